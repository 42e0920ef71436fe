//! The synchronisation primitives of the driver's hand-off protocols:
//! std's, or loom's in a `--cfg loom` build that model-checks them
//! (`RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p weft-mux --lib -- loom`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, fence};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use std::sync::TryLockError;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, fence};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard, TryLockError};

/// Where another thread may run in the model: loom switches threads only
/// at its own operations, and a mutex's unlock is not one, so the window
/// between the owner's last look at the mailbox and its unlock would
/// otherwise never be explored. Nothing outside the model.
#[inline(always)]
pub(crate) fn switch_point() {
    #[cfg(loom)]
    loom::thread::yield_now();
}
