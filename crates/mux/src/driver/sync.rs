//! The synchronisation primitives of the driver's hand-off protocols:
//! std's, or loom's when the `loom` feature model-checks them
//! (`cargo test -p weft-mux --features loom --release --lib loom`).

#[cfg(feature = "loom")]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, fence};
#[cfg(feature = "loom")]
pub(crate) use loom::sync::{Mutex, MutexGuard, TryLockError};

#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, fence};
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::{Mutex, MutexGuard, TryLockError};
