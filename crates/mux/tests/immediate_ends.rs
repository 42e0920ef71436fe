//! Replies made at once while earlier ones wait for the writer: each
//! stream leaves the table in the send that ends it, the frames go out in
//! the order they were made, and a peer that does not read meets its
//! stream cap (sans-I/O).

mod support;

use std::time::Instant;

use bytes::Bytes;
use support::{Scripted, drain, resets};
use weft_frame::{FrameType, Metadata};
use weft_mux::session::Session;
use weft_mux::{Config, Reason};

/// Accepts stream `id` (opened with its whole request) and reads it.
fn take_request(p: &mut Scripted, id: u32) {
    assert_eq!(p.s.accept(), Some(id));
    let (_, ended, err) = drain(&mut p.s, id);
    assert!(ended && err.is_none());
}

/// Sends `reply` on `id` as a server answers a call; returns whether the
/// handle was released in that send (the stream may stay in the table
/// until its end is written).
fn answer(s: &mut Session, id: u32, reply: &'static [u8], now: Instant) -> bool {
    let (mut md, mut data) = (Metadata::new(), Bytes::from_static(reply));
    let mut released = false;
    let sent = s.send_some_releasing(id, (&mut md, &mut data, true), &mut || now, &mut released);
    assert_eq!(sent, Ok(true));
    released
}

#[test]
fn replies_made_between_two_writes_each_leave_the_table_in_their_send() {
    let mut p = Scripted::server(Config::default());
    for id in [1, 3, 5] {
        p.open(id, b"ask", true);
        take_request(&mut p, id);
    }
    for (id, reply) in [(1, &b"one"[..]), (3, b"three"), (5, b"five")] {
        assert!(answer(&mut p.s, id, reply, p.now), "stream {id} released");
    }
    assert_eq!(p.s.stream_count(), 0, "every stream left in its own send");
    let out = p.out();
    let data: Vec<(u32, &[u8], bool)> = out
        .iter()
        .filter(|f| f.ty == FrameType::DATA)
        .map(|f| (f.stream_id, &f.payload[..], f.is_end_stream()))
        .collect();
    assert_eq!(
        data,
        [
            (1, &b"one"[..], true),
            (3, b"three", true),
            (5, b"five", true)
        ],
        "in the order they were made: {out:?}"
    );
}

#[test]
fn a_streams_end_follows_its_own_earlier_frame_and_a_reset_follows_both() {
    let mut p = Scripted::server(Config::default());
    p.open(1, b"ask", true);
    take_request(&mut p, 1);
    p.open(3, b"ask", false);
    assert_eq!(p.s.accept(), Some(3));
    let (mut md, mut data) = (Metadata::new(), Bytes::from_static(b"part"));
    assert_eq!(p.s.send_some(1, &mut md, &mut data, false), Ok(true));
    assert!(answer(&mut p.s, 1, b"end", p.now));
    // A reset queued next goes out after both (the peer must see them first).
    p.s.reset(3, Reason::CANCEL);
    let out = p.out();
    let order: Vec<(FrameType, u32)> = out
        .iter()
        .filter(|f| f.stream_id != 0)
        .map(|f| (f.ty, f.stream_id))
        .collect();
    assert_eq!(
        order,
        [
            (FrameType::DATA, 1),
            (FrameType::DATA, 1),
            (FrameType::RESET, 3)
        ],
        "{out:?}"
    );
    let data: Vec<(&[u8], bool)> = out
        .iter()
        .filter(|f| f.ty == FrameType::DATA)
        .map(|f| (&f.payload[..], f.is_end_stream()))
        .collect();
    assert_eq!(data, [(&b"part"[..], false), (b"end", true)]);
}

#[test]
fn a_peer_that_does_not_read_meets_its_stream_cap() {
    let mut config = Config::default();
    config.max_concurrent_streams(2);
    let mut p = Scripted::server(config);
    // Two rounds of the cap's worth: the first round's replies wait (the
    // bound), the second round's stay on their streams, in the table.
    for id in [1, 3] {
        p.open(id, b"ask", true);
        take_request(&mut p, id);
        assert!(answer(&mut p.s, id, b"r", p.now));
    }
    assert_eq!(p.s.stream_count(), 0);
    for id in [5, 7] {
        p.open(id, b"ask", true);
        take_request(&mut p, id);
        answer(&mut p.s, id, b"r", p.now);
    }
    assert_eq!(p.s.stream_count(), 2, "kept: past the bound");
    p.open(9, b"ask", true);
    assert_eq!(p.s.accept(), None);
    let out = p.out();
    assert_eq!(resets(&out), [(9, Reason::REFUSED_STREAM)]);
    // Written, every reply went, and the kept streams left.
    let replied: Vec<u32> = out
        .iter()
        .filter(|f| f.ty == FrameType::DATA && f.is_end_stream())
        .map(|f| f.stream_id)
        .collect();
    assert_eq!(replied, [1, 3, 5, 7]);
    assert_eq!(p.s.stream_count(), 0);
}
