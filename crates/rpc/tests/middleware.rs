//! Server middleware: the interceptor and tower layers over whole calls.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use common::pair_with;
use weft_rpc::{Client, Code, Router, Server, Status};

fn counted() -> (Router, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let router = Router::new()
        .unary("echo", move |_c, b: Bytes| {
            r.fetch_add(1, Ordering::SeqCst);
            async move { Ok(b) }
        })
        .server_streaming("two", |_c, _b, mut sink| async move {
            sink.send(Bytes::from_static(b"a")).await?;
            sink.send(Bytes::from_static(b"b")).await
        });
    (router, runs)
}

#[tokio::test]
async fn the_interceptor_refuses_before_the_handler() {
    let (router, runs) = counted();
    let server = Server::new(router).interceptor(|ctx| match ctx.metadata().get(b"token") {
        Some(b"ok") => Ok(()),
        _ => Err(Status::new(Code::UNAUTHENTICATED, "no token")),
    });
    let p = pair_with(server, Client::new).await;
    let e = p
        .client
        .unary("echo", Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let opts = weft_rpc::CallOptions::new().metadata(b"token", b"ok");
    let r = p
        .client
        .unary_with("echo", Bytes::from_static(b"x"), &opts)
        .await;
    assert_eq!(r.unwrap(), "x");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn headers_the_interceptor_sets_reach_the_caller() {
    use weft_rpc::{Ascii, MetadataKey};
    const NODE: MetadataKey<Ascii> = MetadataKey::from_static("x-node");
    let (router, _) = counted();
    let server = Server::new(router).interceptor(|ctx| Ok(ctx.set_header(&NODE, "n7")?));
    let p = pair_with(server, Client::new).await;
    let opts = weft_rpc::CallOptions::new();
    let r = p.client.unary_response("echo", Bytes::new(), &opts).await;
    assert_eq!(r.unwrap().header(&NODE), Some("n7"));
    let mut s = p
        .client
        .server_streaming("two", Bytes::new(), &opts)
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap().unwrap(), "a");
    assert_eq!(s.headers().and_then(|h| h.value(&NODE)), Some("n7"));
}

#[cfg(feature = "tower")]
mod layers {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tower_layer::Layer;
    use tower_service::Service;
    use weft_rpc::{CallOutcome, IncomingCall};

    use super::*;

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    /// Refuses calls to `deny` with `error`; passes the rest inward.
    #[derive(Clone)]
    struct Deny {
        deny: &'static str,
        error: fn() -> BoxError,
    }

    impl<S> Layer<S> for Deny {
        type Service = DenyService<S>;
        fn layer(&self, inner: S) -> DenyService<S> {
            DenyService {
                inner,
                deny: self.clone(),
            }
        }
    }

    struct DenyService<S> {
        inner: S,
        deny: Deny,
    }

    impl<S> Service<IncomingCall> for DenyService<S>
    where
        S: Service<IncomingCall, Response = CallOutcome, Error = Status>,
        S::Future: Send + 'static,
    {
        type Response = CallOutcome;
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<CallOutcome, BoxError>> + Send>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            self.inner.poll_ready(cx).map_err(Into::into)
        }

        fn call(&mut self, call: IncomingCall) -> Self::Future {
            assert_eq!(call.peer().addr.as_deref(), Some("memory"));
            if call.method() == self.deny.deny {
                let e = (self.deny.error)();
                return Box::pin(async move { Err(e) });
            }
            let f = self.inner.call(call);
            Box::pin(async move { f.await.map_err(Into::into) })
        }
    }

    #[tokio::test]
    async fn a_layer_ends_refused_calls_with_its_status_and_passes_the_rest() {
        let (router, runs) = counted();
        let server = Server::new(router)
            .layer(Deny {
                deny: "echo",
                error: || Box::new(Status::new(Code::PERMISSION_DENIED, "not you")),
            })
            .layer(Deny {
                deny: "nothing",
                error: || "unused".into(),
            });
        let p = pair_with(server, Client::new).await;
        let e = p.client.unary("echo", Bytes::new()).await.unwrap_err();
        assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        // A streaming call passes both layers untouched.
        let mut s = p
            .client
            .server_streaming("two", Bytes::new(), &Default::default())
            .await
            .unwrap();
        assert_eq!(s.message().await.unwrap().unwrap(), "a");
        assert_eq!(s.message().await.unwrap().unwrap(), "b");
        assert_eq!(s.message().await.unwrap(), None);
    }

    /// Counts its drops: whether a handler's future was dropped.
    struct OnDrop(Arc<AtomicUsize>);

    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A layer that times a call out cuts its unary handler at once: the
    /// handler's future is dropped and the caller gets the layer's status,
    /// however long the handler would have gone on.
    #[tokio::test(start_paused = true)]
    async fn a_layer_timeout_cuts_a_unary_handler_that_never_ends() {
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let router = Router::new().unary("hang", move |_c, _b: Bytes| {
            let dropped = OnDrop(d.clone());
            async move {
                let _dropped = dropped;
                std::future::pending::<()>().await;
                Ok(Bytes::new())
            }
        });
        let limit = std::time::Duration::from_millis(100);
        let server = Server::new(router).layer(tower::timeout::TimeoutLayer::new(limit));
        let p = pair_with(server, Client::new).await;
        let call = p.client.unary("hang", Bytes::new());
        let e = tokio::time::timeout(std::time::Duration::from_secs(60), call)
            .await
            .expect("the layer ends the call")
            .unwrap_err();
        assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the handler dropped");
    }

    #[tokio::test]
    async fn an_error_that_is_not_a_status_is_unavailable() {
        let (router, _) = counted();
        let server = Server::new(router).layer(Deny {
            deny: "echo",
            error: || "overloaded".into(),
        });
        let p = pair_with(server, Client::new).await;
        let e = p.client.unary("echo", Bytes::new()).await.unwrap_err();
        assert_eq!(e.code(), Code::UNAVAILABLE);
        assert!(e.message().contains("overloaded"), "{e}");
    }
}
