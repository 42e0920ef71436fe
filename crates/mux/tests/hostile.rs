//! Hostile-catalogue items 22-35 against the sans-I/O core, driven by a
//! scripted raw-frame peer with a virtual clock (one test per abuse).

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::{Pair, Scripted, bytes, drain, goaway, resets};
use weft_frame::{Flags, Frame, FrameType};
use weft_mux::session::{OpenError, Recv, Role};
use weft_mux::{Config, Metadata, Reason};

fn server() -> Scripted {
    Scripted::server(Config::default())
}

fn assert_goaway(t: &mut Scripted, reason: Reason) {
    let out = t.out();
    assert_eq!(goaway(&out), Some(reason), "frames: {out:?}");
    assert!(t.s.is_closed());
    assert_eq!(t.s.close_cause().unwrap().reason, reason);
}

// ----- 22: stream id abuse ---------------------------------------------------

#[test]
fn item_22_wrong_parity_is_protocol_error() {
    let mut t = server();
    t.open(2, b"", false); // even ids are the server's
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
}

#[test]
fn item_22_stream_frame_on_id_zero_is_protocol_error() {
    let mut t = server();
    t.data(0, Bytes::from_static(b"x"), false);
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
}

#[test]
fn item_22_a_request_before_the_settings_is_protocol_error() {
    // The settings must come first: a call's frames are checked for it
    // as every other frame is (the dispatch tests them apart).
    let now = std::time::Instant::now();
    let s = weft_mux::session::Session::new(Role::Server, &Config::default(), now);
    let mut t = Scripted { s, now };
    t.out();
    t.feed(Frame::new(
        FrameType::OPEN,
        Flags::END_STREAM,
        1,
        Bytes::from_static(b"x"),
    ));
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
    assert_eq!(t.s.accept(), None, "nothing to accept");
}

#[test]
fn item_22_lower_than_highest_is_protocol_error() {
    let mut t = server();
    t.open(5, b"", false);
    t.open(3, b"", false);
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
}

#[test]
fn item_22_reused_id_is_protocol_error() {
    let mut t = server();
    t.open(1, b"a", true);
    let id = t.s.accept().unwrap();
    t.s.send(id, Metadata::new(), Bytes::new(), true).unwrap();
    t.s.release(id, t.now);
    t.out();
    assert_eq!(t.s.stats().streams, 0);
    t.open(1, b"again", true);
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
}

#[test]
fn item_22_frames_for_never_opened_streams_are_protocol_errors() {
    let mut t = server();
    t.data(7, Bytes::from_static(b"x"), false);
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
    // Our own parity, never opened by us.
    let mut t = server();
    t.feed(Frame::reset(4, Reason::CANCEL));
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
    let mut t = server();
    t.feed(Frame::window_update(9, 100));
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
}

#[test]
fn item_22_late_frames_after_reset_ignored_within_budget() {
    let mut cfg = Config::default();
    cfg.late_frame_budget(10);
    let mut t = Scripted::server(cfg);
    t.open(1, b"", false);
    let id = t.s.accept().unwrap();
    t.s.reset(id, Reason::CANCEL);
    t.s.release(id, t.now);
    assert_eq!(support::resets(&t.out()), vec![(1, Reason::CANCEL)]);
    for _ in 0..10 {
        t.data(1, Bytes::from_static(b"late"), false);
    }
    assert!(
        !t.s.is_closed(),
        "late frames within the budget are ignored"
    );
    // Their bytes still count against, and return to, the connection window.
    let st = t.s.stats();
    assert_eq!(st.conn_recv_window + st.conn_recv_unacked, 1024 * 1024);
    t.data(1, Bytes::from_static(b"late"), false);
    assert_goaway(&mut t, Reason::ENHANCE_YOUR_CALM);
}

/// A busy transfer's late frames: the client returns credit for a reply's
/// data while the reply's end is on its way, so its `WINDOW_UPDATE`
/// reaches a stream the server has already ended and released. One such
/// frame per stream is the normal crossing, not a flood, however many
/// streams end in a budget window; late frames beyond that still spend
/// the budget.
#[test]
fn item_22_a_window_update_crossing_each_streams_end_is_not_a_flood() {
    let mut cfg = Config::default();
    cfg.late_frame_budget(2);
    let mut t = Scripted::server(cfg);
    for n in 0..50u32 {
        let id = 2 * n + 1;
        t.open(id, b"request", true);
        assert_eq!(t.s.accept(), Some(id));
        assert_eq!(drain(&mut t.s, id).0, b"request");
        t.s.send(id, Metadata::new(), Bytes::from_static(b"reply"), true)
            .unwrap();
        t.out();
        t.s.release(id, t.now);
        // The client's credit for data it read, sent before our end reached it.
        t.feed(Frame::window_update(id, 64 * 1024));
        assert!(!t.s.is_closed(), "stream {id}: {:?}", t.s.close_cause());
    }
    // Without new streams, late frames spend the budget as before: the
    // streams are counted from the window's first late frame (its own
    // stream came before it), so the budget of two allows one more.
    t.feed(Frame::window_update(1, 64 * 1024));
    assert!(!t.s.is_closed(), "{:?}", t.s.close_cause());
    t.feed(Frame::window_update(3, 64 * 1024));
    assert_goaway(&mut t, Reason::ENHANCE_YOUR_CALM);
}

// ----- 23: ids near exhaustion -------------------------------------------------

#[test]
fn item_23_ids_near_exhaustion_goaway_never_wrap() {
    let mut cfg = Config::default();
    cfg.max_stream_id(5);
    let mut p = Pair::with(cfg, Config::default());
    let a = p
        .client
        .open(Metadata::new(), Bytes::new(), false, p.now)
        .unwrap();
    let b = p
        .client
        .open(Metadata::new(), Bytes::new(), false, p.now)
        .unwrap();
    assert_eq!((a, b), (1, 3));
    assert!(!p.client.is_going_away());
    let c = p
        .client
        .open(Metadata::new(), Bytes::new(), false, p.now)
        .unwrap();
    assert_eq!(c, 5);
    // The last id is out: GOAWAY(STREAM_IDS_EXHAUSTED) before running out.
    let out: Vec<Frame> = std::iter::from_fn(|| p.client.poll_transmit()).collect();
    assert_eq!(goaway(&out), Some(Reason::STREAM_IDS_EXHAUSTED));
    for f in out {
        p.server.handle_frame(f, p.now);
    }
    assert_eq!(
        p.client.open(Metadata::new(), Bytes::new(), false, p.now),
        Err(OpenError::GoingAway)
    );
    // Existing streams keep working.
    p.client
        .send(a, Metadata::new(), Bytes::from_static(b"hi"), true)
        .unwrap();
    p.drive();
    let sa = p.server.accept().unwrap();
    assert_eq!(drain(&mut p.server, sa), (b"hi".to_vec(), true, None));
}

// ----- 24: rapid reset ----------------------------------------------------------

#[test]
fn item_24_rapid_reset_goaway_after_budget() {
    let mut t = server();
    let mut id = 1;
    for _ in 0..20 {
        t.open(id, b"req", false);
        t.feed(Frame::reset(id, Reason::CANCEL));
        id += 2;
    }
    assert!(!t.s.is_closed(), "20 pending-accept resets are allowed");
    t.open(id, b"req", false);
    t.feed(Frame::reset(id, Reason::CANCEL));
    assert_goaway(&mut t, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn item_24_rapid_reset_never_exceeds_the_handler_cap() {
    let mut cfg = Config::default();
    cfg.max_concurrent_streams(8);
    let mut t = Scripted::server(cfg);
    let mut handlers = Vec::new();
    let mut refused = 0;
    for i in 0..1000u32 {
        let id = 2 * i + 1;
        t.open(id, b"req", false);
        t.feed(Frame::reset(id, Reason::CANCEL));
        // The application accepts every stream and its handler runs a while.
        while let Some(h) = t.s.accept() {
            handlers.push(h);
        }
        assert!(t.s.stats().inbound <= 8, "handlers never exceed the cap");
        refused += resets(&t.out())
            .iter()
            .filter(|(_, r)| *r == Reason::REFUSED_STREAM)
            .count();
        if handlers.len() == 8 {
            // Handlers end: only now are their slots freed.
            for h in handlers.drain(..) {
                assert!(matches!(t.s.recv(h), Recv::Chunk(_)));
                assert!(matches!(t.s.recv(h), Recv::Failed(e) if e.is_reset()));
                t.s.release(h, t.now);
            }
            assert_eq!(t.s.stats().inbound, 0);
        }
    }
    assert!(!t.s.is_closed());
    assert_eq!(
        refused, 0,
        "accepted streams fill the cap only while running"
    );
    assert!(t.s.stats().streams <= 8, "memory flat");
}

// ----- 25: peer makes us reset ----------------------------------------------------

#[test]
fn item_25_peer_caused_resets_goaway_after_budget() {
    let mut cfg = Config::default();
    cfg.local_reset_budget(6);
    let mut t = Scripted::server(cfg);
    let mut handles = Vec::new();
    for i in 0..2u32 {
        // Zero window update.
        let id = 6 * i + 1;
        t.open(id, b"", false);
        t.feed(Frame::window_update(id, 0));
        // Data after end.
        let id = 6 * i + 3;
        t.open(id, b"x", true);
        t.data(id, Bytes::from_static(b"y"), false);
        // Window overflow.
        let id = 6 * i + 5;
        t.open(id, b"", false);
        t.feed(Frame::window_update(id, weft_mux::MAX_WINDOW));
        while let Some(h) = t.s.accept() {
            handles.push(h);
        }
    }
    let out = t.out();
    let rs = resets(&out);
    assert!(rs.contains(&(1, Reason::PROTOCOL_ERROR)));
    assert!(rs.contains(&(3, Reason::STREAM_CLOSED)));
    assert!(rs.contains(&(5, Reason::FLOW_CONTROL_ERROR)));
    assert_eq!(t.s.stats().local_resets, 6);
    assert!(!t.s.is_closed());
    // A handler slot is freed only when the handler ends.
    assert_eq!(t.s.stats().inbound, 6);
    t.s.release(1, t.now);
    assert_eq!(t.s.stats().inbound, 5);
    // One more over the budget.
    t.open(13, b"", false);
    t.feed(Frame::window_update(13, 0));
    assert_goaway(&mut t, Reason::ENHANCE_YOUR_CALM);
}

// ----- 26: open flood past the cap --------------------------------------------------

#[test]
fn item_26_open_flood_refused_retry_safe() {
    let mut cfg = Config::default();
    cfg.max_concurrent_streams(4);
    let mut p = Pair::with(Config::default(), cfg);
    let ids: Vec<u32> = (0..10)
        .map(|_| {
            p.client
                .open(Metadata::new(), Bytes::from_static(b"q"), true, p.now)
                .unwrap()
        })
        .collect();
    p.drive();
    let mut refused = 0;
    for id in &ids {
        if let Recv::Failed(e) = p.client.recv(*id) {
            assert!(e.is_refused(), "refusal is retry-safe: {e}");
            refused += 1;
        }
    }
    assert_eq!(refused, 6);
    assert!(!p.client.is_closed() && !p.server.is_closed());
    // The four accepted streams work.
    let mut served = 0;
    while let Some(s) = p.server.accept() {
        assert_eq!(drain(&mut p.server, s).0, b"q");
        p.server
            .send(s, Metadata::new(), Bytes::from_static(b"a"), true)
            .unwrap();
        served += 1;
    }
    assert_eq!(served, 4);
    p.drive();
    for id in &ids[..4] {
        assert_eq!(drain(&mut p.client, *id), (b"a".to_vec(), true, None));
    }
}

// ----- 27: window update overflow / zero ------------------------------------------------

#[test]
fn item_27_connection_window_update_zero_or_overflow_closes() {
    let mut t = server();
    t.feed(Frame::window_update(0, 0));
    assert_goaway(&mut t, Reason::PROTOCOL_ERROR);
    let mut t = server();
    t.feed(Frame::window_update(0, u32::MAX));
    assert_goaway(&mut t, Reason::FLOW_CONTROL_ERROR);
}

#[test]
fn item_27_stream_window_update_zero_or_overflow_resets_stream() {
    let mut t = server();
    t.open(1, b"", false);
    t.open(3, b"", false);
    t.feed(Frame::window_update(1, 0));
    t.feed(Frame::window_update(3, u32::MAX));
    let rs = resets(&t.out());
    assert_eq!(
        rs,
        vec![(1, Reason::PROTOCOL_ERROR), (3, Reason::FLOW_CONTROL_ERROR)]
    );
    assert!(!t.s.is_closed());
    // Other streams are unaffected.
    t.open(5, b"ok", true);
    let ids: Vec<u32> = std::iter::from_fn(|| t.s.accept()).collect();
    assert_eq!(ids, vec![1, 3, 5]);
    assert_eq!(drain(&mut t.s, 5), (b"ok".to_vec(), true, None));
}

// ----- 28: data beyond the windows ------------------------------------------------------

#[test]
fn item_28_first_frame_beyond_stream_window_is_flow_control_error() {
    let mut cfg = Config::default();
    cfg.stream_window(64 * 1024);
    let mut t = Scripted::server(cfg);
    // OPEN carrying more than the stream window on the very first frame.
    t.feed(Frame::new(
        FrameType::OPEN,
        Flags::NONE,
        1,
        bytes(64 * 1024 + 1),
    ));
    assert_eq!(resets(&t.out()), vec![(1, Reason::FLOW_CONTROL_ERROR)]);
    assert!(t.s.accept().is_none());
    assert!(!t.s.is_closed());
    // Exceeding it over several frames.
    t.open(3, b"", false);
    t.data(3, bytes(64 * 1024), false);
    t.data(3, bytes(1), false);
    assert_eq!(resets(&t.out()), vec![(3, Reason::FLOW_CONTROL_ERROR)]);
}

#[test]
fn item_28_data_beyond_connection_window_closes() {
    let mut cfg = Config::default();
    cfg.connection_window(64 * 1024);
    let mut t = Scripted::server(cfg);
    t.open(1, b"", false);
    t.data(1, bytes(64 * 1024), false);
    assert!(!t.s.is_closed());
    t.open(3, b"", false);
    t.data(3, bytes(1), false);
    assert_goaway(&mut t, Reason::FLOW_CONTROL_ERROR);
}

// ----- 29: floods -------------------------------------------------------------------------

#[test]
fn item_29_ping_flood_goaway() {
    let mut cfg = Config::default();
    cfg.ping_budget(10);
    let mut t = Scripted::server(cfg);
    for i in 0..10u64 {
        t.feed(Frame::ping(i.to_be_bytes(), false));
    }
    let pongs = t.out();
    assert_eq!(pongs.len(), 10);
    assert!(pongs.iter().all(|f| f.flags.contains(Flags::ACK)));
    // The budget restarts each window.
    t.advance(Duration::from_secs(10));
    for i in 0..10u64 {
        t.feed(Frame::ping(i.to_be_bytes(), false));
    }
    assert!(!t.s.is_closed());
    t.feed(Frame::ping([0; 8], false));
    assert_goaway(&mut t, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn item_29_empty_data_flood_goaway() {
    let mut cfg = Config::default();
    cfg.empty_frame_budget(100);
    let mut t = Scripted::server(cfg);
    t.open(1, b"", false);
    for _ in 0..100 {
        t.data(1, Bytes::new(), false);
    }
    assert!(!t.s.is_closed());
    assert_eq!(drain(&mut t.s, 1), (vec![], false, None), "nothing queued");
    t.data(1, Bytes::new(), false);
    assert_goaway(&mut t, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn item_29_tiny_window_update_flood_goaway() {
    let mut cfg = Config::default();
    cfg.empty_frame_budget(50);
    let mut t = Scripted::server(cfg);
    t.open(1, b"", false);
    for _ in 0..50 {
        t.feed(Frame::window_update(1, 1));
    }
    assert!(!t.s.is_closed());
    t.feed(Frame::window_update(1, 1));
    assert_goaway(&mut t, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn item_29_unknown_frames_and_flags_ignored_then_goaway() {
    let mut cfg = Config::default();
    cfg.unknown_frame_budget(20);
    let mut t = Scripted::server(cfg);
    for _ in 0..10 {
        t.feed(Frame::new(
            FrameType(0x42),
            Flags::NONE,
            0,
            Bytes::from_static(b"?"),
        ));
    }
    // Unknown flag bits on a known frame: counted, the frame still works.
    for i in 0..10u32 {
        t.feed(Frame::new(
            FrameType::OPEN,
            Flags(0x80),
            2 * i + 1,
            Bytes::new(),
        ));
    }
    assert!(!t.s.is_closed());
    assert_eq!(std::iter::from_fn(|| t.s.accept()).count(), 10);
    t.feed(Frame::new(FrameType(0x42), Flags::NONE, 0, Bytes::new()));
    assert_goaway(&mut t, Reason::ENHANCE_YOUR_CALM);
}

// ----- 30: peer does not read ----------------------------------------------------------------

#[test]
fn item_30_outbound_control_queue_bounded_when_peer_does_not_read() {
    let mut cfg = Config::default();
    cfg.ping_budget(u32::MAX).max_control_queue(32);
    let mut t = Scripted::server(cfg);
    let mut fed = 0;
    // The driver feeds frames only while the session wants to read.
    while t.s.wants_read() && fed < 10_000 {
        t.feed(Frame::ping([1; 8], false));
        fed += 1;
    }
    assert_eq!(fed, 32, "reading stops once 32 answers wait");
    assert_eq!(t.s.stats().control_queued, 32);
    assert!(!t.s.is_closed());
    t.out();
    assert!(t.s.wants_read(), "reading resumes once the peer reads");
}

// ----- 31: zero-window stall -------------------------------------------------------------------

#[test]
fn item_31_zero_window_stall_bounds_send_buffer_others_flow() {
    let mut cfg = Config::default();
    cfg.max_send_buffer(100 * 1024);
    let mut p = Pair::with(cfg, Config::default());
    let stalled = p
        .client
        .open(Metadata::new(), Bytes::new(), false, p.now)
        .unwrap();
    let other = p
        .client
        .open(Metadata::new(), Bytes::new(), false, p.now)
        .unwrap();
    p.drive();
    // The server never reads `stalled`: its window (64 KiB) fills, then our
    // send buffer (100 KiB) fills, and `send_room` says wait.
    let mut queued = 0usize;
    for _ in 0..100 {
        let room = p.client.send_room(stalled).unwrap();
        if room == 0 {
            break;
        }
        p.client
            .send(stalled, Metadata::new(), bytes(room.min(32 * 1024)), false)
            .unwrap();
        queued += room.min(32 * 1024);
        p.drive();
    }
    assert_eq!(p.client.send_room(stalled).unwrap(), 0);
    // The buffer also counts each queued item's overhead (a few hundred
    // bytes), so slightly less payload than the buffer's size fits.
    let most = 64 * 1024 + 100 * 1024;
    assert!(
        queued <= most && queued + 4 * 1024 >= most,
        "window plus send buffer, no more: {queued}"
    );
    // The other stream keeps flowing.
    let _ = std::iter::from_fn(|| p.server.accept()).count();
    for _ in 0..50 {
        p.client
            .send(other, Metadata::new(), bytes(16 * 1024), false)
            .unwrap();
        p.drive();
        assert_eq!(drain(&mut p.server, other).0.len(), 16 * 1024);
        p.drive();
    }
    // Deadlines still fire: a timer the application sets is independent,
    // and the stalled stream can be reset, freeing its buffer.
    p.client.reset(stalled, Reason::CANCEL);
    assert!(p.client.send_room(stalled).unwrap_err().is_reset());
}

// ----- 33: half-close misuse ------------------------------------------------------------------

#[test]
fn item_33_half_close_misuse_errors_on_that_stream_only() {
    let mut t = server();
    t.open(1, b"one", true);
    t.open(3, b"", false);
    // Data after end from the peer: that stream is reset.
    t.data(1, Bytes::from_static(b"more"), false);
    assert_eq!(resets(&t.out()), vec![(1, Reason::STREAM_CLOSED)]);
    // Double end from us: a local error, nothing sent.
    t.s.send(3, Metadata::new(), Bytes::new(), true).unwrap();
    let e =
        t.s.send(3, Metadata::new(), Bytes::new(), true)
            .unwrap_err();
    assert!(e.is_send_closed());
    // Data received before a reset is still delivered, then the error.
    t.data(3, Bytes::from_static(b"before"), false);
    t.feed(Frame::reset(3, Reason::INTERNAL_ERROR));
    match t.s.recv(3) {
        Recv::Chunk(c) => assert_eq!(&c.data[..], b"before"),
        other => panic!("{other:?}"),
    }
    match t.s.recv(3) {
        Recv::Failed(e) => {
            assert!(e.is_reset() && e.is_remote());
            assert_eq!(e.reason(), Some(Reason::INTERNAL_ERROR));
        }
        other => panic!("{other:?}"),
    }
    // Reset after end from the peer on a finished stream: ignored as late.
    t.open(5, b"x", true);
    t.feed(Frame::reset(5, Reason::CANCEL));
    assert!(!t.s.is_closed());
    t.open(7, b"fine", true);
    assert_eq!(drain(&mut t.s, 7), (b"fine".to_vec(), true, None));
}

// ----- 34: keepalive ---------------------------------------------------------------------------

#[test]
fn item_34_keepalive_closes_silent_peer_and_fails_streams() {
    let mut cfg = Config::default();
    cfg.keepalive_interval(Some(Duration::from_secs(10)))
        .keepalive_timeout(Duration::from_secs(5));
    let mut t = Scripted::new(Role::Client, cfg);
    let id =
        t.s.open(Metadata::new(), Bytes::new(), false, t.now)
            .unwrap();
    t.out();
    assert_eq!(t.s.poll_timeout(), Some(t.now + Duration::from_secs(10)));
    t.advance(Duration::from_secs(10));
    let out = t.out();
    assert!(
        out.iter()
            .any(|f| f.ty == FrameType::PING && !f.flags.contains(Flags::ACK))
    );
    t.advance(Duration::from_secs(4));
    assert!(!t.s.is_closed());
    t.advance(Duration::from_secs(1));
    assert_goaway(&mut t, Reason::TIMEOUT);
    match t.s.recv(id) {
        Recv::Failed(e) => assert!(e.is_timeout() && e.is_closed()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn item_34_keepalive_answered_keeps_connection() {
    let mut cfg = Config::default();
    cfg.keepalive_interval(Some(Duration::from_secs(10)))
        .keepalive_timeout(Duration::from_secs(5))
        .idle_timeout(None);
    let mut p = Pair::with(cfg.clone(), cfg);
    for _ in 0..10 {
        p.advance(Duration::from_secs(10));
        p.drive();
    }
    assert!(!p.client.is_closed() && !p.server.is_closed());
}

// ----- idle timeout and GOAWAY drain -----------------------------------------------------------

#[test]
fn idle_timeout_closes_after_30s_without_streams() {
    let mut t = server();
    t.open(1, b"", true);
    let id = t.s.accept().unwrap();
    t.advance(Duration::from_secs(60));
    assert!(!t.s.is_closed(), "a stream is open");
    t.s.send(id, Metadata::new(), Bytes::new(), true).unwrap();
    t.s.release(id, t.now);
    // The stream leaves the table once its END goes out; the clock starts.
    assert_eq!(t.s.stats().streams, 1);
    t.out();
    assert_eq!(t.s.stats().streams, 0);
    t.advance(Duration::from_secs(29));
    assert!(!t.s.is_closed());
    t.advance(Duration::from_secs(1));
    assert_goaway(&mut t, Reason::NO_ERROR);
}

#[test]
fn goaway_drain_finishes_streams_below_and_refuses_above() {
    let mut p = Pair::new();
    let a = p
        .client
        .open(Metadata::new(), Bytes::from_static(b"a"), false, p.now)
        .unwrap();
    p.drive();
    let sa = p.server.accept().unwrap();
    // The server shuts down; `b` crosses the GOAWAY on the wire.
    p.server.shutdown(p.now, Duration::from_secs(5));
    let b = p
        .client
        .open(Metadata::new(), Bytes::from_static(b"b"), false, p.now)
        .unwrap();
    p.drive();
    match p.client.recv(b) {
        Recv::Failed(e) => assert!(e.is_refused(), "above the last id: retry-safe"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        p.client.open(Metadata::new(), Bytes::new(), false, p.now),
        Err(OpenError::GoingAway)
    ));
    // `a` finishes normally.
    p.server
        .send(sa, Metadata::new(), Bytes::from_static(b"done"), true)
        .unwrap();
    p.client
        .send(a, Metadata::new(), Bytes::new(), true)
        .unwrap();
    p.drive();
    assert_eq!(drain(&mut p.client, a), (b"done".to_vec(), true, None));
    assert_eq!(drain(&mut p.server, sa), (b"a".to_vec(), true, None));
    p.client.release(a, p.now);
    p.client.release(b, p.now);
    p.server.release(sa, p.now);
    assert!(p.server.is_closed(), "closes once drained");
    assert_eq!(p.server.close_cause().unwrap().reason, Reason::NO_ERROR);
}

#[test]
fn goaway_drain_deadline_closes_with_streams_left() {
    let mut p = Pair::new();
    let a = p
        .client
        .open(Metadata::new(), Bytes::from_static(b"a"), false, p.now)
        .unwrap();
    p.drive();
    let _sa = p.server.accept().unwrap();
    p.server.shutdown(p.now, Duration::from_secs(5));
    p.drive();
    p.advance(Duration::from_secs(5));
    assert!(p.server.is_closed());
    p.drive();
    assert!(matches!(
        p.client.recv(a),
        Recv::Chunk(_) | Recv::Pending | Recv::Failed(_)
    ));
}

// ----- 35: churn -----------------------------------------------------------------------------

#[test]
fn item_35_churn_100k_open_cancel_returns_to_baseline() {
    let mut p = Pair::new();
    let base_c = p.client.stats();
    let base_s = p.server.stats();
    for i in 0..100_000u32 {
        let id = p
            .client
            .open(Metadata::new(), bytes(100 + (i % 7) as usize), false, p.now)
            .unwrap();
        if i % 3 == 0 {
            p.client
                .send(id, Metadata::new(), bytes(5000), false)
                .unwrap();
        }
        p.drive();
        let s = p.server.accept().unwrap();
        if i % 2 == 0 {
            let _ = p.server.recv(s); // read part of it
        }
        // The client cancels (drops its handle), the handler ends.
        p.client.release(id, p.now);
        p.drive();
        p.server.release(s, p.now);
        p.drive();
    }
    assert_baseline(&p, &base_c, &base_s);
}

/// The stream table is empty and every byte of connection credit is
/// accounted for: what one side may still send plus what the other has
/// consumed but not yet granted back (returned in batches of half a
/// window) is exactly the window.
fn assert_baseline(p: &Pair, base_c: &weft_mux::session::Stats, base_s: &weft_mux::session::Stats) {
    let (c, s) = (p.client.stats(), p.server.stats());
    let window = 1024 * 1024;
    for (st, base) in [(&c, base_c), (&s, base_s)] {
        assert_eq!(
            (st.streams, st.inbound, st.accept_queue),
            (0, 0, 0),
            "{st:?}"
        );
        assert_eq!(st.control_queued, 0);
        assert_eq!(st.local_resets, base.local_resets);
        assert_eq!(st.conn_recv_window + st.conn_recv_unacked, window);
    }
    assert_eq!(
        c.conn_send_window + i64::from(s.conn_recv_unacked),
        i64::from(window)
    );
    assert_eq!(
        s.conn_send_window + i64::from(c.conn_recv_unacked),
        i64::from(window)
    );
    assert_eq!(c.conn_send_window, i64::from(s.conn_recv_window));
    assert_eq!(s.conn_send_window, i64::from(c.conn_recv_window));
}

#[test]
fn churn_with_completed_exchanges_returns_to_baseline() {
    let mut p = Pair::new();
    let base_c = p.client.stats();
    let base_s = p.server.stats();
    for _ in 0..10_000 {
        let id = p
            .client
            .open(Metadata::new(), bytes(300), true, p.now)
            .unwrap();
        p.drive();
        let s = p.server.accept().unwrap();
        assert_eq!(drain(&mut p.server, s).0.len(), 300);
        p.server.send(s, Metadata::new(), bytes(700), true).unwrap();
        p.drive();
        assert_eq!(drain(&mut p.client, id).0.len(), 700);
        p.server.release(s, p.now);
        p.client.release(id, p.now);
        p.drive();
    }
    assert_baseline(&p, &base_c, &base_s);
}

#[test]
fn idle_clock_starts_when_the_last_stream_leaves_on_a_frame() {
    let mut t = server();
    t.open(1, b"", true);
    let id = t.s.accept().unwrap();
    // Our answer is larger than the peer's stream window: its END waits.
    t.s.send(id, Metadata::new(), bytes(300 * 1024), true)
        .unwrap();
    t.s.release(id, t.now);
    t.out();
    assert_eq!(t.s.stats().streams, 1, "the END waits for credit");
    // No timer runs in between: the frame carries a later time than any
    // input before it, and the idle clock starts at that time.
    t.now += Duration::from_secs(20);
    t.feed(Frame::reset(1, Reason::CANCEL)); // the stream leaves now
    assert_eq!(t.s.stats().streams, 0);
    assert_eq!(t.s.poll_timeout(), Some(t.now + Duration::from_secs(30)));
    t.advance(Duration::from_secs(29));
    assert!(
        !t.s.is_closed(),
        "idle counts from the reset, not the release"
    );
    t.advance(Duration::from_secs(1));
    assert_goaway(&mut t, Reason::NO_ERROR);
}
