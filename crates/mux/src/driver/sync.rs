//! The synchronisation primitives of the driver's hand-off protocols:
//! ordinary ones, or loom's in a `--cfg loom` build that model-checks them
//! (`RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p weft-mux --lib -- loom`).
//!
//! The mutex is `parking_lot`'s: it has no poisoning. Nothing here
//! uses poisoning (every lock took the state back from a poisoned mutex,
//! as a panic inside a critical section leaves nothing half-done that a
//! later owner could not see), yet std's mutex checks `thread::panicking`
//! at every lock and unlock: about 30 instructions per call over the
//! state's five or so acquisitions. Under loom, [`Mutex`] wraps loom's
//! mutex in the same poison-free interface.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, fence};

#[cfg(not(loom))]
pub(crate) use parking_lot::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, fence};

#[cfg(loom)]
pub(crate) use loom::sync::MutexGuard;

/// loom's mutex with `parking_lot`'s interface: a poisoned lock is taken
/// as it is.
#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    #[cfg(test)]
    pub(crate) fn into_inner(self) -> T {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where another thread may run in the model: loom switches threads only
/// at its own operations, and a mutex's unlock is not one, so the window
/// between the owner's last look at the mailbox and its unlock would
/// otherwise never be explored. Nothing outside the model.
#[inline(always)]
pub(crate) fn switch_point() {
    #[cfg(loom)]
    loom::thread::yield_now();
}
