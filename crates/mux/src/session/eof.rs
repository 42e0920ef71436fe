//! The peer's clean end of file (a TCP half-close): it will send nothing
//! more, but may still read, so what it asked for is still answered.

use std::time::Instant;

use weft_frame::{Frame, Reason};

use super::Session;
use super::stream::SendState;
use crate::error::{CloseCause, StreamKind};

impl Session {
    /// The transport's read side ended cleanly, after whole frames: the
    /// peer half-closed and will send nothing more (docs/PROTOCOL.md 6.6).
    ///
    /// A stream *owes the peer an answer* while this side has not ended
    /// its half of it (neither its `END_STREAM` nor a `RESET` has been
    /// sent) and the peer waits for it: the peer opened the stream (its
    /// request, finished or not), or ended its own half of it. With no
    /// stream owing one the connection closes at once: a transport close,
    /// with no reason from the peer, and nothing sent.
    ///
    /// Otherwise the peer learns the fate of each: streams it ended (a
    /// request followed by the half-close) go on, and the connection
    /// closes once they are done, or when `Config::half_close_drain` has
    /// passed since `now`; streams it left open (an unfinished request)
    /// can never complete: each fails as if the connection had closed, and
    /// the peer gets `RESET(CANCEL)` for it. `GOAWAY(NO_ERROR)` follows
    /// (nothing new is accepted).
    pub fn handle_peer_eof(&mut self, now: Instant) {
        self.clock = now;
        if self.is_closed() {
            return;
        }
        let cause = self.peer_ended(
            CloseCause::peer(Reason::NO_ERROR, "transport closed by peer").into_transport(),
        );
        // The rules below walk full streams.
        self.streams.promote_all();
        if !self.peer.settings_received {
            // A peer processes no stream before it has sent its settings
            // frame, and a clean end of file comes after all it sent: it
            // processed nothing (a server evicting a connection whose
            // first record it had not yet read ends it so).
            for (_, s) in self.streams.iter_mut() {
                if s.failed.is_none() {
                    s.failed = Some(StreamKind::Unprocessed(cause.clone()));
                }
            }
            self.fail(cause, false);
            return;
        }
        let role = self.role;
        let owed = self.streams.iter().any(|(id, s)| {
            s.failed.is_none()
                && s.send.state != SendState::EndSent
                && (!role.owns(*id) || s.recv_ended())
        });
        if !owed {
            self.fail(cause, false);
            return;
        }
        let open: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| !s.recv_done())
            .map(|(id, _)| *id)
            .collect();
        for id in open {
            self.control.push_back(Frame::reset(id, Reason::CANCEL));
            self.fail_stream(id, StreamKind::Closed(cause.clone()));
            self.try_remove(id);
        }
        self.go_away(Reason::NO_ERROR, None);
        // Also bounds a drain already under way without a deadline (our
        // GOAWAY for exhausted stream ids).
        let by = now + self.limits.half_close_drain;
        self.goaway.drain_deadline = Some(self.goaway.drain_deadline.map_or(by, |d| d.min(by)));
        self.timer_changed = true;
        self.maybe_finish_drain();
    }
}
