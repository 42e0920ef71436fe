//! Sans-I/O close paths: what a graceful drain still sends, and what a
//! stream that completed before the close reports afterwards.

mod support;

use bytes::Bytes;
use support::{Pair, Scripted, drain};
use weft_frame::{Frame, FrameType, Metadata};
use weft_mux::session::Role;
use weft_mux::{CloseCause, Config, Reason};

#[test]
fn a_drain_close_still_sends_the_last_streams_final_frame() {
    let mut p = Scripted::new(Role::Server, Config::default());
    p.open(1, b"ask", true);
    p.feed(Frame::goaway(1, Reason::STREAM_IDS_EXHAUSTED, b""));
    assert_eq!(p.s.accept(), Some(1));
    let (got, ended, err) = drain(&mut p.s, 1);
    assert_eq!((got.as_slice(), ended, err), (&b"ask"[..], true, None));
    // The answer takes the direct path (nothing else waits to be sent)...
    let mut md = Metadata::new();
    let mut data = Bytes::from_static(b"answer");
    assert!(p.s.send_some(1, &mut md, &mut data, true).unwrap());
    // ...and dropping the stream ends the drain before it is transmitted.
    p.s.release(1, p.now);
    assert!(p.s.is_closed(), "the drain is over: no stream is left");
    let out = p.out();
    let answer = out
        .iter()
        .find(|f| f.ty == FrameType::DATA && f.stream_id == 1)
        .unwrap_or_else(|| panic!("the answer was dropped: {out:?}"));
    assert_eq!(&answer.payload[..], b"answer");
    assert!(answer.is_end_stream());
}

#[test]
fn a_stream_done_both_ways_reads_its_clean_end_after_the_close() {
    let mut p = Pair::new();
    let id = request(&mut p);
    assert_eq!(p.server.accept(), Some(id));
    let _ = drain(&mut p.server, id);
    p.server
        .send(id, Metadata::new(), Bytes::from_static(b"r"), true)
        .unwrap();
    p.drive();
    // The peer's FIN (or anything else that ends the connection) arrives
    // before the application has read the answer.
    p.client.handle_transport_closed(eof());
    let (got, ended, err) = drain(&mut p.client, id);
    assert_eq!((got.as_slice(), ended, err), (&b"r"[..], true, None));
    // A stream still open when the connection died fails.
    let mut q = Pair::new();
    let id = request(&mut q);
    q.client.handle_transport_closed(eof());
    let (_, ended, err) = drain(&mut q.client, id);
    assert!(!ended && err.is_some_and(|e| e.to_string().contains("closed")));
}

/// The client opens a stream with the whole request `q` and the pair
/// exchanges it; returns the stream's id.
fn request(p: &mut Pair) -> u32 {
    let id = p
        .client
        .open(Metadata::new(), Bytes::from_static(b"q"), true, p.now)
        .unwrap();
    p.drive();
    id
}

fn eof() -> CloseCause {
    CloseCause {
        reason: Reason::NO_ERROR,
        origin: weft_mux::Origin::Peer,
        detail: "transport closed by peer",
        peer_text: None,
    }
}

/// A plain TCP close or a reset carries no reason from the peer: the
/// session never reports one as the peer's (whatever its caller passes).
#[test]
fn a_transport_close_or_reset_is_not_reported_as_a_peer_reason() {
    for (reason, detail) in [
        (Reason::NO_ERROR, "transport closed by peer"),
        (Reason::INTERNAL_ERROR, "transport read failed"),
    ] {
        let mut q = Pair::new();
        q.client.handle_transport_closed(CloseCause {
            reason,
            origin: weft_mux::Origin::Peer,
            detail,
            peer_text: None,
        });
        let cause = q.client.close_cause().unwrap();
        assert_eq!(cause.origin, weft_mux::Origin::Transport);
        assert!(cause.by_peer());
        let text = cause.to_string();
        assert!(!text.contains("peer: "), "{text}");
        assert!(
            text.contains(detail) && text.contains("no GOAWAY"),
            "{text}"
        );
    }
}

/// A peer that sends `GOAWAY` with an error and then closes (or resets)
/// its transport did give a reason: the close is reported as the peer's,
/// with that reason, not as "no GOAWAY". An error reason stands against a
/// later `GOAWAY(NO_ERROR)`.
#[test]
fn a_transport_close_after_the_peers_goaway_reports_the_peers_reason() {
    let calm = Reason::ENHANCE_YOUR_CALM;
    let orders = [[calm, Reason::NO_ERROR], [Reason::NO_ERROR, calm]];
    for (end, order) in ["eof", "reset", "write failed"]
        .into_iter()
        .flat_map(|end| orders.map(|o| (end, o)))
    {
        let mut p = Scripted::new(Role::Client, Config::default());
        let id =
            p.s.open(Metadata::new(), Bytes::from_static(b"q"), false, p.now)
                .unwrap();
        // The peer processed our stream and is draining it.
        for reason in order {
            let said: &[u8] = if reason == calm {
                b"late frame flood"
            } else {
                b"shutting down"
            };
            p.feed(Frame::goaway(id, reason, said));
        }
        assert!(!p.s.is_closed(), "a GOAWAY drains the open stream first");
        match end {
            "eof" => p.s.handle_peer_eof(p.now),
            "reset" => p.s.handle_transport_closed(CloseCause {
                reason: Reason::INTERNAL_ERROR,
                origin: weft_mux::Origin::Peer,
                detail: "transport read failed",
                peer_text: None,
            }),
            _ => p.s.handle_transport_closed(CloseCause {
                reason: Reason::INTERNAL_ERROR,
                origin: weft_mux::Origin::Local,
                detail: "write failed",
                peer_text: None,
            }),
        }
        let cause = p.s.close_cause().unwrap();
        assert_eq!(
            (cause.origin, cause.reason),
            (weft_mux::Origin::Peer, calm),
            "{end} after {order:?}: {cause}"
        );
        assert!(!cause.to_string().contains("no GOAWAY"), "{end}: {cause}");
        // What the peer said goes with the reason that stands.
        assert_eq!(
            cause.peer_text.as_deref(),
            Some("late frame flood"),
            "{end} after {order:?}: {cause}"
        );
    }
}

/// `is_done_by_app`: only once the application queued its end *and* took
/// the peer's last chunk (a stream it could still observe is not done).
#[test]
fn a_stream_is_done_by_the_app_only_when_both_ends_are_its_own_business_no_more() {
    let mut p = Pair::new();
    let id = request(&mut p);
    assert_eq!(p.server.accept(), Some(id));
    assert!(!p.server.is_done_by_app(id), "the request is not taken yet");
    let _ = drain(&mut p.server, id);
    assert!(
        !p.server.is_done_by_app(id),
        "its own end is not queued yet"
    );
    p.server
        .send(id, Metadata::new(), Bytes::from_static(b"r"), true)
        .unwrap();
    assert!(p.server.is_done_by_app(id));
    assert!(!p.server.is_done_by_app(id + 2), "an unknown stream is not");
}
