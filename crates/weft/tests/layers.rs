//! Server layers see each call's final status and its response metadata:
//! a timing layer records the handler's `NOT_FOUND`, a `DEADLINE_EXCEEDED`
//! and a caller's `CANCELLED`; a layer's headers and trailers reach the
//! caller; a layer that times a call out ends it `DEADLINE_EXCEEDED`, saying
//! so, instead of resetting it.
#![cfg(feature = "tower")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weft::{
    Ascii, CallOptions, Client, Code, Config, MetadataKey, ResponseSink, Router, Server, Status,
    layer_fn,
};
use weft_testkit::eventually;

const SERVED_BY: MetadataKey<Ascii> = MetadataKey::from_static("x-served-by");
const SEEN: MetadataKey<Ascii> = MetadataKey::from_static("x-layer-saw");

/// `echo`; `find` (always `NOT_FOUND`); `hang` (never answers); `two`
/// (server streaming: one message, then another after an hour); `list`
/// (server streaming: one message, then `NOT_FOUND`).
fn router() -> Router {
    Router::new()
        .unary("echo", |_ctx, req: Bytes| async move { Ok(req) })
        .unary("find", |_ctx, _req: Bytes| async move {
            Err::<Bytes, _>(Status::not_found("no such user"))
        })
        .unary("hang", |_ctx, _req: Bytes| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(Bytes::new())
        })
        .server_streaming(
            "two",
            |_ctx, _req: Bytes, mut sink: ResponseSink| async move {
                sink.send(Bytes::from_static(b"first")).await?;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                sink.send(Bytes::from_static(b"late")).await
            },
        )
        .server_streaming(
            "list",
            |_ctx, _req: Bytes, mut sink: ResponseSink| async move {
                sink.send(Bytes::from_static(b"first")).await?;
                Err(Status::not_found("no more pages"))
            },
        )
}

async fn client(server: Server) -> Client {
    weft::memory(server, &Config::new()).await.unwrap()
}

/// The (method, code) of every call a timing layer saw end.
type Log = Arc<Mutex<Vec<(String, Code)>>>;

fn timed(log: &Log) -> Server {
    let log = log.clone();
    Server::new(router()).layer(layer_fn(move |call, next| {
        let log = log.clone();
        async move {
            let method = call.method().to_owned();
            let outcome = next.run(call).await;
            log.lock().unwrap().push((method, outcome.status().code()));
            Ok(outcome)
        }
    }))
}

/// The code the timing layer logged for `method`, once it has.
async fn logged(log: &Log, method: &str) -> Code {
    eventually(
        || {
            let log = log.lock().unwrap();
            log.iter().find(|(m, _)| m == method).map(|(_, c)| *c)
        },
        || format!("the layer to log {method}: {:?}", log.lock().unwrap()),
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn a_timing_layer_sees_each_calls_final_status() {
    let log = Log::default();
    let client = client(timed(&log)).await;

    client
        .unary("echo", Bytes::from_static(b"hi"))
        .await
        .unwrap();
    assert_eq!(logged(&log, "echo").await, Code::OK);

    let e = client.unary("find", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::NOT_FOUND);
    assert_eq!(logged(&log, "find").await, Code::NOT_FOUND);

    // The caller's deadline passes in the handler.
    let opts = CallOptions::new().timeout(Duration::from_millis(50));
    let e = client
        .unary_with("hang", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED);
    assert_eq!(logged(&log, "hang").await, Code::DEADLINE_EXCEEDED);

    // The caller gives up (drops its call): the server sees CANCELLED.
    log.lock().unwrap().clear();
    let call = client.unary("hang", Bytes::new());
    let gave_up = tokio::time::timeout(Duration::from_millis(20), call).await;
    assert!(gave_up.is_err(), "the call should still be waiting");
    assert_eq!(logged(&log, "hang").await, Code::CANCELLED);
}

#[tokio::test(start_paused = true)]
async fn headers_and_trailers_a_layer_sets_reach_the_caller() {
    let server = Server::new(router()).layer(layer_fn(|call, next| async move {
        call.set_header(&SERVED_BY, "node-7")?;
        let outcome = next.run(call).await;
        // After the handler: what it ended with, as a header (a unary
        // response has not gone yet) and a trailer.
        let code = outcome.status().code().name();
        outcome.set_header(&SEEN, code)?;
        outcome.set_trailer(&SEEN, code)?;
        Ok(outcome)
    }));
    let client = client(server).await;
    let opts = CallOptions::new();

    let r = client
        .unary_response("echo", Bytes::from_static(b"x"), &opts)
        .await
        .unwrap();
    assert_eq!(r.message(), &Bytes::from_static(b"x"));
    assert_eq!(r.header(&SERVED_BY), Some("node-7"));
    assert_eq!(r.header(&SEEN), Some("OK"));
    assert_eq!(r.trailer(&SEEN), Some("OK"));

    // An error status carries them too (as trailers: no message went).
    let e = client
        .unary_response("find", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NOT_FOUND);

    // A streaming call: the header went with the first message, the
    // trailer with the end.
    let mut s = client
        .server_streaming("list", Bytes::new(), &opts)
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap().unwrap(), "first");
    assert_eq!(
        s.headers().and_then(|h| h.value(&SERVED_BY)),
        Some("node-7")
    );
    let e = s.message().await.unwrap_err();
    assert_eq!(e.code(), Code::NOT_FOUND);
    assert_eq!(s.trailers().and_then(|t| t.value(&SEEN)), Some("NOT_FOUND"));
}

#[tokio::test(start_paused = true)]
async fn a_layer_that_refuses_a_call_sends_its_status_and_trailers() {
    let server = Server::new(router()).layer(layer_fn(|call, next| async move {
        if call.metadata().get(b"authorization") != Some(b"Bearer s3cret") {
            return Err(Status::unauthenticated("no valid token"));
        }
        Ok(next.run(call).await)
    }));
    let client = client(server).await;
    let e = client
        .unary_response("echo", Bytes::new(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED);
    assert_eq!(e.message(), "no valid token");
    let opts = CallOptions::new().metadata(b"authorization", b"Bearer s3cret");
    let r = client.unary_with("echo", Bytes::from_static(b"in"), &opts);
    assert_eq!(r.await.unwrap(), "in");
}

#[tokio::test(start_paused = true)]
async fn a_layer_may_replace_the_handlers_status() {
    let server = Server::new(router()).layer(layer_fn(|call, next| async move {
        let outcome = next.run(call).await;
        match outcome.status().code() {
            Code::NOT_FOUND => Err(Status::permission_denied("hidden: not yours")),
            _ => Ok(outcome),
        }
    }));
    let client = client(server).await;
    let e = client.unary("find", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::PERMISSION_DENIED);
    assert_eq!(e.message(), "hidden: not yours");
    assert_eq!(
        client
            .unary("echo", Bytes::from_static(b"y"))
            .await
            .unwrap(),
        "y"
    );
}

/// tower's own `TimeoutLayer` on the server: the caller sees
/// `DEADLINE_EXCEEDED` naming the server's layer, not a reset.
#[tokio::test(start_paused = true)]
async fn a_server_timeout_layer_ends_the_call_deadline_exceeded() {
    let server = Server::new(router()).layer(tower::timeout::TimeoutLayer::new(
        Duration::from_millis(100),
    ));
    let client = client(server).await;

    let e = client.unary("hang", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    assert_eq!(
        e.message(),
        "the server's layer timed out the call (request timed out)"
    );

    // A streaming call: its first message arrives, then the status.
    let mut s = client
        .server_streaming("two", Bytes::new(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap().unwrap(), "first");
    let e = s.message().await.unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    assert!(e.message().contains("the server's layer timed out"), "{e}");

    // Calls within the limit pass.
    assert_eq!(
        client
            .unary("echo", Bytes::from_static(b"z"))
            .await
            .unwrap(),
        "z"
    );
}

/// A handler the layer timed out is dropped and its cancellation signal
/// fires, as when the caller's own deadline passes.
#[tokio::test(start_paused = true)]
async fn a_timed_out_handler_sees_its_call_cancelled() {
    let signal = Arc::new(Mutex::new(None));
    let keep = signal.clone();
    let router = Router::new().unary("hang", move |ctx, _req: Bytes| {
        *keep.lock().unwrap() = Some(ctx.cancellation());
        async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(Bytes::new())
        }
    });
    let server = Server::new(router).layer(tower::timeout::TimeoutLayer::new(
        Duration::from_millis(100),
    ));
    let e = client(server).await.unary("hang", Bytes::new()).await;
    assert_eq!(e.unwrap_err().code(), Code::DEADLINE_EXCEEDED);
    let signal = signal.lock().unwrap().clone().expect("the handler ran");
    eventually(
        || signal.is_cancelled().then_some(()),
        || "the signal to fire",
    )
    .await;
}
