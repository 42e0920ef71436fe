//! Shared inputs and the target registry for weft's benches, so the divan
//! benches (`benches/*.rs`) and the allocation harness (`src/bin/alloc.rs`)
//! measure the same bytes and the same operations.
//!
//! - [`targets()`] lists every registered target: its name (divan's path for
//!   the same measurement, `<bench file>/<function>[/<argument>]`), a label and
//!   a constructor for its [`Op`].
//! - The allocation harness runs each [`Op`] many times after a warm-up and
//!   prints allocations and bytes per op as JSON; `cargo xtask bench` compares
//!   them with `benches/alloc-baseline.json`.
//!
//! What it does NOT do: time anything (divan does), or decide pass/fail
//! (xtask does). Benches never count towards coverage.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod frame;
pub mod payload;
mod registry;

pub use frame::{FRAME_SIZES, encoded_frame, sample_frame};
pub use registry::{Op, Target, targets};
