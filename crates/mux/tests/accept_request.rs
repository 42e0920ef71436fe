//! `Incoming::accept_with_request`: a request whole in its `OPEN` comes
//! with the stream, taken as `recv` would take it; anything else is left
//! for `recv`.

use std::time::Duration;

use bytes::Bytes;
use weft_mux::{Config, Metadata};
use weft_testkit::duplex_pair;

#[tokio::test]
async fn a_request_whole_in_its_open_comes_with_the_stream() {
    let ((client, _), (server, mut incoming)) =
        duplex_pair(1 << 16, Config::default(), Config::default()).await;
    let ask = Bytes::from_static(b"the whole request");
    let mut out = client
        .open(Metadata::builder().method("m").finish(), ask.clone(), true)
        .await
        .unwrap();
    let a = incoming.accept_with_request().await.unwrap();
    let mut stream = a.stream;
    assert_eq!(stream.metadata().method(), Some("m"));
    let request = a.request.expect("taken with the stream");
    assert_eq!(request, ask);
    // Taken as `recv` takes it: its connection credit is given back, and
    // the stream says it ended.
    assert_eq!(
        server.stats().conn_recv_unacked as usize,
        ask.len(),
        "the credit was returned"
    );
    assert_eq!(stream.recv().await.unwrap(), None);
    // The stream is otherwise the usual one: the reply ends it.
    stream.send(Bytes::from_static(b"r"), true).await.unwrap();
    let reply = out.recv().await.unwrap().unwrap();
    assert!(reply.end && reply.data == "r");
}

#[tokio::test]
async fn a_request_still_coming_is_left_for_recv() {
    let ((client, _), (server, mut incoming)) =
        duplex_pair(1 << 16, Config::default(), Config::default()).await;
    let mut out = client
        .open(Metadata::new(), Bytes::from_static(b"part"), false)
        .await
        .unwrap();
    let a = incoming.accept_with_request().await.unwrap();
    assert!(a.request.is_none());
    assert_eq!(server.stats().conn_recv_unacked, 0, "nothing taken yet");
    let mut stream = a.stream;
    out.send(Bytes::from_static(b"rest"), true).await.unwrap();
    let first = stream.recv().await.unwrap().unwrap();
    assert_eq!((&first.data[..], first.end), (&b"part"[..], false));
    let second = stream.recv().await.unwrap().unwrap();
    assert_eq!((&second.data[..], second.end), (&b"rest"[..], true));
}

#[tokio::test]
async fn a_stream_reset_before_its_accept_keeps_its_data_for_recv() {
    let ((client, _), (_server, mut incoming)) =
        duplex_pair(1 << 16, Config::default(), Config::default()).await;
    let out = client
        .open(Metadata::new(), Bytes::from_static(b"ask"), true)
        .await
        .unwrap();
    // Dropped before the reply: the client resets it (CANCEL).
    drop(out);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let a = incoming.accept_with_request().await.unwrap();
    assert!(a.request.is_none(), "a reset stream's data stays with it");
    let mut stream = a.stream;
    let data = stream.recv().await.unwrap().unwrap();
    assert_eq!(&data.data[..], b"ask", "delivered before the reset");
    let err = stream.recv().await.unwrap_err();
    assert!(err.is_reset(), "{err}");
}

#[tokio::test]
async fn one_accept_future_yields_each_stream_in_turn() {
    let ((client, _), (_server, mut incoming)) =
        duplex_pair(1 << 16, Config::default(), Config::default()).await;
    let mut accept = std::pin::pin!(incoming.accept_with_request());
    let (mut calls, mut seen) = (Vec::new(), Vec::new());
    for ask in [&b"one"[..], b"two", b"three"] {
        calls.push(
            client
                .open(Metadata::new(), Bytes::copy_from_slice(ask), true)
                .await
                .unwrap(),
        );
        // The same future, polled again after each stream it gave.
        let a = accept.as_mut().await.expect("the connection is open");
        seen.push(a.request.expect("whole in its OPEN"));
    }
    assert_eq!(seen, [&b"one"[..], b"two", b"three"]);
}
