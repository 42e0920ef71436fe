//! Frames an application command makes that go straight into the
//! driver's write buffer, past the session's queues: an `OPEN` (a call's
//! request) and a reply made at once. Queued, such a frame was moved into
//! a queue and out again and taken by the writer's loop (its tests, its
//! room check) only to be encoded into the same buffer; encoded where it
//! is made it skips all of that.
//!
//! Only while nothing waits ahead of it: with the control queue and the
//! frames made at once both empty, the writer would take this frame next
//! (a stream's queued data goes after both), so the order on the wire is
//! the one the queues give. Whatever is in the buffer already was encoded
//! earlier and goes first either way.

use weft_frame::Frame;

use super::Session;

/// Where a frame can go at once (the driver's write buffer), or not.
pub(crate) trait Direct {
    /// Whether it may take frames at all (tested first, so that a driver
    /// that never does pays one test).
    fn takes_frames(&self) -> bool;

    /// Encodes `frame` for the wire and returns true, or returns false
    /// having written nothing: the frame is then queued as usual.
    fn put(&mut self, frame: &Frame) -> bool;
}

/// No direct path: every frame is queued (the sans-I/O API, and tests).
pub(crate) struct Queued;

impl Direct for Queued {
    #[inline(always)]
    fn takes_frames(&self) -> bool {
        false
    }

    #[inline(always)]
    fn put(&mut self, _: &Frame) -> bool {
        false
    }
}

impl Session {
    /// Whether `frame`, the next frame the writer would take were it
    /// queued, went to `direct` instead: only while no frame is queued
    /// ahead of it and the session is open (a closed session sends only
    /// its final control frames).
    #[inline(always)]
    pub(super) fn put_direct(&self, direct: &mut impl Direct, frame: &Frame) -> bool {
        direct.takes_frames()
            && self.control.is_empty()
            && self.immediate.is_empty()
            && !self.is_closed()
            && direct.put(frame)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bytes::Bytes;
    use weft_frame::{Flags, FrameType, Metadata};

    use super::*;
    use crate::config::{BASELINE_WINDOW, Config};
    use crate::session::{Role, settings_frame};

    /// Takes frames while `open` says so, keeping what it took.
    struct Taker {
        open: bool,
        took: Vec<Frame>,
    }

    impl Direct for Taker {
        fn takes_frames(&self) -> bool {
            self.open
        }
        fn put(&mut self, frame: &Frame) -> bool {
            self.took.push(frame.clone());
            true
        }
    }

    /// A session of `role` past the peer's settings, and a taker that
    /// takes frames if `open`.
    fn session(role: Role, now: Instant, open: bool) -> (Session, Taker) {
        let mut s = Session::new(role, &Config::default(), now);
        s.handle_frame(settings_frame(1 << 20, BASELINE_WINDOW), now);
        while s.poll_transmit().is_some() {}
        while s.poll_event().is_some() {}
        let w = Taker {
            open,
            took: Vec::new(),
        };
        (s, w)
    }

    fn sent(s: &mut Session) -> Vec<(FrameType, u32)> {
        std::iter::from_fn(|| s.poll_transmit())
            .map(|f| (f.ty, f.stream_id))
            .collect()
    }

    /// An `OPEN` goes to the writer's buffer when nothing is queued, and
    /// waits behind a control frame queued before it otherwise: the ack of
    /// the peer's `PING` leaves first, as the queues would send it.
    #[test]
    fn an_open_goes_direct_only_with_nothing_queued_ahead() {
        let now = Instant::now();
        let (mut s, mut w) = session(Role::Client, now, true);
        let payload = || Bytes::from_static(b"request");
        let block = Metadata::builder().custom(b"method", b"echo").finish();
        // The metadata is lent: the caller has it back either way.
        let mut md = block.clone();
        let id = s.open_call_direct(&mut md, payload(), &mut w).unwrap();
        assert_eq!(md, block, "given back after a direct encode");
        assert_eq!(w.took.len(), 1);
        assert_eq!((w.took[0].ty, w.took[0].stream_id), (FrameType::OPEN, id));
        assert!(w.took[0].flags.contains(Flags::END_STREAM));
        assert_eq!(w.took[0].metadata, block);
        assert!(!s.has_transmit(), "taken, not queued too");

        s.handle_frame(Frame::ping([7; 8], false), now);
        let next = s.open_direct(&mut md, payload(), true, &mut w).unwrap();
        assert_eq!(md, block, "given back while queued");
        assert_eq!(w.took.len(), 1, "queued behind the ping's ack");
        let queued: Vec<Frame> = std::iter::from_fn(|| s.poll_transmit()).collect();
        assert_eq!(queued.len(), 2);
        assert_eq!(queued[0].ty, FrameType::PING);
        assert_eq!((queued[1].ty, queued[1].stream_id), (FrameType::OPEN, next));
        assert_eq!(queued[1].metadata, block);

        // A driver that takes no frames gets none.
        w.open = false;
        s.open_call_direct(&mut md, payload(), &mut w).unwrap();
        assert_eq!(md, block);
        assert_eq!(w.took.len(), 1);
        assert!(s.has_transmit());
    }

    /// A reply made at once goes direct while nothing waits, and not while
    /// an earlier reply made at once is still queued (it would overtake
    /// it) or a control frame is.
    #[test]
    fn a_reply_goes_direct_only_behind_nothing() {
        let now = Instant::now();
        let (mut s, mut w) = session(Role::Server, now, false);
        let request = |id| {
            Frame::new(
                FrameType::OPEN,
                Flags::END_STREAM,
                id,
                Bytes::from_static(b"request"),
            )
        };
        let reply = |s: &mut Session, w: &mut Taker, id| {
            s.handle_frame(request(id), now);
            let (got, _, _) = s.accept_with_request().unwrap();
            assert_eq!(got, id);
            let (mut md, mut data, mut released) =
                (Metadata::new(), Bytes::from_static(b"reply"), false);
            let sent = (&mut md, &mut data, true);
            let r = s.send_releasing_direct(id, sent, &mut || now, &mut released, w);
            assert_eq!(r, Ok(true));
        };
        // Not taken: made at once and queued.
        reply(&mut s, &mut w, 1);
        w.open = true;
        reply(&mut s, &mut w, 3);
        assert!(w.took.is_empty(), "behind the reply queued before it");
        assert_eq!(sent(&mut s), [(FrameType::DATA, 1), (FrameType::DATA, 3)]);

        reply(&mut s, &mut w, 5);
        assert_eq!(w.took.len(), 1);
        assert_eq!((w.took[0].ty, w.took[0].stream_id), (FrameType::DATA, 5));
        assert!(w.took[0].flags.contains(Flags::END_STREAM));
        assert!(!s.has_transmit());

        s.handle_frame(Frame::ping([7; 8], false), now);
        reply(&mut s, &mut w, 7);
        assert_eq!(w.took.len(), 1, "behind the ping's ack");
        assert_eq!(sent(&mut s), [(FrameType::PING, 0), (FrameType::DATA, 7)]);
    }
}
