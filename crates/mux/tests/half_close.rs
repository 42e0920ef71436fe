//! A peer that half-closes its transport (a clean end of file between
//! frames) still gets the answers to what it sent before; what it left
//! open fails at once, and the connection ends within the drain time.

use std::time::Duration;

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use weft_frame::{Flags, Frame, FrameType};
use weft_mux::{Config, Origin, Reason, Role, connect};

type RawPeer<T = tokio::io::DuplexStream> = weft_testkit::RawPeer<T>;

fn open(id: u32, body: &'static [u8], end: bool) -> Frame {
    let flags = if end { Flags::END_STREAM } else { Flags::NONE };
    Frame::new(FrameType::OPEN, flags, id, Bytes::from_static(body))
}

fn goaway_reason(frames: &[Frame]) -> Option<Reason> {
    frames
        .iter()
        .find(|f| f.ty == FrameType::GOAWAY)
        .map(|f| f.parse_goaway().unwrap().1)
}

#[tokio::test]
async fn item_52_a_request_followed_by_a_tcp_half_close_gets_its_reply() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let (conn, mut incoming) = connect(tcp, Role::Server, Config::default()).await.unwrap();
        let mut st = incoming.accept().await.expect("the request's stream");
        let mut body = Vec::new();
        while let Some(c) = st.recv().await.unwrap() {
            body.extend_from_slice(&c.data);
        }
        // Nothing more is accepted once the peer's end of file is read:
        // only then is the answer sent, so it surely follows the half-close.
        assert!(incoming.accept().await.is_none());
        body.extend_from_slice(b" pong");
        st.send(Bytes::from(body), true).await.unwrap();
        drop(st);
        conn.closed().await;
        conn.close_cause().unwrap()
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut peer = RawPeer::facing(tcp, Role::Server).await;
    peer.send(&open(1, b"ping", true)).await.unwrap();
    peer.shutdown_write().await.unwrap(); // shutdown(Write): a TCP half-close
    let frames = peer.frames_to_eof().await;
    let reply: Vec<&Frame> = frames.iter().filter(|f| f.stream_id == 1).collect();
    assert_eq!(reply.len(), 1, "{frames:?}");
    assert_eq!(reply[0].ty, FrameType::DATA);
    assert_eq!(&reply[0].payload[..], b"ping pong");
    assert!(reply[0].is_end_stream());
    assert_eq!(goaway_reason(&frames), Some(Reason::NO_ERROR), "{frames:?}");
    let cause = server.await.unwrap();
    assert_eq!(cause.reason, Reason::NO_ERROR, "{cause}");
    assert_eq!(cause.origin, Origin::Local, "{cause}");
}

#[tokio::test(start_paused = true)]
async fn a_half_closed_peer_cannot_hold_streams_past_the_drain() {
    let mut cfg = Config::default();
    cfg.half_close_drain(Duration::from_secs(5))
        .idle_timeout(None);
    let (conn, mut incoming, mut peer) = RawPeer::start(Role::Server, cfg, 64 * 1024).await;
    // Stream 1 is a whole request the application never answers; stream 3
    // is left open by the peer, which then half-closes.
    peer.send(&open(1, b"a", true)).await.unwrap();
    peer.send(&open(3, b"b", false)).await.unwrap();
    let mut s1 = incoming.accept().await.unwrap();
    let mut s3 = incoming.accept().await.unwrap();
    assert_eq!(&s1.recv().await.unwrap().unwrap().data[..], b"a");
    assert_eq!(&s3.recv().await.unwrap().unwrap().data[..], b"b");
    peer.shutdown_write().await.unwrap();
    let started = tokio::time::Instant::now();
    // Stream 3 can never complete: it fails at once and the peer is told.
    let e = s3.recv().await.unwrap_err();
    assert!(e.is_closed(), "{e}");
    assert!(started.elapsed() < Duration::from_secs(1));
    let frames = tokio::time::timeout(Duration::from_secs(60), peer.frames_to_eof())
        .await
        .expect("the connection ends");
    assert!(
        frames.iter().any(|f| f.ty == FrameType::RESET
            && f.stream_id == 3
            && f.parse_reset().unwrap() == Reason::CANCEL),
        "{frames:?}"
    );
    assert_eq!(goaway_reason(&frames), Some(Reason::NO_ERROR), "{frames:?}");
    // Stream 1 was held until the drain deadline, not beyond.
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert!(started.elapsed() < Duration::from_secs(6));
    assert!(conn.is_closed());
    let cause = conn.close_cause().unwrap();
    assert_eq!(cause.detail, "drain deadline passed", "{cause}");
    let e = s1
        .send(Bytes::from_static(b"late"), true)
        .await
        .unwrap_err();
    assert!(e.is_closed(), "{e}");
}

/// A stream owes the peer an answer until this side has ended its half
/// (docs/PROTOCOL.md 6.6.1): an unfinished request (the peer's half still
/// open) followed by a half-close gets `RESET(CANCEL)` and
/// `GOAWAY(NO_ERROR)`, so the peer learns what became of it.
#[tokio::test(start_paused = true)]
async fn a_half_close_after_an_unfinished_request_resets_it_and_goes_away() {
    let (conn, mut incoming, mut peer) =
        RawPeer::start(Role::Server, Config::default(), 64 * 1024).await;
    peer.send(&open(1, b"a", false)).await.unwrap();
    let mut st = incoming.accept().await.unwrap();
    peer.shutdown_write().await.unwrap();
    assert!(st.recv().await.unwrap().is_some());
    let e = st.recv().await.unwrap_err();
    assert!(e.is_closed(), "{e}");
    drop(st);
    let frames = peer.frames_to_eof().await;
    let resets: Vec<_> = frames
        .iter()
        .filter(|f| f.ty == FrameType::RESET)
        .map(|f| (f.stream_id, f.parse_reset().unwrap()))
        .collect();
    assert_eq!(resets, [(1, Reason::CANCEL)], "{frames:?}");
    assert_eq!(goaway_reason(&frames), Some(Reason::NO_ERROR), "{frames:?}");
    conn.closed().await;
    let cause = conn.close_cause().unwrap();
    assert_eq!(cause.reason, Reason::NO_ERROR, "{cause}");
}

/// With no stream at all, a half-close closes at once: nothing is owed,
/// so nothing is sent (a transport close).
#[tokio::test(start_paused = true)]
async fn a_half_close_with_nothing_owed_closes_at_once_as_a_transport_close() {
    let (conn, mut incoming, mut peer) =
        RawPeer::start(Role::Server, Config::default(), 64 * 1024).await;
    peer.send(&open(1, b"a", true)).await.unwrap();
    let mut st = incoming.accept().await.unwrap();
    assert!(st.recv().await.unwrap().is_some());
    st.send(Bytes::from_static(b"b"), true).await.unwrap();
    drop(st);
    let answer = loop {
        let f = peer.recv().await.frame().expect("the answer");
        if f.stream_id == 1 {
            break f;
        }
    };
    assert!(answer.is_end_stream());
    peer.shutdown_write().await.unwrap();
    conn.closed().await;
    let cause = conn.close_cause().unwrap();
    assert_eq!(cause.origin, Origin::Transport, "{cause}");
    assert_eq!(cause.reason, Reason::NO_ERROR, "{cause}");
    // Nothing was owed: no GOAWAY, just the end.
    let frames = peer.frames_to_eof().await;
    assert_eq!(goaway_reason(&frames), None, "{frames:?}");
}

#[tokio::test(start_paused = true)]
async fn a_half_closed_peer_that_does_not_read_cannot_hold_the_transport() {
    let mut cfg = Config::default();
    cfg.half_close_drain(Duration::from_secs(5))
        .idle_timeout(None);
    let (conn, mut incoming, mut peer) = RawPeer::start(Role::Server, cfg, 4096).await;
    peer.send(&open(1, b"a", true)).await.unwrap();
    let mut st = incoming.accept().await.unwrap();
    assert!(st.recv().await.unwrap().is_some());
    peer.shutdown_write().await.unwrap();
    // The answer is far larger than the pipe, and the peer never reads:
    // neither the drain nor the final flush can finish.
    let big = Bytes::from(vec![7u8; 200 * 1024]);
    let sent = tokio::spawn(async move { st.send(big, true).await });
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(60), conn.closed())
        .await
        .expect("the connection ends though its last frames cannot be written");
    // The drain (5 s), then at most the final flush's limit (5 s).
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert!(started.elapsed() <= Duration::from_secs(11));
    assert!(sent.await.unwrap().is_ok(), "queued before the close");
    drop(peer);
}

#[tokio::test]
async fn after_a_graceful_close_a_peer_still_sending_reads_the_goaway_not_a_reset() {
    // The server shuts down while the peer is still writing. Dropping the
    // socket at once would answer the peer's next bytes with a TCP reset:
    // its writes fail and its unread `GOAWAY` can be lost with them (the
    // channel's "write failed (no GOAWAY)" calls). The server reads on
    // until the peer's end of file instead (lingering close).
    peer_still_sending_reads_the_goaway(Close::Graceful, Reason::NO_ERROR).await;
}

#[tokio::test]
async fn after_an_error_close_a_peer_still_sending_reads_the_goaway_not_a_reset() {
    // The same after a connection error: the peer that broke the rule (or
    // hit a budget) learns which, instead of "connection reset".
    peer_still_sending_reads_the_goaway(Close::PeerError, Reason::PROTOCOL_ERROR).await;
}

/// How the server's side of the connection ends.
enum Close {
    /// It shuts down (no drain).
    Graceful,
    /// The peer opens a stream with a server's (even) id.
    PeerError,
}

/// The server closes as `close` says while the raw peer keeps sending
/// pings; the peer must read the server's `GOAWAY(reason)` and a clean end
/// of file, its writes all succeeding.
async fn peer_still_sending_reads_the_goaway(close: Close, reason: Reason) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (go, gone) = tokio::sync::oneshot::channel::<()>();
    let graceful = matches!(close, Close::Graceful);
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let (conn, _incoming) = connect(tcp, Role::Server, Config::default()).await.unwrap();
        gone.await.unwrap();
        if graceful {
            conn.shutdown(Duration::ZERO).await;
        }
        conn.closed().await;
        conn.close_cause().unwrap()
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut peer = RawPeer::facing(tcp, Role::Server).await;
    if let Close::PeerError = close {
        peer.send(&open(2, b"", false)).await.unwrap();
    }
    go.send(()).unwrap();
    // Wait until the server's last frames are here (it shuts its write
    // side and, without lingering, drops the socket in the same poll).
    let mut probe = [0u8; 1];
    while peer.io_mut().peek(&mut probe).await.unwrap() == 0 {}
    let mut writes = Vec::new();
    for i in 0..20u8 {
        writes.push(
            peer.send(&Frame::ping([i; 8], false))
                .await
                .map_err(|e| e.kind()),
        );
        tokio::task::yield_now().await;
    }
    let (frames, end) = peer.rest().await;
    assert!(writes.iter().all(Result::is_ok), "{writes:?}");
    assert_eq!(goaway_reason(&frames), Some(reason), "{frames:?}");
    assert_eq!(end, weft_testkit::PeerRead::Eof, "{frames:?}");
    peer.shutdown_write().await.unwrap();
    let cause = server.await.unwrap();
    assert_eq!(
        (cause.reason, cause.origin),
        (reason, Origin::Local),
        "{cause}"
    );
}
