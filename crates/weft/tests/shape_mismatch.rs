//! A call whose shape does not match its method's fails with a status
//! that names the method's shape, not "expected one message".

use bytes::Bytes;
use weft::{CallOptions, Client, Code, Config, ResponseSink, Router, Status};

fn router() -> Router {
    Router::new()
        .unary("echo", |_ctx, req: Bytes| async move { Ok(req) })
        .server_streaming(
            "list",
            |_ctx, req: Bytes, mut sink: ResponseSink| async move { sink.send(req).await },
        )
}

async fn client() -> Client {
    weft::memory(router(), &Config::new()).await.unwrap()
}

#[tokio::test]
async fn a_client_streaming_call_to_a_unary_method_names_its_shape() {
    let client = client().await;
    let opts = CallOptions::new();
    let mut call = client.client_streaming("echo", &opts).await.unwrap();
    call.send(Bytes::from_static(b"a")).await.unwrap();
    call.send(Bytes::from_static(b"b")).await.unwrap();
    let e = call.finish().await.unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");
    assert_eq!(
        e.message(),
        "method \"echo\" is unary: it takes one request message, and this call sent \
         more (is it called as client-streaming or bidi?)"
    );

    let call = client.client_streaming("echo", &opts).await.unwrap();
    let e = call.finish().await.unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");
    assert_eq!(
        e.message(),
        "method \"echo\" is unary: it takes one request message, and this call sent none"
    );
}

#[tokio::test]
async fn a_unary_call_to_a_streaming_method_names_its_shape() {
    let router = Router::new().server_streaming(
        "count",
        |_ctx, _req: Bytes, mut sink: ResponseSink| async move {
            for _ in 0..3 {
                sink.send(Bytes::from_static(b"n")).await?;
            }
            Ok(())
        },
    );
    let client = weft::memory(router, &Config::new()).await.unwrap();
    let e = client.unary("count", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");
    assert_eq!(
        e.message(),
        "method \"count\" sent a unary call more than one response: it streams its \
         responses (call it as server-streaming or bidi)"
    );
    // The connection stays usable.
    let mut list = client
        .server_streaming("count", Bytes::new(), &CallOptions::new())
        .await
        .unwrap();
    let mut n = 0;
    while list.message().await.unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
}

#[tokio::test]
async fn a_bidi_call_to_a_server_streaming_method_names_its_shape() {
    let client = client().await;
    let mut call = client.bidi("list", &CallOptions::new()).await.unwrap();
    call.send(Bytes::from_static(b"a")).await.unwrap();
    call.send(Bytes::from_static(b"b")).await.unwrap();
    call.close_send().await.unwrap();
    let e: Status = loop {
        match call.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the call should fail"),
            Err(e) => break e,
        }
    };
    assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");
    assert_eq!(
        e.message(),
        "method \"list\" is server-streaming: it takes one request message, and this call \
         sent more (is it called as client-streaming or bidi?)"
    );
}
