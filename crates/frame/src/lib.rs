//! # weft-frame: the wire codec
//!
//! Every byte weft sends after the preface is a *frame*: a fixed 16-byte
//! header, a metadata block and a payload.
//!
//! ```text
//!  0        1        2        3        4                8               12               16
//! +--------+--------+--------+--------+----------------+----------------+----------------+
//! |version |  type  | flags  |reserved|   stream id    | metadata len   |  payload len   |
//! +--------+--------+--------+--------+----------------+----------------+----------------+
//! | metadata (metadata len bytes) | payload (payload len bytes)                          |
//! +-------------------------------+--------------------------------------------------------+
//! ```
//!
//! This crate provides the header ([`Header`], [`FrameType`], [`Flags`]),
//! metadata ([`Metadata`], with a typed view of method, timeout and status),
//! wire error codes ([`Reason`]), the connection [`preface`], and
//! [`FrameCodec`], a tokio-util `Decoder`/`Encoder`.
//!
//! Decoding a buffered frame allocates nothing and copies no payload: the
//! metadata and payload are `Bytes` slices of the read buffer. Every length
//! is checked against [`Limits`] from the header alone, before a byte of
//! the body is buffered, and every malformed input is a typed
//! [`FrameError`], never a panic.
//!
//! ## What this crate does not do
//! No I/O and no runtime: it never reads or writes a socket (use
//! `tokio_util::codec::Framed` or the `weft-mux` driver). It does not know
//! what a stream is, does not compress or encrypt (that is `weft-transform`,
//! which uses [`FrameCodec::decode_raw`] to open a frame's body before
//! parsing it), and does not enforce budgets on unknown frame types or
//! flags: it passes them up unchanged for the layer above to count.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod codec;
mod error;
mod frame;
mod header;
mod limits;
pub mod metadata;
pub mod preface;
mod reason;

pub use codec::{CHAIN_THRESHOLD, FrameCodec};
pub use error::{FrameError, MetadataError};
pub use frame::Frame;
pub use header::{CONNECTION_ID, Flags, FrameType, HEADER_LEN, Header, Scope, VERSION};
pub use limits::{
    DEFAULT_MAX_METADATA, DEFAULT_MAX_PAYLOAD, Limits, MAX_MAX_PAYLOAD, MIN_MAX_PAYLOAD,
};
pub use metadata::{Metadata, MetadataBuilder};
pub use reason::Reason;
