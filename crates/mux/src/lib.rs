//! # weft-mux: many streams over one connection
//!
//! A multiplexer in two parts:
//!
//! - [`session::Session`], a sans-I/O core holding every protocol rule:
//!   stream ids and states, per-stream and per-connection flow control, the
//!   cap on concurrent inbound streams, keepalive, idle timeout, `GOAWAY`
//!   and the budgets against floods. It is fed frames, application commands
//!   and an explicit `now`, and returns frames to send, the next deadline
//!   and events. It is deterministic and tested in memory with a virtual
//!   clock.
//! - A tokio driver, [`connect`], generic over
//!   `AsyncRead + AsyncWrite + Unpin + Send`: it runs the handshake under
//!   its deadline, then one owner at a time holds the connection's state
//!   and does everyone's work — writes every queued frame, reads every
//!   frame the socket has — and callers never wait for work that returns
//!   nothing: a drop or reset is left for the owner; wake-ups happen after
//!   the state is released; the connection task, finding the state held,
//!   is polled again once it is free instead of blocking. A caller alone
//!   on the connection writes and reads inline, so a round trip needs no
//!   extra task wake-up; one task per
//!   connection fires timers, finishes writes and watches the socket when
//!   nobody else does.
//!
//! ```text
//!  Stream::send ─► Session (queues, windows) ─► Outbound ─► write (inline, or batched by the owner)
//!  Stream::recv ◄─ Session (per-stream queue) ◄─ Inbound ◄─ read by whoever waits (else the connection task)
//! ```
//!
//! ## Guarantees
//! - The reader never waits for one stream's queue: received data is
//!   buffered per stream, bounded by the stream's window, so an unread
//!   stream never stalls the others.
//! - Control frames (pongs, resets, window updates, `GOAWAY`) go ahead of
//!   data; outbound queues are bounded (a peer that does not read stops our
//!   reading instead of growing our memory).
//! - A reset or a dead connection is always an error to `recv`, never a
//!   clean end.
//!
//! ## Cancel safety
//! `Stream::recv` is cancel safe (nothing is taken until it returns).
//! `Stream::send` may have queued part of the data when cancelled.
//! Dropping a [`Stream`] not closed both ways resets it with `CANCEL`.
//!
//! ## One-exchange calls
//! [`Connection::call`] sends a request whole and waits for the first
//! piece of its answer (a unary call's exchange) in one future, with one
//! take of the connection's state fewer than `open` then `recv`; on the
//! accepting side [`Incoming::accept_with_request`] hands over a request
//! that arrived whole with its stream. Both keep every stream rule above:
//! they are shortcuts through the same streams, not another protocol.
//!
//! ## What this crate does not do
//! It opens no sockets (the `weft` facade does, and sets `TCP_NODELAY`),
//! knows nothing of calls, methods or status codes (that is `weft-rpc`),
//! and does not itself encrypt or compress: it runs weft-transform's
//! handshake and record pipeline (see [`pipeline`]).
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod call;
mod config;
mod connect;
mod driver;
mod error;
mod handle;
mod idmap;
pub mod pipeline;
pub mod session;

pub use call::{Answer, Call};
pub use config::{BASELINE_WINDOW, Config, DEFAULT_WINDOW_CAP, MAX_WINDOW};
pub use connect::{Handshaken, MAX_FIRST_RECORD, connect, handshake};
pub use driver::BufferCapacity;
pub use error::{CloseCause, MuxError, Origin, StreamError};
pub use handle::{Accepted, Connection, Incoming, Stream};
pub use pipeline::Negotiated;
pub use session::{Chunk, Role};
pub use weft_frame::{Metadata, Reason};

/// The counter, in the `metrics` facade, of streams the peer opened that
/// were refused with `REFUSED_STREAM` because the stream cap was reached or
/// the connection was not accepting (recorded only if the application
/// installed a recorder; the caller retries such a stream safely).
///
/// ```
/// assert_eq!(weft_mux::STREAMS_REFUSED, "weft_streams_refused_total");
/// ```
pub const STREAMS_REFUSED: &str = "weft_streams_refused_total";
