//! Every call shape, end to end over an in-memory mux connection.
#![cfg(feature = "json")]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::pair;
use serde::{Deserialize, Serialize};
use weft_rpc::{CallOptions, Code, Router, Status};

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Add {
    a: i64,
    b: i64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Sum {
    n: i64,
}

fn router() -> Router {
    Router::new()
        .unary("echo", |_ctx, req| async move { Ok(req) })
        .unary_json(
            "add",
            |_ctx, r: Add| async move { Ok(Sum { n: r.a + r.b }) },
        )
        .unary("meta", |ctx, _req| async move {
            let v = ctx.metadata().get(b"who").unwrap_or(b"?").to_vec();
            let peer = ctx.peer().addr.clone().unwrap_or_default();
            Ok(Bytes::from(format!(
                "{}|{}|{}",
                ctx.method(),
                String::from_utf8_lossy(&v),
                peer
            )))
        })
        .server_streaming_json("count", |_ctx, n: u32, mut sink| async move {
            for i in 0..n {
                sink.send_json(&i).await?;
            }
            Ok(())
        })
        .server_streaming("fail_after", |_ctx, _req, mut sink| async move {
            sink.send(Bytes::from_static(b"one")).await?;
            Err(Status::not_found("gone after one"))
        })
        .client_streaming_json("sum", |_ctx, mut rx| async move {
            let mut n = 0i64;
            while let Some(v) = rx.message_json::<i64>().await? {
                n += v;
            }
            Ok(Sum { n })
        })
        .client_streaming("concat", |_ctx, mut rx| async move {
            let mut out = Vec::new();
            while let Some(m) = rx.message().await? {
                out.extend_from_slice(&m);
            }
            Ok(Bytes::from(out))
        })
        .bidi("upper", |_ctx, mut s| async move {
            while let Some(m) = s.message().await? {
                s.send(Bytes::from(m.to_ascii_uppercase())).await?;
            }
            s.send_json(&"bye").await
        })
}

#[tokio::test]
async fn unary_raw_and_json() {
    let p = pair(router()).await;
    let c = &p.client;
    assert_eq!(
        c.unary("echo", Bytes::from_static(b"hi")).await.unwrap(),
        "hi"
    );
    assert_eq!(c.unary("echo", Bytes::new()).await.unwrap(), "");
    // Several frames each way, beyond the 256 KiB stream window: the
    // response's end is still queued when the server lets go of its stream.
    let big = Bytes::from(vec![7u8; 600 * 1024]);
    assert_eq!(c.unary("/ECHO", big.clone()).await.unwrap(), big);
    let s: Sum = c.unary_json("add", &Add { a: 2, b: 40 }).await.unwrap();
    assert_eq!(s, Sum { n: 42 });
    let e = c
        .unary_json::<_, Sum>("add", &"not an object")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT);
    // A response the client cannot decode is the server's fault, not the
    // caller's: INTERNAL, naming the method (gRPC does the same).
    let e = c.unary_json::<_, Add>("echo", &1).await.unwrap_err();
    assert_eq!(e.code(), Code::INTERNAL, "{e}");
    assert!(e.message().contains("response of echo"), "{e}");
}

/// A unary call's future is what callers box (`join_all`, `FuturesUnordered`)
/// or spawn: each time it is moved, all of it is copied, and past about
/// 1 KiB glibc's allocator leaves its fast per-thread cache. It was 1.6 KiB
/// while the deadline wrapper was an `async fn` holding the call twice, and
/// 752 bytes while the open and the read were one `async fn`, 568 as two
/// phases; 472 once a request in one piece went through the mux's
/// `Connection::call` polled in place and a large request's path was boxed;
/// 232 as one hand-written future (observers, timer and phase side by side,
/// a traced call's span boxed), 128 with its deadline timer (a tokio
/// `Sleep`, 112 bytes, held even without a deadline) boxed and recycled
/// by the thread. Under 256 bytes a copy is one unrolled move, not a loop,
/// and a caller's wrapper of it stays under as well.
#[tokio::test]
async fn unary_call_futures_stay_small() {
    let p = pair(router()).await;
    let c = &p.client;
    let raw = c.unary("echo", Bytes::new());
    assert!(
        size_of_val(&raw) <= 128,
        "unary future: {} bytes",
        size_of_val(&raw)
    );
    let with = c.unary_with(
        "echo",
        Bytes::new(),
        &CallOptions::new().timeout(Duration::from_secs(1)),
    );
    assert!(
        size_of_val(&with) <= 128,
        "unary_with future: {} bytes",
        size_of_val(&with)
    );
    let json = c.unary_json::<_, Sum>("add", &Add { a: 1, b: 2 });
    assert!(
        size_of_val(&json) <= 128,
        "unary_json future: {} bytes",
        size_of_val(&json)
    );
    // They are real calls, all the same.
    assert_eq!(raw.await.unwrap(), "");
    assert_eq!(with.await.unwrap(), "");
    assert_eq!(json.await.unwrap(), Sum { n: 3 });
}

/// A raw unary call passes the client's interceptors (they set an entry
/// the handler reads, or refuse the call, which then sends nothing); a
/// client without any sends the plain call's cached metadata.
#[tokio::test]
async fn a_raw_unary_call_passes_the_clients_interceptors() {
    use weft_rpc::Caller;
    let p = pair(router()).await;
    let plain = p.client.clone();
    let stamped = p.client.clone().with_interceptor(|call| {
        if call.method() == "echo" {
            return Err(Status::new(Code::UNAUTHENTICATED, "no echo here"));
        }
        if call.metadata(b"who").is_none() {
            call.set_metadata(b"who", b"interceptor");
        }
        Ok(())
    });
    for _ in 0..2 {
        // the second time, from the plain call's cache
        assert_eq!(
            plain.unary("meta", Bytes::new()).await.unwrap(),
            "meta|?|memory"
        );
        assert_eq!(
            stamped.unary("meta", Bytes::new()).await.unwrap(),
            "meta|interceptor|memory"
        );
    }
    let mine = CallOptions::new().metadata(b"who", b"caller");
    let r = stamped
        .unary_with("meta", Bytes::new(), &mine)
        .await
        .unwrap();
    assert_eq!(r, "meta|caller|memory", "per-call entries win");
    let e = stamped.unary("echo", Bytes::new()).await.unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::UNAUTHENTICATED, "no echo here")
    );
    assert_eq!(
        plain.unary("echo", Bytes::from_static(b"x")).await.unwrap(),
        "x"
    );
}

/// A unary call wrong in more than one way fails with the first problem
/// found: an interceptor's refusal, then the name, then the request's
/// size; with options or without.
#[tokio::test]
async fn a_call_wrong_twice_fails_with_the_first_problem() {
    use weft_rpc::Caller;
    let p = common::pair_with(weft_rpc::Server::new(router()), |c| {
        weft_rpc::Client::with_limits(c, 16, None)
    })
    .await;
    let big = || Bytes::from(vec![0u8; 64]);
    let timed = CallOptions::new().timeout(Duration::from_secs(5));
    for opts in [CallOptions::new(), timed] {
        let c = &p.client;
        let e = c.unary_with("a/../b", big(), &opts).await.unwrap_err();
        assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");
        let e = c.unary_with("echo", big(), &opts).await.unwrap_err();
        assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED, "{e}");
        let refusing = c
            .clone()
            .with_interceptor(|_| Err(Status::new(Code::PERMISSION_DENIED, "no")));
        let e = refusing
            .unary_with("a/../b", big(), &opts)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::PERMISSION_DENIED, "{e}");
    }
}

#[tokio::test]
async fn handler_sees_method_metadata_and_peer() {
    let p = pair(router()).await;
    let opts = CallOptions::new().metadata(b"who", b"tester");
    let r = p
        .client
        .unary_with("/Meta", Bytes::new(), &opts)
        .await
        .unwrap();
    assert_eq!(r, "meta|tester|memory");
}

#[tokio::test]
async fn server_streaming_ends_only_with_ok() {
    let p = pair(router()).await;
    let mut s = p
        .client
        .server_streaming_json("count", &3u32, &CallOptions::new())
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(v) = s.message_json::<u32>().await.unwrap() {
        got.push(v);
    }
    assert_eq!(got, [0, 1, 2]);
    assert_eq!(s.message().await.unwrap(), None); // stays ended

    let mut s = p
        .client
        .server_streaming("fail_after", Bytes::new(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap().unwrap(), "one");
    let e = s.message().await.unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::NOT_FOUND, "gone after one"));
    assert_eq!(s.message().await.unwrap_err().code(), Code::NOT_FOUND);
}

#[tokio::test]
async fn client_streaming() {
    let p = pair(router()).await;
    let mut call = p
        .client
        .client_streaming("sum", &CallOptions::new())
        .await
        .unwrap();
    for v in [1i64, 2, 3, 4] {
        call.send_json(&v).await.unwrap();
    }
    let s: Sum = call.finish_json().await.unwrap();
    assert_eq!(s.n, 10);

    let mut call = p
        .client
        .client_streaming("concat", &CallOptions::new())
        .await
        .unwrap();
    let chunk = Bytes::from(vec![b'x'; 100 * 1024]);
    for _ in 0..5 {
        call.send(chunk.clone()).await.unwrap();
    }
    assert_eq!(call.finish().await.unwrap().len(), 500 * 1024);
}

#[tokio::test]
async fn a_client_streaming_call_is_a_sink() {
    use futures::SinkExt;
    let p = pair(router()).await;
    let mut call = p
        .client
        .client_streaming("concat", &CallOptions::new())
        .await
        .unwrap();
    let parts = ["a", "bc", "def"].map(|w| Ok(Bytes::from(w)));
    call.send_all(&mut futures::stream::iter(parts))
        .await
        .unwrap();
    // A large message goes in two frames through the same path.
    SinkExt::send(&mut call, Bytes::from(vec![b'x'; 100 * 1024]))
        .await
        .unwrap();
    call.close().await.unwrap();
    call.close().await.unwrap(); // idempotent
    let e = SinkExt::send(&mut call, Bytes::from_static(b"late"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FAILED_PRECONDITION);
    let got = call.finish().await.unwrap();
    assert_eq!(&got[..6], b"abcdef");
    assert_eq!(got.len(), 6 + 100 * 1024);

    // The server's status wins over a send error, through the Sink too.
    let mut call = p
        .client
        .client_streaming("nope", &CallOptions::new())
        .await
        .unwrap();
    let sent = SinkExt::send(&mut call, Bytes::from_static(b"x")).await;
    let closed = call.close().await;
    for r in [sent, closed] {
        if let Err(e) = r {
            assert_eq!(e.code(), Code::UNIMPLEMENTED);
        }
    }
    assert_eq!(call.finish().await.unwrap_err().code(), Code::UNIMPLEMENTED);
}

#[tokio::test]
async fn bidi_interleaves() {
    let p = pair(router()).await;
    let mut call = p.client.bidi("upper", &CallOptions::new()).await.unwrap();
    for w in ["a", "bc", "def"] {
        call.send(Bytes::from(w)).await.unwrap();
        let m = call.message().await.unwrap().unwrap();
        assert_eq!(m, w.to_ascii_uppercase());
    }
    call.close_send().await.unwrap();
    call.close_send().await.unwrap(); // idempotent
    let e = call.send(Bytes::from_static(b"late")).await.unwrap_err();
    assert_eq!(e.code(), Code::FAILED_PRECONDITION);
    assert_eq!(call.message_json::<String>().await.unwrap().unwrap(), "bye");
    assert_eq!(call.message().await.unwrap(), None);
}

#[tokio::test]
async fn streaming_call_to_unknown_method_reports_unimplemented() {
    let p = pair(router()).await;
    let mut call = p.client.bidi("nope", &CallOptions::new()).await.unwrap();
    let e = call.message().await.unwrap_err();
    assert_eq!(e.code(), Code::UNIMPLEMENTED);
    let mut call = p
        .client
        .client_streaming("nope", &CallOptions::new())
        .await
        .unwrap();
    // Sending may succeed or fail; finishing reports the server's status.
    let _ = call.send(Bytes::from_static(b"x")).await;
    assert_eq!(call.finish().await.unwrap_err().code(), Code::UNIMPLEMENTED);
}

#[tokio::test]
async fn a_unary_call_to_a_streaming_method_is_an_error_not_a_hang() {
    let p = pair(router()).await;
    let opts = CallOptions::new().timeout(Duration::from_secs(5));
    // `count` answers with 2 messages: a unary caller must not take the first.
    let req = Bytes::from_static(b"2");
    let e = p.client.unary_with("count", req, &opts).await.unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");
    assert!(e.message().contains("it streams its responses"), "{e}");
}

/// A codec of its own, so that a call naming another one is refused.
#[derive(Debug, Clone, Copy)]
struct Upper;

impl weft_rpc::Codec<Bytes> for Upper {
    const NAME: &'static str = "upper";

    fn encode(value: &Bytes, max: usize) -> Result<weft_rpc::codec::Framed, Status> {
        weft_rpc::codec::frame(value.to_ascii_uppercase().into(), max)
    }

    fn decode(body: Bytes) -> Result<Bytes, Status> {
        Ok(body)
    }
}

#[tokio::test]
async fn json_calls_name_their_codec_and_raw_calls_name_none() {
    let p =
        pair(Router::new().unary_codec("up", Upper, |_ctx, b: Bytes| async move { Ok(b) })).await;
    // unary_json names `json`, like the streaming JSON calls: refused.
    let e = p
        .client
        .unary_json::<_, String>("up", "x")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::UNIMPLEMENTED, "{e}");
    assert!(e.message().contains("json"), "{e}");
    // Raw (untyped bytes) names none: any method takes it, through every
    // surface that carries it (the server answers in its codec).
    let raw = Bytes::from_static(b"raw");
    assert_eq!(p.client.unary("up", raw.clone()).await.unwrap(), "RAW");
    let opts = CallOptions::new();
    let typed_raw = p.client.unary_codec("up", weft_rpc::Raw, &raw, &opts);
    assert_eq!(typed_raw.await.unwrap(), "RAW");
    // The codec's own name is accepted.
    let upper: Bytes = p
        .client
        .unary_codec("up", Upper, &raw, &opts)
        .await
        .unwrap();
    assert_eq!(upper, "RAW");
}

/// A handler's cancellation signal fires when its call is cut short (here
/// its deadline passes) and not when it ends cleanly: the server takes the
/// call's entry, signal included, before the status goes, and fires the
/// signal it took only if the end was not clean.
#[tokio::test(start_paused = true)]
async fn a_signal_fires_when_its_call_is_cut_and_only_then() {
    let signals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = signals.clone();
    let router = Router::new().unary("wait", move |ctx, req: Bytes| {
        keep.lock().unwrap().push(ctx.cancellation());
        async move {
            if req.is_empty() {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok(req)
        }
    });
    let p = pair(router).await;
    let quick = p.client.unary("wait", Bytes::from_static(b"x")).await;
    assert_eq!(quick.unwrap(), "x");
    let opts = CallOptions::new().timeout(Duration::from_millis(100));
    let e = p.client.unary_with("wait", Bytes::new(), &opts).await;
    assert_eq!(e.unwrap_err().code(), Code::DEADLINE_EXCEEDED);
    let [clean, cut] = <[_; 2]>::try_from(signals.lock().unwrap().clone()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), cut.cancelled())
        .await
        .expect("the cut call's signal fires");
    assert!(!clean.is_cancelled());
}

/// A unary call past its deadline fails on the client's own timer (here the
/// peer is a bare mux endpoint that never answers and enforces nothing),
/// and its stream is reset then, while the caller still holds the finished
/// future: the peer's handler is not kept waiting for the caller's drop.
#[tokio::test(start_paused = true)]
async fn a_unary_call_past_its_deadline_resets_its_stream_at_once() {
    let config = weft_mux::Config::default();
    let ((conn, _client_incoming), (_server_conn, mut incoming)) =
        weft_testkit::duplex_pair(64 * 1024, config.clone(), config).await;
    let silent = tokio::spawn(async move {
        let mut stream = incoming.accept().await.expect("the call's stream");
        std::future::poll_fn(|cx| stream.poll_reset(cx)).await
    });
    let client = weft_rpc::Client::new(conn);
    let opts = CallOptions::new().timeout(Duration::from_millis(100));
    let mut call = std::pin::pin!(client.unary_with("silent", Bytes::from_static(b"x"), &opts));
    let e = tokio::time::timeout(Duration::from_secs(5), &mut call)
        .await
        .expect("the client's own timer ends the call")
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    let reset = tokio::time::timeout(Duration::from_secs(5), silent)
        .await
        .expect("the peer sees the reset before the call's future is dropped")
        .unwrap();
    assert_eq!(reset.reason(), Some(weft_mux::Reason::CANCEL), "{reset:?}");
    // `call` (pinned on this stack) lives until here.
}

/// A call's deadline timer is recycled: one given back by a call that
/// ended (here armed for 60 s, polled, then dropped) is re-armed by the
/// next call on the thread, which still fails at its own deadline, sends
/// its own remaining time to the server, and resets its stream then.
#[tokio::test(start_paused = true)]
async fn a_recycled_deadline_timer_fires_at_the_next_calls_deadline() {
    let config = weft_mux::Config::default();
    let ((conn, _client_incoming), (_server_conn, mut incoming)) =
        weft_testkit::duplex_pair(64 * 1024, config.clone(), config).await;
    let silent = tokio::spawn(async move {
        let first = incoming.accept().await.expect("the first call's stream");
        let mut second = incoming.accept().await.expect("the second call's stream");
        let sent = [first.metadata().timeout(), second.metadata().timeout()];
        let reset = std::future::poll_fn(|cx| second.poll_reset(cx)).await;
        (sent, reset)
    });
    let client = weft_rpc::Client::new(conn);
    let long = CallOptions::new().timeout(Duration::from_secs(60));
    {
        let mut first =
            std::pin::pin!(client.unary_with("silent", Bytes::from_static(b"x"), &long));
        let polled = tokio::time::timeout(Duration::from_millis(1), &mut first).await;
        assert!(polled.is_err(), "the silent peer never answers");
    }
    let start = tokio::time::Instant::now();
    let short = CallOptions::new().timeout(Duration::from_millis(100));
    let e = tokio::time::timeout(
        Duration::from_secs(5),
        client.unary_with("silent", Bytes::from_static(b"x"), &short),
    )
    .await
    .expect("the call's own deadline ends it, not the recycled timer's old one")
    .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_millis(102),
        "{took:?}"
    );
    let (sent, reset) = tokio::time::timeout(Duration::from_secs(5), silent)
        .await
        .expect("the peer sees both calls and the reset")
        .unwrap();
    assert_eq!(
        sent,
        [
            Some(Duration::from_secs(60)),
            Some(Duration::from_millis(100))
        ]
    );
    assert_eq!(reset.reason(), Some(weft_mux::Reason::CANCEL), "{reset:?}");
}

/// A typed service for [`a_service_method_borrows_its_service_held_once_per_call`]:
/// a running total, and a way to count who holds the service.
struct Tally {
    total: std::sync::atomic::AtomicU32,
    me: std::sync::OnceLock<std::sync::Weak<Tally>>,
}

impl Tally {
    async fn add(&self, n: u32) -> Result<u32, Status> {
        // Suspended once, so the call's future outlives its first poll
        // (boxed and polled again) while it borrows the service.
        tokio::task::yield_now().await;
        let holders = self.me.get().expect("set").strong_count() as u32;
        let total = self.total.fetch_add(n, std::sync::atomic::Ordering::SeqCst) + n;
        Ok(total * 10 + holders)
    }
}

/// [`Tally::add`] as a unary method of the service.
struct AddTo;

impl weft_rpc::UnaryMethod<Tally, u32, u32> for AddTo {
    fn call(
        service: &Tally,
        _ctx: weft_rpc::Context,
        request: u32,
    ) -> impl std::future::Future<Output = Result<u32, Status>> + Send + '_ {
        service.add(request)
    }
}

/// A typed service's unary method runs on the service itself: its future
/// borrows the service, which each call holds once (the test's own
/// reference, the router's and the call's: three), and lets go of after.
/// Its request and reply go through the codec, with the usual errors.
#[tokio::test]
async fn a_service_method_borrows_its_service_held_once_per_call() {
    use std::sync::Arc;
    let service = Arc::new(Tally {
        total: Default::default(),
        me: Default::default(),
    });
    service.me.set(Arc::downgrade(&service)).unwrap();
    let router = Router::new().unary_method("tally/add", weft_rpc::Json, service.clone(), AddTo);
    let p = pair(router).await;
    let opts = CallOptions::new();
    let call = |n: u32| {
        p.client
            .unary_codec::<_, u32, u32>("tally/add", weft_rpc::Json, &n, &opts)
    };
    assert_eq!(call(2).await.unwrap(), 23);
    assert_eq!(call(3).await.unwrap(), 53);
    assert_eq!(
        Arc::strong_count(&service),
        2,
        "the test's and the router's"
    );
    // Not a number: the peer's fault.
    let e = p
        .client
        .unary("tally/add", Bytes::from_static(b"\"x\""))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{e}");
    // Another codec than the method's: refused before the handler.
    let e = p
        .client
        .unary_codec::<_, Bytes, Bytes>("tally/add", Upper, &Bytes::from_static(b"1"), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::UNIMPLEMENTED, "{e}");
    assert_eq!(service.total.load(std::sync::atomic::Ordering::SeqCst), 5);
}
