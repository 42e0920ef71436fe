//! How connections close: a graceful `GOAWAY` drains its streams before the
//! transport is shut, and a closed connection shuts its transport's write
//! side even while handles to it live.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use weft_mux::pipeline::HandshakeConfig;
use weft_mux::{Config, Connection, Metadata, Reason};
use weft_testkit::{SpinGuard, duplex_pair, echo, pair_over};

mod support;
use support::io::TestIo;

async fn call(conn: &Connection, body: &'static [u8]) -> Result<Vec<u8>, String> {
    let mut s = conn
        .open(Metadata::new(), Bytes::from_static(body), true)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let mut got = Vec::new();
    while let Some(c) = s.recv().await.map_err(|e| format!("recv: {e}"))? {
        got.extend_from_slice(&c.data);
    }
    Ok(got)
}

#[tokio::test(start_paused = true)]
async fn the_call_on_the_last_stream_id_gets_its_answer() {
    let mut cc = Config::default();
    cc.max_stream_id(3); // ids 1 and 3; opening 3 also sends GOAWAY
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, cc, Config::default()).await;
    let handler = tokio::spawn(async move {
        while let Some(st) = incoming.accept().await {
            echo(st).await.1.unwrap();
        }
    });
    assert_eq!(call(&client, b"first").await.unwrap(), b"first");
    let last = tokio::time::timeout(Duration::from_secs(5), call(&client, b"last"))
        .await
        .expect("the last call ends");
    assert_eq!(last.unwrap(), b"last");
    // Both sides then close gracefully.
    tokio::time::timeout(Duration::from_secs(5), server.closed())
        .await
        .expect("the server closes once the drain is done");
    tokio::time::timeout(Duration::from_secs(5), client.closed())
        .await
        .expect("the client closes once the drain is done");
    assert_eq!(server.close_cause().unwrap().reason, Reason::NO_ERROR);
    handler.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_sender_past_its_key_limit_updates_its_key_and_keeps_the_connection() {
    // The server's key allows 12 records: it updates its key every 11
    // records, through the transform alone, and the calls go on.
    let hs = HandshakeConfig {
        rekey: weft_transform::RekeyLimits {
            records: 12,
            ..weft_transform::RekeyLimits::default()
        },
        ..HandshakeConfig::default()
    };
    let mut sc = Config::default();
    sc.handshake(hs);
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), sc).await;
    assert!(client.negotiated().encrypted);
    let _handler = tokio::spawn(async move {
        while let Some(st) = incoming.accept().await {
            // The record limit may fail a handler's call: not a panic.
            tokio::spawn(echo(st));
        }
    });
    for i in 0..200 {
        let got = tokio::time::timeout(Duration::from_secs(5), call(&client, b"ping"))
            .await
            .unwrap_or_else(|_| panic!("call {i} hung"));
        assert_eq!(got.unwrap(), b"ping", "call {i}");
    }
    assert!(!client.is_closed() && !server.is_closed());
    assert!(server.close_cause().is_none());
}

#[tokio::test(start_paused = true)]
async fn a_closed_connection_releases_its_transport_while_handles_live() {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let tracked = TestIo::new(b);
    let dropped = tracked.dropped();
    let ((client, _ci), (server, incoming)) =
        pair_over(a, tracked, Config::default(), Config::default()).await;
    assert!(!dropped.load(Ordering::SeqCst));
    tokio::time::timeout(
        Duration::from_secs(5),
        server.shutdown(Duration::from_secs(1)),
    )
    .await
    .expect("an idle connection shuts down at once");
    // Every handle (`server`, `incoming`) is alive, yet the transport is
    // gone: the peer got its end and the descriptor would be free.
    assert!(
        dropped.load(Ordering::SeqCst),
        "the transport is still held"
    );
    tokio::time::timeout(Duration::from_secs(5), client.closed())
        .await
        .expect("the peer sees the end");
    assert!(server.is_closed());
    drop((server, incoming));
}

#[tokio::test(start_paused = true)]
async fn tasks_waiting_on_their_streams_are_woken_when_the_peer_shuts_down() {
    // Tasks waiting with the stream's event waker: a `poll_recv` that
    // leaves socket reading to the connection task, a `poll_reset`, and a
    // send waiting for window. The peer's shutdown must wake all three.
    let _spin = SpinGuard::new("the waiters are woken by a zero-drain shutdown");
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    // The server takes three streams and never reads or answers them.
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(incoming.accept().await.expect("a stream"));
        }
        (held, incoming)
    });
    let mut recv = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let mut reset = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let mut send = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let held = held.await.unwrap();
    let recv = tokio::spawn(async move {
        std::future::poll_fn(|cx| recv.poll_recv(cx))
            .await
            .map(|_| ())
    });
    let reset = tokio::spawn(async move {
        let e = std::future::poll_fn(|cx| reset.poll_reset(cx)).await;
        Err::<(), _>(e)
    });
    let send = tokio::spawn(async move {
        // Far past the stream's window: waits for room that never comes.
        let big = Bytes::from(vec![7u8; 8 << 20]);
        send.send(big, false).await
    });
    // Every task has reached its wait (nothing can end them but a close).
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!recv.is_finished() && !reset.is_finished() && !send.is_finished());
    // A zero drain: the `GOAWAY`'s deadline is due when it is armed.
    server.shutdown(Duration::ZERO).await;
    for (name, task) in [("recv", recv), ("reset", reset), ("send", send)] {
        let r = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .unwrap_or_else(|_| panic!("the {name} waiter is never woken"))
            .unwrap();
        let e = r.expect_err(name);
        assert!(
            e.is_closed(),
            "{name} failed with {e:?}, not the connection's close"
        );
    }
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn a_write_failing_after_the_peers_goaway_reports_the_goaway() {
    // The peer says why it goes (`GOAWAY(ENHANCE_YOUR_CALM)`) and resets
    // the connection. Our next write fails before any task has read that
    // `GOAWAY`: the close must still be the peer's, with its reason, not
    // our "write failed" with no reason given.
    let (client, _incoming, mut peer, reset) = support::io::client_with_failing_writes().await;
    let mut s = client
        .open(Metadata::new(), Bytes::from_static(b"first"), false)
        .await
        .unwrap();
    let opened = peer.recv().await.frame().expect("the OPEN");
    assert_eq!(opened.stream_id, s.id());
    peer.send(&weft_frame::Frame::goaway(
        s.id(),
        Reason::ENHANCE_YOUR_CALM,
        b"late frame flood",
    ))
    .await
    .unwrap();
    reset.store(true, Ordering::SeqCst);
    // Alone on the connection, the send writes inline, now.
    let sent = s.send(Bytes::from_static(b"more"), false).await;
    tokio::time::timeout(Duration::from_secs(5), client.closed())
        .await
        .expect("a failed write closes the connection");
    let cause = client.close_cause().unwrap();
    assert_eq!(
        (cause.origin, cause.reason),
        (weft_mux::Origin::Peer, Reason::ENHANCE_YOUR_CALM),
        "{cause} (send: {sent:?})"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reply_that_ends_the_drain_shuts_the_transport_while_its_handle_lives() {
    // The server drains with a stream open; the handler's reply ends it
    // both ways, which ends the drain and closes the session in the send
    // itself. The send must wake the connection task to shut the
    // transport: nothing else will (the handle lives on, the client has
    // nothing more to say, the drain deadline is a minute away).
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let mut call = client
        .open(Metadata::new(), Bytes::from_static(b"ask"), true)
        .await
        .unwrap();
    let mut peer = incoming.accept().await.unwrap();
    assert!(peer.recv().await.unwrap().unwrap().end);
    let draining = server.clone();
    let drain = tokio::spawn(async move { draining.shutdown(Duration::from_secs(60)).await });
    tokio::task::yield_now().await;
    assert!(!server.is_closed(), "the stream is still open");
    peer.send(Bytes::from_static(b"answer"), true)
        .await
        .unwrap();
    assert!(server.is_closed(), "the reply ended the drain");
    tokio::time::timeout(Duration::from_secs(5), server.closed())
        .await
        .expect("the transport is shut without waiting for the drain deadline");
    assert_eq!(server.close_cause().unwrap().reason, Reason::NO_ERROR);
    let reply = call.recv().await.unwrap().unwrap();
    assert_eq!(&reply.data[..], b"answer");
    drain.await.unwrap();
    drop(peer);
}
