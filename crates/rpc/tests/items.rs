//! Hostile-catalogue items 36–41: calls.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use common::{Probe, pair, pair_with, settle};
use tokio::time::Instant;
use weft_frame::Metadata;
use weft_frame::metadata::tag;
use weft_rpc::{CallOptions, Client, Code, Router, Server, Status};

fn slow_router(probe: Probe) -> Router {
    let p2 = probe.clone();
    let p3 = probe.clone();
    let p4 = probe.clone();
    Router::new()
        .unary("echo", |_c, b| async move { Ok(b) })
        .unary("slow", move |ctx, _b| {
            let g = probe.enter();
            async move {
                assert!(ctx.deadline().is_some() || ctx.metadata().get(b"nodeadline").is_some());
                tokio::time::sleep(Duration::from_secs(3600)).await;
                g.finish();
                Ok(Bytes::from_static(b"late"))
            }
        })
        .server_streaming("slow_stream", move |_c, _b, mut sink| {
            let g = p2.enter();
            async move {
                loop {
                    sink.send(Bytes::from_static(b"tick")).await?;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    if false {
                        g.finish();
                        return Ok(());
                    }
                }
            }
        })
        .server_streaming("quiet_stream", {
            let p4 = p4.clone();
            move |_c, _b, _sink| {
                let g = p4.enter();
                async move {
                    std::future::pending::<()>().await;
                    g.finish();
                    Ok(())
                }
            }
        })
        .client_streaming("drain", move |_c, mut rx| {
            let g = p3.enter();
            async move {
                let mut n = 0usize;
                while let Some(m) = rx.message().await? {
                    n += m.len();
                }
                g.finish();
                Ok(Bytes::from(n.to_string()))
            }
        })
}

/// Sends an OPEN with a raw timeout value straight on the mux.
async fn raw_call(client: &Client, meta: Metadata) -> (Option<u32>, Option<String>) {
    let mut s = client
        .connection()
        .open(meta, Bytes::from_static(&[0, 0, 0, 0]), true)
        .await
        .unwrap();
    let mut trailers = Metadata::new();
    while let Some(c) = s.recv().await.unwrap() {
        if c.end {
            trailers = c.metadata;
        }
    }
    (trailers.status(), trailers.message().map(str::to_owned))
}

#[tokio::test(start_paused = true)]
async fn item_36_slow_handler_past_deadline() {
    let probe = Probe::default();
    let p = pair(slow_router(probe.clone())).await;
    let start = Instant::now();
    let opts = CallOptions::new().timeout(Duration::from_millis(100));
    let e = p
        .client
        .unary_with("slow", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_millis(150),
        "{took:?}"
    );
    // The server dropped the handler at the deadline, unfinished.
    assert!(settle(|| probe.dropped() == 1).await);
    assert_eq!((probe.started(), probe.finished()), (1, 0));
    // No late response leaks into the next call on the connection.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let r = p
        .client
        .unary("echo", Bytes::from_static(b"next"))
        .await
        .unwrap();
    assert_eq!(r, "next");

    // Malformed, negative and huge deadline values: INVALID_ARGUMENT, per call.
    for micros in [u64::MAX, 1u64 << 63, 8 * 24 * 3600 * 1_000_000] {
        let meta = Metadata::builder()
            .method("echo")
            .raw(tag::TIMEOUT, &[], &micros.to_be_bytes())
            .finish();
        let (code, msg) = raw_call(&p.client, meta).await;
        assert_eq!(code, Some(Code::INVALID_ARGUMENT.0), "{micros}: {msg:?}");
    }
    // Zero: already late, the handler never runs.
    let meta = Metadata::builder()
        .method("slow")
        .timeout(Duration::ZERO)
        .finish();
    assert_eq!(
        raw_call(&p.client, meta).await.0,
        Some(Code::DEADLINE_EXCEEDED.0)
    );
    assert_eq!(probe.started(), 1);
    // A timeout the client itself refuses to send.
    let huge = CallOptions::new().timeout(Duration::from_secs(30 * 24 * 3600));
    let e = p
        .client
        .unary_with("echo", Bytes::new(), &huge)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT);
    // A deadline already passed when the call starts.
    let past = CallOptions::new().deadline(Instant::now());
    let e = p
        .client
        .unary_with("echo", Bytes::new(), &past)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED);
    assert_eq!(
        p.client
            .unary("echo", Bytes::from_static(b"ok"))
            .await
            .unwrap(),
        "ok"
    );
}

/// Polls `fut` `n` times (letting the other tasks run between polls), then
/// drops it. Returns whether it completed first.
async fn poll_n_then_drop<F: Future>(fut: F, n: usize) -> bool {
    let mut fut = pin!(fut);
    for _ in 0..n {
        let ready = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_ready())).await;
        if ready {
            return true;
        }
        tokio::task::yield_now().await;
    }
    false
}

/// Polls `fut` until `started` holds (then drops it); false if it finished.
async fn drop_once<F: Future>(fut: F, started: impl Fn() -> bool) -> bool {
    let mut fut = pin!(fut);
    for _ in 0..10_000 {
        if started() {
            return false;
        }
        let ready = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_ready())).await;
        if ready {
            return true;
        }
        tokio::task::yield_now().await;
    }
    panic!("the handler never started");
}

#[tokio::test(start_paused = true)]
async fn a_waiting_handler_is_dropped_as_soon_as_its_caller_resets() {
    let probe = Probe::default();
    let p = pair(slow_router(probe.clone())).await;
    let nodl = CallOptions::new().metadata(b"nodeadline", b"1");
    // A unary handler that has read its whole request and waits.
    let call = p.client.unary_with("slow", Bytes::new(), &nodl);
    assert!(!drop_once(call, || probe.started() == 1).await);
    // The clock is paused and `settle` only yields, so no timer can fire:
    // the handler must be dropped by the reset's own wake-up.
    let t0 = Instant::now();
    assert!(
        settle(|| probe.dropped() == 1).await,
        "a unary handler outlived its caller's reset"
    );
    // A server-streaming handler that waits without sending (the call
    // waits for its first frame, so it is the call that is dropped).
    let opts = CallOptions::new();
    let call = p
        .client
        .server_streaming("quiet_stream", Bytes::new(), &opts);
    assert!(!drop_once(call, || probe.started() == 2).await);
    assert!(
        settle(|| probe.dropped() == 2).await,
        "a streaming handler outlived its caller's reset"
    );
    assert_eq!(Instant::now(), t0, "virtual time passed");
    assert_eq!(probe.finished(), 0);
}

#[tokio::test(start_paused = true)]
async fn item_37_cancellation_races() {
    let probe = Probe::default();
    let p = pair(slow_router(probe.clone())).await;
    let nodl = CallOptions::new().metadata(b"nodeadline", b"1");
    // Unary: drop at every await point.
    for n in 0..12 {
        let done = poll_n_then_drop(p.client.unary_with("slow", Bytes::new(), &nodl), n).await;
        assert!(!done);
    }
    // Every started handler is dropped (the caller's reset reaches it) and
    // none finished: exactly one terminal outcome each.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(settle(|| probe.dropped() == probe.started()).await);
    assert_eq!(probe.finished(), 0);
    let unary_started = probe.started();

    // Streaming: drop the handle after some messages.
    for n in 0..4 {
        let mut s = p
            .client
            .server_streaming("slow_stream", Bytes::new(), &CallOptions::new())
            .await
            .unwrap();
        for _ in 0..n {
            assert_eq!(s.message().await.unwrap().unwrap(), "tick");
        }
        drop(s);
    }
    // A streaming handler that waits without sending is dropped too (with
    // its call, which waits for the first frame).
    let opts = CallOptions::new();
    let call = p
        .client
        .server_streaming("quiet_stream", Bytes::new(), &opts);
    let before = probe.started();
    assert!(!drop_once(call, || probe.started() == before + 1).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(settle(|| probe.dropped() == probe.started()).await);
    assert!(probe.started() >= unary_started + 5);

    // Cancel together with the final message; cancel twice (drop a call
    // whose request side is already closed, then the next).
    let before = probe.finished();
    let mut c = p
        .client
        .client_streaming("drain", &CallOptions::new())
        .await
        .unwrap();
    c.send(Bytes::from_static(b"last")).await.unwrap();
    drop(c);
    let mut c = p
        .client
        .client_streaming("drain", &CallOptions::new())
        .await
        .unwrap();
    c.send(Bytes::from_static(b"x")).await.unwrap();
    let fin = c.finish();
    assert!(!poll_n_then_drop(fin, 1).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(settle(|| probe.dropped() == probe.started()).await);
    // At most the second could finish (its end was sent before the drop).
    assert!(probe.finished() - before <= 1);

    // No leaked credit: a transfer larger than the connection window still
    // goes through, and calls still work.
    let big = Bytes::from(vec![1u8; 1536 * 1024]);
    let mut c = p
        .client
        .client_streaming("drain", &CallOptions::new())
        .await
        .unwrap();
    for _ in 0..2 {
        c.send(big.clone()).await.unwrap();
    }
    assert_eq!(c.finish().await.unwrap(), (2 * big.len()).to_string());
    assert_eq!(
        p.client
            .unary("echo", Bytes::from_static(b"ok"))
            .await
            .unwrap(),
        "ok"
    );
}

#[tokio::test]
async fn item_38_peer_crash_mid_stream_is_an_error_not_an_end() {
    let probe = Probe::default();
    let p = pair(slow_router(probe.clone())).await;
    let mut s = p
        .client
        .server_streaming("slow_stream", Bytes::new(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap().unwrap(), "tick");
    assert_eq!(s.message().await.unwrap().unwrap(), "tick");
    p.cut.cut();
    let e = loop {
        match s.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("a crash read as a clean end"),
            Err(e) => break e,
        }
    };
    assert_eq!(e.code(), Code::UNAVAILABLE, "{e}");
    let e = p.client.unary("echo", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
    assert!(p.client.is_closed());
}

#[tokio::test(start_paused = true)]
async fn item_39_shutdown_with_calls_in_flight() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r2 = runs.clone();
    let router = Router::new().unary("work", move |_c, b| {
        r2.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            Ok(b)
        }
    });
    let p = pair(router).await;
    let mut calls = Vec::new();
    for i in 0..3u8 {
        let c = p.client.clone();
        calls.push(tokio::spawn(async move {
            c.unary("work", Bytes::from(vec![i])).await
        }));
    }
    assert!(settle(|| runs.load(Ordering::SeqCst) == 3).await);
    let server_conn = p.server_conn.clone();
    let shut = tokio::spawn(async move { server_conn.shutdown(Duration::from_secs(5)).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    // A call opened after the GOAWAY fails retry-safe and never runs.
    let e = p.client.unary("work", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
    assert!(e.is_retry_safe(), "{e:?}");
    // Calls in flight finish.
    for (i, c) in calls.into_iter().enumerate() {
        assert_eq!(c.await.unwrap().unwrap(), Bytes::from(vec![i as u8]));
    }
    shut.await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3, "nothing ran twice or late");
}

#[tokio::test]
async fn item_40_oversize_unknown_and_odd_names() {
    let server = Server::new(Router::new().unary("svc/echo", |_c, b| async move { Ok(b) }))
        .max_message(1024);
    let p = pair_with(server, |c| Client::with_limits(c, 4096, None)).await;
    let c = &p.client;
    // Oversize request (over the server's limit, under the client's).
    let e = c
        .unary("svc/echo", Bytes::from(vec![0u8; 2000]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED, "{e}");
    // Oversize for the client itself: refused before sending.
    let e = c
        .unary("svc/echo", Bytes::from(vec![0u8; 5000]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED);
    // Unknown method.
    let e = c.unary("svc/nope", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNIMPLEMENTED);
    // Odd spellings route to the canonical method.
    for n in ["/svc/echo", "SVC/Echo", "//svc//echo/"] {
        assert_eq!(
            c.unary(n, Bytes::from_static(b"x")).await.unwrap(),
            "x",
            "{n}"
        );
    }
    // Malformed names: refused by the client, and by the server if sent raw.
    let e = c.unary("svc/../echo", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT);
    for name in ["svc/../echo", "a b", "", "é"] {
        let meta = Metadata::builder().method(name).finish();
        assert_eq!(
            raw_call(c, meta).await.0,
            Some(Code::INVALID_ARGUMENT.0),
            "{name:?}"
        );
    }
    // No method entry at all.
    assert_eq!(
        raw_call(c, Metadata::new()).await.0,
        Some(Code::INVALID_ARGUMENT.0)
    );
    // Oversize response: the client's limit.
    let p2 = pair_with(
        Server::new(Router::new().unary("big", |_c, _b| async move {
            Ok(Bytes::from(vec![1u8; 10_000]))
        })),
        |c| Client::with_limits(c, 4096, None),
    )
    .await;
    let e = p2.client.unary("big", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED);
    // Each failure was that call's only: the connections live.
    assert_eq!(
        c.unary("svc/echo", Bytes::from_static(b"alive"))
            .await
            .unwrap(),
        "alive"
    );
    assert!(!p2.client.is_closed());
}

/// A name keeps its declared case on the wire and in the handler; a call
/// spelled as an earlier release lower-cased it still arrives, and the
/// handler (and every check keyed on `Context::method`) sees the declared
/// name, never the caller's spelling.
#[tokio::test]
async fn declared_case_is_what_the_handler_sees_whatever_the_callers_case() {
    let router = Router::new().unary("userdir.Users/BulkUpload", |ctx, _b| async move {
        Ok(Bytes::copy_from_slice(ctx.method().as_bytes()))
    });
    let p = pair(router).await;
    for n in [
        "userdir.Users/BulkUpload",
        "/userdir.Users/BulkUpload",
        "userdir.users/bulkupload",
        "USERDIR.USERS/BULKUPLOAD",
    ] {
        let got = p.client.unary(n, Bytes::new()).await.unwrap();
        assert_eq!(got, "userdir.Users/BulkUpload", "{n}");
    }
    let e = p
        .client
        .unary("userdir.Users/Bulk", Bytes::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::UNIMPLEMENTED);
}

#[tokio::test]
async fn item_41_handler_panic_is_internal_and_the_connection_lives() {
    #[allow(unreachable_code)]
    let router = Router::new()
        .unary("echo", |_c, b| async move { Ok(b) })
        .unary("boom_async", |_c, _b| async move {
            panic!("handler bug");
            Ok(Bytes::new())
        })
        .unary(
            "boom_sync",
            |_c, _b| -> std::future::Ready<Result<Bytes, Status>> {
                panic!("handler bug before its future")
            },
        )
        .bidi("boom_stream", |_c, mut s| async move {
            s.send(Bytes::from_static(b"first")).await?;
            panic!("streaming handler bug")
        });
    let p = pair(router).await;
    for m in ["boom_async", "boom_sync"] {
        let e = p.client.unary(m, Bytes::new()).await.unwrap_err();
        assert_eq!(e.code(), Code::INTERNAL, "{m}");
        assert!(e.message().contains("panicked"));
    }
    let mut b = p
        .client
        .bidi("boom_stream", &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(b.message().await.unwrap().unwrap(), "first");
    assert_eq!(b.message().await.unwrap_err().code(), Code::INTERNAL);
    assert_eq!(
        p.client
            .unary("echo", Bytes::from_static(b"alive"))
            .await
            .unwrap(),
        "alive"
    );
}

#[tokio::test(start_paused = true)]
async fn deadline_reaches_the_handler_and_its_nested_call() {
    // Inner service reports the remaining time it saw, in microseconds.
    let inner = pair(Router::new().unary("remaining", |ctx, _b| async move {
        let left = ctx.remaining().map_or(0, |d| d.as_micros());
        Ok(Bytes::from(left.to_string()))
    }))
    .await;
    let inner_client = inner.client.clone();
    let outer = pair(Router::new().unary("outer", move |ctx, _b| {
        let c = inner_client.clone();
        async move {
            let mine = ctx.remaining().expect("the caller's deadline is visible");
            tokio::time::sleep(Duration::from_millis(300)).await;
            let theirs = c
                .unary_with("remaining", Bytes::new(), &ctx.call_options())
                .await?;
            Ok(Bytes::from(format!(
                "{}|{}",
                mine.as_micros(),
                String::from_utf8_lossy(&theirs)
            )))
        }
    }))
    .await;
    let opts = CallOptions::new().timeout(Duration::from_secs(2));
    let r = outer
        .client
        .unary_with("outer", Bytes::new(), &opts)
        .await
        .unwrap();
    let r = String::from_utf8(r.to_vec()).unwrap();
    let (mine, theirs) = r.split_once('|').unwrap();
    let (mine, theirs): (u64, u64) = (mine.parse().unwrap(), theirs.parse().unwrap());
    assert!(mine <= 2_000_000 && mine > 1_900_000, "{mine}");
    // The nested call carried the rest: 2 s minus the 300 ms spent.
    assert!(theirs <= 1_700_000 && theirs > 1_600_000, "{theirs}");

    // And the nested call gives up when the outer caller would.
    let opts = CallOptions::new().timeout(Duration::from_millis(200));
    let e = outer
        .client
        .unary_with("outer", Bytes::new(), &opts)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED);
}
