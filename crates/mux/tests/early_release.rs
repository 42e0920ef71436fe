//! A stream finished both ways leaves the session in the call that
//! finished it (the handle queued its end and took the peer's last chunk),
//! not at the handle's drop: the slot under the peer's cap is free at once,
//! and the handle still answers as a finished stream does.

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use weft_mux::{Config, Connection, Incoming, Metadata, Stream};
use weft_testkit::duplex_pair;

/// A unary request sent and read: the caller's and the server's handles.
async fn asked(client: &Connection, incoming: &mut Incoming) -> (Stream, Stream) {
    let call = client
        .open(Metadata::new(), Bytes::from_static(b"ask"), true)
        .await
        .unwrap();
    let mut peer = incoming.accept().await.unwrap();
    let request = peer.recv().await.unwrap().unwrap();
    assert!(request.end);
    (call, peer)
}

#[tokio::test]
async fn a_unary_exchange_frees_both_tables_while_the_handles_live() {
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let (mut call, mut peer) = asked(&client, &mut incoming).await;
    assert_eq!(
        server.stats().streams,
        1,
        "the request is read, the reply not sent"
    );
    peer.send(Bytes::from_static(b"answer"), true)
        .await
        .unwrap();
    assert_eq!(
        server.stats().streams,
        0,
        "the server's end is queued and the request's end taken: released"
    );

    let reply = call.recv().await.unwrap().unwrap();
    assert_eq!(&reply.data[..], b"answer");
    assert!(reply.end);
    assert_eq!(
        client.stats().streams,
        0,
        "the reply's end was taken: released"
    );

    // The handles still behave as finished streams do.
    assert!(call.recv().await.unwrap().is_none(), "ended, again");
    assert!(peer.recv().await.unwrap().is_none(), "ended, again");
    let e = call
        .send(Bytes::from_static(b"late"), false)
        .await
        .unwrap_err();
    assert!(e.is_send_closed(), "{e:?}");
    let e = peer
        .send(Bytes::from_static(b"late"), true)
        .await
        .unwrap_err();
    assert!(e.is_send_closed(), "{e:?}");
    drop((call, peer));
    assert_eq!(client.stats().streams, 0);
    assert_eq!(server.stats().streams, 0);
}

#[tokio::test]
async fn the_peers_cap_has_room_again_before_the_finished_handle_is_dropped() {
    let mut one = Config::default();
    one.max_concurrent_streams(1);
    let ((client, _ci), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), one).await;
    // A first exchange, so the client has read the server's settings (its
    // cap of one) before the one the test looks at.
    let mut warm = client
        .open(Metadata::new(), Bytes::new(), true)
        .await
        .unwrap();
    let mut peer = incoming.accept().await.unwrap();
    peer.send(Bytes::from_static(b"hi"), true).await.unwrap();
    warm.recv().await.unwrap().unwrap();
    drop((warm, peer));
    let (mut call, mut peer) = asked(&client, &mut incoming).await;
    peer.send(Bytes::from_static(b"answer"), true)
        .await
        .unwrap();
    let room = poll_fn(|cx| Poll::Ready(client.poll_open_ready(cx))).await;
    assert!(
        room.is_pending(),
        "the only slot is taken while the reply is unread"
    );
    call.recv().await.unwrap().unwrap();
    let room = poll_fn(|cx| Poll::Ready(client.poll_open_ready(cx))).await;
    assert!(
        matches!(room, Poll::Ready(Ok(()))),
        "the finished stream's slot is free though its handle lives: {room:?}"
    );
    drop(call);
}

#[tokio::test]
async fn a_released_streams_reset_wait_ends_with_the_connection() {
    let ((client, _ci), (server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let (mut call, mut peer) = asked(&client, &mut incoming).await;
    peer.send(Bytes::from_static(b"done"), true).await.unwrap();
    call.recv().await.unwrap().unwrap();
    assert_eq!(client.stats().streams, 0);
    let now = poll_fn(|cx| Poll::Ready(call.poll_reset(cx))).await;
    assert!(
        now.is_pending(),
        "a finished stream has not failed: {now:?}"
    );
    // Waiting (registered) before the connection ends: the end wakes it.
    let waiting = tokio::spawn(async move { poll_fn(|cx| call.poll_reset(cx)).await });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(!waiting.is_finished());
    server.shutdown(Duration::ZERO).await;
    let e = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("woken by the connection's end")
        .unwrap();
    assert!(e.is_closed(), "{e:?}");
}
