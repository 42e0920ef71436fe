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
