//! The client as a tower Service: poll_ready is tied to call credit.
#![cfg(feature = "tower")]

mod common;

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use common::pair;
use tower_service::Service;
use weft_rpc::{Code, Router, UnaryRequest};

#[tokio::test]
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
    tokio::time::timeout(Duration::from_secs(5), poll_fn(|cx| b.poll_ready(cx)))
        .await
        .unwrap()
        .unwrap();
    let r = b
        .call(UnaryRequest::new("wait", Bytes::from_static(b"2")))
        .await
        .unwrap();
    assert_eq!(r, "2");
    // A closed connection is not ready.
    p.cut.cut();
    let mut c = p.client.clone();
    let e = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match poll_fn(|cx| c.poll_ready(cx)).await {
                Err(e) => break e,
                Ok(()) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(e.code(), Code::UNAVAILABLE);
}
