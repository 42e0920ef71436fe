//! A frame the transform could not deliver, confined to its stream: its
//! payload failed to decompress (PROTOCOL section 4). The stream is reset
//! with the transform's reason (`COMPRESSION_ERROR`) and the connection
//! goes on.

use std::time::Instant;

use weft_frame::{FrameType, Reason};

use super::{Fatal, Session, Spend, protocol};

impl Session {
    /// A frame of type `ty` on stream `id` failed below the mux: resets
    /// that stream with `reason` and keeps the connection.
    ///
    /// An `OPEN` is held to the id rules of any `OPEN` and then opens its
    /// id, as a refused `OPEN` does, so later frames on it are late frames
    /// rather than frames for a stream never opened. Its credit is not
    /// returned: the size the sender counted (the inflated size, 6.4) is
    /// unknown, so the sender loses it; the reset counts against the
    /// locally caused resets budget (6.7).
    pub fn reset_unreadable(
        &mut self,
        ty: FrameType,
        id: u32,
        reason: Reason,
        now: &mut dyn FnMut() -> Instant,
    ) {
        if self.is_closed() {
            return;
        }
        if let Err(cause) = self.unreadable(ty, id, reason, now) {
            tracing::debug!(%cause, "closing connection");
            self.fail(cause, true);
        }
    }

    fn unreadable(
        &mut self,
        ty: FrameType,
        id: u32,
        reason: Reason,
        now: &mut dyn FnMut() -> Instant,
    ) -> Result<(), Fatal> {
        if !self.peer.settings_received {
            return Err(protocol("first frame is not the settings WINDOW_UPDATE"));
        }
        if ty == FrameType::OPEN {
            self.claim_remote_id(id)?;
            if self.goaway.sent {
                return self.spend(Spend::Late, now, "opens after GOAWAY");
            }
            return self.peer_caused_reset(id, reason);
        }
        match self.streams.get_mut(&id) {
            Some(s) if s.failed.is_none() => self.peer_caused_reset(id, reason),
            Some(_) => self.spend_late(now),
            None => self.unknown_stream(id, now),
        }
    }

    /// The id rules of a peer's `OPEN` (6.2): its parity, above the highest
    /// it opened; the id then counts as opened.
    pub(super) fn claim_remote_id(&mut self, id: u32) -> Result<(), Fatal> {
        if self.role.owns(id) {
            return Err(protocol("peer opened a stream with our id parity"));
        }
        if id <= self.ids.highest_remote {
            return Err(protocol("stream id reused or lower than the highest seen"));
        }
        self.ids.highest_remote = id;
        Ok(())
    }
}
