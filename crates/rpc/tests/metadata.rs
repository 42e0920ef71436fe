//! Metadata both ways: typed keys on the request, response headers and
//! trailers a handler sets, and status details.

mod common;

use bytes::Bytes;
use common::pair;
use weft_rpc::{
    Ascii, Binary, CallOptions, Code, InvalidMetadata, Json, MetadataKey, Router, Status,
};

const REQUEST_ID: MetadataKey<Ascii> = MetadataKey::from_static("x-request-id");
const TOKEN: MetadataKey<Binary> = MetadataKey::from_static("token-bin");
const SERVED_BY: MetadataKey<Ascii> = MetadataKey::from_static("x-served-by");
const TIMING: MetadataKey<Ascii> = MetadataKey::from_static("server-timing");
const CURSOR: MetadataKey<Binary> = MetadataKey::from_static("cursor-bin");
const NEXT: MetadataKey<Ascii> = MetadataKey::from_static("next-page");

/// Every byte value, for binary round trips.
fn all_bytes() -> Vec<u8> {
    (0..=255u8).collect()
}

fn router() -> Router {
    Router::new()
        .unary("timed", |ctx, b: Bytes| async move {
            ctx.set_header(&SERVED_BY, "node-1")?;
            ctx.set_trailer(&TIMING, "db;dur=3")?;
            ctx.set_trailer(&CURSOR, &[0, 1, 2][..])?;
            Ok(b)
        })
        // Echoes the request's typed entries back: the token as a header,
        // the request id as a trailer.
        .unary("mirror", |ctx, b: Bytes| async move {
            let token = ctx.metadata().value(&TOKEN).unwrap_or_default().to_vec();
            let id = ctx.metadata().value(&REQUEST_ID).unwrap_or("").to_owned();
            ctx.set_header(&TOKEN, &token)?;
            ctx.set_trailer(&REQUEST_ID, &id)?;
            Ok(b)
        })
        .unary("bad-value", |ctx, _b: Bytes| async move {
            // A newline is not ASCII metadata: refused, `?` makes it
            // INVALID_ARGUMENT.
            ctx.set_header(&SERVED_BY, "a\nb")?;
            Ok(Bytes::new())
        })
        .unary("refuse", |ctx, _b: Bytes| async move {
            ctx.set_header(&SERVED_BY, "node-2")?;
            ctx.set_trailer(&MetadataKey::<Ascii>::from_static("retry-after"), "5")?;
            Err::<Bytes, _>(Status::unavailable("busy").with_details(Bytes::from_static(b"\x05")))
        })
        .server_streaming("pages", |ctx, _b, mut sink| async move {
            ctx.set_header(&SERVED_BY, "node-3")?;
            sink.send(Bytes::from_static(b"p1")).await?;
            // Too late: the headers went with the first message.
            ctx.set_header(&SERVED_BY, "late")?;
            sink.send(Bytes::from_static(b"p2")).await?;
            ctx.set_trailer(&NEXT, "2")?;
            Ok(())
        })
        .server_streaming("empty", |ctx, _b, _sink| async move {
            ctx.set_header(&SERVED_BY, "node-4")?;
            Ok(())
        })
        .unary_codec("typed", Json, |ctx, n: u32| async move {
            ctx.set_header(&SERVED_BY, "node-5")?;
            ctx.set_trailer(&CURSOR, &n.to_be_bytes())?;
            Ok::<_, Status>(n + 1)
        })
}

#[tokio::test]
async fn a_unary_handler_sets_headers_and_trailers_the_caller_reads() {
    let p = pair(router()).await;
    let r = p
        .client
        .unary_response("timed", Bytes::from_static(b"x"), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(r.message(), "x");
    assert_eq!(r.header(&SERVED_BY), Some("node-1"));
    assert_eq!(r.headers().status(), None, "headers carry no status");
    assert_eq!(r.headers().get(b"server-timing"), None);
    assert_eq!(r.trailers().status(), Some(0));
    assert_eq!(r.trailer(&TIMING), Some("db;dur=3"));
    assert_eq!(r.trailer(&CURSOR), Some(&[0u8, 1, 2][..]));
    assert_eq!(r.trailer(&SERVED_BY), None, "a header is not a trailer");
    // The plain call reads the same response, metadata ignored.
    let body = p.client.unary("timed", Bytes::from_static(b"y")).await;
    assert_eq!(body.unwrap(), "y");
}

#[tokio::test]
async fn binary_and_ascii_values_round_trip_both_ways() {
    let p = pair(router()).await;
    let opts = CallOptions::new()
        .insert(&TOKEN, &all_bytes())
        .unwrap()
        .insert(&REQUEST_ID, " !~r-42~! ")
        .unwrap();
    let r = p
        .client
        .unary_response("mirror", Bytes::new(), &opts)
        .await
        .unwrap();
    assert_eq!(r.header(&TOKEN), Some(&all_bytes()[..]));
    assert_eq!(r.trailer(&REQUEST_ID), Some(" !~r-42~! "));
}

#[tokio::test]
async fn invalid_keys_and_values_are_typed_errors() {
    assert_eq!(
        MetadataKey::<Ascii>::new("X-Request-Id").unwrap_err(),
        InvalidMetadata::KeyByte { at: 0, byte: b'X' }
    );
    assert_eq!(
        MetadataKey::<Binary>::new("token").unwrap_err(),
        InvalidMetadata::WrongKind { binary: true }
    );
    assert_eq!(
        MetadataKey::<Ascii>::new("weft-codec").unwrap_err(),
        InvalidMetadata::Reserved
    );
    let e = CallOptions::new().insert(&REQUEST_ID, "é").unwrap_err();
    assert_eq!(e, InvalidMetadata::ValueByte { at: 0, byte: 0xc3 });
    let status = Status::from(e);
    assert_eq!(status.code(), Code::INVALID_ARGUMENT);
    assert!(status.message().contains("0xc3"), "{status}");
    // A handler's bad value fails its call, the connection lives.
    let p = pair(router()).await;
    let e = p.client.unary("bad-value", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT);
    assert!(e.message().contains("ASCII"), "{e}");
    assert!(p.client.unary("timed", Bytes::new()).await.is_ok());
}

#[tokio::test]
async fn streaming_headers_go_with_the_first_message() {
    let p = pair(router()).await;
    let mut s = p
        .client
        .server_streaming("pages", Bytes::new(), &CallOptions::new())
        .await
        .unwrap();
    // The call returned with the server's first frame: its headers are
    // here before any message is read (as tonic's are), its trailers not.
    assert_eq!(s.headers().unwrap().value(&SERVED_BY), Some("node-3"));
    assert!(s.trailers().is_none());
    assert_eq!(s.message().await.unwrap().unwrap(), "p1");
    assert_eq!(s.message().await.unwrap().unwrap(), "p2");
    assert_eq!(s.message().await.unwrap(), None);
    let h = s.headers().unwrap();
    assert_eq!(h.iter().count(), 1, "the late header was dropped: {h:?}");
    let t = s.trailers().unwrap();
    assert_eq!(t.value(&NEXT), Some("2"));
    assert_eq!(t.value(&SERVED_BY), None);

    // No message: the headers join the trailers ("trailers-only").
    let mut s = p
        .client
        .server_streaming("empty", Bytes::new(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap(), None);
    assert!(s.headers().is_none());
    assert_eq!(s.trailers().unwrap().value(&SERVED_BY), Some("node-4"));
}

#[tokio::test]
async fn a_typed_unary_call_reads_headers_and_trailers() {
    let p = pair(router()).await;
    let r = p
        .client
        .unary_codec_response::<_, u32, u32>("typed", Json, &41, &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(*r.message(), 42);
    assert_eq!(r.header(&SERVED_BY), Some("node-5"));
    assert_eq!(r.trailer(&CURSOR), Some(&41u32.to_be_bytes()[..]));
    let (n, headers, trailers) = r.into_parts();
    assert_eq!(
        (n, headers.is_empty(), trailers.status()),
        (42, false, Some(0))
    );
}

#[tokio::test]
async fn a_failed_call_keeps_its_status_details() {
    let p = pair(router()).await;
    let e = p.client.unary("refuse", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
    assert_eq!(e.message(), "busy");
    assert_eq!(e.details().map(|d| &d[..]), Some(&b"\x05"[..]));
}
