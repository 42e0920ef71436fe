//! Every call shape through a [`Channel`], and how a channel fixes a call's
//! deadline: its own options first, else the channel's `call_timeout`,
//! covering the wait for a connection as well as the call. In memory on a
//! paused clock, so each elapsed time below is exact, not a speed claim.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use weft::{CallOptions, Channel, Code, Config, Endpoint, Error, Router, Status};

mod support;
use support::{echo_router, streaming_shapes};

/// The shapes [`streaming_shapes`] serves, plus `count` (server
/// streaming: the request's first byte as a count of numbered messages),
/// `add` (JSON) and `hang` (never answers).
fn router() -> Router {
    streaming_shapes(echo_router())
        .server_streaming("count", |_c, req, mut sink| async move {
            for i in 0..req.first().copied().unwrap_or(0) {
                sink.send(Bytes::from(vec![i])).await?;
            }
            Ok(())
        })
        .unary_json("add", |_c, (a, b): (i64, i64)| async move { Ok(a + b) })
        .unary("hang", |_c, _req: Bytes| async move {
            std::future::pending::<Result<Bytes, Status>>().await
        })
}

/// An endpoint serving [`router`] over a new in-memory pipe per connect,
/// counting the connects.
fn memory(connects: Arc<AtomicUsize>) -> Endpoint {
    Endpoint::from_fn("memory", move || {
        connects.fetch_add(1, Ordering::SeqCst);
        async move { weft::memory(router(), &Config::new()).await }
    })
}

/// An endpoint that never connects.
fn unreachable() -> Endpoint {
    Endpoint::from_fn("down", || async {
        Err(Error::Connect(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )))
    })
}

#[tokio::test(start_paused = true)]
async fn every_call_shape_goes_through_a_channel() {
    let connects = Arc::new(AtomicUsize::new(0));
    // Zero connections per endpoint means one, not a channel that cannot
    // place a call.
    let channel = Channel::builder()
        .connections(0)
        .endpoint(memory(connects.clone()));
    let none = CallOptions::new();

    let sum: i64 = channel.unary_json("add", &(40, 2)).await.unwrap();
    assert_eq!(sum, 42);

    let mut counted = channel
        .server_streaming("count", Bytes::from_static(&[3]), &none)
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(m) = counted.message().await.unwrap() {
        got.push(m);
    }
    assert_eq!(got, [&[0u8][..], &[1], &[2]]);

    let mut concat = channel.client_streaming("concat", &none).await.unwrap();
    concat.send(Bytes::from_static(b"ab")).await.unwrap();
    concat.send(Bytes::from_static(b"cd")).await.unwrap();
    assert_eq!(concat.finish().await.unwrap(), "abcd");

    let mut upper = channel.bidi("upper", &none).await.unwrap();
    upper.send(Bytes::from_static(b"one")).await.unwrap();
    assert_eq!(upper.message().await.unwrap().unwrap(), "ONE");
    upper.send(Bytes::from_static(b"two")).await.unwrap();
    upper.close_send().await.unwrap();
    assert_eq!(upper.message().await.unwrap().unwrap(), "TWO");
    assert_eq!(upper.message().await.unwrap(), None);

    // All of it on the one connection.
    assert_eq!(connects.load(Ordering::SeqCst), 1);
}

/// Runs `call`, which must fail with `DEADLINE_EXCEEDED` after `after`
/// (on the paused clock: to the timer wheel's millisecond).
async fn late_by<T: std::fmt::Debug>(
    call: impl Future<Output = Result<T, Status>>,
    after: Duration,
) {
    let start = Instant::now();
    // Bounded, so that a call that ignores its deadline fails the test
    // instead of waiting (on the paused clock) for ever.
    let e = tokio::time::timeout(after * 10 + Duration::from_secs(1), call)
        .await
        .expect("the call must end by its deadline")
        .expect_err("the call cannot succeed");
    let took = start.elapsed();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    assert!(
        took >= after && took < after + Duration::from_millis(10),
        "ended after {took:?}, not {after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_channel_call_timeout_bounds_calls_that_set_no_deadline() {
    let channel = Channel::builder()
        .call_timeout(Some(Duration::from_secs(5)))
        .endpoint(memory(Arc::default()));
    let secs = Duration::from_secs;
    // No options: the channel's timeout.
    late_by(channel.unary("hang", Bytes::new()), secs(5)).await;
    // The call's own timeout replaces the channel's, longer or shorter.
    let opts = CallOptions::new().timeout(secs(8));
    late_by(channel.unary_with("hang", Bytes::new(), &opts), secs(8)).await;
    // So does its own deadline.
    let opts = CallOptions::new().deadline(Instant::now() + secs(2));
    late_by(channel.unary_with("hang", Bytes::new(), &opts), secs(2)).await;
    // Both set: the earlier wins.
    let opts = CallOptions::new()
        .deadline(Instant::now() + secs(3))
        .timeout(secs(1));
    late_by(channel.unary_with("hang", Bytes::new(), &opts), secs(1)).await;
    let opts = CallOptions::new()
        .deadline(Instant::now() + secs(1))
        .timeout(secs(3));
    late_by(channel.unary_with("hang", Bytes::new(), &opts), secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn the_call_timeout_covers_the_wait_for_a_connection() {
    let channel = Channel::builder()
        .call_timeout(Some(Duration::from_secs(3)))
        .endpoint(unreachable());
    let late = Duration::from_secs(3);
    // Without fail-fast a call waits for a connection, until its deadline.
    late_by(channel.unary("echo", Bytes::new()), late).await;
    late_by(channel.client(), late).await;
    let none = CallOptions::new();
    late_by(channel.server_streaming("count", Bytes::new(), &none), late).await;
    late_by(channel.client_streaming("concat", &none), late).await;
    late_by(channel.bidi("upper", &none), late).await;
    late_by(channel.unary_json::<_, i64>("add", &(1, 2)), late).await;
}

/// Without a channel `call_timeout`, a call's own timeout is fixed as its
/// deadline once and covers the wait for a connection too, not only each
/// attempt (the common call, which sets none, skips that work).
#[tokio::test(start_paused = true)]
async fn a_calls_own_timeout_covers_the_wait_for_a_connection() {
    let channel = Channel::builder().endpoint(unreachable());
    let secs = Duration::from_secs;
    let opts = CallOptions::new().timeout(secs(2));
    late_by(channel.unary_with("echo", Bytes::new(), &opts), secs(2)).await;
    let opts = CallOptions::new().deadline(Instant::now() + secs(1));
    late_by(channel.unary_with("echo", Bytes::new(), &opts), secs(1)).await;
}

#[test]
fn a_channel_and_its_endpoints_name_themselves_when_debugged() {
    let e = Endpoint::new("127.0.0.1:1", &Config::new()).unwrap();
    assert!(format!("{e:?}").contains("127.0.0.1:1"), "{e:?}");
}

#[tokio::test]
async fn a_dns_channel_resolves_and_calls() {
    let listener = weft::Listener::bind("127.0.0.1:0").await.unwrap();
    let server = support::serve(listener);
    let channel = Channel::builder()
        .dns(&server.addr, &Config::new(), Duration::from_secs(60))
        .unwrap();
    assert!(format!("{channel:?}").contains("Balanced"), "{channel:?}");
    let hi = Bytes::from_static(b"hi");
    assert_eq!(channel.unary("echo", hi.clone()).await.unwrap(), hi);
    // Only host:port can be resolved.
    for bad in ["unix:/tmp/weft.sock", "no port"] {
        let e = Channel::builder()
            .dns(bad, &Config::new(), Duration::from_secs(60))
            .unwrap_err();
        assert!(matches!(e, Error::Address(_)), "{bad}: {e}");
    }
}

/// A channel's unary future is what callers box, spawn or join, and each
/// move copies all of it; past about 1 KiB glibc's allocator leaves its
/// per-thread cache for every boxed call. It was 1,296 bytes (default
/// features) while the call's fixed options were held twice and the retry
/// loop was an `async fn` holding its arguments twice, 976 while the
/// attempt took a clone of the lease's client, 944 while the deadline was
/// kept beside the options that carry it, 920 while it held them as a
/// 64-byte `Result<Cow<CallOptions>, Status>` instead of a reference, 872
/// (912 with the `tower` feature, which makes the client larger) while the
/// attempt held a client of its own and the rare waits (for a connection,
/// for room under the server's stream cap) were held inline rather than
/// boxed, 760 while each try was a future of its own around the client's
/// (a closure's `async` block holding a handle on the client) awaited
/// inside the retry loop's, 416 while the retry loop kept the lease in
/// locals of its own (and a match's temporary), the failure path's status
/// and waits inline, and the method beside the attempt that holds it too,
/// 360 while the retry loop kept a reference to the options across its
/// awaits and a lease held its connection's slot index and its pool as a
/// `Cow`, 336 while a lease kept its connection's generation beside its
/// client, 328 while the client's call future held its deadline timer
/// inline (now a pointer to a recycled one). The client is now one `Arc`,
/// so the feature no longer shows. 232 since the attempt carries its
/// method's `MethodKey` (the name and its cache probe's start, worked out
/// where the caller names the method) instead of the bare name. A key
/// that also carried the name's 32 bytes of words (256 bytes here) made
/// the gate's joined calls dearer (+40 a call in `memcpy`: their futures
/// moved past 256 bytes) than its lookup saved.
/// (The client's own call future is 128 bytes; the channel's state beside
/// it is the channel, the options, the method's key and the request kept
/// for a retry, and the lease.)
#[tokio::test]
async fn channel_unary_future_stays_small() {
    let channel = Channel::builder().endpoint(memory(Arc::new(AtomicUsize::new(0))));
    let call = channel.unary("echo", Bytes::from_static(b"hi"));
    let bound = 232;
    assert!(
        size_of_val(&call) <= bound,
        "channel unary future: {} bytes",
        size_of_val(&call)
    );
    // It is a real call, all the same.
    assert_eq!(call.await.unwrap(), "hi");
}
