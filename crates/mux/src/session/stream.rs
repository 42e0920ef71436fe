//! Per-stream state inside the session.

use bytes::Bytes;
use weft_frame::Metadata;

use super::progress::Progress;
use super::queue::InlineQueue;
use crate::error::StreamKind;

/// One received piece of a stream: the payload of one `OPEN`/`DATA` frame
/// and its metadata. `end` is set on the piece that carried `END_STREAM`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// The payload (a slice of the read buffer: no copy).
    pub data: Bytes,
    /// The frame's metadata (trailers such as a final status); empty on most
    /// frames. The `OPEN` metadata is on `Stream::metadata`, not here.
    pub metadata: Metadata,
    /// Whether the peer half-closed the stream with this piece.
    pub end: bool,
}

/// Data queued to send, waiting for credit or the socket.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) metadata: Metadata,
    pub(crate) data: Bytes,
    pub(crate) end: bool,
}

/// What one queued [`Pending`] costs beyond its bytes, counted against the
/// send buffer so that many small messages cannot hold far more memory
/// than the buffer allows: its queue slot, up to twice over (the queue
/// grows by doubling), and allocator overhead for its buffer and metadata
/// (one more slot's worth and 64 bytes). Measured by
/// crates/mux/tests/send_memory.rs: 8-byte messages used to hold 19 times
/// the buffer.
pub(crate) const PENDING_OVERHEAD: usize = 3 * std::mem::size_of::<Pending>() + 64;

impl Pending {
    /// What queueing `data` and `metadata` costs the send buffer.
    pub(crate) fn cost(data: usize, metadata: usize) -> usize {
        data + metadata + PENDING_OVERHEAD
    }
}

/// How far this side's sending has got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendEnd {
    /// Still sending.
    Open,
    /// `END_STREAM` is queued behind data.
    Queued,
    /// `END_STREAM` has been handed to the writer.
    Sent,
}

#[derive(Debug)]
pub(crate) struct StreamState {
    /// Opened by the peer.
    pub(crate) remote: bool,
    /// The application has taken the handle (always true for local streams).
    pub(crate) accepted: bool,
    /// The application dropped its handle.
    pub(crate) released: bool,
    /// The peer reset it while it waited in the accept queue (counted
    /// against the pending-accept reset budget until accepted).
    pub(crate) reset_pending_accept: bool,
    /// OPEN metadata (for streams the peer opened).
    pub(crate) open_metadata: Metadata,

    pub(crate) send_window: i64,
    pub(crate) send_queue: InlineQueue<Pending>,
    /// What `send_queue` costs: bytes plus [`PENDING_OVERHEAD`] per item.
    pub(crate) queued: usize,
    pub(crate) send_end: SendEnd,
    pub(crate) in_ready: bool,
    pub(crate) want_writable: bool,

    pub(crate) recv_queue: InlineQueue<Chunk>,
    /// Bytes of `recv_queue` (flow-controlled size).
    pub(crate) buffered: u32,
    pub(crate) recv_window: u32,
    pub(crate) recv_unacked: u32,
    pub(crate) recv_end: bool,

    /// The terminal error, once reset.
    pub(crate) failed: Option<StreamKind>,
    /// Frames either way, for the progress deadline.
    pub(crate) progress: Progress,
}

impl StreamState {
    pub(crate) fn new(remote: bool, send_window: u32, recv_window: u32) -> StreamState {
        StreamState {
            remote,
            accepted: !remote,
            released: false,
            reset_pending_accept: false,
            open_metadata: Metadata::new(),
            send_window: i64::from(send_window),
            send_queue: InlineQueue::default(),
            queued: 0,
            send_end: SendEnd::Open,
            in_ready: false,
            want_writable: false,
            recv_queue: InlineQueue::default(),
            buffered: 0,
            recv_window,
            recv_unacked: 0,
            recv_end: false,
            failed: None,
            progress: Progress::default(),
        }
    }

    pub(crate) fn send_done(&self) -> bool {
        self.send_end == SendEnd::Sent || self.failed.is_some()
    }

    pub(crate) fn recv_done(&self) -> bool {
        self.recv_end || self.failed.is_some()
    }

    /// Whether the stream can leave the table.
    pub(crate) fn finished(&self) -> bool {
        self.send_done() && self.recv_done() && self.released
    }

    /// Whether data is waiting and some could go out with `conn_credit`.
    pub(crate) fn can_send(&self, conn_credit: i64) -> bool {
        match self.send_queue.front() {
            None => false,
            Some(p) if p.data.is_empty() && p.metadata.is_empty() => true,
            Some(_) => self.send_window > 0 && conn_credit > 0,
        }
    }
}
