//! Per-stream state inside the session.

use bytes::Bytes;
use weft_frame::{Flags, Frame, FrameType, Metadata};

use super::progress::Progress;
use super::queue::InlineQueue;
use super::window::{RecvWindow, SendWindow};
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

/// Where each half of a stream is. Each half moves forward only; a reset
/// either way, or the connection closing, ends both at once (`failed` on
/// [`StreamState`], terminal). A stream leaves the table once both halves
/// are done and the application has released its handle.
///
/// ```text
///  send half (this side's data)          receive half (the peer's data)
///
///        Open ------------------+              Open
///         |                     |               |
///         | send(end) while     | END_STREAM    | END_STREAM
///         | data still waits    | written at    | received
///         v                     | once          v
///     EndQueued                 |             Ended
///         |                     |
///         | the last piece,     |
///         | END_STREAM, written |
///         v                     |
///      EndSent <----------------+
///
///  either half, any state ---- RESET sent or received, ----> failed
///                              the connection closed         (both halves)
///
///  handle:   Unaccepted --(peer RESET)--> UnacceptedReset
///   (peer's      |                             |
///    streams)    +---------- accept -----------+
///                               v
///   (ours) ----------------->  Held ---- release ----> Released
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendState {
    /// Still sending.
    Open,
    /// `END_STREAM` is queued behind data.
    EndQueued,
    /// `END_STREAM` has been handed to the writer.
    EndSent,
}

/// The receive half; see [`SendState`] for both halves' transitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvState {
    /// The peer may send more.
    Open,
    /// The peer's `END_STREAM` arrived: nothing more will come.
    Ended,
}

/// Who holds the stream's handle; see [`SendState`] for the transitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handle {
    /// Opened by the peer, waiting in the accept queue.
    Unaccepted,
    /// Opened by the peer and reset by it while it waited in the accept
    /// queue: counted against the pending-accept reset budget until taken.
    UnacceptedReset,
    /// The application holds it (from the start for streams we open).
    Held,
    /// The application dropped it, or finished with it both ways (see
    /// `Session::is_done_by_app`).
    Released,
}

impl Handle {
    /// A new stream's: waiting to be accepted if the peer opened it
    /// (`remote`), held from the start if we did.
    pub(crate) fn first(remote: bool) -> Handle {
        if remote {
            Handle::Unaccepted
        } else {
            Handle::Held
        }
    }
}

/// The send half: its state, the peer's credit and the data waiting.
#[derive(Debug)]
pub(crate) struct SendSide {
    pub(crate) state: SendState,
    /// The peer's credit for this stream.
    pub(crate) window: SendWindow,
    pub(crate) queue: InlineQueue<Pending>,
    /// What `queue` costs: bytes plus [`PENDING_OVERHEAD`] per item.
    pub(crate) queued: usize,
    /// In the session's ready list (scheduled to send).
    pub(crate) in_ready: bool,
    /// The application waits for room: raise `Event::Writable` on it.
    pub(crate) want_writable: bool,
}

impl SendSide {
    /// Queues `p` behind what waits; its `end` moves the half to
    /// [`SendState::EndQueued`].
    #[inline]
    pub(crate) fn push(&mut self, p: Pending) {
        self.queued += Pending::cost(p.data.len(), p.metadata.len());
        if p.end {
            self.state = SendState::EndQueued;
        }
        self.queue.push_back(p);
    }

    /// Queues the `room` bytes at the front of `data`, or, when it is the
    /// `last` piece (all of `data` fits), all of it with `metadata` (taken)
    /// and `end`. Returns false, queueing nothing, when that is no bytes,
    /// no metadata and no end.
    #[inline]
    pub(crate) fn queue_piece(
        &mut self,
        metadata: &mut Metadata,
        data: &mut Bytes,
        (last, room): (bool, usize),
        end: bool,
    ) -> bool {
        let piece = if last {
            std::mem::take(data)
        } else {
            data.split_to(room)
        };
        let md = if last {
            std::mem::take(metadata)
        } else {
            Metadata::new()
        };
        if piece.is_empty() && md.is_empty() && !end {
            return false;
        }
        self.push(Pending {
            metadata: md,
            data: piece,
            end,
        });
        true
    }
}

/// The receive half: its state, our credit for the peer and what arrived.
#[derive(Debug)]
pub(crate) struct RecvSide {
    pub(crate) state: RecvState,
    /// Our credit for the peer on this stream.
    pub(crate) window: RecvWindow,
    pub(crate) queue: InlineQueue<Chunk>,
    /// Bytes of `queue` (flow-controlled size).
    pub(crate) buffered: u32,
}

impl RecvSide {
    /// Queues a received piece of `len` flow-controlled bytes (its `end`
    /// moves the half to [`RecvState::Ended`]); returns whether the queue
    /// was empty before (a reader waiting on it wants an event).
    #[inline]
    pub(crate) fn push(&mut self, chunk: Chunk, len: u32) -> bool {
        if chunk.end {
            self.state = RecvState::Ended;
        }
        let was_empty = self.queue.is_empty();
        self.buffered += len;
        self.queue.push_back(chunk);
        was_empty
    }
}

#[derive(Debug)]
pub(crate) struct StreamState {
    /// Opened by the peer.
    pub(crate) remote: bool,
    pub(crate) handle: Handle,
    /// OPEN metadata (for streams the peer opened), until the accept
    /// takes it. An `Option` rather than an empty `Metadata` when there is
    /// none: blanking or overwriting an empty one still ran its `Bytes`'s
    /// drop (an indirect call), twice per accepted stream; `None` is a test.
    pub(crate) open_metadata: Option<Metadata>,
    pub(crate) send: SendSide,
    pub(crate) recv: RecvSide,
    /// The terminal error, once reset (both halves are then done).
    pub(crate) failed: Option<StreamKind>,
    /// Frames either way, for the progress deadline.
    pub(crate) progress: Progress,
    /// The driver's wake-ups for the handle's tasks.
    pub(crate) wakers: StreamWakers,
    /// The next spare box while this one is spare (`StreamTable`); `None`
    /// while the stream is live.
    pub(crate) spare_link: Option<Box<StreamState>>,
}

/// What releasing a stream's handle left for the session to do.
#[derive(Debug)]
pub(crate) struct Released {
    /// Who held the handle before.
    pub(crate) was: Handle,
    /// Unread bytes dropped: connection credit to give back.
    pub(crate) dropped: u32,
    /// Whether the stream can leave the table now.
    pub(crate) finished: bool,
    /// Opened by the peer.
    pub(crate) remote: bool,
}

/// Wakers of one stream's tasks, kept with the stream so the driver needs
/// no second table (a lookup, an insert and a remove less per stream). The
/// session only stores them: it never wakes, clones or reads them.
#[derive(Debug, Default)]
pub(crate) struct StreamWakers {
    /// The task waiting in `recv` (or `poll_reset`).
    pub(crate) recv: Option<std::task::Waker>,
    /// The task waiting for room to send.
    pub(crate) send: Option<std::task::Waker>,
}

impl StreamWakers {
    /// No waker any more. Each slot is tested first: assigning `None`
    /// over it drops in place, which was a call even when it held none
    /// (the common case: a released stream's wakers are already gone).
    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        if self.recv.is_some() {
            self.recv = None;
        }
        if self.send.is_some() {
            self.send = None;
        }
    }
}

impl StreamState {
    pub(crate) fn new(remote: bool, send_window: u32, recv_window: RecvWindow) -> StreamState {
        StreamState {
            remote,
            handle: Handle::first(remote),
            open_metadata: None,
            send: SendSide {
                state: SendState::Open,
                window: SendWindow::new(send_window),
                queue: InlineQueue::default(),
                queued: 0,
                in_ready: false,
                want_writable: false,
            },
            recv: RecvSide {
                state: RecvState::Open,
                window: recv_window,
                queue: InlineQueue::default(),
                buffered: 0,
            },
            failed: None,
            progress: Progress::default(),
            wakers: StreamWakers::default(),
            spare_link: None,
        }
    }

    /// Back to [`new`](Self::new)'s state, in place (a recycled box: see
    /// `StreamTable`). Every field is named, so a field added later cannot
    /// be left over from the previous stream. Always inline: it runs once
    /// per stream and side, from one place (`StreamTable`'s recycling).
    #[inline(always)]
    pub(crate) fn renew(&mut self, remote: bool, send_window: u32, recv_window: RecvWindow) {
        let StreamState {
            // Set by `start`, below.
            remote: _,
            handle: _,
            open_metadata,
            send,
            recv,
            failed,
            progress,
            wakers,
            // The table's, not the stream's.
            spare_link: _,
        } = self;
        // Tested first: the accept took it (the common case), and
        // assigning `None` over `None` is still a call to its drop glue.
        if open_metadata.is_some() {
            *open_metadata = None;
        }
        let SendSide {
            state,
            window: _,
            queue,
            queued,
            in_ready,
            want_writable,
        } = send;
        *state = SendState::Open;
        queue.reset();
        *queued = 0;
        *in_ready = false;
        *want_writable = false;
        let RecvSide {
            state,
            window: _,
            queue,
            buffered,
        } = recv;
        *state = RecvState::Open;
        queue.reset();
        *buffered = 0;
        *failed = None;
        *progress = Progress::default();
        wakers.clear();
        self.start(remote, send_window, recv_window);
    }

    /// A [`renew`](Self::renew)ed state made stream state for a new
    /// stream: only what [`new`](Self::new) takes differs.
    #[inline]
    pub(crate) fn start(&mut self, remote: bool, send_window: u32, recv_window: RecvWindow) {
        self.remote = remote;
        self.handle = Handle::first(remote);
        self.send.window = SendWindow::new(send_window);
        self.recv.window = recv_window;
    }

    /// See `Session::is_done_by_app`.
    #[inline]
    pub(crate) fn done_by_app(&self) -> bool {
        self.send.state != SendState::Open
            && self.recv_ended()
            && self.recv.queue.is_empty()
            && self.failed.is_none()
            && self.handle == Handle::Held
    }

    /// Whether the peer's `END_STREAM` arrived.
    #[inline]
    pub(crate) fn recv_ended(&self) -> bool {
        self.recv.state == RecvState::Ended
    }

    /// Whether the application dropped its handle.
    #[inline]
    pub(crate) fn released(&self) -> bool {
        self.handle == Handle::Released
    }

    pub(crate) fn send_done(&self) -> bool {
        self.send.state == SendState::EndSent || self.failed.is_some()
    }

    pub(crate) fn recv_done(&self) -> bool {
        self.recv_ended() || self.failed.is_some()
    }

    /// Whether the stream can leave the table.
    pub(crate) fn finished(&self) -> bool {
        self.send_done() && self.recv_done() && self.released()
    }

    /// Whether data is waiting and some could go out with `conn` credit.
    pub(crate) fn can_send(&self, conn: SendWindow) -> bool {
        match self.send.queue.front() {
            None => false,
            Some(p) if p.data.is_empty() && p.metadata.is_empty() => true,
            Some(_) => !self.send.window.is_blocked() && !conn.is_blocked(),
        }
    }

    /// Whether the stream joins the session's ready list now: not in it
    /// yet and able to send with `conn` credit (it is marked as in it).
    #[inline]
    pub(crate) fn enter_ready(&mut self, conn: SendWindow) -> bool {
        let enter = !self.send.in_ready && self.can_send(conn);
        self.send.in_ready |= enter;
        enter
    }

    /// Makes the `DATA` frame for all of `data` and `metadata` (taken,
    /// `total` bytes) at once, with `END_STREAM` if `end`: its credit is taken from the
    /// stream's window and the connection's `conn`. The caller has checked
    /// that it fits and that nothing else waits.
    #[inline]
    pub(crate) fn send_now(
        &mut self,
        conn: &mut SendWindow,
        id: u32,
        (metadata, data): (&mut Metadata, &mut Bytes),
        total: usize,
        end: bool,
    ) -> Frame {
        self.send.window.debit_with(conn, total);
        self.progress.bump();
        let flags = if end {
            self.send.state = SendState::EndSent;
            Flags::END_STREAM
        } else {
            Flags::NONE
        };
        Frame {
            ty: FrameType::DATA,
            flags,
            stream_id: id,
            metadata: std::mem::take(metadata),
            payload: std::mem::take(data),
        }
    }

    /// The application let go of the handle: no task to wake any more (the
    /// wakers go; the stream itself may stay a while, draining), nothing
    /// more will be read. What the session must do about it is returned.
    #[inline(always)]
    pub(crate) fn release_handle(&mut self) -> Released {
        let was = std::mem::replace(&mut self.handle, Handle::Released);
        self.wakers.clear();
        let dropped = self.clear_recv();
        Released {
            was,
            dropped,
            finished: self.finished(),
            remote: self.remote,
        }
    }

    /// The peer's whole side, when it is one received piece that ended it
    /// and the stream is healthy: taken off the queue (see
    /// `Session::accept_with_request`; the caller returns its connection
    /// credit). The stream's own window owes nothing: the peer sends no
    /// more on it.
    #[inline]
    pub(crate) fn take_whole_side(&mut self) -> Option<Chunk> {
        let whole = self.failed.is_none()
            && self.recv_ended()
            && self.recv.queue.front().is_some_and(|c| c.end);
        if !whole {
            return None;
        }
        // The end is the last piece: the queue holds only this one.
        let chunk = self.recv.queue.take_last()?;
        self.recv.buffered = 0;
        Some(chunk)
    }

    /// Drops everything queued to send (the stream failed).
    pub(crate) fn clear_send(&mut self) {
        self.send.queue.clear();
        self.send.queued = 0;
    }

    /// Drops everything received and unread, returning its size (the
    /// connection credit to give back).
    #[inline]
    pub(crate) fn clear_recv(&mut self) -> u32 {
        self.recv.queue.clear();
        std::mem::take(&mut self.recv.buffered)
    }
}
