//! The client as a tower Service: poll_ready is tied to stream credit
//! (the server's announced cap) and to the client's in-flight limit.
//!
//! Everything runs in memory on a paused clock: time moves only when every
//! task waits, so each `timeout` here fires exactly when the awaited wake-up
//! can never come (a hang), never because the machine is slow.
#![cfg(feature = "tower")]

mod common;

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use common::{pair, pair_configured, settle};
use tower_service::Service;
use weft_mux::Config;
use weft_rpc::{Client, Code, Router, Server, UnaryRequest};

/// A liveness guard on the paused clock (see the module docs).
const HANG: Duration = Duration::from_secs(5);

#[tokio::test(start_paused = true)]
async fn poll_ready_follows_credit_and_connection_state() {
    let (release, gate) = tokio::sync::watch::channel(false);
    let router = Router::new().unary("wait", move |_c, b| {
        let mut gate = gate.clone();
        async move {
            let _ = gate.wait_for(|open| *open).await;
            Ok(b)
        }
    });
    let p = pair(router).await;
    let mut a = p.client.clone().with_in_flight_limit(1);
    let mut b = a.clone();
    poll_fn(|cx| a.poll_ready(cx)).await.unwrap();
    poll_fn(|cx| a.poll_ready(cx)).await.unwrap(); // still ready, one permit
    let first = a.call(UnaryRequest::new("wait", Bytes::from_static(b"1")));
    let first = tokio::spawn(first);
    // The only credit is taken: the clone is not ready.
    let pending = poll_fn(|cx| Poll::Ready(b.poll_ready(cx).is_pending())).await;
    assert!(pending);
    release.send(true).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), "1");
    tokio::time::timeout(HANG, poll_fn(|cx| b.poll_ready(cx)))
        .await
        .unwrap()
        .unwrap();
    let r = b
        .call(UnaryRequest::new("wait", Bytes::from_static(b"2")))
        .await
        .unwrap();
    assert_eq!(r, "2");
    // A closed connection is not ready: once the connection has noticed
    // the cut, the very next poll_ready fails.
    p.cut.cut();
    let mut c = p.client.clone();
    tokio::time::timeout(HANG, p.client.connection().closed())
        .await
        .expect("the connection noticed the cut transport");
    let e = poll_fn(|cx| c.poll_ready(cx)).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
}

#[tokio::test(start_paused = true)]
async fn poll_ready_waits_for_room_under_the_servers_stream_cap() {
    let (release, gate) = tokio::sync::watch::channel(false);
    let router = Router::new()
        .unary("echo", |_c, b| async move { Ok(b) })
        .unary("wait", move |_c, b| {
            let mut gate = gate.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok(b)
            }
        });
    let mut cap = Config::default();
    cap.max_concurrent_streams(2);
    let p = pair_configured(Server::new(router), Client::new, cap).await;
    // One call first, so the server's settings (and its cap) have arrived.
    assert_eq!(
        p.client
            .unary("echo", Bytes::from_static(b"hi"))
            .await
            .unwrap(),
        "hi"
    );
    let mut calls = Vec::new();
    for i in 0..2u8 {
        let mut c = p.client.clone();
        poll_fn(|cx| c.poll_ready(cx)).await.unwrap();
        calls.push(tokio::spawn(
            c.call(UnaryRequest::new("wait", Bytes::from(vec![i]))),
        ));
    }
    assert!(settle(|| p.server_conn.stats().inbound == 2).await);
    // Both slots are taken: a third service is not ready, though the
    // client's own in-flight limit (100) has room.
    let mut third = p.client.clone();
    let pending = poll_fn(|cx| Poll::Ready(third.poll_ready(cx).is_pending())).await;
    assert!(pending, "ready with the server's cap reached");
    let waiting = tokio::spawn(async move {
        poll_fn(|cx| third.poll_ready(cx)).await.unwrap();
        third
            .call(UnaryRequest::new("echo", Bytes::from_static(b"3")))
            .await
    });
    release.send(true).unwrap();
    for c in calls {
        c.await.unwrap().unwrap();
    }
    // The finished calls freed their slots and woke the waiting service.
    let r = tokio::time::timeout(HANG, waiting)
        .await
        .expect("poll_ready woke when a slot came free")
        .unwrap()
        .unwrap();
    assert_eq!(r, "3");
}

#[cfg(feature = "json")]
#[tokio::test(start_paused = true)]
async fn typed_calls_through_the_tower_interface() {
    use weft_rpc::{Json, TypedRequest};
    let router =
        Router::new().unary_codec(
            "add",
            Json,
            |_c, (a, b): (i64, i64)| async move { Ok(a + b) },
        );
    let p = pair(router).await;
    let mut svc = p.client.typed_service(Json);
    poll_fn(|cx| Service::<TypedRequest<(i64, i64), i64>>::poll_ready(&mut svc, cx))
        .await
        .unwrap();
    let sum: i64 = svc.call(TypedRequest::new("add", (2, 40))).await.unwrap();
    assert_eq!(sum, 42);
    // The wrong response type is the server's fault: INTERNAL.
    poll_fn(|cx| Service::<TypedRequest<(i64, i64), String>>::poll_ready(&mut svc, cx))
        .await
        .unwrap();
    let e = svc
        .call(TypedRequest::<_, String>::new("add", (1, 1)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::INTERNAL);
}
