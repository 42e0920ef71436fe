//! Client and server call metrics through the `metrics` facade, read back
//! from metrics-util's `DebuggingRecorder` installed for this thread (the
//! tests run on a current-thread runtime, so the server's tasks record
//! into it too).

mod common;

use bytes::Bytes;
use metrics::LocalRecorderGuard;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use weft_rpc::{CallOptions, Client, Code, Metrics, Router, Server, Status};

fn router() -> Router {
    Router::new()
        .unary("svc.m/echo", |_ctx, req| async move { Ok(req) })
        .unary("svc.m/missing", |_ctx, _req| async move {
            Err(Status::not_found("no such thing"))
        })
        .unary("svc.m/stall", |_ctx, _req| std::future::pending())
        .server_streaming("svc.m/three", |_ctx, _req, mut sink| async move {
            for _ in 0..3 {
                sink.send(Bytes::from_static(b"x")).await?;
            }
            Ok(())
        })
        .bidi("svc.m/upper", |_ctx, mut s| async move {
            while let Some(m) = s.message().await? {
                s.send(Bytes::from(m.to_ascii_uppercase())).await?;
            }
            Ok(())
        })
}

/// A snapshot: name, labels and value of each metric. Taking one resets
/// the recorder's counters and gauges and drains its histograms, so each
/// test takes one.
struct Snap(Vec<(String, Labels, DebugValue)>);

type Labels = Vec<(String, String)>;

impl Snap {
    fn take(s: &Snapshotter) -> Snap {
        Snap(
            s.snapshot()
                .into_vec()
                .into_iter()
                .map(|(k, _, _, v)| {
                    let key = k.key();
                    let labels = key
                        .labels()
                        .map(|l| (l.key().to_owned(), l.value().to_owned()))
                        .collect();
                    (key.name().to_owned(), labels, v)
                })
                .collect(),
        )
    }

    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<&DebugValue> {
        self.0
            .iter()
            .find(|(n, ls, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, v)| v)
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.find(name, labels) {
            Some(DebugValue::Counter(n)) => *n,
            other => panic!("{name} {labels:?}: {other:?} in {:#?}", self.0),
        }
    }

    fn samples(&self, name: &str, labels: &[(&str, &str)]) -> usize {
        match self.find(name, labels) {
            Some(DebugValue::Histogram(v)) => v.len(),
            other => panic!("{name} {labels:?}: {other:?} in {:#?}", self.0),
        }
    }

    /// Whether any metric's name starts with `prefix`.
    fn any(&self, prefix: &str) -> bool {
        self.0.iter().any(|(n, _, _)| n.starts_with(prefix))
    }

    fn gauge(&self, name: &str) -> f64 {
        match self.find(name, &[]) {
            Some(DebugValue::Gauge(g)) => g.0,
            other => panic!("{name}: {other:?} in {:#?}", self.0),
        }
    }
}

/// A debugging recorder for this thread (leaked: it lives as long as the
/// test) and its snapshotter.
fn record() -> (LocalRecorderGuard<'static>, Snapshotter) {
    let r: &'static DebuggingRecorder = Box::leak(Box::new(DebuggingRecorder::new()));
    (metrics::set_default_local_recorder(r), r.snapshotter())
}

const STARTED: &str = "weft_rpc_client_started_total";
const HANDLED: &str = "weft_rpc_client_handled_total";
const DURATION: &str = "weft_rpc_client_duration_seconds";

#[tokio::test]
async fn client_unary_calls_count_by_method_and_code_with_latency_and_bytes() {
    let (_local, snapshotter) = record();
    let p = common::pair(router()).await;
    let c = &p.client;

    for _ in 0..3 {
        // Spelled with a leading slash: labelled by the canonical name.
        let r = c.unary("/svc.m/echo", Bytes::from_static(b"hello")).await;
        assert_eq!(r.unwrap(), "hello");
    }
    let e = c.unary("svc.m/missing", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::NOT_FOUND);
    // A call dropped before its end is cancelled; one timing out is not.
    drop(c.unary("svc.m/stall", Bytes::new()));
    let opts = CallOptions::new().timeout(std::time::Duration::from_millis(20));
    let e = c
        .unary_with("svc.m/stall", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED);
    // The variant with headers and trailers is metered too.
    let r = c
        .unary_response("svc.m/echo", Bytes::from_static(b"hi"), &opts)
        .await
        .unwrap();
    assert_eq!(r.message(), "hi");

    let s = Snap::take(&snapshotter);
    let echo = [("rpc_method", "svc.m/echo")];
    let ok = [("rpc_method", "svc.m/echo"), ("code", "OK")];
    assert_eq!(s.counter(STARTED, &echo), 4);
    assert_eq!(s.counter(HANDLED, &ok), 4);
    assert_eq!(s.samples(DURATION, &echo), 4);
    // 3 × (4-byte prefix + 5) + (4 + 2) out; 3 × 5 + 2 in.
    assert_eq!(s.counter("weft_rpc_client_sent_bytes_total", &echo), 33);
    assert_eq!(s.counter("weft_rpc_client_received_bytes_total", &echo), 17);
    let missing = [("rpc_method", "svc.m/missing"), ("code", "NOT_FOUND")];
    assert_eq!(s.counter(HANDLED, &missing), 1);
    let stall = [("rpc_method", "svc.m/stall")];
    assert_eq!(s.counter(STARTED, &stall), 2);
    let cancelled = [("rpc_method", "svc.m/stall"), ("code", "CANCELLED")];
    assert_eq!(s.counter(HANDLED, &cancelled), 1);
    let timed_out = [("rpc_method", "svc.m/stall"), ("code", "DEADLINE_EXCEEDED")];
    assert_eq!(s.counter(HANDLED, &timed_out), 1);
    assert_eq!(s.gauge("weft_rpc_client_calls_in_flight"), 0.0);
    // The server's side of the same calls, under its own names.
    let server_ok = [("rpc_method", "svc.m/echo"), ("code", "OK")];
    assert_eq!(s.counter("weft_rpc_server_handled_total", &server_ok), 4);
    // Each method under its own name, on one connection (its handles are
    // kept by route, per connection).
    assert_eq!(s.counter("weft_rpc_server_handled_total", &missing), 1);
    assert_eq!(s.counter("weft_rpc_server_started_total", &stall), 1);
    // The server read what the client sent and sent what it received.
    assert_eq!(s.counter("weft_rpc_server_received_bytes_total", &echo), 17);
    assert_eq!(s.counter("weft_rpc_server_sent_bytes_total", &echo), 33);
}

async fn echo(c: &Client) -> Result<Bytes, Status> {
    c.unary("svc.m/echo", Bytes::from_static(b"hi")).await
}

#[tokio::test]
async fn metering_is_decided_when_the_client_is_made_or_the_connection_opens() {
    // No recorder yet: the client and the server connection meter nothing,
    // not even after one is installed (no clock reads, no handles).
    let p = common::pair(router()).await;
    // The server's connection task starts serving (its first poll) here.
    tokio::task::yield_now().await;
    let (_local, snapshotter) = record();
    assert_eq!(echo(&p.client).await.unwrap(), "hi");
    let s = Snap::take(&snapshotter);
    assert!(!s.any("weft_rpc_client_"), "{:#?}", s.0);
    assert!(!s.any("weft_rpc_server_"), "{:#?}", s.0);
    // Switched on, a client meters from its next call.
    let on = p.client.clone().with_metrics(Metrics::On);
    assert_eq!(echo(&on).await.unwrap(), "hi");
    let s = Snap::take(&snapshotter);
    let ok = [("rpc_method", "svc.m/echo"), ("code", "OK")];
    assert_eq!(s.counter(HANDLED, &ok), 1);
    assert!(!s.any("weft_rpc_server_"), "{:#?}", s.0);

    // With a recorder installed (a fresh one: a snapshot lists every
    // handle ever registered), `Off` meters nothing on its side.
    let (_fresh, snapshotter) = record();
    let p = common::pair_with(Server::new(router()).metrics(Metrics::Off), |c| {
        Client::new(c).with_metrics(Metrics::Off)
    })
    .await;
    assert_eq!(echo(&p.client).await.unwrap(), "hi");
    let s = Snap::take(&snapshotter);
    assert!(!s.any("weft_rpc_client_"), "{:#?}", s.0);
    assert!(!s.any("weft_rpc_server_"), "{:#?}", s.0);
    // And `Auto` meters both sides, as every other test here shows.
    let p = common::pair(router()).await;
    assert_eq!(echo(&p.client).await.unwrap(), "hi");
    let s = Snap::take(&snapshotter);
    assert_eq!(s.counter(HANDLED, &ok), 1);
    assert_eq!(s.counter("weft_rpc_server_handled_total", &ok), 1);
    assert_eq!(s.gauge("weft_rpc_server_connections"), 1.0);
}

#[tokio::test]
async fn client_streaming_calls_count_once_at_their_end() {
    let (_local, snapshotter) = record();
    let p = common::pair(router()).await;
    let c = &p.client;
    let none = CallOptions::new();

    let mut three = c
        .server_streaming("svc.m/three", Bytes::new(), &none)
        .await
        .unwrap();
    while three.message().await.unwrap().is_some() {}
    // Reading past the end repeats the outcome; it is counted once.
    assert_eq!(three.message().await.unwrap(), None);

    // A split bidi call ends on its receiving half.
    let (mut tx, mut rx) = c.bidi("svc.m/upper", &none).await.unwrap().split();
    tx.send(Bytes::from_static(b"a")).await.unwrap();
    assert_eq!(rx.message().await.unwrap().unwrap(), "A");
    tx.close_send().await.unwrap();
    assert_eq!(rx.message().await.unwrap(), None);

    // A bidi call to an unknown method.
    let mut nope = c.bidi("svc.m/nope", &none).await.unwrap();
    assert_eq!(
        nope.message().await.unwrap_err().code(),
        Code::UNIMPLEMENTED
    );

    // A stream that never opens (a name that is not one) counts at once,
    // labelled as given.
    let e = c.bidi("no such/../name", &none).await.unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");

    // One call still open when the snapshot is taken.
    let open = c
        .server_streaming("svc.m/three", Bytes::new(), &none)
        .await
        .unwrap();

    let s = Snap::take(&snapshotter);
    assert_eq!(s.gauge("weft_rpc_client_calls_in_flight"), 1.0, "open");
    assert_eq!(s.counter(STARTED, &[("rpc_method", "svc.m/three")]), 2);
    for m in ["svc.m/three", "svc.m/upper"] {
        assert_eq!(
            s.counter(HANDLED, &[("rpc_method", m), ("code", "OK")]),
            1,
            "{m}"
        );
        assert_eq!(s.samples(DURATION, &[("rpc_method", m)]), 1, "{m}");
    }
    let nope = [("rpc_method", "svc.m/nope"), ("code", "UNIMPLEMENTED")];
    assert_eq!(s.counter(HANDLED, &nope), 1);
    let bad = [
        ("rpc_method", "no such/../name"),
        ("code", "INVALID_ARGUMENT"),
    ];
    assert_eq!(s.counter(HANDLED, &bad), 1);
    assert_eq!(s.counter(STARTED, &[("rpc_method", "svc.m/upper")]), 1);
    drop((three, tx, rx, open));
}

#[cfg(feature = "json")]
#[tokio::test]
async fn typed_and_client_streaming_calls_are_metered_too() {
    use weft_rpc::Json;
    let (_local, snapshotter) = record();
    let router = Router::new()
        .unary_codec("svc.t/add", Json, |_c, (a, b): (i64, i64)| async move {
            Ok(a + b)
        })
        .client_streaming("svc.t/concat", |_ctx, mut rx| async move {
            let mut out = Vec::new();
            while let Some(m) = rx.message().await? {
                out.extend_from_slice(&m);
            }
            Ok(Bytes::from(out))
        });
    let p = common::pair(router).await;
    let c = &p.client;
    let none = CallOptions::new();

    let n: i64 = c.unary_json("svc.t/add", &(1i64, 2i64)).await.unwrap();
    assert_eq!(n, 3);
    let n: i64 = c
        .unary_codec("svc.t/add", Json, &(2i64, 3i64), &none)
        .await
        .unwrap();
    assert_eq!(n, 5);
    let mut up = c.client_streaming("svc.t/concat", &none).await.unwrap();
    up.send(Bytes::from_static(b"ab")).await.unwrap();
    up.send(Bytes::from_static(b"c")).await.unwrap();
    assert_eq!(up.finish().await.unwrap(), "abc");

    let s = Snap::take(&snapshotter);
    let add = [("rpc_method", "svc.t/add")];
    assert_eq!(s.counter(STARTED, &add), 2);
    assert_eq!(
        s.counter(HANDLED, &[("rpc_method", "svc.t/add"), ("code", "OK")]),
        2
    );
    // `[1,2]` and `[2,3]` with their 4-byte prefixes out; `3` and `5` in.
    assert_eq!(s.counter("weft_rpc_client_sent_bytes_total", &add), 18);
    assert_eq!(s.counter("weft_rpc_client_received_bytes_total", &add), 2);
    let concat = [("rpc_method", "svc.t/concat"), ("code", "OK")];
    assert_eq!(s.counter(HANDLED, &concat), 1);
    assert_eq!(s.samples(DURATION, &[("rpc_method", "svc.t/concat")]), 1);
    assert_eq!(s.gauge("weft_rpc_client_calls_in_flight"), 0.0);
}

/// The server meters a call only once its interceptor lets it through: a
/// refused call never started (no `started`, no `handled` of its own),
/// while the calls it passes are metered as usual.
#[tokio::test]
async fn a_call_the_servers_interceptor_refuses_is_not_metered() {
    let (_local, snapshotter) = record();
    let server = Server::new(router()).interceptor(|ctx| match ctx.metadata().get(b"token") {
        Some(_) => Ok(()),
        None => Err(Status::new(Code::UNAUTHENTICATED, "no token")),
    });
    let p = common::pair_with(server, Client::new).await;
    let e = echo(&p.client).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED);
    let s = Snap::take(&snapshotter);
    assert!(!s.any("weft_rpc_server_started"), "{:#?}", s.0);
    assert!(!s.any("weft_rpc_server_handled"), "{:#?}", s.0);
    let opts = CallOptions::new().metadata(b"token", b"t");
    let r = p
        .client
        .unary_with("svc.m/echo", Bytes::from_static(b"hi"), &opts)
        .await;
    assert_eq!(r.unwrap(), "hi");
    let s = Snap::take(&snapshotter);
    let echo = [("rpc_method", "svc.m/echo")];
    let ok = [("rpc_method", "svc.m/echo"), ("code", "OK")];
    assert_eq!(s.counter("weft_rpc_server_started_total", &echo), 1);
    assert_eq!(s.counter("weft_rpc_server_handled_total", &ok), 1);
}
