//! The application's handles: `Connection`, `Incoming`, `Stream`.

use std::future::{Future, poll_fn};
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use weft_frame::{Metadata, Reason};

use crate::driver::{BufferCapacity, Deferred, Life, Request, Shared, Waiter};
use crate::error::{MuxError, StreamError};
use crate::pipeline::Negotiated;
use crate::session::Chunk;

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
    /// Waits while the streams we opened fill the cap the peer announced
    /// (its `max-streams` setting), as h2 and grpc-go clients do, so a
    /// well-behaved caller is not refused for opening too many; bound the
    /// wait with a timeout or deadline.
    ///
    /// Fails retry-safe ([`MuxError::is_refused`]) after a `GOAWAY` or when
    /// stream ids run out, and with [`MuxError::is_closed`] once closed.
    ///
    /// (A plain function returning the future, not an `async fn`: one
    /// state machine less per call.)
    pub fn open(
        &self,
        metadata: Metadata,
        payload: Bytes,
        end: bool,
    ) -> impl Future<Output = Result<Stream, MuxError>> + '_ {
        Opening {
            conn: self,
            args: Some((metadata, payload)),
            end,
            ticket: None,
        }
    }

    /// Polls for room to open one more stream under the cap the peer
    /// announced (its `max-streams` setting): `Ready(Ok)` while there is
    /// room, `Pending` while there is none (woken when a stream we opened
    /// finishes), `Ready(Err)` once the connection is closed. It reserves
    /// nothing, so racing opens can still meet a retry-safe refusal; the
    /// rpc client's tower `poll_ready` is built on it.
    pub fn poll_open_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), MuxError>> {
        self.shared
            .poll_state(cx, |inner, cx| inner.poll_open_ready(cx))
    }

    /// What the handshake agreed (encryption, compression).
    pub fn negotiated(&self) -> &Negotiated {
        self.shared.negotiated()
    }

    /// Graceful shutdown: sends `GOAWAY` with the last stream id processed;
    /// streams at or below it may finish, new opens fail retry-safe; after
    /// `drain` (or as soon as no stream is left) the connection closes.
    /// Resolves when it has.
    pub async fn shutdown(&self, drain: Duration) {
        self.shared.lock().shutdown(drain);
        self.closed().await;
    }

    /// Whether the connection is closed (no stream can make progress).
    pub fn is_closed(&self) -> bool {
        self.shared.lock().is_closed()
    }

    /// Resolves when the connection is gone and its transport shut.
    pub async fn closed(&self) {
        poll_fn(|cx| {
            self.shared
                .poll_state(cx, |inner, cx| inner.poll_closed(cx))
        })
        .await;
    }

    /// Flow-control and stream-table figures, for diagnostics and tests.
    pub fn stats(&self) -> crate::session::Stats {
        self.shared.lock().stats()
    }

    /// Why the connection closed, once it has.
    pub fn close_cause(&self) -> Option<crate::CloseCause> {
        self.shared.lock().close_cause()
    }

    /// Bytes the connection's read and write buffers hold reserved now,
    /// for diagnostics and memory tests (an idle connection's are small:
    /// they are sized on demand and given back when it goes quiet).
    pub fn buffer_capacity(&self) -> BufferCapacity {
        self.shared.lock().buffer_capacity()
    }
}

/// The future of [`Connection::open`]: waits its turn for a slot under
/// the peer's cap, then opens; dropped while waiting, it leaves the queue.
struct Opening<'a> {
    conn: &'a Connection,
    args: Option<(Metadata, Bytes)>,
    end: bool,
    /// Its place in the queue of waiting opens.
    ticket: Option<u64>,
}

impl Future for Opening<'_> {
    type Output = Result<Stream, MuxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.get_mut();
        let mut inner = me.conn.shared.lock();
        if inner.must_wait_to_open(cx, &mut me.ticket) {
            return Poll::Pending;
        }
        let (mut metadata, payload) = me.args.take().expect("open polled after it completed");
        let id = inner.open(&mut metadata, payload, me.end);
        drop(inner);
        Poll::Ready(id.map(|id| Stream::new(me.conn.shared.clone(), id, metadata)))
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.conn.shared.submit(Deferred::CancelOpen(t));
        }
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
        self.poll_accept_inner(cx, false, Request::Left)
            .map(|a| a.map(|a| a.stream))
    }

    /// Like [`accept`](Self::accept), and the peer's whole side when its
    /// `OPEN` carried it (`END_STREAM`): taken as `recv` would take it
    /// (its credit returned; the stream's `recv` then says it ended), in
    /// the same step as the accept. A unary call's request, one frame,
    /// reaches its server this way without a receive of its own. Anything
    /// else (more frames to come, a stream reset before the accept) is
    /// left for `recv`, and [`Accepted::request`] is `None`. Cancel safe.
    ///
    /// The future may be polled again after it resolved: each `Ready` is
    /// the next stream (or `None` once the connection is done), as a
    /// stream of accepted streams would give them, so a server can keep
    /// one such future for a connection's life. It holds no state between
    /// polls but its watch of the socket.
    pub fn accept_with_request(&mut self) -> impl Future<Output = Option<Accepted>> + '_ {
        SocketWait {
            waiter: TakingRequests(self),
            waiting: false,
        }
    }

    fn poll_accept_inner(
        &mut self,
        cx: &mut Context<'_>,
        read_inline: bool,
        request: Request,
    ) -> Poll<Option<Accepted>> {
        let mut inner = self.shared.lock();
        let polled = inner.poll_accept(cx, read_inline, request);
        inner.unlock();
        let out = std::task::ready!(polled);
        Poll::Ready(out.map(|(id, m, request)| Accepted {
            stream: Stream::new(self.shared.clone(), id, m),
            request,
        }))
    }
}

/// The future of [`Stream::send_with_metadata`].
///
/// Queueing all of it takes the metadata and the data out of the future,
/// leaving their (static, empty) defaults behind. Dropping those would
/// still call through the `Bytes` vtable twice for nothing, so the parts
/// are kept in `ManuallyDrop` and dropped only while they may hold
/// something: before the send, after a failure, or when it is cancelled
/// while waiting for room.
struct Sending<'a> {
    stream: &'a mut Stream,
    metadata: ManuallyDrop<Metadata>,
    data: ManuallyDrop<Bytes>,
    end: bool,
    parts: Parts,
}

/// Whether a [`Sending`]'s parts may still hold something.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    /// Not queued yet, or not all of it: they are dropped with the future.
    Held,
    /// All queued: both are their defaults, with nothing to let go.
    Taken,
}

impl Future for Sending<'_> {
    type Output = Result<(), StreamError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let polled = this
            .stream
            .poll_send(cx, &mut this.metadata, &mut this.data, this.end);
        if let Poll::Ready(Ok(())) = polled {
            // `Inner::poll_send` answers `Ready(Ok)` only once it has taken
            // both (`mem::take`), whichever way they were queued.
            this.parts = Parts::Taken;
        }
        polled
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        if self.parts == Parts::Held {
            drop(ManuallyDrop::into_inner(std::mem::take(&mut self.metadata)));
            drop(ManuallyDrop::into_inner(std::mem::take(&mut self.data)));
        }
    }
}

/// A stream the peer opened, from [`Incoming::accept_with_request`].
#[derive(Debug)]
pub struct Accepted {
    /// The stream.
    pub stream: Stream,
    /// The peer's whole side, when its `OPEN` carried it: that frame's
    /// payload (its `END_STREAM` implied; the `OPEN` metadata is the
    /// stream's). `None` when more is to come on the stream (or it was
    /// reset before the accept): read it with [`Stream::recv`].
    pub request: Option<Bytes>,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        self.shared.submit(Deferred::StopAccepting);
    }
}

/// One stream: ordered, flow-controlled, half-closable.
///
/// Dropping a `Stream` that is not closed both ways resets it with
/// `CANCEL` (the peer's `recv` fails with a reset); its data still queued
/// is discarded. A stream closed both ways frees its slot (the one counted
/// against the peer's concurrency cap) as soon as the handle has queued its
/// own end and taken the peer's last chunk — in that same call, not at the
/// drop — or else when the handle is dropped.
#[derive(Debug)]
pub struct Stream {
    shared: Arc<Shared>,
    id: u32,
    metadata: Metadata,
    life: Life,
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
            life: Life::Held,
        }
    }

    /// A handle for stream `id` whose session state is as `life` says
    /// (a [`Connection::call`]'s answer hands its stream on this way).
    pub(crate) fn with_life(
        shared: Arc<Shared>,
        id: u32,
        metadata: Metadata,
        life: Life,
    ) -> Stream {
        let mut s = Stream::new(shared, id, metadata);
        s.life = life;
        s
    }

    /// The stream id (odd: opened by the client, even: by the server).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The `OPEN` metadata (received, or sent).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Takes the `OPEN` metadata out of the handle, leaving it empty: for
    /// a holder that keeps the block elsewhere for the stream's life (a
    /// server's call context), rather than a second reference to it.
    pub fn take_metadata(&mut self) -> Metadata {
        std::mem::take(&mut self.metadata)
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
        Sending {
            stream: self,
            metadata: ManuallyDrop::new(metadata),
            data: ManuallyDrop::new(data),
            end,
            parts: Parts::Held,
        }
    }

    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        metadata: &mut Metadata,
        data: &mut Bytes,
        end: bool,
    ) -> Poll<Result<(), StreamError>> {
        // A released stream is unknown to the session, which then says
        // what it says of any stream whose end was sent: `SendClosed` (or
        // the connection's close).
        let (id, life) = (self.id, &mut self.life);
        self.shared.poll_state(cx, |inner, cx| {
            inner.poll_send(id, cx, metadata, data, end, life)
        })
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

    fn poll_recv_inner(
        &mut self,
        cx: &mut Context<'_>,
        read_inline: bool,
    ) -> Poll<Result<Option<Chunk>, StreamError>> {
        if self.life == Life::Released {
            // Its last chunk (with the peer's end) was taken already.
            return Poll::Ready(Ok(None));
        }
        let (id, life) = (self.id, &mut self.life);
        self.shared
            .poll_state(cx, |inner, cx| inner.poll_recv(id, cx, read_inline, life))
    }

    /// Resolves once the stream fails — reset by the peer (or by us), or
    /// its connection closed — with that error; pending while the stream is
    /// healthy, also after the peer's end. Takes no data. A server uses it
    /// to learn, without polling, that a caller whose whole request it has
    /// read went away. The waker is the one [`poll_recv`](Self::poll_recv)
    /// uses, so poll both from the same task.
    pub fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<StreamError> {
        let (id, life) = (self.id, self.life);
        self.shared
            .poll_state(cx, |inner, cx| inner.poll_reset(id, cx, life))
    }

    /// Resets the stream with `reason`: the peer's `recv` fails, queued data
    /// is dropped. Does nothing if the stream already ended both ways.
    pub fn reset(&mut self, reason: Reason) {
        tracing::debug!(parent: self.shared.span(), stream = self.id, %reason, "stream reset");
        self.shared.submit(Deferred::Reset(self.id, reason));
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.life == Life::Held {
            self.shared.submit(Deferred::Release(self.id));
        }
    }
}

/// A handle whose waits may make it the socket's registered reader.
trait SocketWaiter {
    type Output;
    /// Polls, reading the socket inline and registering as its waiter.
    fn poll_inline(&mut self, cx: &mut Context<'_>) -> Poll<Self::Output>;
    fn shared(&self) -> &Shared;
    /// Who this handle is to the read waker.
    fn waiter(&self) -> Waiter;
}

impl SocketWaiter for &mut Stream {
    type Output = Result<Option<Chunk>, StreamError>;
    fn poll_inline(&mut self, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_recv_inner(cx, true)
    }
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn waiter(&self) -> Waiter {
        Waiter::Stream(self.id)
    }
}

impl SocketWaiter for &mut Incoming {
    type Output = Option<Stream>;
    fn poll_inline(&mut self, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_accept_inner(cx, true, Request::Left)
            .map(|a| a.map(|a| a.stream))
    }
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn waiter(&self) -> Waiter {
        Waiter::Acceptor
    }
}

/// [`Incoming::accept_with_request`]'s waiter: the acceptor, taking
/// requests.
struct TakingRequests<'a>(&'a mut Incoming);

impl SocketWaiter for TakingRequests<'_> {
    type Output = Option<Accepted>;
    fn poll_inline(&mut self, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_accept_inner(cx, true, Request::Taken)
    }
    fn shared(&self) -> &Shared {
        &self.0.shared
    }
    fn waiter(&self) -> Waiter {
        Waiter::Acceptor
    }
}

/// The future of [`Stream::recv`] and [`Incoming::accept`]: if dropped
/// while registered as the socket's waiter, it hands the watch back to the
/// connection task (which reads anything that woke us meanwhile).
struct SocketWait<W: SocketWaiter> {
    waiter: W,
    waiting: bool,
}

impl<W: SocketWaiter + Unpin> Future for SocketWait<W> {
    type Output = W::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = self.waiter.poll_inline(cx);
        self.waiting = r.is_pending();
        r
    }
}

impl<W: SocketWaiter> Drop for SocketWait<W> {
    fn drop(&mut self) {
        if self.waiting {
            let who = self.waiter.waiter();
            self.waiter.shared().abandon_socket_wait(who);
        }
    }
}
