//! Smaller contracts: configuration, errors, settings, edge paths of the
//! core and the driver.

mod support;

use std::future::poll_fn;
use std::time::Duration;

use bytes::Bytes;
use support::{Scripted, goaway, resets};
use weft_frame::{Flags, Frame, FrameType, Limits};
use weft_mux::pipeline::{EncryptionPolicy, HandshakeConfig, HandshakeRole};
use weft_mux::session::{Event, Recv, Role, Session, settings_frame, settings_frame_with_cap};
use weft_mux::{Config, Metadata, Reason, connect};
use weft_testkit::{Mode, RawPeer, duplex_pair};

#[test]
fn config_setters_clamp_and_debug() {
    let mut c = Config::default();
    c.limits(Limits::default())
        .handshake(HandshakeConfig::default())
        .handshake_timeout(Duration::from_secs(1))
        .max_concurrent_streams(3)
        .stream_window(1)
        .connection_window(u32::MAX)
        .max_send_buffer(0)
        .keepalive_interval(None)
        .keepalive_timeout(Duration::from_secs(1))
        .idle_timeout(None)
        .pending_accept_reset_budget(1)
        .local_reset_budget(1)
        .ping_budget(1)
        .empty_frame_budget(1)
        .unknown_frame_budget(1)
        .late_frame_budget(1)
        .budget_window(Duration::ZERO)
        .max_control_queue(0)
        .max_stream_id(0)
        .write_coalesce(0);
    let d = format!("{c:?}");
    assert!(d.contains("stream_window: 65536"), "{d}");
    assert!(d.contains("connection_window: 2147483647"), "{d}");
    assert!(d.contains("max_send_buffer: 1,"), "{d}");
    assert!(d.contains("write_coalesce: 1024"), "{d}");
}

#[test]
fn first_frame_must_be_settings() {
    let now = std::time::Instant::now();
    let mut s = Session::new(Role::Server, &Config::default(), now);
    assert_eq!(s.role(), Role::Server);
    s.handle_frame(Frame::ping([0; 8], false), now);
    assert!(s.is_closed());
    assert_eq!(s.close_cause().unwrap().reason, Reason::PROTOCOL_ERROR);
    // Closed sessions ignore further input and refuse work.
    s.handle_frame(Frame::ping([0; 8], false), now);
    s.handle_timeout(now);
    assert_eq!(s.poll_timeout(), None);
    assert!(!s.wants_read());
    assert!(matches!(
        s.open(Metadata::new(), Bytes::new(), false, now),
        Err(weft_mux::session::OpenError::Closed(_))
    ));
    assert!(matches!(s.recv(1), Recv::Failed(e) if e.is_closed()));

    for bad in [
        settings_frame(0, 1024),    // window below baseline
        Frame::window_update(0, 5), // no stream window
        Frame::new(
            FrameType::WINDOW_UPDATE,
            Flags::NONE,
            0,
            Bytes::from_static(b"x"),
        ),
    ] {
        let mut s = Session::new(Role::Server, &Config::default(), now);
        s.handle_frame(bad, now);
        assert_eq!(s.close_cause().unwrap().reason, Reason::PROTOCOL_ERROR);
    }
}

#[test]
fn settings_raise_windows_of_streams_opened_before() {
    let now = std::time::Instant::now();
    let mut s = Session::new(Role::Client, &Config::default(), now);
    let id = s
        .open(
            Metadata::new(),
            Bytes::from(vec![0; 100 * 1024]),
            false,
            now,
        )
        .unwrap();
    let data = |f: Frame| {
        if f.ty == FrameType::WINDOW_UPDATE {
            0
        } else {
            f.payload.len()
        }
    };
    let sent: usize = std::iter::from_fn(|| s.poll_transmit()).map(data).sum();
    assert_eq!(
        sent,
        64 * 1024,
        "baseline window before the peer's settings"
    );
    s.handle_frame(settings_frame(1024 * 1024 - 64 * 1024, 256 * 1024), now);
    let more: usize = std::iter::from_fn(|| s.poll_transmit()).map(data).sum();
    assert_eq!(more, 36 * 1024);
    assert!(s.send_room(id).unwrap() > 0);
}

/// `has_event` says whether `poll_event` has something: the driver skips
/// its dispatch when it says no, so a wrong "no" would lose a wake-up.
#[test]
fn has_event_is_whether_poll_event_has_one() {
    let now = std::time::Instant::now();
    let mut s = Session::new(Role::Client, &Config::default(), now);
    while s.poll_event().is_some() {}
    assert!(!s.has_event(), "none after the queue is drained");
    s.handle_frame(settings_frame_with_cap(0, 256 * 1024, 2), now);
    assert!(s.has_event(), "the settings' open credit waits");
    while s.poll_event().is_some() {}
    assert!(!s.has_event());
}

#[test]
fn the_peers_stream_cap_bounds_open_credit() {
    let now = std::time::Instant::now();
    let mut s = Session::new(Role::Client, &Config::default(), now);
    assert!(
        s.open_credit() > 1 << 30,
        "no cap before the peer's settings"
    );
    s.handle_frame(settings_frame_with_cap(0, 256 * 1024, 2), now);
    assert!(std::iter::from_fn(|| s.poll_event()).any(|e| e == Event::OpenCredit));
    assert_eq!(s.open_credit(), 2);
    let a = s.open(Metadata::new(), Bytes::new(), true, now).unwrap();
    s.open(Metadata::new(), Bytes::new(), true, now).unwrap();
    assert_eq!(s.open_credit(), 0);
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
    // The first stream ends both ways and is released: a slot comes free.
    s.handle_frame(
        Frame::new(FrameType::DATA, Flags::END_STREAM, a, Bytes::new()),
        now,
    );
    while !matches!(s.recv(a), Recv::End | Recv::Failed(_)) {}
    s.release(a, now);
    assert_eq!(s.open_credit(), 1);
    assert!(std::iter::from_fn(|| s.poll_event()).any(|e| e == Event::OpenCredit));

    // A malformed cap is a protocol error.
    let mut s = Session::new(Role::Client, &Config::default(), now);
    let mut bad = settings_frame(0, 256 * 1024);
    bad.metadata = Metadata::builder()
        .custom(b"stream-window", &(256u32 * 1024).to_be_bytes())
        .custom(b"max-streams", &[0, 1, 2])
        .finish();
    s.handle_frame(bad, now);
    assert_eq!(s.close_cause().unwrap().reason, Reason::PROTOCOL_ERROR);
}

#[test]
fn handshake_and_control_frames_out_of_place_are_protocol_errors() {
    let mut t = Scripted::server(Config::default());
    t.feed(Frame::new(
        FrameType::HANDSHAKE,
        Flags::NONE,
        0,
        Bytes::new(),
    ));
    assert_eq!(goaway(&t.out()), Some(Reason::PROTOCOL_ERROR));
    assert_eq!(
        t.s.close_cause().unwrap().detail,
        "HANDSHAKE frame after the handshake"
    );
    // Records consume every KEY_UPDATE, so one the session sees was sent
    // in clear: the text says so (5.1, 6.8).
    let mut t = Scripted::server(Config::default());
    t.feed(Frame::new(
        FrameType::KEY_UPDATE,
        Flags::NONE,
        0,
        Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 1]),
    ));
    assert_eq!(goaway(&t.out()), Some(Reason::PROTOCOL_ERROR));
    assert_eq!(
        t.s.close_cause().unwrap().detail,
        "KEY_UPDATE on a connection without encryption"
    );
    for bad in [
        Frame::new(
            FrameType::PING,
            Flags::NONE,
            0,
            Bytes::from_static(b"short"),
        ),
        Frame::new(
            FrameType::GOAWAY,
            Flags::NONE,
            0,
            Bytes::from_static(b"short"),
        ),
        Frame::new(FrameType::RESET, Flags::NONE, 1, Bytes::new()),
        Frame::new(FrameType::WINDOW_UPDATE, Flags::NONE, 1, Bytes::new()),
        Frame::new(
            FrameType::PING,
            Flags::NONE,
            3,
            Bytes::from_static(b"12345678"),
        ),
    ] {
        let mut t = Scripted::server(Config::default());
        t.open(1, b"", false);
        t.feed(bad);
        assert_eq!(goaway(&t.out()), Some(Reason::PROTOCOL_ERROR));
    }
}

#[test]
fn refusing_while_not_accepting_and_queued_streams() {
    let mut t = Scripted::server(Config::default());
    t.open(1, b"a", false);
    t.open(3, b"b", false);
    t.feed(Frame::reset(3, Reason::CANCEL)); // reset while pending accept
    t.s.set_accepting(false);
    t.open(5, b"c", false);
    let rs = resets(&t.out());
    assert!(rs.contains(&(1, Reason::REFUSED_STREAM)));
    assert!(rs.contains(&(5, Reason::REFUSED_STREAM)));
    assert_eq!(t.s.stats().streams, 0);
    assert_eq!(t.s.accept(), None);
}

#[test]
fn peer_goaway_refuses_streams_above_and_closes_when_drained() {
    let mut t = Scripted::new(Role::Client, Config::default());
    let a =
        t.s.open(Metadata::new(), Bytes::new(), false, t.now)
            .unwrap();
    let b =
        t.s.open(Metadata::new(), Bytes::new(), false, t.now)
            .unwrap();
    t.out();
    t.feed(Frame::goaway(a, Reason::INTERNAL_ERROR, b"bye"));
    assert!(std::iter::from_fn(|| t.s.poll_event()).any(|e| e == Event::GoingAway));
    assert!(matches!(t.s.recv(b), Recv::Failed(e) if e.is_refused()));
    assert!(t.s.is_going_away());
    t.s.release(b, t.now);
    t.s.reset(a, Reason::CANCEL);
    t.s.release(a, t.now);
    assert!(t.s.is_closed());
    let cause = t.s.close_cause().unwrap();
    assert!(cause.by_peer() && cause.origin == weft_mux::Origin::Peer);
    assert!(cause.to_string().contains("peer"));
}

#[test]
fn explicit_close_sends_goaway() {
    let mut t = Scripted::server(Config::default());
    t.s.close(Reason::INTERNAL_ERROR, "bye");
    assert_eq!(goaway(&t.out()), Some(Reason::INTERNAL_ERROR));
    let err =
        t.s.send(1, Metadata::new(), Bytes::new(), true)
            .unwrap_err();
    assert!(err.is_closed() && !err.is_remote());
    assert!(err.to_string().contains("closed"));
}

#[test]
fn stream_error_predicates_and_display() {
    let mut t = Scripted::server(Config::default());
    t.open(1, b"", false);
    t.feed(Frame::reset(1, Reason::FLOW_CONTROL_ERROR));
    let Recv::Failed(e) = t.s.recv(1) else {
        panic!()
    };
    assert!(e.is_reset() && e.is_remote() && e.is_flow_control() && !e.is_refused());
    assert!(!e.is_timeout() && !e.is_closed() && !e.is_send_closed());
    assert!(e.to_string().contains("peer"));
    t.open(3, b"", false);
    t.s.reset(3, Reason::CANCEL);
    let Recv::Failed(e) = t.s.recv(3) else {
        panic!()
    };
    assert!(!e.is_remote());
    assert!(e.to_string().contains("locally"));
    // Sending on a stream that is not in the table.
    let e =
        t.s.send(99, Metadata::new(), Bytes::new(), true)
            .unwrap_err();
    assert!(e.is_send_closed() && !e.is_remote() && e.reason().is_none());
    assert!(e.to_string().contains("ended"));
    assert!(matches!(t.s.recv(99), Recv::Failed(_)));
}

#[tokio::test]
async fn encryption_negotiated_by_default_and_off_on_request() {
    for (policy, encrypted) in [
        (EncryptionPolicy::Preferred, true),
        (EncryptionPolicy::Off, false),
    ] {
        let mut cfg = Config::default();
        let mut hs = HandshakeConfig::default();
        hs.offer.encryption = policy;
        cfg.handshake(hs);
        let ((client, _ci), (_server, mut incoming)) =
            duplex_pair(64 * 1024, cfg, Config::default()).await;
        assert_eq!(client.negotiated().encrypted, encrypted);
        let mut st = client
            .open(Metadata::new(), Bytes::from(vec![7u8; 5000]), true)
            .await
            .unwrap();
        let mut peer = incoming.accept().await.unwrap();
        assert_eq!(peer.recv().await.unwrap().unwrap().data.len(), 5000);
        peer.send(Bytes::from_static(b"ok"), true).await.unwrap();
        assert_eq!(&st.recv().await.unwrap().unwrap().data[..], b"ok");
    }
}

#[tokio::test]
async fn driver_api_edges() {
    let mut cfg = Config::default();
    cfg.max_stream_id(3);
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, cfg, Config::default()).await;
    assert!(client.negotiated().encrypted, "Preferred on both sides");
    let mut s1 = client
        .open(Metadata::new(), Bytes::from_static(b"1"), false)
        .await
        .unwrap();
    let _s3 = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let e = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap_err();
    assert!(e.is_refused() && e.to_string().contains("refused"), "{e}");
    let mut h1 = incoming.accept().await.unwrap();
    // poll_recv leaves socket reading to the driver.
    let c = poll_fn(|cx| h1.poll_recv(cx)).await.unwrap().unwrap();
    assert_eq!(&c.data[..], b"1");
    h1.reset(Reason::INTERNAL_ERROR);
    let e = s1.recv().await.unwrap_err();
    assert_eq!(e.reason(), Some(Reason::INTERNAL_ERROR));
    assert!(
        s1.send(Bytes::from_static(b"x"), false)
            .await
            .unwrap_err()
            .is_reset()
    );
    assert!(format!("{client:?}{incoming:?}{s1:?}").contains("Connection"));
    drop(server);
}

#[tokio::test]
async fn undecodable_input_closes_with_frame_size_error() {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let mux = tokio::spawn(connect(a, weft_mux::Role::Server, Config::default()));
    let peer = RawPeer::handshake_on(b, HandshakeRole::Initiator, Mode::plain().client).await;
    let mut peer = peer.unwrap();
    peer.send(&settings_frame(0, 256 * 1024)).await.unwrap();
    // A header announcing a payload over the limit.
    let mut h = [0u8; 16];
    h[0] = 1;
    h[4..8].copy_from_slice(&1u32.to_be_bytes());
    h[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
    peer.send_raw(&h).await.unwrap();
    let (conn, _inc) = mux.await.unwrap().unwrap();
    conn.closed().await;
    assert_eq!(conn.close_cause().unwrap().reason, Reason::FRAME_SIZE_ERROR);
    assert_eq!(peer.goaway().await, Some(Reason::FRAME_SIZE_ERROR));
    let e = conn
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap_err();
    assert!(e.is_closed() && e.close_cause().is_some() && !e.is_timeout());
    assert!(e.to_string().contains("closed"));
}

#[tokio::test]
async fn eof_during_handshake_is_an_io_error() {
    let (a, b) = tokio::io::duplex(1024);
    drop(b);
    let e = connect(a, weft_mux::Role::Client, Config::default())
        .await
        .unwrap_err();
    assert!(e.is_closed() && !e.is_handshake() && std::error::Error::source(&e).is_some());
    assert!(e.to_string().contains("transport"));
}

#[tokio::test]
async fn oversize_metadata_is_a_local_error_not_a_dead_connection() {
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let huge = Metadata::builder()
        .custom(b"k", &vec![0u8; 20_000])
        .finish();
    let e = client
        .open(huge.clone(), Bytes::new(), false)
        .await
        .unwrap_err();
    assert!(e.is_too_large() && !e.is_closed(), "{e}");
    assert!(e.to_string().contains("metadata"));
    let mut s = client
        .open(Metadata::new(), Bytes::from_static(b"x"), false)
        .await
        .unwrap();
    let e = s
        .send_with_metadata(huge, Bytes::new(), true)
        .await
        .unwrap_err();
    assert!(
        e.is_too_large() && !e.is_remote() && e.reason().is_none(),
        "{e}"
    );
    assert!(e.to_string().contains("metadata"));
    // The stream and the connection carry on.
    s.send(Bytes::from_static(b"y"), true).await.unwrap();
    let mut p = incoming.accept().await.unwrap();
    assert_eq!(&p.recv().await.unwrap().unwrap().data[..], b"x");
    assert_eq!(&p.recv().await.unwrap().unwrap().data[..], b"y");
    assert!(!client.is_closed());
}

#[test]
fn peer_goaway_does_not_end_accepting() {
    let mut t = Scripted::server(Config::default());
    t.open(1, b"", false); // keeps the connection alive
    t.feed(Frame::goaway(0, Reason::STREAM_IDS_EXHAUSTED, b""));
    assert!(!t.s.is_closed());
    assert_eq!(t.s.accept(), Some(1));
    assert!(t.s.is_going_away());
    assert!(!t.s.accept_finished(), "the peer may still open streams");
    t.s.shutdown(t.now, Duration::from_secs(1));
    assert!(t.s.accept_finished());
}
