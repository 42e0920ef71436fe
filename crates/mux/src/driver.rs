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

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadHalf};
use tokio::time::Sleep;
use tracing::Span;
use weft_frame::Reason;

use crate::error::CloseCause;
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
    io: Box<dyn AsyncWrite + Send + Unpin>,
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

/// Everything behind the connection's lock.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) session: Session,
    writer: Writer,
    pub(crate) wakers: HashMap<u32, StreamWakers>,
    pub(crate) accept_waker: Option<Waker>,
    pub(crate) closed_wakers: Vec<Waker>,
    driver_waker: Waker,
    armed: Option<Instant>,
    /// The driver has finished: the transport is shut or failed.
    pub(crate) done: bool,
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
        if let Err(e) = self.write_out() {
            tracing::debug!(error = %e, "write failed");
            self.session
                .handle_transport_closed(CloseCause::local(Reason::INTERNAL_ERROR, "write failed"));
            self.writer.buf.clear();
            self.writer.shut = true;
        }
        self.dispatch_events();
    }

    /// [`pump`](Self::pump), then wakes the driver if a timer moved earlier
    /// or the connection closed (the driver shuts the transport down).
    pub(crate) fn pump_app(&mut self) {
        self.pump();
        let earlier = self
            .session
            .poll_timeout()
            .is_some_and(|t| self.armed.is_none_or(|a| t < a));
        if earlier || self.session.is_closed() {
            self.driver_waker.wake_by_ref();
        }
    }

    /// Encodes queued frames into the buffer and writes it, until the
    /// session has nothing left or the socket is not writable (the driver's
    /// waker is registered then).
    fn write_out(&mut self) -> io::Result<()> {
        let w = &mut self.writer;
        if w.shut {
            return Ok(());
        }
        let mut cx = Context::from_waker(&self.driver_waker);
        loop {
            while w.buf.len() < w.coalesce {
                let Some(frame) = self.session.poll_transmit() else {
                    break;
                };
                if let Err(e) = w.outbound.encode(&frame, &mut w.buf) {
                    return Err(io::Error::other(e));
                }
            }
            if w.buf.is_empty() {
                if w.needs_flush {
                    match Pin::new(&mut w.io).poll_flush(&mut cx) {
                        Poll::Ready(r) => {
                            w.needs_flush = false;
                            r?;
                        }
                        Poll::Pending => {}
                    }
                }
                return Ok(());
            }
            match Pin::new(&mut w.io).poll_write(&mut cx, &w.buf) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    w.buf.advance(n);
                    w.needs_flush = true;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
    }

    fn dispatch_events(&mut self) {
        while let Some(ev) = self.session.poll_event() {
            match ev {
                Event::Readable(id) => {
                    if let Some(w) = self.wakers.get_mut(&id).and_then(|w| w.recv.take()) {
                        w.wake();
                    }
                }
                Event::Writable(id) => {
                    if let Some(w) = self.wakers.get_mut(&id).and_then(|w| w.send.take()) {
                        w.wake();
                    }
                }
                Event::Incoming | Event::GoingAway => {
                    if let Some(w) = self.accept_waker.take() {
                        w.wake();
                    }
                }
                Event::Closed => {
                    if let Some(w) = self.accept_waker.take() {
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

    fn finish(&mut self) {
        self.done = true;
        for w in self.closed_wakers.drain(..) {
            w.wake();
        }
    }
}

/// Builds the shared state for a connection whose handshake is done.
pub(crate) fn shared(
    session: Session,
    io: Box<dyn AsyncWrite + Send + Unpin>,
    outbound: Outbound,
    negotiated: Negotiated,
    coalesce: usize,
    span: Span,
) -> Arc<Shared> {
    Arc::new(Shared {
        inner: Mutex::new(Inner {
            session,
            writer: Writer {
                io,
                outbound,
                buf: BytesMut::with_capacity(8 * 1024),
                coalesce,
                needs_flush: false,
                shut: false,
            },
            wakers: HashMap::new(),
            accept_waker: None,
            closed_wakers: Vec::new(),
            driver_waker: Waker::noop().clone(),
            armed: None,
            done: false,
        }),
        negotiated,
        span,
    })
}

/// Reads below this much free room trigger a reserve of `READ_CHUNK`.
const READ_MIN: usize = 1024;
const READ_CHUNK: usize = 16 * 1024;
/// Read calls per driver poll before yielding to other tasks.
const READS_PER_POLL: usize = 16;

/// The connection task: reads and decodes frames, feeds the session, fires
/// timers, and completes writes the socket was not ready for.
pub(crate) struct Driver<T> {
    shared: Arc<Shared>,
    read: ReadHalf<T>,
    inbound: Inbound,
    buf: BytesMut,
    sleep: Pin<Box<Sleep>>,
    armed: Option<Instant>,
    may_read: bool,
    /// Bytes read during the handshake wait in `buf` for the first poll.
    leftover: bool,
}

impl<T> std::fmt::Debug for Driver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Driver<T> {
    pub(crate) fn new(
        shared: Arc<Shared>,
        read: ReadHalf<T>,
        inbound: Inbound,
        buf: BytesMut,
    ) -> Self {
        let leftover = !buf.is_empty();
        Driver {
            shared,
            read,
            inbound,
            buf,
            sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
            leftover,
            armed: None,
            may_read: true,
        }
    }
}

enum ReadOutcome {
    Data,
    Eof,
    Failed(io::Error),
    Pending,
}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Future for Driver<T> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        let _enter = shared.span.enter();
        for _ in 0..READS_PER_POLL {
            let outcome = if this.may_read {
                if this.buf.capacity() - this.buf.len() < READ_MIN {
                    this.buf.reserve(READ_CHUNK);
                }
                match tokio_util::io::poll_read_buf(Pin::new(&mut this.read), cx, &mut this.buf) {
                    Poll::Ready(Ok(0)) => ReadOutcome::Eof,
                    Poll::Ready(Ok(_)) => ReadOutcome::Data,
                    Poll::Ready(Err(e)) => ReadOutcome::Failed(e),
                    Poll::Pending => ReadOutcome::Pending,
                }
            } else {
                ReadOutcome::Pending
            };
            let mut inner = shared.lock();
            if !inner.driver_waker.will_wake(cx.waker()) {
                inner.driver_waker = cx.waker().clone();
            }
            let outcome = match outcome {
                ReadOutcome::Pending if std::mem::take(&mut this.leftover) => ReadOutcome::Data,
                o => o,
            };
            let got_data = matches!(outcome, ReadOutcome::Data);
            let mut now = None;
            let mut clock = || *now.get_or_insert_with(self::now);
            match outcome {
                ReadOutcome::Data => this.decode(&mut inner, clock(), false),
                ReadOutcome::Eof => this.decode(&mut inner, clock(), true),
                ReadOutcome::Failed(e) => {
                    tracing::debug!(error = %e, "read failed");
                    inner.session.handle_transport_closed(CloseCause::peer(
                        Reason::INTERNAL_ERROR,
                        "transport read failed",
                    ));
                }
                ReadOutcome::Pending => {}
            }
            // Timers.
            if this.armed.is_some() && this.sleep.as_mut().poll(cx).is_ready() {
                this.armed = None;
                inner.session.handle_timeout(clock());
            }
            inner.pump();
            if let Some(t) = inner.session.poll_timeout()
                && this.armed.is_none_or(|a| t < a)
            {
                this.armed = Some(t);
                this.sleep.as_mut().reset(tokio::time::Instant::from_std(t));
                if this.sleep.as_mut().poll(cx).is_ready() {
                    this.armed = None;
                    inner.session.handle_timeout(clock());
                    inner.pump();
                    drop(inner);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
            inner.armed = this.armed;
            this.may_read = inner.session.wants_read();
            if inner.session.is_closed() {
                return this.poll_close(&mut inner, cx);
            }
            if !got_data {
                return Poll::Pending;
            }
        }
        // Read budget used: let other tasks run, then continue.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Driver<T> {
    fn decode(&mut self, inner: &mut Inner, now: Instant, eof: bool) {
        loop {
            let res = if eof {
                self.inbound.decode_eof(&mut self.buf)
            } else {
                self.inbound.decode(&mut self.buf)
            };
            match res {
                Ok(Some(frame)) => inner.session.handle_frame(frame, now),
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "bad input from peer");
                    match e.stream_id() {
                        Some(id) if !e.is_fatal() => inner.session.reset(id, e.reason()),
                        _ => inner.session.close(e.reason(), "undecodable input"),
                    }
                    if e.is_fatal() {
                        break;
                    }
                }
            }
            if inner.session.is_closed() {
                break;
            }
        }
        if eof {
            inner.session.handle_transport_closed(CloseCause::peer(
                Reason::NO_ERROR,
                "transport closed by peer",
            ));
        }
    }

    /// Flushes the final frames, shuts the transport, wakes everyone.
    fn poll_close(&mut self, inner: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
        let w = &mut inner.writer;
        if !w.shut {
            if !w.buf.is_empty() || inner.session.has_transmit() {
                // `pump` registered our waker if the socket was not ready.
                return Poll::Pending;
            }
            match Pin::new(&mut w.io).poll_shutdown(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(_) => w.shut = true,
            }
        }
        inner.finish();
        Poll::Ready(())
    }
}

impl<T> Drop for Driver<T> {
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
