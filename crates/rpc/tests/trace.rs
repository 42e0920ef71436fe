//! Per-call spans on both sides, and one trace across a nested call.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use weft_rpc::{Client, Router, Server};

/// One captured span: name, fields, the name of its parent in the span tree.
#[derive(Debug, Clone, Default)]
struct Captured {
    name: &'static str,
    fields: BTreeMap<String, String>,
    parent: Option<&'static str>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<BTreeMap<u64, Captured>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut c = Captured {
            name: attrs.metadata().name(),
            parent: ctx.span(id).and_then(|s| s.parent()).map(|p| p.name()),
            ..Default::default()
        };
        attrs.record(&mut Fields(&mut c.fields));
        self.0.lock().unwrap().insert(id.into_u64(), c);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Some(c) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut c.fields));
        }
    }
}

impl Capture {
    fn find(&self, name: &str, method: &str) -> Captured {
        let all = self.0.lock().unwrap();
        let hits: Vec<&Captured> = all
            .values()
            .filter(|c| {
                c.name == name && c.fields.get("rpc.method").map(String::as_str) == Some(method)
            })
            .collect();
        assert_eq!(hits.len(), 1, "{name} {method}: {all:#?}");
        hits[0].clone()
    }
}

#[tokio::test]
async fn one_trace_spans_a_nested_call_with_parents_and_children() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let inner = common::pair(
        Router::new().unary("svc.inner/echo", |_ctx, req: Bytes| async move { Ok(req) }),
    )
    .await;
    let inner_client = inner.client.clone();
    let relay = Router::new().unary("svc.outer/relay", move |ctx, req: Bytes| {
        let c = inner_client.clone();
        async move {
            c.unary_with("svc.inner/echo", req, &ctx.call_options())
                .await
        }
    });
    // The outer client knows its server's address; the inner one does not.
    let outer = common::pair_with(Server::new(relay), |c| {
        Client::new(c).with_peer_address("10.0.0.7:7700")
    })
    .await;
    let r = outer
        .client
        .unary("svc.outer/relay", Bytes::from_static(b"hi"))
        .await
        .unwrap();
    assert_eq!(r, "hi");

    let c1 = capture.find("rpc.client", "relay");
    let s1 = capture.find("rpc.server", "relay");
    let c2 = capture.find("rpc.client", "echo");
    let s2 = capture.find("rpc.server", "echo");
    for s in [&c1, &s1, &c2, &s2] {
        assert_eq!(s.fields["rpc.system"], "weft", "{s:?}");
        assert_eq!(s.fields["rpc.response.status_code"], "OK", "{s:?}");
        assert!(s.fields.contains_key("rpc.weft.stream_id"), "{s:?}");
        assert_eq!(
            s.fields["trace_id"], c1.fields["trace_id"],
            "one trace: {s:?}"
        );
        assert_eq!(s.fields["trace_id"].len(), 32);
    }
    assert_eq!(s1.fields["rpc.service"], "svc.outer");
    assert_eq!(s2.fields["rpc.service"], "svc.inner");
    assert_eq!(s1.fields["network.peer.address"], "memory");
    assert_eq!(c1.fields["network.peer.address"], "10.0.0.7:7700");
    assert!(!c2.fields.contains_key("network.peer.address"), "{c2:?}");
    // W3C parents: client → server → nested client → nested server.
    assert!(!c1.fields.contains_key("parent_id"), "a root: {c1:?}");
    assert_eq!(s1.fields["parent_id"], c1.fields["span_id"]);
    assert_eq!(c2.fields["parent_id"], s1.fields["span_id"]);
    assert_eq!(s2.fields["parent_id"], c2.fields["span_id"]);
    // The span tree in-process: the nested client call is inside the
    // handler's server span, server spans inside their connection's.
    assert_eq!(c2.parent, Some("rpc.server"));
    assert_eq!(s1.parent, Some("rpc.connection"));
    assert_eq!(c1.parent, None);
    // A nested call's deadline travels too.
    assert!(
        s2.fields
            .get("rpc.weft.timeout_us")
            .is_none_or(|v| v != "0")
    );
}

#[tokio::test]
async fn a_failed_call_records_its_code_on_both_spans() {
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let p = common::pair(Router::new().unary("boom", |_ctx, _req: Bytes| async move {
        Err::<Bytes, _>(weft_rpc::Status::not_found("no such thing"))
    }))
    .await;
    let e = p.client.unary("boom", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), weft_rpc::Code::NOT_FOUND);
    assert_eq!(
        capture.find("rpc.client", "boom").fields["rpc.response.status_code"],
        "NOT_FOUND"
    );
    assert_eq!(
        capture.find("rpc.server", "boom").fields["rpc.response.status_code"],
        "NOT_FOUND"
    );
}

#[tokio::test]
async fn a_streaming_call_has_spans_on_both_sides_too() {
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let p = common::pair(Router::new().server_streaming(
        "svc/list",
        |_ctx, _req: Bytes, mut sink| async move {
            for i in 0..3u8 {
                sink.send(Bytes::from(vec![i])).await?;
            }
            Ok(())
        },
    ))
    .await;
    let mut s = p
        .client
        .server_streaming("svc/list", Bytes::new(), &weft_rpc::CallOptions::new())
        .await
        .unwrap();
    let mut n = 0;
    while s.message().await.unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 3);
    let c = capture.find("rpc.client", "list");
    let s = capture.find("rpc.server", "list");
    assert_eq!(c.fields["rpc.response.status_code"], "OK", "{c:?}");
    assert_eq!(s.fields["rpc.response.status_code"], "OK", "{s:?}");
    assert_eq!(
        c.fields["rpc.weft.stream_id"],
        s.fields["rpc.weft.stream_id"]
    );
    assert_eq!(s.fields["parent_id"], c.fields["span_id"]);
}
