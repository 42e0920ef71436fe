//! A unary call's deadline timer: boxed, so a call without a deadline does
//! not carry (and every move of its future does not copy) a tokio `Sleep`
//! of about 112 bytes, and recycled, so a call with one does not allocate.
//!
//! Each thread keeps a small bounded free list of boxed timers: a call
//! takes one (re-armed with `Sleep::reset`) and gives it back when it ends.
//! Per thread, not per client: no lock and no atomic on the call's path,
//! and a client used from many threads shares nothing. A task that moves
//! between a multi-thread runtime's workers gives its timer back where it
//! ends; the lists are bounded, so a thread that takes more than it gets
//! back allocates, one that gets more drops the extra.
//!
//! A `Sleep` belongs to the runtime that made it (its time driver): each
//! kept timer is tagged with that runtime's id, and one taken while another
//! runtime is current is dropped, never re-armed, so no timer is ever
//! polled by a runtime other than its own, nor after its own is gone (each
//! `#[tokio::test]` runs its own runtime, often on a thread a test before
//! used). A kept timer may still be registered with its driver until
//! reused: if its old deadline passes first, it wakes the task that last
//! polled it once, spuriously (a future must expect that).

use std::cell::RefCell;
use std::pin::Pin;
use std::task::Context;

use pin_project_lite::pin_project;
use tokio::runtime::{Handle, Id};
use tokio::time::{Instant, Sleep};

/// How many timers a thread keeps: enough for a batch of calls in flight
/// from one task (the gate's 64 joined), about 17 KiB at most.
const KEEP: usize = 128;

thread_local! {
    /// The free timers of this thread, each with its runtime's id.
    static FREE: RefCell<Vec<Pin<Box<Armed>>>> = const { RefCell::new(Vec::new()) };
}

pin_project! {
    /// A boxed `Sleep` and the runtime it belongs to.
    struct Armed {
        runtime: Id,
        #[pin]
        sleep: Sleep,
    }
}

/// A call's deadline timer, if it has a deadline: one pointer (a call
/// without one carries a null), given back to this thread's list when
/// dropped.
#[derive(Debug)]
pub(super) struct Timer {
    armed: Option<Pin<Box<Armed>>>,
}

impl std::fmt::Debug for Armed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Armed")
            .field("runtime", &self.runtime)
            .field("deadline", &self.sleep.deadline())
            .finish()
    }
}

impl Timer {
    /// No deadline: no timer.
    pub(super) const NONE: Timer = Timer { armed: None };

    /// A timer firing at `deadline` (a recycled one of the current runtime
    /// if this thread keeps one), or none without a deadline. Outside a
    /// runtime it panics, as `tokio::time::sleep_until` does.
    #[inline]
    pub(super) fn new(deadline: Option<Instant>) -> Timer {
        match deadline {
            None => Timer::NONE,
            Some(at) => Timer {
                armed: Some(arm(at)),
            },
        }
    }

    /// Whether the call has a deadline.
    #[inline(always)]
    pub(super) fn is_set(&self) -> bool {
        self.armed.is_some()
    }

    /// Polls the timer, if any: `Some(true)` once the deadline has passed.
    #[inline]
    pub(super) fn poll_with(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut Sleep>, &mut Context<'_>) -> bool,
    ) -> Option<bool> {
        let armed = self.armed.as_mut()?;
        Some(poll(armed.as_mut().project().sleep, cx))
    }
}

/// A timer for `at`: this thread's last kept one, re-armed, if it belongs
/// to the current runtime; otherwise a new one (the kept one, of another
/// runtime, dropped).
#[inline(never)]
fn arm(at: Instant) -> Pin<Box<Armed>> {
    // Outside a runtime this panics, as `sleep_until` would.
    let runtime = Handle::current().id();
    // `try_with`: during the thread's teardown the list is gone.
    if let Some(mut kept) = FREE.try_with(|f| f.borrow_mut().pop()).ok().flatten()
        && kept.runtime == runtime
    {
        kept.as_mut().project().sleep.reset(at);
        return kept;
    }
    Box::pin(Armed {
        runtime,
        sleep: tokio::time::sleep_until(at),
    })
}

impl Drop for Timer {
    /// Inline, the check alone: every call future's drop runs it, and only
    /// a call with a deadline gives a timer back (out of line).
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(armed) = self.armed.take() {
            give_back(armed);
        }
    }
}

/// Keeps `armed` in this thread's list for the next call, unless the list
/// is full or already torn down (then it is dropped).
#[inline(never)]
fn give_back(armed: Pin<Box<Armed>>) {
    let _ = FREE.try_with(|f| {
        let mut free = f.borrow_mut();
        if free.len() < KEEP {
            if free.capacity() == 0 {
                free.reserve_exact(KEEP);
            }
            free.push(armed);
        }
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn kept() -> usize {
        FREE.with(|f| f.borrow().len())
    }

    /// A timer given back is the next one taken, re-armed to its new
    /// deadline, and fires then.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_timer_given_back_is_reused_and_fires_at_its_new_deadline() {
        let before = kept();
        let first = Timer::new(Some(Instant::now() + Duration::from_secs(60)));
        let at = first.armed.as_ref().map(|a| &**a as *const Armed);
        drop(first);
        assert_eq!(kept(), before + 1);
        let deadline = Instant::now() + Duration::from_millis(5);
        let mut second = Timer::new(Some(deadline));
        assert_eq!(second.armed.as_ref().map(|a| &**a as *const Armed), at);
        assert_eq!(kept(), before);
        let fired = std::future::poll_fn(|cx| {
            match second.poll_with(cx, |s, cx| std::future::Future::poll(s, cx).is_ready()) {
                Some(true) => std::task::Poll::Ready(Instant::now()),
                _ => std::task::Poll::Pending,
            }
        })
        .await;
        assert_eq!(fired, deadline);
    }

    /// A timer kept by a runtime since dropped is never re-armed by
    /// another: the next runtime makes its own.
    #[test]
    fn a_timer_of_another_runtime_is_not_reused() {
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("a runtime")
        };
        let old = runtime();
        let kept_at = old.block_on(async {
            let t = Timer::new(Some(Instant::now() + Duration::from_secs(60)));
            t.armed.as_ref().map(|a| a.runtime)
        });
        drop(old);
        let new = runtime();
        new.block_on(async {
            let t = Timer::new(Some(Instant::now() + Duration::from_millis(1)));
            let now = t.armed.as_ref().map(|a| a.runtime);
            assert_ne!(now, kept_at);
            assert_eq!(now, Some(Handle::current().id()));
            // It works: this runtime's driver fires it.
            let mut t = t;
            std::future::poll_fn(|cx| {
                match t.poll_with(cx, |s, cx| std::future::Future::poll(s, cx).is_ready()) {
                    Some(true) => std::task::Poll::Ready(()),
                    _ => std::task::Poll::Pending,
                }
            })
            .await;
        });
    }

    /// No deadline, no timer, nothing kept.
    #[test]
    fn no_deadline_no_timer() {
        let t = Timer::new(None);
        assert!(!t.is_set());
        assert_eq!(size_of::<Timer>(), size_of::<usize>());
    }
}
