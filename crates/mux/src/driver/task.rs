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

use super::{Inner, Shared, now};
use crate::error::CloseCause;

/// What the connection task and the application calls share about the
/// task, behind the connection's lock: whose turn writing is, the
/// deadline the task's timer is armed at, and whether the task is owed a
/// wake-up. (Its waker is with the others, in `Wakers`.)
#[derive(Debug)]
pub(super) struct Link {
    /// Who writes queued frames now.
    pub(super) turn: Turn,
    /// Whether the connection task's last write found calls in flight
    /// together (see `Inner::defer_write`).
    pub(super) pace: Pace,
    /// Whether the task is owed a wake-up once the state is released.
    owed: Owed,
    /// The deadline the connection task's timer is armed at: the task arms
    /// it, and `pump_app` wakes the task when a deadline moves earlier.
    pub(super) armed: Option<Instant>,
}

/// Whether the connection task is owed a wake-up: asked for any number of
/// times, it is sent once, and not again until the task has held the
/// state since (whatever was asked for meanwhile, that poll sees).
///
/// Without `Sent`, a server that read a burst of requests without arming
/// the socket woke the task once per accepted stream (each `accept` that
/// stops waiting hands unread bytes on, `stop_waiting`): 63 wake-ups of an
/// already-woken task per burst of 64, about 60 instructions per call.
/// The variants are in the order `wake_driver`'s `max` relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Owed {
    /// Nothing to wake it for.
    No,
    /// A wake-up is asked for, to send when the state is released.
    Yes,
    /// A wake-up was sent and the task has not held the state since.
    Sent,
}

impl Link {
    pub(super) fn new() -> Link {
        Link {
            turn: Turn::Inline,
            pace: Pace::Alone,
            owed: Owed::No,
            armed: None,
        }
    }

    /// Wakes the connection task (it reads the socket on every poll) once
    /// the state is released, so it does not start only to find it held.
    pub(super) fn wake_driver(&mut self) {
        // `No` becomes `Yes`; `Yes` and `Sent` stay (a compare and a
        // conditional move: this runs several times per call).
        self.owed = self.owed.max(Owed::Yes);
    }

    /// The connection task holds the state: a wake-up sent before has
    /// done its work (this poll sees everything asked for until now), so
    /// the next request sends a new one. Called at every acquisition by
    /// the task, before it looks at anything.
    #[inline]
    pub(super) fn polled(&mut self) {
        self.owed = Owed::No;
    }

    /// Whether the task is owed a wake-up.
    #[inline]
    pub(super) fn is_owed(&self) -> bool {
        self.owed == Owed::Yes
    }

    /// Whether the task is owed a wake-up; if so, it is now sent.
    #[inline]
    pub(super) fn take_owed(&mut self) -> bool {
        let owed = self.owed == Owed::Yes;
        if owed {
            self.owed = Owed::Sent;
        }
        owed
    }
}

/// Who writes the frames queued on the connection (see
/// `Inner::defer_write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    /// An application call that queues frames writes them itself.
    Inline,
    /// Frames were left for the connection task's next write (it is woken
    /// for it): application calls queue theirs behind them.
    Owed,
    /// The connection task holds the state: it writes whatever is queued.
    Driver,
}

/// What the connection task's last write of queued frames found: one
/// stream open, or several. After a burst of calls the next burst is
/// likely (callers woken by one read of replies call again together), so
/// even its first call leaves its frames for the connection task rather
/// than write them alone: one write for the whole burst, not one for the
/// first call and one for the rest (on TCP, a segment and its
/// acknowledgement fewer per burst).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pace {
    /// A call alone on the connection writes at once.
    Alone,
    /// Calls come in bursts: every call's frames wait for the task's write.
    Burst,
}

impl Pace {
    /// The pace a write that found `streams` open streams sets.
    #[inline]
    pub(super) fn of(streams: usize) -> Pace {
        if streams < 2 {
            Pace::Alone
        } else {
            Pace::Burst
        }
    }
}

/// Whether the connection task's last poll only yielded before writing
/// frames it was owed (see `Driver::poll`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Yield {
    /// The next owed write yields once first.
    Due,
    /// It yielded: the next poll writes.
    Done,
}

/// The connection task's future.
pub(crate) struct Driver {
    shared: Arc<Shared>,
    sleep: Option<Pin<Box<Sleep>>>,
    /// Whether the last poll only yielded before an owed write.
    yielded: Yield,
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
            yielded: Yield::Due,
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
        inner.link.polled();
        inner.wakers.set_driver(cx.waker());
        if inner.link.turn == Turn::Owed && this.yielded == Yield::Due {
            // Woken to write frames an application call left us: first let
            // the tasks already runnable queue theirs (a wake from inside
            // our own poll puts us at the back of the run queue).
            this.yielded = Yield::Done;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.yielded = Yield::Due;
        inner.link.turn = Turn::Driver;
        let out = this.poll_locked(&mut inner, cx);
        inner.link.turn = Turn::Inline;
        out
    }
}

impl Driver {
    /// The connection task's work, with the state held: read, fire timers,
    /// write everything queued, and close at the end.
    fn poll_locked(&mut self, inner: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
        inner.reader.unblock();
        inner.read_frames();
        // Timers: one `Sleep`, polled only while armed.
        if inner.link.armed.is_some()
            && let Some(sleep) = self.sleep.as_mut()
            && sleep.as_mut().poll(cx).is_ready()
        {
            inner.link.armed = None;
            inner.session.handle_timeout(now());
            inner.release_quiet_buffers();
        }
        inner.pump();
        let mut rounds = 0;
        while inner.reader.is_blocked() && inner.session.wants_read() {
            // Our control queue drained into the socket: read again (and
            // arm), a few rounds per poll, then yield.
            rounds += 1;
            if rounds > 4 {
                cx.waker().wake_by_ref();
                break;
            }
            inner.reader.unblock();
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
        if flush_and_shut(inner, cx).is_pending() && !self.flush_expired(inner, cx) {
            return Poll::Pending;
        }
        if inner.lingers()
            && inner.discard_until_eof(cx).is_pending()
            && !self.flush_expired(inner, cx)
        {
            return Poll::Pending;
        }
        inner.writer.shut = true;
        finish(inner);
        Poll::Ready(())
    }

    /// Whether the final flush has had its time (the timer is armed for it
    /// on the first call).
    fn flush_expired(&mut self, inner: &mut Inner, cx: &mut Context<'_>) -> bool {
        let by = *self
            .flush_by
            .get_or_insert_with(|| now() + CLOSE_FLUSH_LIMIT);
        inner.link.armed = None;
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
                if inner.link.armed.is_none() && inner.holds_buffers() && !inner.session.is_closed()
                {
                    let t = now() + QUIET_TICK;
                    inner.link.armed = Some(t);
                    // Registers the waker; it cannot be due yet.
                    let _ = self.timer_at(t).poll(cx);
                }
            }
            Some(t) if inner.link.armed.is_none_or(|a| t < a) => {
                inner.link.armed = Some(t);
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
    }
}

/// Writes the final frames and shuts the transport's write side.
fn flush_and_shut(inner: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
    if inner.write_pending() {
        // `pump` registered our waker if the socket was not ready.
        return Poll::Pending;
    }
    inner.io.poll_shutdown(cx)
}

/// The connection task has finished: the transport is released and
/// `Connection::closed` waiters are woken.
fn finish(inner: &mut Inner) {
    inner.io.finish();
    inner.wakers.wake_closed();
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
        finish(&mut inner);
    }
}
