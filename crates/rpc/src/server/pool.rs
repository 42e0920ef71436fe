//! Reusable heap slots for call futures, so a steady stream of calls to
//! one route allocates no future per call.
//!
//! A route's call future has one concrete type; its slots are
//! `Pin<Box<Option<T>>>`, refilled with `Pin::set` (safe: the old future is
//! dropped in place before the new one moves in) and returned to the
//! route's pool when the call ends. The pool is type-erased (`dyn Any`)
//! only at the route, which knows `T`; it is built typed on the route's
//! first call, so later calls only check its type.
//!
//! Calls that finish inline (the usual unary call) take and return the
//! same slot one after the other, so the pool keeps its most recently
//! returned slot in a lock-free cell and only the rest under a lock: in
//! that steady state a call swaps one pointer in and one out and takes no
//! lock, where a lock per take and per return cost about 250 instructions
//! a call. Calls that overlap (spawned, still pending) fall back to the
//! locked list. No slot is held per connection, so an idle connection
//! keeps nothing here.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use crossbeam_utils::atomic::AtomicCell;

/// Slots kept per route; beyond this, finished slots are freed.
const MAX_IDLE: usize = 64;

type Slot<T> = Pin<Box<Option<T>>>;

/// The idle slots of one route.
#[derive(Default)]
pub(crate) struct Pool {
    idle: OnceLock<Box<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

/// The idle slots of a pool whose futures are `T`: the last one returned
/// in a cell (a pointer, swapped without a lock), the others in a list.
struct Idle<T> {
    last: AtomicCell<Option<Slot<T>>>,
    rest: Mutex<Vec<Slot<T>>>,
}

impl<T: Send + 'static> Idle<T> {
    fn take(&self) -> Option<Slot<T>> {
        self.last.swap(None).or_else(|| self.rest().pop())
    }

    fn put(&self, slot: Slot<T>) {
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
}

impl Pool {
    /// The slots of future type `T`; `None` for any other type than the
    /// first one this pool served (such a future gets a slot of its own).
    fn idle<T: Send + 'static>(&self) -> Option<&Idle<T>> {
        self.idle
            .get_or_init(|| {
                Box::new(Idle::<T> {
                    last: AtomicCell::new(None),
                    rest: Mutex::new(Vec::new()),
                })
            })
            .downcast_ref::<Idle<T>>()
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
    pub(crate) fn start<A, T>(
        self: &Arc<Pool>,
        input: A,
        make: impl FnOnce(A) -> T,
    ) -> Filled<'_, T>
    where
        T: Future<Output = ()> + Send + 'static,
    {
        let idle = self.idle::<T>();
        let mut slot = idle.and_then(Idle::take).unwrap_or_else(|| Box::pin(None));
        slot.set(Some(make(input)));
        Filled {
            slot: Some(slot),
            pool: self,
            idle,
        }
    }

    fn put_back<T: Send + 'static>(&self, slot: Slot<T>) {
        put_back(self.idle::<T>(), slot);
    }

    #[cfg(test)]
    fn idle_count<T: Send + 'static>(&self) -> usize {
        let Some(idle) = self.idle::<T>() else {
            return 0;
        };
        let last = idle.last.take();
        let n = usize::from(last.is_some()) + idle.rest().len();
        idle.last.store(last);
        n
    }
}

/// Drops the future in `slot` and keeps the slot in `idle`, if its type
/// is the pool's.
fn put_back<T: Send + 'static>(idle: Option<&Idle<T>>, mut slot: Slot<T>) {
    slot.set(None);
    if let Some(idle) = idle {
        idle.put(slot);
    }
}

/// A call future in a slot lent by its pool, polled where it was built;
/// the slot goes back when it is dropped, unless it became a [`Pooled`]
/// future first.
pub(crate) struct Filled<'p, T: Send + 'static> {
    slot: Option<Slot<T>>,
    pool: &'p Arc<Pool>,
    /// The pool's slots of this type, found once as the slot was taken
    /// (not looked up again, type check included, to give it back).
    idle: Option<&'p Idle<T>>,
}

impl<T: Future<Output = ()> + Send + 'static> Filled<'_, T> {
    /// Polls the future (once finished, it is not polled again).
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self.slot.as_mut().and_then(|s| s.as_mut().as_pin_mut()) {
            Some(fut) => fut.poll(cx),
            None => Poll::Ready(()),
        }
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
            put_back(self.idle, slot);
        }
    }
}

/// A call future in a pooled slot; the slot goes back when the future
/// completes or is dropped.
pub(crate) struct Pooled<T: Send + 'static> {
    slot: Option<Slot<T>>,
    pool: Arc<Pool>,
}

impl<T: Send + 'static> std::fmt::Debug for Pooled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled").finish_non_exhaustive()
    }
}

impl<T: Future<Output = ()> + Send + 'static> Future for Pooled<T> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(slot) = self.slot.as_mut() else {
            return Poll::Ready(());
        };
        let Some(fut) = slot.as_mut().as_pin_mut() else {
            return Poll::Ready(());
        };
        if fut.poll(cx).is_pending() {
            return Poll::Pending;
        }
        if let Some(slot) = self.slot.take() {
            self.pool.put_back(slot);
        }
        Poll::Ready(())
    }
}

impl<T: Send + 'static> Drop for Pooled<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.put_back(slot);
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
        let pool = Arc::new(Pool::default());
        let drops = Arc::new(AtomicUsize::new(0));
        let job = |wait| Job {
            drops: drops.clone(),
            wait,
        };
        // Finished in its first poll, where it was built: the slot goes
        // back as the lent slot is dropped.
        let mut first = pool.start(false, job);
        let ptr = addr(&first.slot);
        assert!(poll_once(|cx| first.poll(cx)).await.is_ready());
        drop(first);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle_count::<Job>(), 1);
        // The next call of the same type reuses the slot, and a future
        // handed on to be spawned returns it as it completes.
        let second = pool.start(false, job);
        assert_eq!(addr(&second.slot), ptr);
        assert_eq!(pool.idle_count::<Job>(), 0);
        let second = second.into_pooled();
        assert_eq!(addr(&second.slot), ptr);
        second.await;
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert_eq!(pool.idle_count::<Job>(), 1);
        // Pending in its first poll, then dropped as a spawned future:
        // the future is dropped, the slot kept.
        let mut third = pool.start(true, job);
        assert!(poll_once(|cx| third.poll(cx)).await.is_pending());
        let mut third = third.into_pooled();
        assert!(
            poll_once(|cx| Pin::new(&mut third).poll(cx))
                .await
                .is_pending()
        );
        drop(third);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        assert_eq!(pool.idle_count::<Job>(), 1);
        // A different future type in the same pool still runs (unpooled).
        pool.start((), std::future::ready).into_pooled().await;
        assert_eq!(pool.idle_count::<Job>(), 1);
        // The idle list is bounded.
        let many: Vec<_> = (0..MAX_IDLE + 10).map(|_| pool.start(true, job)).collect();
        drop(many);
        assert_eq!(pool.idle_count::<Job>(), MAX_IDLE);
    }

    /// The cell in front of the lock is a plain atomic swap for a slot
    /// (a pointer); were it not, `AtomicCell` would fall back to a lock
    /// of its own and the pool would lose its point.
    #[test]
    fn the_last_slot_is_swapped_without_a_lock() {
        assert!(AtomicCell::<Option<Slot<Job>>>::is_lock_free());
    }
}
