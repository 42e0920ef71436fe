//! The connection task: watches the socket when no `recv` does, fires
//! timers, completes writes the socket was not ready for, and shuts the
//! transport down at the end.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::time::Sleep;
use weft_frame::Reason;

use super::{Inner, Io, Shared, now};
use crate::error::CloseCause;

/// The connection task's future.
pub(crate) struct Driver {
    shared: Arc<Shared>,
    sleep: Option<Pin<Box<Sleep>>>,
    armed: Option<Instant>,
    /// The last poll only yielded before a deferred write.
    yielded: bool,
    /// Once closed: when the final flush gives up.
    flush_by: Option<Instant>,
}

/// How long the final frames may take to be written once the connection
/// has closed. A peer that stops reading (one that half-closed included)
/// cannot hold the transport, its descriptor and our buffers for ever:
/// after this the transport is dropped unflushed.
const CLOSE_FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// With no deadline at all (no idle timeout, no keepalive), how long
/// after its last tick a connection that holds buffers looks again whether
/// it went quiet and can give them back (`Inner::release_quiet_buffers`).
/// Without it such a connection kept its buffers for its whole life.
const QUIET_TICK: Duration = Duration::from_secs(10);

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
            flush_by: None,
        }
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        let _enter = shared.span().enter();
        // Held by a caller: it does the reading and writing meanwhile, and
        // wakes us when it lets go (timers and deferred writes can wait
        // that long): the connection task never blocks on a caller.
        let Some(mut inner) = shared.lock_or_wake(cx.waker()) else {
            return Poll::Pending;
        };
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
    /// The connection task's work, with the state held: read, fire timers,
    /// write everything queued, and close at the end.
    fn poll_locked(&mut self, inner: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
        inner.read_blocked = false;
        inner.read_frames();
        // Timers: one `Sleep`, polled only while armed.
        if self.armed.is_some()
            && let Some(sleep) = self.sleep.as_mut()
            && sleep.as_mut().poll(cx).is_ready()
        {
            self.armed = None;
            inner.session.handle_timeout(now());
            inner.release_quiet_buffers();
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
        self.arm_timer(inner, cx);
        if inner.session.is_closed() {
            return self.poll_close(inner, cx);
        }
        Poll::Pending
    }

    /// Flushes the final frames, shuts the transport's write side (even
    /// after a failed write: the peer must see the end), after a graceful
    /// close waits for the peer's end of file (see `Inner::lingers`), then
    /// wakes everyone. Gives up on both after [`CLOSE_FLUSH_LIMIT`].
    fn poll_close(&mut self, inner: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
        if flush_and_shut(inner, cx).is_pending() && !self.flush_expired(cx) {
            return Poll::Pending;
        }
        if inner.lingers() && inner.discard_until_eof(cx).is_pending() && !self.flush_expired(cx) {
            return Poll::Pending;
        }
        inner.writer.shut = true;
        inner.finish();
        Poll::Ready(())
    }

    /// Whether the final flush has had its time (the timer is armed for it
    /// on the first call).
    fn flush_expired(&mut self, cx: &mut Context<'_>) -> bool {
        let by = *self
            .flush_by
            .get_or_insert_with(|| now() + CLOSE_FLUSH_LIMIT);
        self.armed = None;
        let expired = self.timer_at(by).poll(cx).is_ready();
        if expired {
            tracing::debug!("final frames not written in time: transport dropped");
        }
        expired
    }

    /// The connection's one timer, set to fire at `t`.
    fn timer_at(&mut self, t: Instant) -> Pin<&mut Sleep> {
        let at = tokio::time::Instant::from_std(t);
        match self.sleep {
            Some(ref mut sleep) => {
                if sleep.deadline() != at {
                    sleep.as_mut().reset(at);
                }
                sleep.as_mut()
            }
            None => self
                .sleep
                .insert(Box::pin(tokio::time::sleep_until(at)))
                .as_mut(),
        }
    }

    fn arm_timer(&mut self, inner: &mut Inner, cx: &mut Context<'_>) {
        match inner.session.poll_timeout() {
            // No deadline now (streams are open, so the idle timer is off):
            // the sleep stays armed at its old deadline. Firing early costs
            // one `handle_timeout` that finds nothing due; disarming would
            // cost more — every call that empties the stream table sets a
            // new idle deadline, and with nothing armed that deadline would
            // be "earlier", so `pump_app` would wake this task once per call.
            // With nothing armed at all (no idle timeout, no keepalive), a
            // tick of its own still gives a quiet connection's buffers back.
            None => {
                if self.armed.is_none() && inner.holds_buffers() && !inner.session.is_closed() {
                    let t = now() + QUIET_TICK;
                    self.armed = Some(t);
                    // Registers the waker; it cannot be due yet.
                    let _ = self.timer_at(t).poll(cx);
                }
            }
            Some(t) if self.armed.is_none_or(|a| t < a) => {
                self.armed = Some(t);
                if self.timer_at(t).poll(cx).is_ready() {
                    // Already due: handle it on the next poll, which sees
                    // the armed sleep ready. (Disarming here skipped that
                    // handling, so a deadline due at arming — a zero drain —
                    // re-woke this task forever: a spun core.)
                    cx.waker().wake_by_ref();
                }
            }
            Some(_) => {} // a later deadline: re-armed when the sleep fires
        }
        inner.armed = self.armed;
    }
}

/// Writes the final frames and shuts the transport's write side.
fn flush_and_shut(inner: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
    if inner.write_pending() {
        // `pump` registered our waker if the socket was not ready.
        return Poll::Pending;
    }
    if !inner.io_shut {
        if Pin::new(&mut *inner.io.0).poll_shutdown(cx).is_pending() {
            return Poll::Pending;
        }
        inner.io_shut = true;
    }
    Poll::Ready(())
}

impl Inner {
    fn finish(&mut self) {
        self.done = true;
        // Release the transport now rather than with the last handle: the
        // peer sees the end (FIN, or a reset if it still sends) and the
        // descriptor is freed while the application keeps its handles.
        self.io = Io(Box::new(tokio::io::empty()));
        self.io_shut = true;
        for w in std::mem::take(&mut self.closed_wakers) {
            self.wake_list.push(w);
        }
    }
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
