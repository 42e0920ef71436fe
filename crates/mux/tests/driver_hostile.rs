//! The tokio driver against a scripted raw-frame peer and against itself,
//! over `tokio::io::duplex` and TCP loopback.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use weft_frame::{Flags, Frame, FrameType};
use weft_mux::{Config, Connection, Incoming, Metadata, Reason, Role, connect};
use weft_testkit::{data, duplex_pair as pair_over, open};

/// The far end of a mux connection, speaking raw frames (plain pipeline).
type RawPeer = weft_testkit::RawPeer<DuplexStream>;

#[tokio::test]
async fn item_22_wrong_parity_over_the_wire_goaway_and_close() {
    let (conn, _inc, mut peer) = RawPeer::start(Role::Server, Config::default(), 64 * 1024).await;
    peer.send(&Frame::new(FrameType::OPEN, Flags::NONE, 2, Bytes::new()))
        .await
        .unwrap();
    let rest = peer.frames_to_eof().await;
    let g = rest
        .iter()
        .find(|f| f.ty == FrameType::GOAWAY)
        .expect("GOAWAY");
    assert_eq!(g.parse_goaway().unwrap().1, Reason::PROTOCOL_ERROR);
    conn.closed().await;
    assert!(conn.is_closed());
    assert_eq!(conn.close_cause().unwrap().reason, Reason::PROTOCOL_ERROR);
}

#[tokio::test(start_paused = true)]
async fn item_30_peer_not_reading_keeps_our_queues_bounded() {
    let mut cfg = Config::default();
    cfg.ping_budget(u32::MAX)
        .max_control_queue(64)
        .idle_timeout(None);
    let (conn, mut incoming, mut peer) = RawPeer::start(Role::Server, cfg, 4096).await;
    // The peer floods 20,000 pings, then opens a stream, and does not read
    // our pongs: once the pipe and our bounded queue are full we stop
    // reading, so its write blocks instead of our memory growing.
    let mut ping = BytesMut::new();
    peer.encode(&Frame::ping([7; 8], false), &mut ping);
    let mut flood = BytesMut::from(&ping.repeat(20_000)[..]);
    peer.encode(&open(1, b"hello", true), &mut flood);
    let (mut rd, mut wr) = tokio::io::split(peer.io_mut());
    let mut write = std::pin::pin!(wr.write_all(&flood));
    // The clock is paused: this returns once every task is idle and five
    // more (virtual) seconds have passed with the write blocked.
    let blocked = tokio::time::timeout(Duration::from_secs(5), &mut write).await;
    assert!(blocked.is_err(), "the flood is backpressured");
    let st = conn.stats();
    assert!(st.control_queued <= 64, "{st:?}");
    assert!(!conn.is_closed());
    // Once the peer reads again, our queue drains and we read again too,
    // through the flood to the stream it opens last. The peer keeps reading
    // until that stream is accepted: pongs for the pings still in the pipe
    // need room too. (Bounded in virtual time: the timeout fires only if
    // everything stalls.)
    let mut sink = vec![0u8; 64 * 1024];
    let mut written = false;
    let mut accept = std::pin::pin!(incoming.accept());
    let resumed = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            tokio::select! {
                w = &mut write, if !written => { w.unwrap(); written = true; }
                n = rd.read(&mut sink) => assert!(n.unwrap() > 0, "{:?}", conn.close_cause()),
                s = &mut accept => return s,
            }
        }
    });
    let mut s = resumed
        .await
        .unwrap_or_else(|_| panic!("reading resumed: {:?}", conn.stats()))
        .expect("connection alive");
    assert_eq!(&s.recv().await.unwrap().unwrap().data[..], b"hello");
    assert!(!conn.is_closed());
}

#[tokio::test(start_paused = true)]
async fn item_31_zero_window_stall_bounded_and_deadlines_fire() {
    let mut cfg = Config::default();
    cfg.max_send_buffer(64 * 1024);
    let ((client, _ci), (_server, mut incoming)) =
        pair_over(16 * 1024, cfg, Config::default()).await;
    let mut stalled = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let mut other = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let _stalled_peer = incoming.accept().await.unwrap(); // never read
    let mut other_peer = incoming.accept().await.unwrap();
    // Window (256 KiB) + send buffer (64 KiB) fill, then send waits; the
    // caller's deadline still fires.
    let big = Bytes::from(vec![1u8; 1024 * 1024]);
    let r = tokio::time::timeout(Duration::from_secs(3), stalled.send(big, false)).await;
    assert!(
        r.is_err(),
        "send waits for credit instead of buffering 1 MiB"
    );
    // The other stream keeps flowing in both directions.
    for _ in 0..20 {
        other
            .send(Bytes::from(vec![2u8; 8192]), false)
            .await
            .unwrap();
        let c = other_peer.recv().await.unwrap().unwrap();
        assert_eq!(c.data.len(), 8192);
        other_peer.send(c.data, false).await.unwrap();
        assert_eq!(other.recv().await.unwrap().unwrap().data.len(), 8192);
    }
}

const STREAMS: usize = 16;
const EACH: usize = 1024 * 1024;

/// Writes `EACH` bytes at full speed, half-closes, waits for the peer's end.
async fn writer(mut s: weft_mux::Stream) {
    let chunk = Bytes::from(vec![0xab; 16 * 1024]);
    for _ in 0..EACH / chunk.len() {
        s.send(chunk.clone(), false).await.unwrap();
    }
    s.send(Bytes::new(), true).await.unwrap();
    assert!(s.recv().await.unwrap().is_none());
}

/// Reads a stream to its end, answers with an end, returns the byte count.
async fn reader(mut s: weft_mux::Stream) -> usize {
    let mut got = 0;
    while let Some(c) = s.recv().await.unwrap() {
        got += c.data.len();
    }
    s.send(Bytes::new(), true).await.unwrap();
    got
}

/// Both sides open `STREAMS` streams and write into them at full speed
/// while reading the streams the other side opened.
async fn side(conn: Connection, mut incoming: Incoming) -> usize {
    let mut writers = Vec::new();
    for _ in 0..STREAMS {
        let s = conn
            .open(Metadata::new(), Bytes::new(), false)
            .await
            .unwrap();
        writers.push(tokio::spawn(writer(s)));
    }
    let mut accepted = Vec::new();
    for _ in 0..STREAMS {
        accepted.push(incoming.accept().await.unwrap());
    }
    // Nothing is read until the connection's receive window is all but
    // used up: every window is full first.
    let full = || (conn.stats().conn_recv_window < 64 * 1024).then_some(());
    weft_testkit::eventually(full, || format!("{:?}", conn.stats())).await;
    let readers: Vec<_> = accepted
        .into_iter()
        .map(|s| tokio::spawn(reader(s)))
        .collect();
    let mut total = 0;
    for r in readers {
        total += r.await.unwrap();
    }
    for w in writers {
        w.await.unwrap();
    }
    total
}

async fn symmetric(client: (Connection, Incoming), server: (Connection, Incoming)) {
    let s = tokio::spawn(side(server.0, server.1));
    let c = side(client.0, client.1).await;
    assert_eq!(c, STREAMS * EACH);
    assert_eq!(s.await.unwrap(), STREAMS * EACH);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_32_symmetric_backpressure_no_deadlock_duplex() {
    let (client, server) = pair_over(8 * 1024, Config::default(), Config::default()).await;
    tokio::time::timeout(Duration::from_secs(120), symmetric(client, server))
        .await
        .expect("symmetric backpressure must not deadlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_32_symmetric_backpressure_no_deadlock_tcp() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        sock.set_nodelay(true).unwrap();
        connect(sock, Role::Server, Config::default())
            .await
            .unwrap()
    });
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.set_nodelay(true).unwrap();
    let client = connect(sock, Role::Client, Config::default())
        .await
        .unwrap();
    let server = accept.await.unwrap();
    tokio::time::timeout(Duration::from_secs(120), symmetric(client, server))
        .await
        .expect("symmetric backpressure must not deadlock");
}

#[tokio::test(start_paused = true)]
async fn item_34_keepalive_closes_silent_peer_and_fails_calls() {
    let mut cfg = Config::default();
    cfg.keepalive_interval(Some(Duration::from_secs(10)))
        .keepalive_timeout(Duration::from_secs(5));
    let (conn, _inc, mut peer) = RawPeer::start(Role::Client, cfg, 64 * 1024).await;
    let mut s = conn
        .open(Metadata::new(), Bytes::from_static(b"q"), false)
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    // The peer reads but never answers.
    let reader = tokio::spawn(async move { peer.frames_to_eof().await });
    let err = s.recv().await.unwrap_err();
    assert!(err.is_timeout() && err.is_closed(), "{err}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(15) && waited <= Duration::from_secs(26),
        "{waited:?}"
    );
    conn.closed().await;
    let frames = reader.await.unwrap();
    assert!(frames.iter().any(|f| f.ty == FrameType::PING));
    let g = frames.iter().find(|f| f.ty == FrameType::GOAWAY).unwrap();
    assert_eq!(g.parse_goaway().unwrap().1, Reason::TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_closes_connection_over_driver() {
    let ((client, _ci), (server, _si)) =
        pair_over(64 * 1024, Config::default(), Config::default()).await;
    let started = tokio::time::Instant::now();
    client.closed().await;
    server.closed().await;
    assert!(started.elapsed() >= Duration::from_secs(30));
    let err = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap_err();
    assert!(err.is_closed());
}

#[tokio::test]
async fn connection_cut_mid_stream_is_an_error_not_an_end() {
    let (conn, _inc, mut peer) = RawPeer::start(Role::Client, Config::default(), 64 * 1024).await;
    let mut s = conn
        .open(Metadata::new(), Bytes::from_static(b"q"), false)
        .await
        .unwrap();
    let open = peer.recv().await.frame().unwrap();
    peer.send(&data(open.stream_id, Bytes::from_static(b"part"), false))
        .await
        .unwrap();
    assert_eq!(&s.recv().await.unwrap().unwrap().data[..], b"part");
    drop(peer);
    let err = s.recv().await.unwrap_err();
    assert!(err.is_closed(), "{err}");
}

#[tokio::test]
async fn dropping_incoming_refuses_new_streams_retry_safe() {
    let ((client, _ci), (_server, incoming)) =
        pair_over(64 * 1024, Config::default(), Config::default()).await;
    drop(incoming);
    let mut s = client
        .open(Metadata::new(), Bytes::from_static(b"q"), true)
        .await
        .unwrap();
    let err = s.recv().await.unwrap_err();
    assert!(err.is_refused(), "{err}");
}

#[tokio::test]
async fn shutdown_drains_then_closes_and_refuses_new_opens() {
    let ((client, _ci), (server, mut incoming)) =
        pair_over(64 * 1024, Config::default(), Config::default()).await;
    let mut s = client
        .open(Metadata::new(), Bytes::from_static(b"q"), true)
        .await
        .unwrap();
    let mut h = incoming.accept().await.unwrap();
    let srv = server.clone();
    let shut = tokio::spawn(async move { srv.shutdown(Duration::from_secs(10)).await });
    // Let the shutdown start (its first poll sends GOAWAY) before the
    // client opens again: otherwise the server may take that open in
    // before it goes away, and the stream is then one to drain, not to
    // refuse. (One yield suffices on the test's single-thread runtime.)
    tokio::task::yield_now().await;
    // The in-flight call still completes.
    assert_eq!(&h.recv().await.unwrap().unwrap().data[..], b"q");
    h.send(Bytes::from_static(b"a"), true).await.unwrap();
    assert_eq!(&s.recv().await.unwrap().unwrap().data[..], b"a");
    assert!(s.recv().await.unwrap().is_none());
    // New opens are refused, retry-safe.
    loop {
        match client.open(Metadata::new(), Bytes::new(), true).await {
            Err(e) => {
                assert!(e.is_refused() || e.is_closed(), "{e}");
                break;
            }
            Ok(mut s2) => {
                let e = s2.recv().await.unwrap_err();
                assert!(e.is_refused(), "{e}");
            }
        }
        tokio::task::yield_now().await;
    }
    drop(h);
    drop(s);
    shut.await.unwrap();
    assert!(server.is_closed());
    assert!(incoming.accept().await.is_none());
}

#[tokio::test]
async fn handshake_rejects_garbage_at_once() {
    let (a, mut b) = tokio::io::duplex(1024);
    let mux = tokio::spawn(connect(a, Role::Server, Config::default()));
    b.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let err = mux.await.unwrap().unwrap_err();
    assert!(err.is_handshake(), "{err}");
}

#[tokio::test(start_paused = true)]
async fn handshake_deadline_for_a_silent_peer() {
    let (a, _b) = tokio::io::duplex(1024);
    let err = connect(a, Role::Server, Config::default())
        .await
        .unwrap_err();
    assert!(err.is_timeout() && err.is_handshake(), "{err}");
}

#[tokio::test]
async fn many_streams_interleave_over_tcp() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        let (_c, mut inc) = connect(sock, Role::Server, Config::default())
            .await
            .unwrap();
        let mut tasks = Vec::new();
        while let Some(mut s) = inc.accept().await {
            tasks.push(tokio::spawn(async move {
                let mut all = Vec::new();
                while let Some(c) = s.recv().await.unwrap() {
                    all.extend_from_slice(&c.data);
                }
                s.send(Bytes::from(all), true).await.unwrap();
                let _ = s.recv().await;
            }));
            if tasks.len() == 50 {
                break;
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (conn, _inc) = connect(sock, Role::Client, Config::default())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..50u8 {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = conn
                .open(Metadata::new(), Bytes::from(vec![i; 1000]), false)
                .await
                .unwrap();
            s.send(Bytes::from(vec![i; 100_000]), true).await.unwrap();
            let mut got = 0;
            while let Some(c) = s.recv().await.unwrap() {
                assert!(c.data.iter().all(|b| *b == i));
                got += c.data.len();
            }
            got
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 101_000);
    }
    server.await.unwrap();
}
