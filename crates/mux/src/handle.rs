//! The application's handles: `Connection`, `Incoming`, `Stream`.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use weft_frame::{Metadata, Reason};

use crate::driver::{ACCEPT_ID, Inner, Shared, now};
use crate::error::{MuxError, StreamError};
use crate::pipeline::Negotiated;
use crate::session::{Chunk, OpenError, Recv};

/// A handle to one multiplexed connection. Cheap to clone; the connection
/// lives until it closes (shutdown, error, idle timeout, peer), not until
/// the last handle is dropped — call [`shutdown`](Self::shutdown) to end it.
#[derive(Clone, Debug)]
pub struct Connection {
    pub(crate) shared: Arc<Shared>,
}

impl Connection {
    /// Opens a stream: one `OPEN` frame carrying `metadata` (method,
    /// timeout...) and the first payload (as much as flow control allows;
    /// the rest follows as `DATA`). `end` half-closes at once, so a unary
    /// request is a single frame.
    ///
    /// Fails retry-safe ([`MuxError::is_refused`]) after a `GOAWAY` or when
    /// stream ids run out, and with [`MuxError::is_closed`] once closed.
    pub async fn open(
        &self,
        metadata: Metadata,
        payload: Bytes,
        end: bool,
    ) -> Result<Stream, MuxError> {
        let mut inner = self.shared.lock();
        let id = match inner.session.open(metadata.clone(), payload, end, now()) {
            Ok(id) => id,
            Err(OpenError::GoingAway) => {
                inner.pump_app();
                return Err(MuxError::refused("connection is going away"));
            }
            Err(OpenError::IdsExhausted) => {
                inner.pump_app();
                return Err(MuxError::ids_exhausted());
            }
            Err(OpenError::Closed(c)) => return Err(MuxError::closed(c)),
            Err(OpenError::MetadataTooLarge) => return Err(MuxError::metadata_too_large()),
        };
        inner.wakers.insert(id, Default::default());
        inner.pump_app();
        drop(inner);
        Ok(Stream::new(self.shared.clone(), id, metadata))
    }

    /// Polls for room to open one more stream under the cap the peer
    /// announced (its `max-streams` setting): `Ready(Ok)` while there is
    /// room, `Pending` while there is none (woken when a stream we opened
    /// finishes), `Ready(Err)` once the connection is closed. It reserves
    /// nothing, so racing opens can still meet a retry-safe refusal; the
    /// rpc client's tower `poll_ready` is built on it.
    pub fn poll_open_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), MuxError>> {
        let mut inner = self.shared.lock();
        if let Some(c) = inner.session.close_cause() {
            return Poll::Ready(Err(MuxError::closed(c.clone())));
        }
        if inner.session.open_credit() > 0 {
            return Poll::Ready(Ok(()));
        }
        if !inner.open_waiters.iter().any(|w| w.will_wake(cx.waker())) {
            inner.open_waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// What the handshake agreed (encryption, compression).
    pub fn negotiated(&self) -> &Negotiated {
        &self.shared.negotiated
    }

    /// Graceful shutdown: sends `GOAWAY` with the last stream id processed;
    /// streams at or below it may finish, new opens fail retry-safe; after
    /// `drain` (or as soon as no stream is left) the connection closes.
    /// Resolves when it has.
    pub async fn shutdown(&self, drain: Duration) {
        {
            let mut inner = self.shared.lock();
            inner.session.shutdown(now(), drain);
            inner.pump_app();
        }
        self.closed().await;
    }

    /// Whether the connection is closed (no stream can make progress).
    pub fn is_closed(&self) -> bool {
        self.shared.lock().session.is_closed()
    }

    /// Resolves when the connection is gone and its transport shut.
    pub async fn closed(&self) {
        poll_fn(|cx| {
            let mut inner = self.shared.lock();
            if inner.done {
                return Poll::Ready(());
            }
            if !inner.closed_wakers.iter().any(|w| w.will_wake(cx.waker())) {
                inner.closed_wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
    }

    /// Flow-control and stream-table figures, for diagnostics and tests.
    pub fn stats(&self) -> crate::session::Stats {
        self.shared.lock().session.stats()
    }

    /// Why the connection closed, once it has.
    pub fn close_cause(&self) -> Option<crate::CloseCause> {
        self.shared.lock().session.close_cause().cloned()
    }
}

/// Streams the peer opens, in order. Dropping it refuses further opens
/// with `REFUSED_STREAM` (retry-safe for the peer).
#[derive(Debug)]
pub struct Incoming {
    pub(crate) shared: Arc<Shared>,
}

impl Incoming {
    /// The next stream the peer opened; `None` once the connection is
    /// closed or going away and the queue is empty.
    ///
    /// While it waits, this call reads the socket itself (for every
    /// stream), as [`Stream::recv`] does, so a request wakes this task
    /// directly rather than the connection task first; cancel safe.
    pub fn accept(&mut self) -> impl Future<Output = Option<Stream>> + '_ {
        SocketWait {
            waiter: self,
            waiting: false,
        }
    }

    /// Polls for the next stream (see [`accept`](Self::accept)); it leaves
    /// socket reading to the connection task.
    pub fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<Option<Stream>> {
        self.poll_accept_inner(cx, false)
    }

    /// Reads the socket from this task, for every stream.
    fn read_inline(inner: &mut Inner) {
        // New streams our read brings need not wake us: we look next.
        // (`Session::set_reader` stays unset: every stream's data wakes
        // its reader.)
        inner.reading_for = Some(ACCEPT_ID);
        if inner.read_frames() {
            inner.pump_app();
        }
        inner.reading_for = None;
    }

    fn poll_accept_inner(
        &mut self,
        cx: &mut Context<'_>,
        read_inline: bool,
    ) -> Poll<Option<Stream>> {
        let mut inner = self.shared.lock();
        let mut tried = !read_inline;
        if read_inline && inner.read_wake_fired() {
            // Woken by the socket: read before looking at the queue.
            tried = true;
            Self::read_inline(&mut inner);
        }
        loop {
            let out = if let Some(id) = inner.session.accept() {
                let metadata = inner.session.open_metadata(id).cloned().unwrap_or_default();
                inner.wakers.insert(id, Default::default());
                Some((id, metadata))
            } else if inner.session.accept_finished() {
                None
            } else if !tried && inner.read_needed() {
                // Nothing queued and the socket may have bytes: read it
                // ourselves, for every stream.
                tried = true;
                Self::read_inline(&mut inner);
                continue;
            } else {
                if read_inline {
                    // The socket wakes this task when bytes arrive; a read
                    // by anyone else that brings a stream wakes the waiter
                    // too (`dispatch_events`).
                    if inner.wait_for_socket(ACCEPT_ID, cx.waker(), !tried) {
                        tried = true;
                        Self::read_inline(&mut inner);
                        continue;
                    }
                } else {
                    match &inner.accept_waker {
                        Some(old) if old.will_wake(cx.waker()) => {}
                        _ => inner.accept_waker = Some(cx.waker().clone()),
                    }
                }
                return Poll::Pending;
            };
            if read_inline {
                inner.stop_waiting(ACCEPT_ID);
            }
            drop(inner);
            return Poll::Ready(out.map(|(id, m)| Stream::new(self.shared.clone(), id, m)));
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        let mut inner = self.shared.lock();
        inner.session.set_accepting(false);
        inner.pump_app();
    }
}

/// One stream: ordered, flow-controlled, half-closable.
///
/// Dropping a `Stream` that is not closed both ways resets it with
/// `CANCEL` (the peer's `recv` fails with a reset); its data still queued
/// is discarded. A stream closed both ways just frees its slot. Either way
/// the slot counted against the peer's concurrency cap is freed only when
/// the handle is dropped.
#[derive(Debug)]
pub struct Stream {
    shared: Arc<Shared>,
    id: u32,
    metadata: Metadata,
}

impl Stream {
    fn new(shared: Arc<Shared>, id: u32, metadata: Metadata) -> Stream {
        // No span per stream: creating and dropping one cost a few hundred
        // instructions per call even with no subscriber; events name the
        // stream id under the connection's span instead.
        Stream {
            shared,
            id,
            metadata,
        }
    }

    /// The stream id (odd: opened by the client, even: by the server).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The `OPEN` metadata (received, or sent).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Sends data, split into frames of at most the frame payload limit,
    /// waiting while the stream's send buffer is full (flow control).
    /// `end` half-closes after it. Resolves once queued, not once the peer
    /// has it.
    ///
    /// (A plain function returning the future, not an `async fn`: one
    /// state machine less on every send.)
    pub fn send(
        &mut self,
        data: Bytes,
        end: bool,
    ) -> impl Future<Output = Result<(), StreamError>> + '_ {
        self.send_with_metadata(Metadata::new(), data, end)
    }

    /// Like [`send`](Self::send), with `metadata` on the last frame
    /// (trailers such as a final status).
    pub fn send_with_metadata(
        &mut self,
        metadata: Metadata,
        data: Bytes,
        end: bool,
    ) -> impl Future<Output = Result<(), StreamError>> + '_ {
        let mut data = data;
        let mut metadata = metadata;
        poll_fn(move |cx| self.poll_send(cx, &mut metadata, &mut data, end))
    }

    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        metadata: &mut Metadata,
        data: &mut Bytes,
        end: bool,
    ) -> Poll<Result<(), StreamError>> {
        let mut inner = self.shared.lock();
        match inner.session.send_some(self.id, metadata, data, end) {
            Ok(true) => {
                inner.pump_send();
                Poll::Ready(Ok(()))
            }
            Ok(false) => {
                // The send buffer is full: wait for room.
                if let Some(w) = inner.wakers.get_mut(&self.id) {
                    w.send = Some(cx.waker().clone());
                }
                inner.pump_app();
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// The next chunk, in order. `Ok(None)` only after the peer's explicit
    /// `END_STREAM`; a reset or a dead connection is an `Err`, never a clean
    /// end. Data received before a reset is delivered first.
    ///
    /// While it waits, this call reads the socket itself (for every
    /// stream), so the reply wakes this task directly; cancel safe.
    pub fn recv(&mut self) -> impl Future<Output = Result<Option<Chunk>, StreamError>> + '_ {
        SocketWait {
            waiter: self,
            waiting: false,
        }
    }

    /// Polls for the next chunk (see [`recv`](Self::recv)); it leaves socket
    /// reading to the connection task.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Chunk>, StreamError>> {
        self.poll_recv_inner(cx, false)
    }

    /// Reads the socket from this task, for every stream.
    fn read_inline(&self, inner: &mut Inner) {
        // Our own read must not wake us through the stream's event waker.
        inner.reading_for = Some(self.id);
        inner.session.set_reader(self.id);
        if inner.read_frames() {
            inner.pump_app();
        }
        inner.session.set_reader(0);
        inner.reading_for = None;
    }

    fn poll_recv_inner(
        &mut self,
        cx: &mut Context<'_>,
        read_inline: bool,
    ) -> Poll<Result<Option<Chunk>, StreamError>> {
        let mut inner = self.shared.lock();
        let mut tried = !read_inline;
        if read_inline && inner.read_wake_fired() {
            // Woken by the socket: read before looking at our queue.
            tried = true;
            self.read_inline(&mut inner);
        }
        loop {
            let out = match inner.session.recv(self.id) {
                Recv::Chunk(c) => Ok(Some(c)),
                Recv::End => Ok(None),
                Recv::Failed(e) => Err(e),
                Recv::Pending if !tried && inner.read_needed() => {
                    // Nothing buffered and the socket may have bytes: read
                    // it ourselves, for every stream.
                    tried = true;
                    self.read_inline(&mut inner);
                    continue;
                }
                Recv::Pending => {
                    if read_inline {
                        // The socket wakes this task when bytes arrive; a
                        // read by anyone else that brings our data wakes
                        // the waiter too (`dispatch_events`).
                        if inner.wait_for_socket(self.id, cx.waker(), !tried) {
                            tried = true;
                            self.read_inline(&mut inner);
                            continue;
                        }
                    } else if let Some(w) = inner.wakers.get_mut(&self.id) {
                        match &w.recv {
                            Some(old) if old.will_wake(cx.waker()) => {}
                            _ => w.recv = Some(cx.waker().clone()),
                        }
                    }
                    return Poll::Pending;
                }
            };
            if read_inline {
                inner.stop_waiting(self.id);
            }
            if inner.session.has_transmit() {
                inner.pump_app();
            }
            return Poll::Ready(out);
        }
    }

    /// Resolves once the stream fails — reset by the peer (or by us), or
    /// its connection closed — with that error; pending while the stream is
    /// healthy, also after the peer's end. Takes no data. A server uses it
    /// to learn, without polling, that a caller whose whole request it has
    /// read went away. The waker is the one [`poll_recv`](Self::poll_recv)
    /// uses, so poll both from the same task.
    pub fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<StreamError> {
        let mut inner = self.shared.lock();
        if let Some(e) = inner.session.failure(self.id) {
            return Poll::Ready(e);
        }
        if let Some(w) = inner.wakers.get_mut(&self.id) {
            match &w.recv {
                Some(old) if old.will_wake(cx.waker()) => {}
                _ => w.recv = Some(cx.waker().clone()),
            }
        }
        Poll::Pending
    }

    /// Resets the stream with `reason`: the peer's `recv` fails, queued data
    /// is dropped. Does nothing if the stream already ended both ways.
    pub fn reset(&mut self, reason: Reason) {
        tracing::debug!(parent: &self.shared.span, stream = self.id, %reason, "stream reset");
        let mut inner = self.shared.lock();
        inner.session.reset(self.id, reason);
        inner.pump_app();
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let mut inner = self.shared.lock();
        inner.session.release(self.id, now());
        inner.wakers.remove(&self.id);
        inner.pump_app();
    }
}

/// A handle whose waits may make it the socket's registered reader
/// ([`Stream`] under its id, [`Incoming`] under [`ACCEPT_ID`]).
trait SocketWaiter {
    type Output;
    /// Polls, reading the socket inline and registering as its waiter.
    fn poll_inline(&mut self, cx: &mut Context<'_>) -> Poll<Self::Output>;
    fn shared(&self) -> &Shared;
    /// The id this handle registers under in the read waker.
    fn wait_id(&self) -> u32;
}

impl SocketWaiter for Stream {
    type Output = Result<Option<Chunk>, StreamError>;
    fn poll_inline(&mut self, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_recv_inner(cx, true)
    }
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn wait_id(&self) -> u32 {
        self.id
    }
}

impl SocketWaiter for Incoming {
    type Output = Option<Stream>;
    fn poll_inline(&mut self, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_accept_inner(cx, true)
    }
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn wait_id(&self) -> u32 {
        ACCEPT_ID
    }
}

/// The future of [`Stream::recv`] and [`Incoming::accept`]: if dropped
/// while registered as the socket's waiter, it hands the watch back to the
/// connection task (which reads anything that woke us meanwhile).
struct SocketWait<'a, W: SocketWaiter> {
    waiter: &'a mut W,
    waiting: bool,
}

impl<W: SocketWaiter> Future for SocketWait<'_, W> {
    type Output = W::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = self.waiter.poll_inline(cx);
        self.waiting = r.is_pending();
        r
    }
}

impl<W: SocketWaiter> Drop for SocketWait<'_, W> {
    fn drop(&mut self) {
        if self.waiting {
            let id = self.waiter.wait_id();
            let inner = self.waiter.shared().lock();
            inner.read_wake.clear_recv(id, true);
        }
    }
}
