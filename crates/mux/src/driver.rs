//! The thin tokio driver: one task per connection that reads, fires timers
//! and finishes writes; application calls write their own frames inline.
//!
//! All connection state sits behind one `std::sync::Mutex` (critical sections
//! are short and never await). Writes happen under that lock from whichever
//! side has something to send: a `send` that finds the writer idle encodes
//! and writes its own frame in the same call, so a round trip needs no
//! wake-up of a writer task. Only when the socket is not writable does the
//! driver task (whose waker the write registered) take over; frames queued
//! meanwhile are coalesced into its next write. Every write drains control
//! frames before data, and the buffer is flushed when the queue is empty.
//!
//! Reading works the same way. The socket is always polled with one
//! connection-wide [`ReadWake`] waker; when bytes arrive it wakes the task
//! of the `recv` or `accept` currently waiting for them (which then reads
//! the socket itself, handling frames for every stream) or, if none waits,
//! the driver task. So the reply to a request wakes the requesting task
//! directly, a request wakes the accepting task directly, and some task
//! always watches the socket.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Wake;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Sleep;
use tracing::Span;
use weft_frame::Reason;

use crate::error::CloseCause;
use crate::idmap::IdMap;
use crate::pipeline::{Inbound, Negotiated, Outbound};
use crate::session::{Event, Session};

/// Wakers of one stream's tasks.
#[derive(Debug, Default)]
pub(crate) struct StreamWakers {
    pub(crate) recv: Option<Waker>,
    pub(crate) send: Option<Waker>,
}

/// The write side: the transport's write half, the record pipeline and the
/// coalescing buffer.
pub(crate) struct Writer {
    outbound: Outbound,
    buf: BytesMut,
    coalesce: usize,
    needs_flush: bool,
    shut: bool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("buffered", &self.buf.len())
            .field("shut", &self.shut)
            .finish_non_exhaustive()
    }
}

/// The read side: the transport's read half, the record pipeline and the
/// read buffer (received payloads are slices of it).
pub(crate) struct Reader {
    inbound: Inbound,
    buf: BytesMut,
    /// Bytes read during the handshake are waiting in `buf`.
    leftover: bool,
    eof: bool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("buffered", &self.buf.len())
            .field("eof", &self.eof)
            .finish_non_exhaustive()
    }
}

/// The one waker the socket's reads register. On wake it wakes the task of
/// the `recv` (or `accept`, as [`ACCEPT_ID`]) waiting for bytes, if any
/// (that task reads the socket itself), otherwise the driver task. It never takes the connection lock
/// (a wake may come from inside another connection's lock).
/// The pseudo stream id under which `Incoming::accept` waits in
/// [`ReadWake`]. Stream ids are below 2^31, so no stream has it; it is
/// never looked up in `Inner::wakers` nor given to `Session::set_reader`.
pub(crate) const ACCEPT_ID: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct ReadWake {
    fired: AtomicBool,
    /// The stream id in `waiters.recv` (0: none), readable without the lock.
    recv_id: AtomicU32,
    waiters: Mutex<ReadWaiters>,
}

#[derive(Debug, Default)]
struct ReadWaiters {
    /// The stream whose `recv` waits for socket bytes (or [`ACCEPT_ID`]:
    /// the acceptor), and its task.
    recv: Option<(u32, Waker)>,
    driver: Option<Waker>,
}

impl ReadWake {
    fn waiters(&self) -> MutexGuard<'_, ReadWaiters> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_driver(&self, waker: &Waker) {
        let mut w = self.waiters();
        if !w.driver.as_ref().is_some_and(|d| d.will_wake(waker)) {
            w.driver = Some(waker.clone());
        }
    }

    /// `id`'s `recv` waits for socket bytes in the task of `waker`. Returns
    /// the waiter of another stream it displaces, which the caller keeps as
    /// that stream's event waker (so its data, read by someone else, still
    /// wakes it).
    pub(crate) fn set_recv(&self, id: u32, waker: &Waker) -> Option<(u32, Waker)> {
        let mut w = self.waiters();
        let displaced = match &w.recv {
            Some((i, old)) if *i == id && old.will_wake(waker) => None,
            _ => w.recv.replace((id, waker.clone())),
        };
        self.recv_id.store(id, Ordering::Release);
        displaced.filter(|(i, _)| *i != id)
    }

    /// Takes the waiter if it belongs to `id` (`None`: any stream).
    fn take_recv(&self, id: Option<u32>) -> Option<Waker> {
        let current = self.recv_id.load(Ordering::Acquire);
        if current == 0 || id.is_some_and(|id| id != current) {
            return None;
        }
        let mut w = self.waiters();
        match w.recv.take() {
            Some((i, t)) if id.is_none_or(|id| id == i) => {
                self.recv_id.store(0, Ordering::Release);
                Some(t)
            }
            other => {
                w.recv = other;
                None
            }
        }
    }

    /// `id`'s `recv` no longer waits (it completed or was dropped); with
    /// `handoff`, the driver is woken in case bytes arrived meanwhile.
    pub(crate) fn clear_recv(&self, id: u32, handoff: bool) {
        if !handoff && self.recv_id.load(Ordering::Acquire) != id {
            return; // not ours (or already taken by a wake): no lock needed
        }
        let mut w = self.waiters();
        if w.recv.as_ref().is_some_and(|(i, _)| *i == id) {
            w.recv = None;
            self.recv_id.store(0, Ordering::Release);
        }
        if handoff && let Some(d) = &w.driver {
            d.wake_by_ref();
        }
    }
}

impl Wake for ReadWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        let target = {
            let mut w = self.waiters();
            match w.recv.take() {
                Some((_, t)) => {
                    self.recv_id.store(0, Ordering::Release);
                    Some(t)
                }
                None => w.driver.clone(),
            }
        };
        if let Some(t) = target {
            t.wake();
        }
    }
}

/// The transport, both directions (no split: the connection lock already
/// serialises access, and `tokio::io::split` would add a lock per call).
pub(crate) trait Transport: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Transport for T {}

/// Everything behind the connection's lock.
#[derive(Debug)]
pub(crate) struct Inner {
    io: Io,
    pub(crate) session: Session,
    writer: Writer,
    reader: Reader,
    /// The waker every socket read registers (see [`ReadWake`]).
    pub(crate) read_wake: Arc<ReadWake>,
    read_waker: Waker,
    /// The last read returned `Pending`: the socket will wake `read_wake`.
    read_armed: bool,
    /// Reading stopped because our control queue was full.
    read_blocked: bool,
    /// Frames were queued for the connection task's next write instead of
    /// written by the application call that queued them (see
    /// [`defer_write`](Inner::defer_write)).
    flush_owed: bool,
    /// The connection task holds the lock (it writes whatever is queued).
    driver_polling: bool,
    /// The stream whose task is reading the socket right now: its own
    /// `Readable` events need no wake-up ([`ACCEPT_ID`]: the acceptor, whose
    /// `Incoming` events need none).
    pub(crate) reading_for: Option<u32>,
    pub(crate) wakers: IdMap<StreamWakers>,
    pub(crate) accept_waker: Option<Waker>,
    /// Tasks waiting for room under the peer's stream cap.
    pub(crate) open_waiters: Vec<Waker>,
    pub(crate) closed_wakers: Vec<Waker>,
    driver_waker: Waker,
    armed: Option<Instant>,
    /// The driver has finished: the transport is shut or failed.
    pub(crate) done: bool,
    /// The transport's write side was shut down (or it was dropped).
    io_shut: bool,
}

pub(crate) struct Io(Box<dyn Transport>);

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Io")
    }
}

/// Shared by the driver, the `Connection` handles and every `Stream`.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) inner: Mutex<Inner>,
    pub(crate) negotiated: Negotiated,
    pub(crate) span: Span,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The current time on tokio's clock (virtual in paused tests).
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Inner {
    /// Writes what the session has to send and dispatches its events. The
    /// driver calls this; application calls use [`pump_app`](Self::pump_app).
    pub(crate) fn pump(&mut self) {
        self.write();
        self.dispatch_events();
    }

    /// Writes what the session has to send; a failed write closes it.
    /// Returns whether the write went well.
    fn write(&mut self) -> bool {
        let Err(e) = self.write_out() else {
            return true;
        };
        tracing::debug!(error = %e, "write failed");
        self.session
            .handle_transport_closed(CloseCause::local(Reason::INTERNAL_ERROR, "write failed"));
        self.writer.buf.clear();
        self.writer.shut = true;
        false
    }

    /// [`pump_app`](Self::pump_app) after `Session::send_some`: the write
    /// first, and the rest (events, timers, reading resumed) only if the
    /// write left the session anything to report (a stream that finished
    /// sending, a failure) or reading waits for the control queue to drain.
    pub(crate) fn pump_send(&mut self) {
        if self.write() && !self.read_blocked && self.session.is_quiet() {
            return;
        }
        self.pump_app();
    }

    /// [`pump`](Self::pump), then wakes the driver if a timer moved earlier
    /// or the connection closed (the driver shuts the transport down).
    pub(crate) fn pump_app(&mut self) {
        if self.writer.buf.is_empty()
            && !self.writer.needs_flush
            && !self.read_blocked
            && self.session.is_quiet()
        {
            // Nothing to write, dispatch or re-arm (the common case after a
            // read that only brought data).
            return;
        }
        self.pump();
        let earlier = self.session.take_timer_changed()
            && self
                .session
                .poll_timeout()
                .is_some_and(|t| self.armed.is_none_or(|a| t < a));
        let resume_reading = self.read_blocked && self.session.wants_read();
        if resume_reading {
            self.read_blocked = false;
        }
        if earlier || resume_reading || self.session.is_closed() {
            self.driver_waker.wake_by_ref();
        }
    }

    /// Encodes queued frames into the buffer and writes it, until the
    /// session has nothing left or the socket is not writable (the driver's
    /// waker is registered then).
    fn write_out(&mut self) -> io::Result<()> {
        let w = &self.writer;
        if w.shut {
            return Ok(());
        }
        if w.buf.is_empty() && !w.needs_flush && !self.session.has_transmit() {
            return Ok(());
        }
        if !self.driver_polling && self.defer_write() {
            return Ok(());
        }
        let w = &mut self.writer;
        let io = &mut self.io.0;
        let mut cx = Context::from_waker(&self.driver_waker);
        loop {
            // `has_transmit` is a few field tests; a `poll_transmit` that
            // finds nothing still moves an `Option<Frame>` around.
            while w.buf.len() < w.coalesce && self.session.has_transmit() {
                let Some(frame) = self.session.poll_transmit() else {
                    break;
                };
                if let Err(e) = w.outbound.encode(&frame, &mut w.buf) {
                    if e.is_record_limit() && !self.session.is_closed() {
                        // The key's last record is kept for this GOAWAY;
                        // the close then shuts the transport (FIN).
                        self.session
                            .close(Reason::INTERNAL_ERROR, "record limit reached");
                        continue;
                    }
                    return Err(io::Error::other(e));
                }
            }
            if w.buf.is_empty() {
                if w.needs_flush {
                    match Pin::new(&mut **io).poll_flush(&mut cx) {
                        Poll::Ready(r) => {
                            w.needs_flush = false;
                            r?;
                        }
                        Poll::Pending => {}
                    }
                }
                return Ok(());
            }
            match Pin::new(&mut **io).poll_write(&mut cx, &w.buf) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    if n == w.buf.len() {
                        // All written (the usual case): rewind rather than
                        // advance, so the next encode needs no shift back.
                        w.buf.clear();
                    } else {
                        w.buf.advance(n);
                    }
                    w.needs_flush = true;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
    }

    /// Whether an application call should leave its frames for the
    /// connection task rather than write them itself. Alone on the
    /// connection, a call writes at once (lowest latency). With other
    /// streams in flight, the first call to queue something wakes the
    /// connection task, which yields once (so the tasks already runnable —
    /// typically the callers one read of replies woke — queue theirs too)
    /// and then writes everything in one go: one syscall for many calls.
    fn defer_write(&mut self) -> bool {
        if self.flush_owed {
            return true;
        }
        if self.session.stream_count() < 2 {
            return false;
        }
        self.flush_owed = true;
        self.driver_waker.wake_by_ref();
        true
    }

    fn dispatch_events(&mut self) {
        while let Some(ev) = self.session.poll_event() {
            match ev {
                Event::Readable(id) if self.reading_for == Some(id) => {}
                Event::Readable(id) => {
                    // The stream's task waits as the socket waiter, with an
                    // event waker, or both: wake each. (An event waker can
                    // be stale — a stream's first `recv` may run on another
                    // task, as the rpc server's inline first poll does — so
                    // it never stands in for the socket waiter.)
                    let event = self.wakers.get_mut(&id).and_then(|w| w.recv.take());
                    let socket = self.read_wake.take_recv(Some(id));
                    match (event, socket) {
                        (Some(e), Some(s)) if e.will_wake(&s) => s.wake(),
                        (e, s) => {
                            e.into_iter().chain(s).for_each(Waker::wake);
                        }
                    }
                }
                Event::Writable(id) => {
                    if let Some(w) = self.wakers.get_mut(&id).and_then(|w| w.send.take()) {
                        w.wake();
                    }
                }
                // The acceptor reads now and looks at its queue next.
                Event::Incoming if self.reading_for == Some(ACCEPT_ID) => {}
                Event::Incoming | Event::GoingAway => self.wake_acceptor(),
                Event::OpenCredit => self.open_waiters.drain(..).for_each(Waker::wake),
                Event::Closed => {
                    if let Some(w) = self.accept_waker.take() {
                        w.wake();
                    }
                    self.open_waiters.drain(..).for_each(Waker::wake);
                    if let Some(w) = self.read_wake.take_recv(None) {
                        w.wake();
                    }
                    for w in self.wakers.values_mut() {
                        if let Some(w) = w.recv.take() {
                            w.wake();
                        }
                        if let Some(w) = w.send.take() {
                            w.wake();
                        }
                    }
                }
            }
        }
    }

    /// Wakes `accept`, which waits as the socket waiter, with its event
    /// waker, or both (like a stream's `recv`, see `Readable`).
    fn wake_acceptor(&mut self) {
        let event = self.accept_waker.take();
        let socket = self.read_wake.take_recv(Some(ACCEPT_ID));
        match (event, socket) {
            (Some(e), Some(s)) if e.will_wake(&s) => s.wake(),
            (e, s) => e.into_iter().chain(s).for_each(Waker::wake),
        }
    }

    /// `id` (a stream, or [`ACCEPT_ID`]) waits for socket bytes in the
    /// task of `waker`; returns whether the caller must read once more
    /// first. Registered first, checked second: a wake-up that fired
    /// before we were the waiter went to the old waiter, which may never
    /// read (its task may be gone, or be the one that polled a stream
    /// before it moved to ours). So if the socket may hold unread bytes,
    /// the caller reads — or, if it already read in this poll
    /// (`may_read` false), the connection task is woken to.
    pub(crate) fn wait_for_socket(&mut self, id: u32, waker: &Waker, may_read: bool) -> bool {
        if let Some((other, w)) = self.read_wake.set_recv(id, waker) {
            self.park_displaced(other, w);
        }
        if !self.read_needed() || self.read_blocked {
            return false;
        }
        if may_read {
            return true;
        }
        self.wake_driver();
        false
    }

    /// `id` no longer waits for the socket (its wait returned). If the
    /// socket may hold bytes nobody has read — it woke us, or reading
    /// stopped at the per-poll budget — the connection task takes over,
    /// or nobody would read them.
    pub(crate) fn stop_waiting(&mut self, id: u32) {
        self.read_wake.clear_recv(id, false);
        if self.read_needed() {
            self.wake_driver();
        }
    }

    /// Keeps the socket waiter that `ReadWake::set_recv` displaced as its
    /// event waker, so events for it (its stream's data, or an incoming
    /// stream for the acceptor) read by someone else still wake it.
    fn park_displaced(&mut self, id: u32, waker: Waker) {
        if id == ACCEPT_ID {
            self.accept_waker = Some(waker);
        } else if let Some(slot) = self.wakers.get_mut(&id) {
            slot.recv = Some(waker);
        }
    }

    fn finish(&mut self) {
        self.done = true;
        // Release the transport now rather than with the last handle: the
        // peer sees the end (FIN, or a reset if it still sends) and the
        // descriptor is freed while the application keeps its handles.
        self.io = Io(Box::new(tokio::io::empty()));
        self.io_shut = true;
        for w in self.closed_wakers.drain(..) {
            w.wake();
        }
    }
}

/// Builds the shared state for a connection whose handshake is done.
/// `buf` holds any bytes read past the handshake.
pub(crate) fn shared(
    session: Session,
    io: Box<dyn Transport>,
    pipeline: (Inbound, Outbound),
    buf: BytesMut,
    negotiated: Negotiated,
    coalesce: usize,
    span: Span,
) -> Arc<Shared> {
    let read_wake = Arc::new(ReadWake::default());
    Arc::new(Shared {
        inner: Mutex::new(Inner {
            io: Io(io),
            session,
            writer: Writer {
                outbound: pipeline.1,
                buf: BytesMut::with_capacity(8 * 1024),
                coalesce,
                needs_flush: false,
                shut: false,
            },
            reader: Reader {
                inbound: pipeline.0,
                leftover: !buf.is_empty(),
                buf,
                eof: false,
            },
            read_waker: Waker::from(read_wake.clone()),
            read_wake,
            read_armed: false,
            read_blocked: false,
            flush_owed: false,
            driver_polling: false,
            reading_for: None,
            wakers: IdMap::default(),
            accept_waker: None,
            open_waiters: Vec::new(),
            closed_wakers: Vec::new(),
            driver_waker: Waker::noop().clone(),
            armed: None,
            done: false,
            io_shut: false,
        }),
        negotiated,
        span,
    })
}

/// Reads below this much free room trigger a reserve of `READ_CHUNK`.
const READ_MIN: usize = 1024;
const READ_CHUNK: usize = 16 * 1024;
/// Read calls per poll before yielding to other tasks.
const READS_PER_POLL: usize = 16;

impl Inner {
    /// Reads and handles frames until the socket has nothing more (it is
    /// then armed to wake [`ReadWake`]), the session stops reading, or the
    /// per-call budget is used (then `ReadWake` is woken to continue).
    /// Returns whether any bytes arrived.
    pub(crate) fn read_frames(&mut self) -> bool {
        // Borrowed out for the loop instead of cloned: no reference count
        // traffic per read.
        let waker = std::mem::replace(&mut self.read_waker, Waker::noop().clone());
        let (got, budget_used) = self.read_loop(&mut Context::from_waker(&waker));
        if budget_used {
            waker.wake_by_ref();
        }
        self.read_waker = waker;
        got
    }

    /// [`read_frames`](Self::read_frames)' loop: whether bytes arrived, and
    /// whether it stopped only because the budget was used.
    fn read_loop(&mut self, cx: &mut Context<'_>) -> (bool, bool) {
        let mut got = false;
        for _ in 0..READS_PER_POLL {
            if self.reader.eof {
                return (got, false);
            }
            if !self.session.wants_read() {
                // Resumed by `pump_app` or the driver once the queue drains.
                self.read_blocked = true;
                return (got, false);
            }
            let r = &mut self.reader;
            let res = if std::mem::take(&mut r.leftover) {
                Poll::Ready(Ok(usize::MAX))
            } else {
                let room = r.buf.capacity() - r.buf.len();
                // Frames decoded earlier in this loop may still hold the
                // buffer, so `reserve` would allocate a new one: first try
                // to reuse it, then read into the tail left, and allocate
                // only when nothing is left.
                if room < READ_MIN && !r.buf.try_reclaim(READ_CHUNK) && room == 0 {
                    r.buf.reserve(READ_CHUNK);
                }
                self.read_wake.fired.store(false, Ordering::Release);
                tokio_util::io::poll_read_buf(Pin::new(&mut *self.io.0), cx, &mut r.buf)
            };
            self.read_armed = res.is_pending();
            match res {
                Poll::Pending => return (got, false),
                Poll::Ready(Ok(0)) => {
                    self.reader.eof = true;
                    self.decode(true);
                    return (true, false);
                }
                Poll::Ready(Ok(_)) => {
                    got = true;
                    self.decode(false);
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!(error = %e, "read failed");
                    self.reader.eof = true;
                    self.session.handle_transport_closed(CloseCause::peer(
                        Reason::INTERNAL_ERROR,
                        "transport read failed",
                    ));
                    return (true, false);
                }
            }
        }
        (got, true)
    }

    /// Whether the socket woke since the last read was armed.
    pub(crate) fn read_wake_fired(&self) -> bool {
        self.read_armed && self.read_wake.fired.load(Ordering::Acquire)
    }

    /// Wakes the connection task (it reads the socket on every poll).
    fn wake_driver(&self) {
        self.driver_waker.wake_by_ref();
    }

    /// Whether the socket may have bytes nobody has read: it is not armed,
    /// or it fired since.
    pub(crate) fn read_needed(&self) -> bool {
        !self.read_armed || self.read_wake.fired.load(Ordering::Acquire)
    }

    fn decode(&mut self, eof: bool) {
        let mut cached = None;
        let mut clock = || *cached.get_or_insert_with(now);
        loop {
            let r = &mut self.reader;
            if !eof && r.buf.is_empty() {
                // Every frame so far was whole: nothing to decode (a header
                // held by the codec needs more bytes too).
                break;
            }
            let res = if eof {
                r.inbound.decode_eof(&mut r.buf)
            } else {
                r.inbound.decode(&mut r.buf)
            };
            match res {
                Ok(Some(frame)) => self.session.handle_frame_with(frame, &mut clock),
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "bad input from peer");
                    match e.stream_id() {
                        Some(id) if !e.is_fatal() => self.session.reset(id, e.reason()),
                        _ => self.session.close(e.reason(), "undecodable input"),
                    }
                    if e.is_fatal() {
                        break;
                    }
                }
            }
            if self.session.is_closed() {
                break;
            }
            if !self.session.wants_read() {
                // Our control queue is full: the rest waits in the buffer.
                self.reader.leftover = !self.reader.buf.is_empty();
                if !eof {
                    return;
                }
            }
        }
        if eof {
            self.session.handle_transport_closed(CloseCause::peer(
                Reason::NO_ERROR,
                "transport closed by peer",
            ));
        }
    }
}

/// The connection task: watches the socket when no `recv` does, fires
/// timers, completes writes the socket was not ready for, and shuts the
/// transport down at the end.
pub(crate) struct Driver {
    shared: Arc<Shared>,
    sleep: Option<Pin<Box<Sleep>>>,
    armed: Option<Instant>,
    /// The last poll only yielded before a deferred write.
    yielded: bool,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

impl Driver {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Driver {
            shared,
            sleep: None,
            armed: None,
            yielded: false,
        }
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        let _enter = shared.span.enter();
        let mut inner = shared.lock();
        if !inner.driver_waker.will_wake(cx.waker()) {
            inner.driver_waker = cx.waker().clone();
        }
        inner.read_wake.set_driver(cx.waker());
        if inner.flush_owed && !this.yielded {
            // Woken to write frames an application call left us: first let
            // the tasks already runnable queue theirs (a wake from inside
            // our own poll puts us at the back of the run queue).
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.yielded = false;
        inner.flush_owed = false;
        inner.driver_polling = true;
        let out = this.poll_locked(&mut inner, cx);
        inner.driver_polling = false;
        out
    }
}

impl Driver {
    /// The connection task's work, under the lock: read, fire timers,
    /// write everything queued, and close at the end.
    fn poll_locked(&mut self, inner: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
        let this = self;
        inner.read_blocked = false;
        inner.read_frames();
        // Timers: one `Sleep`, polled only while armed.
        if this.armed.is_some()
            && let Some(sleep) = this.sleep.as_mut()
            && sleep.as_mut().poll(cx).is_ready()
        {
            this.armed = None;
            inner.session.handle_timeout(now());
        }
        inner.pump();
        let mut rounds = 0;
        while inner.read_blocked && inner.session.wants_read() {
            // Our control queue drained into the socket: read again (and
            // arm), a few rounds per poll, then yield.
            rounds += 1;
            if rounds > 4 {
                cx.waker().wake_by_ref();
                break;
            }
            inner.read_blocked = false;
            inner.read_frames();
            inner.pump();
        }
        match inner.session.poll_timeout() {
            // No deadline now (streams are open, so the idle timer is off):
            // the sleep stays armed at its old deadline. Firing early costs
            // one `handle_timeout` that finds nothing due; disarming would
            // cost more — every call that empties the stream table sets a
            // new idle deadline, and with nothing armed that deadline would
            // be "earlier", so `pump_app` would wake this task once per call.
            None => {}
            Some(t) if this.armed.is_none_or(|a| t < a) => {
                this.armed = Some(t);
                let at = tokio::time::Instant::from_std(t);
                let sleep = match this.sleep.as_mut() {
                    Some(sleep) => {
                        sleep.as_mut().reset(at);
                        sleep
                    }
                    None => this.sleep.insert(Box::pin(tokio::time::sleep_until(at))),
                };
                if sleep.as_mut().poll(cx).is_ready() {
                    // Already due: handle it on the next poll.
                    this.armed = None;
                    cx.waker().wake_by_ref();
                }
            }
            Some(_) => {} // a later deadline: re-armed when the sleep fires
        }
        inner.armed = this.armed;
        if inner.session.is_closed() {
            return poll_close(inner, cx);
        }
        Poll::Pending
    }
}

/// Flushes the final frames, shuts the transport's write side (even after
/// a failed write: the peer must see the end), wakes everyone.
fn poll_close(inner: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
    let w = &mut inner.writer;
    if !w.shut && (!w.buf.is_empty() || inner.session.has_transmit()) {
        // `pump` registered our waker if the socket was not ready.
        return Poll::Pending;
    }
    if !inner.io_shut {
        if Pin::new(&mut *inner.io.0).poll_shutdown(cx).is_pending() {
            return Poll::Pending;
        }
        inner.io_shut = true;
    }
    w.shut = true;
    inner.finish();
    Poll::Ready(())
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The runtime dropped us (or we finished): nobody drives I/O any more.
        let mut inner = self.shared.lock();
        inner.session.handle_transport_closed(CloseCause::local(
            Reason::INTERNAL_ERROR,
            "connection task stopped",
        ));
        inner.writer.shut = true;
        inner.dispatch_events();
        inner.finish();
    }
}
