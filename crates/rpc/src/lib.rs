//! # weft-rpc: calls over weft streams
//!
//! Work in progress: this commit has the sans-I/O parts (status codes,
//! method names, deadline encoding, message framing).
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod codec;
pub mod deadline;
pub mod method;
mod status;

pub use status::{Code, Status};
