//! The operations the handles perform on the connection's state: the
//! only way `crate::handle` reaches it. [`Deferred`] ones may be left for
//! whoever holds the state (see [`Combiner`](super::combine::Combiner)).

use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use weft_frame::{Metadata, Reason};

use super::combine::Owned;
use super::task::Turn;
use super::wake::{Waiter, Woken};
use super::{BufferCapacity, Inner, now};
use crate::error::{CloseCause, MuxError, StreamError};
use crate::session::{Chunk, OpenError, Recv, Stats};

/// An operation whose caller does not wait for it.
#[derive(Debug)]
pub(crate) enum Deferred {
    /// A `Stream` handle was dropped: free its slot (resetting it with
    /// `CANCEL` unless it ended both ways).
    Release(u32),
    /// `Stream::reset`.
    Reset(u32, Reason),
    /// A `Connection::open` waiting its turn was dropped: leave the queue.
    CancelOpen(u64),
    /// The `Incoming` handle was dropped: refuse further opens.
    StopAccepting,
    /// A task found the state held: poll it again once it is free.
    Wake(Waker),
}

/// What an accept does with the peer's whole side when the `OPEN` carried
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// Left on the stream, for its `recv` (`Incoming::accept`).
    Left,
    /// Taken and handed over with the stream
    /// (`Incoming::accept_with_request`).
    Taken,
}

/// Whether a receive looks at its stream before it reads the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// At once.
    Now,
    /// Only after a read (or the socket's watch) could have brought
    /// something: the stream was just opened.
    AfterReading,
}

/// Whether a `Stream` handle still names a stream in the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Life {
    /// The session keeps the stream for the handle.
    Held,
    /// Released early, in the call that took its last chunk or queued its
    /// end (see `Session::is_done_by_app`): the handle answers `recv` by
    /// itself and its drop submits nothing.
    Released,
}

/// The mailbox's operations, and stream releases.
impl Inner {
    fn apply_op(&mut self, op: Deferred) {
        match op {
            Deferred::Release(id) => self.release_stream(id),
            Deferred::Reset(id, reason) => self.session.reset(id, reason),
            Deferred::CancelOpen(ticket) => {
                self.wakers.opens.cancel(ticket);
                // It may have been the one owed the free slot.
                self.wakers.wake_opens(self.opens_due(false));
            }
            Deferred::StopAccepting => self.session.set_accepting(false),
            Deferred::Wake(waker) => self.wakers.list.push(waker),
        }
    }

    fn release_stream(&mut self, id: u32) {
        self.session.release(id, now());
    }
}

impl Owned for Inner {
    type Op = Deferred;

    fn apply(&mut self, ops: &mut Vec<Deferred>) {
        for op in ops.drain(..) {
            self.apply_op(op);
        }
        self.pump_app();
    }

    fn apply_now(&mut self, op: Deferred) {
        self.apply_op(op);
        self.pump_app();
    }

    fn wake_op(waker: &Waker) -> Deferred {
        Deferred::Wake(waker.clone())
    }

    fn spare(&mut self) -> &mut Vec<Deferred> {
        &mut self.spare_ops
    }

    #[inline]
    fn take_woken(&mut self) -> Woken {
        self.wakers.take_woken(self.link.take_owed())
    }

    #[inline]
    fn has_woken(&self) -> bool {
        self.link.is_owed() || !self.wakers.list.is_empty()
    }
}

/// Registers `waker` in `slot` unless it already wakes the same task.
fn register(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(old) if old.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

/// `Connection`'s operations.
impl Inner {
    /// Writes the first frames (our settings) once the handshake is done.
    pub(crate) fn start(&mut self) {
        self.pump();
    }

    /// Opens a stream (see `Connection::open`); returns its id.
    /// `metadata` is lent: the caller has it back as it was.
    pub(crate) fn open(
        &mut self,
        metadata: &mut Metadata,
        payload: Bytes,
        end: bool,
    ) -> Result<u32, MuxError> {
        let opened = self
            .session
            .open_direct(metadata, payload, end, &mut self.writer);
        self.opened(opened)
    }

    /// Opens a unary call's stream (see `Connection::call`): its request
    /// whole with `END_STREAM`, waiting for the reply in a slot when the
    /// request fits the `OPEN` (`Session::open_call`); returns its id.
    /// `metadata` is lent, as to [`open`](Self::open).
    pub(crate) fn open_call(
        &mut self,
        metadata: &mut Metadata,
        payload: Bytes,
    ) -> Result<u32, MuxError> {
        let opened = self
            .session
            .open_call_direct(metadata, payload, &mut self.writer);
        self.opened(opened)
    }

    /// An open's outcome, as the handles see it.
    #[inline(always)]
    fn opened(&mut self, opened: Result<u32, OpenError>) -> Result<u32, MuxError> {
        let id = match opened {
            Ok(id) => id,
            Err(OpenError::GoingAway) => {
                self.pump_app();
                return Err(MuxError::refused("connection is going away"));
            }
            Err(OpenError::IdsExhausted) => {
                self.pump_app();
                return Err(MuxError::ids_exhausted());
            }
            Err(OpenError::Closed(c)) => return Err(MuxError::closed(c)),
            Err(OpenError::MetadataTooLarge) => return Err(MuxError::metadata_too_large()),
        };
        self.pump_opened();
        Ok(id)
    }

    /// See `Connection::poll_open_ready`.
    pub(crate) fn poll_open_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), MuxError>> {
        if let Some(c) = self.session.close_cause() {
            return Poll::Ready(Err(MuxError::closed(c.clone())));
        }
        if self.session.open_credit() > 0 {
            return Poll::Ready(Ok(()));
        }
        self.wakers.wait_open_ready(cx.waker());
        Poll::Pending
    }

    /// Whether `Connection::open` holding `ticket` must wait for a slot
    /// under the peer's stream cap, as h2 and grpc-go clients hold a new
    /// stream back until one of theirs closes; opens go in turn (see
    /// [`OpenQueue`](super::opens::OpenQueue)). It never waits once the
    /// connection is closed or going away: `open` then fails at once
    /// (retry-safe after a `GOAWAY`).
    ///
    /// The common case is inline, always: an open not queued with a slot
    /// free past the opens waiting goes at once, whatever else holds
    /// (closed or going away, it goes too, to fail in `open`); as a call
    /// that test cost about 40 instructions per call.
    #[inline(always)]
    pub(crate) fn must_wait_to_open(
        &mut self,
        cx: &mut Context<'_>,
        ticket: &mut Option<u64>,
    ) -> bool {
        if ticket.is_none() && self.wakers.opens.admits_new(self.session.open_credit()) {
            return false;
        }
        self.must_wait_to_open_queued(cx, ticket)
    }

    #[inline(never)]
    fn must_wait_to_open_queued(&mut self, cx: &mut Context<'_>, ticket: &mut Option<u64>) -> bool {
        if self.session.is_closed() || self.session.is_going_away() {
            if let Some(t) = ticket.take() {
                self.wakers.opens.cancel(t);
            }
            return false;
        }
        let queued = ticket.is_some();
        let credit = self.session.open_credit();
        if !self.wakers.opens.admit(ticket, credit, cx.waker()) {
            return true;
        }
        if queued {
            // Slots freed while the session raised no event (it does only
            // when the cap was full) are the next waiters' turn now.
            self.wakers.wake_opens(credit - 1);
        }
        false
    }

    /// Starts a graceful shutdown (see `Connection::shutdown`).
    pub(crate) fn shutdown(&mut self, drain: Duration) {
        self.session.shutdown(now(), drain);
        self.pump_app();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.session.is_closed()
    }

    pub(crate) fn close_cause(&self) -> Option<CloseCause> {
        self.session.close_cause().cloned()
    }

    pub(crate) fn stats(&self) -> Stats {
        self.session.stats()
    }

    pub(crate) fn buffer_capacity(&self) -> BufferCapacity {
        BufferCapacity {
            read: self.reader.capacity(),
            write: self.writer.capacity(),
        }
    }

    /// Ready once the connection is gone and its transport shut.
    pub(crate) fn poll_closed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.io.is_done() {
            return Poll::Ready(());
        }
        self.wakers.wait_closed(cx.waker());
        Poll::Pending
    }
}

/// `Incoming`'s operations.
impl Inner {
    /// The next stream the peer opened, with its `OPEN` metadata and,
    /// when `request` says so, the peer's whole side if the `OPEN` carried
    /// it. With `read_inline` the caller's task reads the socket itself
    /// while it waits (see `Incoming::accept`).
    pub(crate) fn poll_accept(
        &mut self,
        cx: &mut Context<'_>,
        read_inline: bool,
        request: Request,
    ) -> Poll<Option<(u32, Metadata, Option<Bytes>)>> {
        let mut tried = !read_inline;
        if read_inline && self.read_wake_fired() {
            // Woken by the socket: read before looking at the queue.
            tried = true;
            self.read_inline(Waiter::Acceptor);
        }
        loop {
            let accepted = match request {
                Request::Left => self
                    .session
                    .accept_with_metadata()
                    .map(|(id, m)| (id, m, None)),
                Request::Taken => self.session.accept_with_request(),
            };
            let out = if let Some(accepted) = accepted {
                Some(accepted)
            } else if self.session.accept_finished() {
                None
            } else if !tried && self.read_needed() {
                // Nothing queued and the socket may have bytes: read it
                // ourselves, for every stream.
                tried = true;
                self.read_inline(Waiter::Acceptor);
                continue;
            } else {
                if !read_inline {
                    register(&mut self.wakers.accept, cx.waker());
                } else if self.wait_for_socket(Waiter::Acceptor, cx.waker(), !tried) {
                    // The socket wakes this task when bytes arrive; a read
                    // by anyone else that brings a stream wakes the waiter
                    // too (`dispatch_events`).
                    tried = true;
                    self.read_inline(Waiter::Acceptor);
                    continue;
                }
                return Poll::Pending;
            };
            if read_inline {
                self.stop_waiting(Waiter::Acceptor);
            }
            return Poll::Ready(out);
        }
    }
}

/// A receive's outcome as `Stream::recv` gives it (`Pending` is not one:
/// [`Inner::poll_recv_from`] never returns it ready).
#[inline(always)]
pub(crate) fn recv_result(recv: Recv) -> Result<Option<Chunk>, StreamError> {
    match recv {
        Recv::Chunk(c) => Ok(Some(c)),
        Recv::End | Recv::Pending => Ok(None),
        Recv::Failed(e) => Err(e),
    }
}

/// `Stream`'s operations.
impl Inner {
    /// Queues data on stream `id` (see `Stream::send_with_metadata`):
    /// `Ready` once all of it is queued, `Pending` while the send buffer
    /// is full. `Ready(Ok)` always leaves both `metadata` and `data` as
    /// their (static, empty) defaults, taken with `mem::take`: the
    /// handle's future does not drop them then.
    pub(crate) fn poll_send(
        &mut self,
        id: u32,
        cx: &mut Context<'_>,
        metadata: &mut Metadata,
        data: &mut Bytes,
        end: bool,
        life: &mut Life,
    ) -> Poll<Result<(), StreamError>> {
        let mut released = false;
        let sent = (metadata, data, end);
        match self.session.send_releasing_direct(
            id,
            sent,
            &mut now,
            &mut released,
            &mut self.writer,
        ) {
            Ok(true) => {
                if released {
                    *life = Life::Released;
                }
                self.pump_send();
                Poll::Ready(Ok(()))
            }
            Ok(false) => {
                // The send buffer is full: wait for room.
                if let Some(w) = self.session.wakers_mut(id) {
                    w.send = Some(cx.waker().clone());
                }
                self.pump_app();
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// The next chunk of stream `id` (see `Stream::recv`). With
    /// `read_inline` the caller's task reads the socket itself while it
    /// waits.
    #[inline]
    pub(crate) fn poll_recv(
        &mut self,
        id: u32,
        cx: &mut Context<'_>,
        read_inline: bool,
        life: &mut Life,
    ) -> Poll<Result<Option<Chunk>, StreamError>> {
        self.poll_recv_from(id, cx, read_inline, life, Look::Now)
            .map(recv_result)
    }

    /// [`poll_recv`](Self::poll_recv) for a call's answer, as the session
    /// gives it (never [`Recv::Pending`]): a `Connection::call` keeps it
    /// so, and the reply is not moved once more to change its shape.
    #[inline]
    pub(crate) fn poll_reply(
        &mut self,
        id: u32,
        cx: &mut Context<'_>,
        life: &mut Life,
    ) -> Poll<Recv> {
        self.poll_recv_from(id, cx, true, life, Look::Now)
    }

    /// [`poll_recv`](Self::poll_recv) for a call opened in this same take
    /// of the state: nothing can have arrived for it yet (nothing was read
    /// since; only the close changes a stream without a read, and a
    /// closed session is looked at), so the first look at its stream is
    /// skipped.
    pub(crate) fn poll_reply_fresh(
        &mut self,
        id: u32,
        cx: &mut Context<'_>,
        life: &mut Life,
    ) -> Poll<Recv> {
        let look = if self.session.is_closed() {
            Look::Now
        } else {
            Look::AfterReading
        };
        self.poll_recv_from(id, cx, true, life, look)
    }

    /// Ready with anything but [`Recv::Pending`].
    #[inline(always)]
    fn poll_recv_from(
        &mut self,
        id: u32,
        cx: &mut Context<'_>,
        read_inline: bool,
        life: &mut Life,
        mut look: Look,
    ) -> Poll<Recv> {
        let me = Waiter::Stream(id);
        let mut tried = !read_inline;
        if read_inline && self.read_wake_fired() {
            // Woken by the socket: read before looking at our queue.
            tried = true;
            self.read_inline(me);
            look = Look::Now;
        }
        loop {
            let mut released = false;
            let recv = match look {
                Look::Now => self.session.recv_releasing(id, &mut now, &mut released),
                Look::AfterReading => {
                    look = Look::Now;
                    Recv::Pending
                }
            };
            if matches!(recv, Recv::Pending) {
                // It holds nothing: forgotten rather than left to the
                // enum's drop glue, an out-of-line call (about 17
                // instructions) on every wait.
                std::mem::forget(recv);
                if !tried && self.read_needed() {
                    // Nothing buffered and the socket may have bytes: read
                    // it ourselves, for every stream.
                    tried = true;
                    self.read_inline(me);
                    continue;
                }
                if !read_inline {
                    if let Some(w) = self.session.wakers_mut(id) {
                        register(&mut w.recv, cx.waker());
                    }
                } else if self.wait_for_socket(me, cx.waker(), !tried) {
                    // The socket wakes this task when bytes arrive; a
                    // read by anyone else that brings our data wakes
                    // the waiter too (`dispatch_events`).
                    tried = true;
                    self.read_inline(me);
                    continue;
                }
                return Poll::Pending;
            }
            if read_inline {
                self.stop_waiting(me);
            }
            if released {
                *life = Life::Released;
            }
            // A stream's end may have released it (an event, the idle
            // clock); a piece taken may have returned credit (a frame).
            let ends = matches!(&recv, Recv::End) || matches!(&recv, Recv::Chunk(c) if c.end);
            if ends || self.session.has_transmit() {
                self.pump_received();
            }
            return Poll::Ready(recv);
        }
    }

    /// The pump after a receive. Frames queued behind those already left
    /// for the connection task ([`Turn::Owed`]) are its to write, so with
    /// no event, timer or close to act on the pump is skipped, as after an
    /// open (`pump_opened`). With spawned callers at 64 in flight the
    /// other callers' next `OPEN`s are usually queued so when a reply is
    /// taken, and the pump's call and tests cost about 45 instructions per
    /// call. The turn is tested first, alone: `pump_opened`'s whole test
    /// ahead of the usual quiet pump cost sequential calls 6 more.
    #[inline(always)]
    fn pump_received(&mut self) {
        if self.link.turn == Turn::Owed {
            self.pump_opened();
        } else {
            self.pump_app();
        }
    }

    /// See `Stream::poll_reset`.
    pub(crate) fn poll_reset(
        &mut self,
        id: u32,
        cx: &mut Context<'_>,
        life: Life,
    ) -> Poll<StreamError> {
        if let Some(e) = self.session.failure(id) {
            return Poll::Ready(e);
        }
        if life == Life::Released {
            // Finished both ways: only the connection's close can fail it
            // now (`failure` says so once closed).
            std::task::ready!(self.poll_closed(cx));
            // The driver finishes only once the session closed, and then
            // `failure` answered above; if it ever did not, pending.
            return self.session.failure(id).map_or(Poll::Pending, Poll::Ready);
        }
        if let Some(w) = self.session.wakers_mut(id) {
            register(&mut w.recv, cx.waker());
        }
        Poll::Pending
    }
}
