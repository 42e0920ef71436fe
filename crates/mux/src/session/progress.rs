//! Progress deadlines: a stream that waits on the peer and sees no frame
//! either way for the configured time is reset with `TIMEOUT`.
//!
//! Checked on a tick every half timeout, against a per-stream frame counter
//! (bumped for every frame sent on the stream, and every frame received
//! that carries data or the peer's end; see [`carries_data`]), so the hot
//! path
//! reads no clock: a stream is stalled after two ticks without a frame, that
//! is between one and one and a half timeouts after its last frame. Only
//! streams that wait on the peer count (its half still open with nothing
//! left unread, or data of ours held back by the peer's credit); a stream
//! waiting on the local application (a slow handler, an unread queue) is
//! the application's business and its deadline's.

use std::time::Instant;

use weft_frame::Reason;

use super::Session;
use super::stream::StreamState;
use super::window::SendWindow;

/// Per-stream progress bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Frames received or sent on the stream (wrapping).
    frames: u32,
    /// `frames` at the last tick.
    seen: u32,
    /// Consecutive ticks without a frame while waiting on the peer.
    stalled_ticks: u8,
}

impl Progress {
    /// A frame went either way on the stream.
    #[inline]
    pub(crate) fn bump(&mut self) {
        self.frames = self.frames.wrapping_add(1);
    }
}

/// Whether a received `frame` counts as progress for its stream: it
/// carries data bytes or the peer's end. Nothing else does: not an empty
/// `DATA` frame, and not credit — a `WINDOW_UPDATE` that lets our queued
/// data go counts through the frames we then send, and one that lets
/// nothing go moves nothing.
pub(crate) fn carries_data(frame: &weft_frame::Frame) -> bool {
    use weft_frame::FrameType;
    matches!(frame.ty, FrameType::OPEN | FrameType::DATA)
        && (!frame.payload.is_empty() || frame.is_end_stream())
}

/// Whether `s` waits on the peer: its half open with nothing left unread,
/// or data of ours waiting for credit.
fn waits_on_peer(s: &StreamState, conn_send: SendWindow) -> bool {
    if s.failed.is_some() {
        return false;
    }
    let awaiting_data = !s.recv_ended() && s.recv.queue.is_empty();
    let awaiting_credit =
        !s.send.queue.is_empty() && (s.send.window.is_blocked() || conn_send.is_blocked());
    awaiting_data || awaiting_credit
}

impl Session {
    /// The next progress tick, if progress deadlines are on.
    pub(crate) fn progress_deadline(&self) -> Option<Instant> {
        self.timers.progress_tick
    }

    /// Runs the progress tick if due: resets every stalled stream.
    pub(crate) fn check_progress(&mut self, now: Instant) {
        let (Some(timeout), Some(tick)) = (self.limits.progress_timeout, self.timers.progress_tick)
        else {
            return;
        };
        if now < tick {
            return;
        }
        // Keep the ticks on their grid when woken a little late.
        let next = tick + timeout / 2;
        self.timers.progress_tick = Some(if next > now { next } else { now + timeout / 2 });
        self.timer_changed = true;
        let conn_send = self.conn_send;
        let mut stalled = Vec::new();
        for (&id, s) in self.streams.iter_mut() {
            let p = &mut s.progress;
            let quiet = p.frames == p.seen;
            p.seen = p.frames;
            if quiet && waits_on_peer(s, conn_send) {
                let p = &mut s.progress;
                p.stalled_ticks = p.stalled_ticks.saturating_add(1);
                if p.stalled_ticks >= 2 {
                    stalled.push(id);
                }
            } else {
                s.progress.stalled_ticks = 0;
            }
        }
        for id in stalled {
            tracing::debug!(stream = id, "no progress within the deadline: reset");
            self.reset_stream(id, Reason::TIMEOUT);
        }
    }
}
