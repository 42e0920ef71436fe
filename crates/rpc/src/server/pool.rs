//! Reusable heap slots for call futures, so a steady stream of calls to
//! one route allocates no future per call.
//!
//! A route's call future has one concrete type; its slots are
//! `Pin<Box<Option<T>>>`, refilled with `Pin::set` (safe: the old future is
//! dropped in place before the new one moves in) and returned to the
//! route's pool when the call ends (a finished future is left in its slot
//! for the next call's `Pin::set` to drop: one drop per call, not two).
//! The pool is typed: the route's runner
//! names its future's type through the function that builds it (see
//! `call::Runner`), so a call takes a slot without a type check (a
//! type-erased pool's `dyn Any` check cost about 12 instructions a call).
//!
//! Calls that finish inline (the usual unary call) take and return the
//! same slot one after the other, so the pool keeps its most recently
//! returned slot in a lock-free cell and only the rest under a lock: in
//! that steady state a call swaps one pointer in and one out and takes no
//! lock, where a lock per take and per return cost about 250 instructions
//! a call. Calls that overlap (spawned, still pending) fall back to the
//! locked list. No slot is held per connection, so an idle connection
//! keeps nothing here.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crossbeam_utils::atomic::AtomicCell;

/// Slots kept per route; beyond this, finished slots are freed.
const MAX_IDLE: usize = 64;

type Slot<T> = Pin<Box<Option<T>>>;

/// The idle slots of one route, whose futures are `T`: the last one
/// returned in a cell (a pointer, swapped without a lock), the others in
/// a list.
pub(crate) struct Pool<T> {
    last: AtomicCell<Option<Slot<T>>>,
    rest: Mutex<Vec<Slot<T>>>,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            last: AtomicCell::new(None),
            rest: Mutex::new(Vec::new()),
        }
    }
}

impl<T> std::fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Pool<T> {
    fn take(&self) -> Option<Slot<T>> {
        self.last.swap(None).or_else(|| self.rest().pop())
    }

    /// Keeps `slot`, the future in it dropped now if it is `Left::Live`.
    /// A finished one is left in place (a finished call future, an async
    /// block that returned, holds nothing): the slot's next call replaces
    /// it, and dropping it there as well as here was one more call to the
    /// future's drop glue per call (about 12 instructions).
    fn put_back(&self, mut slot: Slot<T>, left: Left) {
        if left == Left::Live {
            slot.set(None);
        }
        if let Some(older) = self.last.swap(Some(slot)) {
            let mut rest = self.rest();
            // The cell holds one more, so at most MAX_IDLE are kept.
            if rest.len() + 1 < MAX_IDLE {
                rest.push(older);
            }
        }
    }

    fn rest(&self) -> std::sync::MutexGuard<'_, Vec<Slot<T>>> {
        self.rest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts the future `make` builds of `input` in a slot (reused when
    /// one is idle). Built in the slot rather than passed in: a call
    /// future is a kilobyte or more, and each move of it is a `memcpy`.
    /// Its input is passed apart from `make` for the same reason: a
    /// closure capturing it would be one more copy of it.
    ///
    /// The slot is lent, not yet a [`Pooled`] future: most calls finish
    /// in their first poll and never need one (nor its reference to the
    /// pool, an `Arc` count up and down per call).
    // Inlined into the route's start, so that its input (a call, a few
    // hundred bytes) is not moved into one more frame on its way.
    #[inline(always)]
    pub(crate) fn start<A>(
        self: &Arc<Pool<T>>,
        input: A,
        make: impl FnOnce(A) -> T,
    ) -> Filled<'_, T>
    where
        T: Future<Output = ()>,
    {
        let mut slot = self.take().unwrap_or_else(|| Box::pin(None));
        // Drops the slot's previous call future, if it finished (see
        // `put_back`).
        slot.set(Some(make(input)));
        Filled {
            slot: Some(slot),
            pool: self,
        }
    }

    /// Polls the future in `slot` (a lent or a spawned call's); once it
    /// has finished, the slot goes back (left holding it, see
    /// `put_back`), so it is not polled again.
    #[inline(always)]
    fn poll_in(&self, slot: &mut Option<Slot<T>>, cx: &mut Context<'_>) -> Poll<()>
    where
        T: Future<Output = ()>,
    {
        let Some(fut) = slot.as_mut().and_then(|s| s.as_mut().as_pin_mut()) else {
            return Poll::Ready(());
        };
        if fut.poll(cx).is_pending() {
            return Poll::Pending;
        }
        if let Some(slot) = slot.take() {
            self.put_back(slot, Left::Finished);
        }
        Poll::Ready(())
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        let last = self.last.take();
        let n = usize::from(last.is_some()) + self.rest().len();
        self.last.store(last);
        n
    }
}

/// What a slot going back to its pool holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    /// A future that completed: it holds nothing and is left for the
    /// slot's next call to replace.
    Finished,
    /// A future dropped before it completed: it is dropped as the slot
    /// goes back, so what it holds (its stream, its call's entry) goes
    /// now, not at the slot's next call.
    Live,
}

/// A call future in a slot lent by its pool, polled where it was built;
/// the slot goes back as the future completes, or when it is dropped,
/// unless it became a [`Pooled`] future first.
pub(crate) struct Filled<'p, T: Send + 'static> {
    slot: Option<Slot<T>>,
    pool: &'p Arc<Pool<T>>,
}

impl<T: Future<Output = ()> + Send + 'static> Filled<'_, T> {
    /// Polls the future; once finished, its slot goes back (and it is not
    /// polled again).
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.pool.poll_in(&mut self.slot, cx)
    }

    /// The future as one to spawn, its slot going back when it completes.
    pub(crate) fn into_pooled(mut self) -> Pooled<T> {
        Pooled {
            slot: self.slot.take(),
            pool: self.pool.clone(),
        }
    }
}

impl<T: Send + 'static> Drop for Filled<'_, T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.put_back(slot, Left::Live);
        }
    }
}

/// A call future in a pooled slot; the slot goes back when the future
/// completes or is dropped.
pub(crate) struct Pooled<T: Send + 'static> {
    slot: Option<Slot<T>>,
    pool: Arc<Pool<T>>,
}

impl<T: Send + 'static> std::fmt::Debug for Pooled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled").finish_non_exhaustive()
    }
}

impl<T: Future<Output = ()> + Send + 'static> Future for Pooled<T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.pool.poll_in(&mut this.slot, cx)
    }
}

impl<T: Send + 'static> Drop for Pooled<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.put_back(slot, Left::Live);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Job {
        drops: Arc<AtomicUsize>,
        wait: bool,
    }
    impl Future for Job {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            if self.wait {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        }
    }
    impl Drop for Job {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn addr(slot: &Option<Slot<Job>>) -> usize {
        slot.as_ref()
            .map_or(0, |s| &**s as *const Option<Job> as usize)
    }

    /// Polls `f` once.
    async fn poll_once(mut f: impl FnMut(&mut Context<'_>) -> Poll<()>) -> Poll<()> {
        std::future::poll_fn(|cx| Poll::Ready(f(cx))).await
    }

    #[tokio::test]
    async fn slots_are_reused_and_futures_dropped() {
        let pool = Arc::new(Pool::<Job>::default());
        let drops = Arc::new(AtomicUsize::new(0));
        let job = |wait| Job {
            drops: drops.clone(),
            wait,
        };
        // Finished in its first poll, where it was built: the slot goes
        // back at once, the finished future left in it (a finished call
        // future holds nothing) until the slot's next call replaces it.
        let mut first = pool.start(false, job);
        let ptr = addr(&first.slot);
        assert!(poll_once(|cx| first.poll(cx)).await.is_ready());
        assert_eq!(pool.idle_count(), 1);
        drop(first);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert_eq!(pool.idle_count(), 1);
        // The next call of the same type reuses the slot (dropping the
        // finished future), and a future handed on to be spawned returns
        // it as it completes.
        let second = pool.start(false, job);
        assert_eq!(addr(&second.slot), ptr);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle_count(), 0);
        let second = second.into_pooled();
        assert_eq!(addr(&second.slot), ptr);
        second.await;
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle_count(), 1);
        // Pending in its first poll, then dropped as a spawned future:
        // the future is dropped at once (what it holds goes now), the
        // slot kept.
        let mut third = pool.start(true, job);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert!(poll_once(|cx| third.poll(cx)).await.is_pending());
        let mut third = third.into_pooled();
        assert!(
            poll_once(|cx| Pin::new(&mut third).poll(cx))
                .await
                .is_pending()
        );
        drop(third);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        assert_eq!(pool.idle_count(), 1);
        // Likewise a pending future dropped where it was built.
        let mut fourth = pool.start(true, job);
        assert!(poll_once(|cx| fourth.poll(cx)).await.is_pending());
        drop(fourth);
        assert_eq!(drops.load(Ordering::SeqCst), 4);
        assert_eq!(pool.idle_count(), 1);
        // The idle list is bounded.
        let many: Vec<_> = (0..MAX_IDLE + 10).map(|_| pool.start(true, job)).collect();
        drop(many);
        assert_eq!(pool.idle_count(), MAX_IDLE);
    }

    /// The cell in front of the lock is a plain atomic swap for a slot
    /// (a pointer); were it not, `AtomicCell` would fall back to a lock
    /// of its own and the pool would lose its point.
    #[test]
    fn the_last_slot_is_swapped_without_a_lock() {
        assert!(AtomicCell::<Option<Slot<Job>>>::is_lock_free());
    }
}
