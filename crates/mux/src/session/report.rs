//! What the session reports to its driver and application: the events to
//! look at, a receive's result, why an open failed, and its figures.

use super::Chunk;
use crate::error::{CloseCause, StreamError};

/// Something the application (or driver) should look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The peer opened a stream; take it, and any opened after it, with
    /// [`Session::accept`](super::Session::accept) until that returns
    /// `None`. Raised once until the accept queue is emptied (as
    /// [`Readable`](Event::Readable) is for a stream's queue), not once
    /// per stream.
    Incoming,
    /// A stream has data, an end or an error to receive. Not raised for
    /// what the peer's `OPEN` itself carries: the stream's
    /// [`Incoming`](Event::Incoming) stands for it (nobody can wait on a
    /// stream not accepted yet).
    Readable(u32),
    /// A stream's send buffer has room again, or its send side failed.
    Writable(u32),
    /// A `GOAWAY` was sent or received: no new streams.
    GoingAway,
    /// The connection is closed; see [`Session::close_cause`](super::Session::close_cause).
    Closed,
    /// A stream we opened left the table, or the peer announced its cap:
    /// [`open_credit`](super::Session::open_credit) may have grown.
    OpenCredit,
    /// A stream the peer opened was refused with `REFUSED_STREAM` (the
    /// stream cap was reached, or we stopped accepting): the driver
    /// counts it as [`STREAMS_REFUSED`](crate::STREAMS_REFUSED). The
    /// session only reports it, so it stays free of any metrics recorder.
    Refused,
}

/// The result of [`Session::recv`](super::Session::recv).
#[derive(Debug, PartialEq, Eq)]
pub enum Recv {
    /// The next piece.
    Chunk(Chunk),
    /// The peer's explicit `END_STREAM`: nothing more will come.
    End,
    /// Nothing yet; an [`Event::Readable`] follows when something arrives.
    Pending,
    /// The stream failed (reset, connection gone).
    Failed(StreamError),
}

/// Why `open` failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// A `GOAWAY` was sent or received: retry on another connection.
    GoingAway,
    /// Stream ids are exhausted: retry on another connection.
    IdsExhausted,
    /// The connection is closed.
    Closed(CloseCause),
    /// The metadata is larger than the frame limit allows.
    MetadataTooLarge,
}

/// Flow-control and table figures, for tests and diagnostics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Streams in the table.
    pub streams: usize,
    /// Streams the peer opened that are in the table (counted against the cap).
    pub inbound: usize,
    /// Credit we may still send on the connection.
    pub conn_send_window: i64,
    /// Credit the peer still has on the connection.
    pub conn_recv_window: u32,
    /// Bytes consumed locally and not yet granted back to the peer.
    pub conn_recv_unacked: u32,
    /// The connection receive window granted so far: the configured one,
    /// or more once bandwidth estimates raised it.
    pub conn_recv_size: u32,
    /// The receive window each stream grows to: the configured stream
    /// window, or more once bandwidth estimates raised it.
    pub stream_recv_target: u32,
    /// Control frames waiting to be sent.
    pub control_queued: usize,
    /// Resets we sent because of the peer.
    pub local_resets: u32,
    /// Streams waiting in the accept queue.
    pub accept_queue: usize,
}
