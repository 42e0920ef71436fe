//! Metadata back to the caller: trailers a handler sets, and status details.

mod common;

use bytes::Bytes;
use common::pair;
use weft_rpc::{CallOptions, Code, Router, Status};

fn router() -> Router {
    Router::new()
        .unary("timed", |ctx, b: Bytes| async move {
            ctx.set_trailer(b"server-timing", b"db;dur=3");
            ctx.set_trailer(b"cursor-bin", &[0, 1, 2]);
            Ok(b)
        })
        .unary("refuse", |ctx, _b: Bytes| async move {
            ctx.set_trailer(b"retry-after", b"5");
            Err::<Bytes, _>(Status::unavailable("busy").with_details(Bytes::from_static(b"\x05")))
        })
        .server_streaming("pages", |ctx, _b, mut sink| async move {
            sink.send(Bytes::from_static(b"p1")).await?;
            ctx.set_trailer(b"next-page", b"2");
            Ok(())
        })
}

#[tokio::test]
async fn a_handler_sets_trailers_the_caller_reads() {
    let p = pair(router()).await;
    let (body, t) = p
        .client
        .unary_with_trailers("timed", Bytes::from_static(b"x"), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(body, "x");
    assert_eq!(t.status(), Some(0));
    assert_eq!(t.get(b"server-timing"), Some(&b"db;dur=3"[..]));
    assert_eq!(t.get(b"cursor-bin"), Some(&[0u8, 1, 2][..]));

    let mut s = p
        .client
        .server_streaming("pages", Bytes::new(), &CallOptions::new())
        .await
        .unwrap();
    assert!(s.trailers().is_none());
    assert_eq!(s.message().await.unwrap().unwrap(), "p1");
    assert_eq!(s.message().await.unwrap(), None);
    assert_eq!(s.trailers().unwrap().get(b"next-page"), Some(&b"2"[..]));

    // A plain call on the same connection carries none.
    let (_, t) = p
        .client
        .unary_with_trailers("timed", Bytes::new(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(t.iter().filter(|e| e.key == b"next-page").count(), 0);
}

#[tokio::test]
async fn a_failed_call_keeps_its_status_details() {
    let p = pair(router()).await;
    let e = p.client.unary("refuse", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
    assert_eq!(e.message(), "busy");
    assert_eq!(e.details().map(|d| &d[..]), Some(&b"\x05"[..]));
}
