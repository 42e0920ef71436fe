//! The channel on one endpoint: lazy connect, idle replacement, backoff
//! timing, fail-fast, deadlines, GOAWAY and a killed-and-restarted server
//! during load. Paused clocks over in-memory pipes where time matters;
//! real loopback sockets where a server must die or re-bind its port.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use weft::{Backoff, CallOptions, Channel, Code, Config, Endpoint, Error, Listener, Router};

mod support;
use support::{Proxy, echo_router};

/// An endpoint serving `router` over a new in-memory pipe per connection,
/// counting connections.
fn memory_endpoint(config: Config, connects: Arc<AtomicUsize>) -> Endpoint {
    Endpoint::from_fn("memory", move || {
        connects.fetch_add(1, Ordering::SeqCst);
        let config = config.clone();
        async move { weft::memory(echo_router(), &config).await }
    })
}

/// An endpoint whose first `fail` connects fail, recording when each
/// attempt started.
fn flaky_endpoint(fail: usize, attempts: Arc<std::sync::Mutex<Vec<Instant>>>) -> Endpoint {
    Endpoint::from_fn("flaky", move || {
        let n = {
            let mut a = attempts.lock().unwrap();
            a.push(Instant::now());
            a.len()
        };
        async move {
            if n <= fail {
                Err(Error::Io(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "refused (test)",
                )))
            } else {
                weft::memory(echo_router(), &Config::new()).await
            }
        }
    })
}

#[tokio::test(start_paused = true)]
async fn lazy_connect_then_idle_timeout_then_a_call_succeeds() {
    let connects = Arc::new(AtomicUsize::new(0));
    let channel = Channel::builder().endpoint(memory_endpoint(Config::new(), connects.clone()));
    // Lazy: nothing connected yet.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(connects.load(Ordering::SeqCst), 0);
    let hi = Bytes::from_static(b"hi");
    assert_eq!(channel.unary("echo", hi.clone()).await.unwrap(), hi);
    assert_eq!(connects.load(Ordering::SeqCst), 1);
    // Past the 30 s idle timeout the connection closes; the next call
    // gets a new one instead of `UNAVAILABLE: connection closed`.
    let first = channel.client().await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(first.is_closed(), "the idle timeout closed the connection");
    assert_eq!(channel.unary("echo", hi.clone()).await.unwrap(), hi);
    assert_eq!(connects.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn reconnects_on_grpc_backoff_schedule() {
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let channel = Channel::builder()
        .backoff(Backoff::new().jitter(0.0))
        .endpoint(flaky_endpoint(4, attempts.clone()));
    let start = Instant::now();
    // The call waits through four failed attempts (no deadline).
    let r = channel.unary("echo", Bytes::from_static(b"x")).await;
    assert_eq!(r.unwrap(), "x");
    let offsets: Vec<f64> = attempts
        .lock()
        .unwrap()
        .iter()
        .map(|t| (*t - start).as_secs_f64())
        .collect();
    // 1 s, then ×1.6 each: 0, 1, 2.6, 5.16, 9.256.
    let want = [0.0, 1.0, 2.6, 5.16, 9.256];
    assert_eq!(offsets.len(), want.len(), "{offsets:?}");
    for (g, w) in offsets.iter().zip(want) {
        assert!((g - w).abs() < 0.002, "{offsets:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_deadline_bounds_the_wait_for_a_connection() {
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let channel = Channel::builder().endpoint(flaky_endpoint(usize::MAX, attempts.clone()));
    let start = Instant::now();
    let opts = CallOptions::new().timeout(Duration::from_secs(3));
    let e = channel
        .unary_with("echo", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED);
    assert_eq!(Instant::now() - start, Duration::from_secs(3));
    // Attempts at 0, 1 s and 2.6 s (± jitter on the last).
    assert_eq!(attempts.lock().unwrap().len(), 3);
}

/// Polls `f` once with a no-op waker.
fn first_poll<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[tokio::test(start_paused = true)]
async fn fail_fast_fails_retry_safe_but_never_on_the_first_poll() {
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let channel = Channel::builder()
        .fail_fast(true)
        .endpoint(flaky_endpoint(usize::MAX, attempts.clone()));
    let e = channel.unary("echo", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
    assert!(e.is_retry_safe(), "{e}");
    assert!(e.message().contains("refused (test)"), "{e}");
    // Now backing off: the call fails without waiting, yet not on its
    // first poll, so a retry loop around it yields to the runtime.
    let call = channel.unary("echo", Bytes::new());
    let mut call = std::pin::pin!(call);
    assert!(first_poll(call.as_mut()).is_pending());
    let e = call.await.unwrap_err();
    assert!(e.is_retry_safe());
    assert_eq!(
        attempts.lock().unwrap().len(),
        1,
        "no attempt during backoff"
    );
}

#[tokio::test(start_paused = true)]
async fn a_local_failure_is_not_ready_on_the_first_poll() {
    let channel = Channel::builder().endpoint(memory_endpoint(Config::new(), Arc::default()));
    channel.unary("echo", Bytes::new()).await.unwrap();
    // Connected; a malformed method name fails before anything is sent.
    let call = channel.unary("no spaces/", Bytes::new());
    let mut call = std::pin::pin!(call);
    assert!(first_poll(call.as_mut()).is_pending());
    assert_eq!(call.await.unwrap_err().code(), Code::INVALID_ARGUMENT);
}

#[tokio::test(start_paused = true)]
async fn connections_are_replaced_after_their_call_limit_without_failing_calls() {
    let connects = Arc::new(AtomicUsize::new(0));
    let channel = Channel::builder()
        .max_calls_per_connection(Some(10))
        .endpoint(memory_endpoint(Config::new(), connects.clone()));
    for i in 0..35u32 {
        let b = Bytes::from(i.to_string());
        assert_eq!(channel.unary("echo", b.clone()).await.unwrap(), b);
    }
    assert_eq!(connects.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn non_retry_safe_failures_are_not_retried_unless_idempotent() {
    const FLAKY: &str = "test.Flaky/Call";
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    // The first call after a reset of `calls` fails `UNAVAILABLE` (not
    // retry-safe: it was sent).
    let router = Router::new().unary(FLAKY, move |_ctx, _req: Bytes| {
        let n = c2.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                Err(weft::Status::unavailable("first call fails"))
            } else {
                Ok(Bytes::from_static(b"ok"))
            }
        }
    });
    let endpoint = Endpoint::from_fn("m", move || {
        let r = router.clone();
        async move { weft::memory(r, &Config::new()).await }
    });
    let plain = Channel::builder().endpoint(endpoint.clone());
    let e = plain.unary(FLAKY, Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "sent once");
    // Declared by the call...
    calls.store(0, Ordering::SeqCst);
    let idem = CallOptions::new().idempotent();
    assert_eq!(
        plain.unary_with(FLAKY, Bytes::new(), &idem).await.unwrap(),
        "ok"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2, "retried once");
    // ... or on the builder, in any case.
    calls.store(0, Ordering::SeqCst);
    let declared = Channel::builder()
        .idempotent("test.flaky/call")
        .endpoint(endpoint);
    assert_eq!(declared.unary(FLAKY, Bytes::new()).await.unwrap(), "ok");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "retried once");
}

#[tokio::test(start_paused = true)]
async fn retries_stop_when_the_budget_is_spent() {
    // An idempotent method whose handler always fails `UNAVAILABLE`: each
    // failure is retried until the budget's reserve of 3 retries is spent.
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    let router = Router::new().unary("down", move |_ctx, _req: Bytes| {
        c2.fetch_add(1, Ordering::SeqCst);
        async { Err::<Bytes, _>(weft::Status::unavailable("down")) }
    });
    let channel = Channel::builder()
        .retry_budget(Duration::from_secs(1), 3, 0.0)
        .endpoint(Endpoint::from_fn("m", move || {
            let r = router.clone();
            async move { weft::memory(r, &Config::new()).await }
        }));
    let idem = CallOptions::new().idempotent();
    let e = channel
        .unary_with("down", Bytes::new(), &idem)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 4, "one call and 3 retries");
    // Spent: the next call is sent once.
    channel
        .unary_with("down", Bytes::new(), &idem)
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn over_the_servers_stream_cap_calls_wait_on_the_same_connection() {
    // The server takes one stream at a time; eight concurrent calls are
    // refused past it (retry-safe) and retried as room frees, all on the
    // one connection: a refusal over the cap does not replace it.
    let connects = Arc::new(AtomicUsize::new(0));
    let one_at_a_time = Config::new().max_concurrent_streams(1);
    let channel = Channel::builder().endpoint(memory_endpoint(one_at_a_time, connects.clone()));
    let calls = (0..8).map(|i| {
        let ch = channel.clone();
        tokio::spawn(async move {
            let b = Bytes::from(format!("{i}"));
            assert_eq!(ch.unary("slow", b.clone()).await.unwrap(), b);
        })
    });
    for c in calls.collect::<Vec<_>>() {
        c.await.unwrap();
    }
    assert_eq!(connects.load(Ordering::SeqCst), 1);
}

/// Runs `callers` tasks making calls until `total` succeeded or failed;
/// returns the failures.
async fn load(channel: &Channel, callers: usize, total: usize) -> Vec<weft::Status> {
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..callers {
        let (ch, done) = (channel.clone(), done.clone());
        tasks.spawn(async move {
            let mut failed = Vec::new();
            while done.fetch_add(1, Ordering::SeqCst) < total {
                let opts = CallOptions::new().timeout(Duration::from_secs(10));
                match ch.unary_with("slow", Bytes::from_static(b"x"), &opts).await {
                    Ok(b) => assert_eq!(b, "x"),
                    Err(e) => failed.push(e),
                }
            }
            failed
        });
    }
    let mut failed = Vec::new();
    while let Some(r) = tasks.join_next().await {
        failed.extend(r.unwrap());
    }
    failed
}

fn fast_backoff() -> Backoff {
    Backoff::new()
        .base(Duration::from_millis(20))
        .max(Duration::from_millis(100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goaway_during_load_loses_nothing() {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let first_hits = Arc::new(AtomicUsize::new(0));
    let first = support::serve_router(listener, first_hits.clone(), Duration::ZERO);
    let channel = Channel::builder()
        .backoff(fast_backoff())
        .connect_lazy(&addr, &Config::new())
        .unwrap();
    let run = tokio::spawn({
        let ch = channel.clone();
        async move { load(&ch, 16, 3000).await }
    });
    // The load is under way on the first server.
    let under_way = || (first_hits.load(Ordering::Relaxed) >= 100).then_some(());
    weft_testkit::eventually(under_way, || "no call reached the first server").await;
    // Graceful: GOAWAY, calls in flight finish, new opens are refused
    // retry-safe and retried on the next server at the same address.
    first.stop_and_wait().await;
    let hits = Arc::new(AtomicUsize::new(0));
    let listener = Listener::bind(&addr).await.unwrap();
    let _second = support::serve_router(listener, hits.clone(), Duration::ZERO);
    let failed = run.await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    assert!(
        hits.load(Ordering::Relaxed) > 0,
        "the load outlived the first server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_and_restarted_mid_load() {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let served = Arc::new(AtomicUsize::new(0));
    let backend = support::serve_router(listener, served.clone(), Duration::ZERO);
    let mut proxy = Proxy::start("127.0.0.1:0", backend.addr.clone()).await;
    let front = proxy.addr.clone();
    let channel = Channel::builder()
        .backoff(fast_backoff())
        .connect_lazy(&front, &Config::new())
        .unwrap();
    let callers = 16;
    let run = tokio::spawn({
        let ch = channel.clone();
        async move { load(&ch, callers, 4000).await }
    });
    for _ in 0..2 {
        // Calls flow through this proxy.
        let before = served.load(Ordering::Relaxed);
        let flowing = || (served.load(Ordering::Relaxed) >= before + 100).then_some(());
        weft_testkit::eventually(flowing, || "no call got through the proxy").await;
        // Killed: every connection through the front cut at once.
        proxy.kill();
        tokio::time::sleep(Duration::from_millis(50)).await;
        proxy = Proxy::start(&front, backend.addr.clone()).await;
    }
    let failed = run.await.unwrap();
    eprintln!("killed twice mid-load: {} calls failed", failed.len());
    assert!(
        proxy.accepted.load(Ordering::Relaxed) > 0,
        "the load outlived both kills"
    );
    // Only calls in flight on a dead connection fail, at most one per
    // caller per kill, and none of them was refused retry-safe.
    assert!(failed.len() <= 2 * callers, "{} failed", failed.len());
    for e in &failed {
        assert_eq!(e.code(), Code::UNAVAILABLE, "{e}");
        assert!(!e.is_retry_safe(), "{e}");
    }
}
