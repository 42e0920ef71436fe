//! How a session ends: a `GOAWAY` sent or received, the drain after it,
//! and the close that fails every stream left with the connection's cause.

use std::borrow::Cow;
use std::time::Instant;

use weft_frame::{Frame, Reason};

use super::{Event, SendState, Session, State};
use crate::error::{CloseCause, StreamKind};

impl Session {
    pub(super) fn go_away(&mut self, reason: Reason, drain: Option<Instant>) {
        if self.goaway.sent || self.is_closed() {
            return;
        }
        self.goaway.sent = true;
        self.goaway.drain_deadline = drain;
        self.timer_changed = true;
        self.control
            .push_back(Frame::goaway(self.ids.last_processed, reason, b""));
        self.events.push_back(Event::GoingAway);
    }

    /// Why the connection ends when its transport does: after a `GOAWAY`
    /// from the peer, that `GOAWAY` gave the reason (a peer that sends
    /// `GOAWAY(ENHANCE_YOUR_CALM)` and closes is not "no reason given"),
    /// otherwise `fallback`.
    pub(super) fn peer_ended(&self, fallback: CloseCause) -> CloseCause {
        match &self.goaway.received {
            Some(g) => {
                CloseCause::peer(g.reason, "the peer sent GOAWAY and closed").saying(g.text.clone())
            }
            None => fallback,
        }
    }

    /// After a `GOAWAY` either way, close once no stream is left. The
    /// test is inline: it runs each time a stream leaves the table, and
    /// is false but on a connection going away.
    #[inline]
    pub(super) fn maybe_finish_drain(&mut self) {
        if self.is_going_away() && self.streams.is_empty() && !self.is_closed() {
            self.finish_drain();
        }
    }

    #[inline(never)]
    fn finish_drain(&mut self) {
        let cause = match &self.goaway.received {
            // Every stream finished: a graceful end, whatever reason
            // the peer gave for going away.
            Some(g) if !self.goaway.sent => {
                CloseCause::peer(Reason::NO_ERROR, "peer went away").saying(g.text.clone())
            }
            _ => CloseCause::local(Reason::NO_ERROR, "shut down"),
        };
        // The last streams may have ended with frames `send_some` made
        // directly (their streams already count them as sent): they are
        // part of the drain, so they go out with the final control frames
        // instead of being dropped by the close.
        self.immediate.move_to(&mut self.control);
        self.fail(cause, false);
    }

    /// Closes the session; `goaway` queues a final `GOAWAY` with the cause's
    /// reason (unless one was sent already with the same meaning).
    pub(super) fn fail(&mut self, cause: CloseCause, goaway: bool) {
        let text = goaway.then_some(Cow::Borrowed(cause.detail.as_bytes()));
        self.fail_saying(cause, text);
    }

    /// [`fail`](Self::fail), with `goaway` the final `GOAWAY`'s debug text
    /// (`None`: no `GOAWAY`).
    pub(super) fn fail_saying(&mut self, cause: CloseCause, goaway: Option<Cow<'static, [u8]>>) {
        if self.is_closed() {
            return;
        }
        if let Some(text) = goaway
            && !cause.by_peer()
        {
            // Drop pending control traffic; the GOAWAY is what matters.
            self.control.clear();
            self.control
                .push_back(Frame::goaway(self.ids.last_processed, cause.reason, &text));
        }
        tracing::debug!(%cause, "connection closed");
        self.state = State::Closed(Box::new(cause.clone()));
        self.ready.clear();
        self.accept_queue.clear();
        let ids: Vec<u32> = self.streams.keys().copied().collect();
        for id in ids {
            let s = self.streams.get_mut(&id).expect("listed");
            // A stream already ended both ways (the application has not
            // dropped it yet) completed before the close: its reader still
            // sees the peer's clean end, not the connection's error.
            if s.failed.is_none() && !(s.send.state == SendState::EndSent && s.recv_ended()) {
                s.failed = Some(StreamKind::Closed(cause.clone()));
            }
            s.clear_send();
            self.events.push_back(Event::Readable(id));
            self.events.push_back(Event::Writable(id));
        }
        self.events.push_back(Event::Closed);
    }
}
