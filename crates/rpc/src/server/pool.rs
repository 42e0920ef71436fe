//! Reusable heap slots for call futures, so a steady stream of calls to
//! one route allocates no future per call.
//!
//! A route's call future has one concrete type; its slots are
//! `Pin<Box<Option<T>>>`, refilled with `Pin::set` (safe: the old future is
//! dropped in place before the new one moves in) and returned to the
//! route's pool when the call ends. The pool is type-erased (`dyn Any`)
//! only at the route, which knows `T`.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Slots kept per route; beyond this, finished slots are freed.
const MAX_IDLE: usize = 64;

type Slot<T> = Pin<Box<Option<T>>>;

/// The idle slots of one route.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Option<Box<dyn Any + Send>>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").finish_non_exhaustive()
    }
}

impl Pool {
    fn with<T: Send + 'static, R>(&self, f: impl FnOnce(&mut Vec<Slot<T>>) -> R) -> R {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let any = idle.get_or_insert_with(|| Box::new(Vec::<Slot<T>>::new()));
        match any.downcast_mut::<Vec<Slot<T>>>() {
            Some(v) => f(v),
            // A pool serves one future type; any other gets a throwaway list.
            None => f(&mut Vec::new()),
        }
    }

    /// Puts the future `make` builds in a slot (reused when one is idle).
    /// Built in the slot rather than passed in: a call future is a
    /// kilobyte or more, and each move of it is a `memcpy`.
    pub(crate) fn start<T>(self: &Arc<Pool>, make: impl FnOnce() -> T) -> Pooled<T>
    where
        T: Future<Output = ()> + Send + 'static,
    {
        let mut slot = self
            .with(|v: &mut Vec<Slot<T>>| v.pop())
            .unwrap_or_else(|| Box::pin(None));
        slot.set(Some(make()));
        Pooled {
            slot: Some(slot),
            pool: self.clone(),
        }
    }

    fn put_back<T: Send + 'static>(&self, mut slot: Slot<T>) {
        slot.set(None);
        self.with(|v: &mut Vec<Slot<T>>| {
            if v.len() < MAX_IDLE {
                v.push(slot);
            }
        });
    }

    #[cfg(test)]
    fn idle<T: Send + 'static>(&self) -> usize {
        self.with(|v: &mut Vec<Slot<T>>| v.len())
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

    fn addr(p: &Pooled<Job>) -> usize {
        p.slot
            .as_ref()
            .map_or(0, |s| &**s as *const Option<Job> as usize)
    }

    #[tokio::test]
    async fn slots_are_reused_and_futures_dropped() {
        let pool = Arc::new(Pool::default());
        let drops = Arc::new(AtomicUsize::new(0));
        let job = |wait| Job {
            drops: drops.clone(),
            wait,
        };
        let first = pool.start(|| job(false));
        let ptr = addr(&first);
        first.await;
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle::<Job>(), 1);
        // The next call of the same type reuses the slot.
        let second = pool.start(|| job(false));
        assert_eq!(addr(&second), ptr);
        assert_eq!(pool.idle::<Job>(), 0);
        second.await;
        // Dropped while pending: the future is dropped, the slot kept.
        let mut third = pool.start(|| job(true));
        let pending =
            std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut third).poll(cx).is_pending()))
                .await;
        assert!(pending);
        drop(third);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
        assert_eq!(pool.idle::<Job>(), 1);
        // A different future type in the same pool still runs (unpooled).
        pool.start(|| std::future::ready(())).await;
        assert_eq!(pool.idle::<Job>(), 1);
        // The idle list is bounded.
        let many: Vec<_> = (0..MAX_IDLE + 10)
            .map(|_| pool.start(|| job(true)))
            .collect();
        drop(many);
        assert_eq!(pool.idle::<Job>(), MAX_IDLE);
    }
}
