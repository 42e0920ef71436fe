//! # weft-testkit: faults on demand
//!
//! [`FaultyIo`] wraps any `AsyncRead + AsyncWrite` and misbehaves at chosen
//! byte offsets: it drops written bytes, corrupts, truncates or delays what
//! is read, or resets the connection. Tests put it under a real weft
//! connection to check that no completed call is lost or duplicated and that
//! every incomplete one fails with a definite error.
//!
//! ## What this crate does not do
//! It is not a network emulator (no bandwidth model, no reordering across
//! connections) and is never a dependency of a library crate.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod faulty;

pub use faulty::{Faults, FaultyIo};
