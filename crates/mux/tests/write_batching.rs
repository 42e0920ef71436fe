//! Writes: a stream alone on its connection writes inline (one write per
//! frame, no hop through the connection task); with other streams in
//! flight, frames queued in one burst leave in one write.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use weft_mux::{Config, Connection, Metadata, Stream};
use weft_testkit::{echo_all, pair_over};

mod support;
use support::io::TestIo;

/// A client whose writes are counted, and a server echoing every stream.
async fn setup() -> (Connection, Arc<AtomicUsize>) {
    let (a, b) = tokio::io::duplex(1024 * 1024);
    let counted = TestIo::new(a);
    let writes = counted.writes();
    let ((client, _), (_server, incoming)) =
        pair_over(counted, b, Config::default(), Config::default()).await;
    tokio::spawn(echo_all(incoming));
    (client, writes)
}

/// One call first, so the handshake's and settings' writes are done.
async fn warm_up(client: &Connection) {
    let st = client
        .open(Metadata::new(), Bytes::from_static(b"warm"), true)
        .await
        .unwrap();
    assert_eq!(answer(st).await, b"warm");
}

async fn answer(mut st: Stream) -> Vec<u8> {
    let mut got = Vec::new();
    while let Some(c) = st.recv().await.unwrap() {
        got.extend_from_slice(&c.data);
    }
    got
}

#[tokio::test(flavor = "current_thread")]
async fn calls_opened_in_one_burst_leave_in_one_write() {
    const CALLS: usize = 64;
    let (client, writes) = setup().await;
    warm_up(&client).await;
    // One stream stays open so that the burst is never alone.
    let _held = client
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .unwrap();
    let before = writes.load(Ordering::Relaxed);
    let mut streams = Vec::new();
    for i in 0..CALLS {
        let body = Bytes::from(format!("call {i}"));
        streams.push(client.open(Metadata::new(), body, true).await.unwrap());
    }
    let burst = writes.load(Ordering::Relaxed) - before;
    for (i, st) in streams.into_iter().enumerate() {
        assert_eq!(answer(st).await, format!("call {i}").as_bytes());
    }
    // Inline writes would make one write per call. Deferred, nothing is
    // written during the burst (the connection task cannot run on this
    // one-thread runtime until the test task waits), then the 64 opens
    // leave together.
    let total = writes.load(Ordering::Relaxed) - before;
    assert_eq!(burst, 0, "written during the burst");
    assert!(total <= 2, "{total} writes for {CALLS} calls");
}

#[tokio::test(flavor = "current_thread")]
async fn a_stream_alone_writes_inline() {
    let (client, writes) = setup().await;
    warm_up(&client).await;
    // Alone on the connection, `open` writes before it returns: on a
    // current-thread runtime nothing else has run in between.
    let before = writes.load(Ordering::Relaxed);
    let st = client
        .open(Metadata::new(), Bytes::from_static(b"now"), true)
        .await
        .unwrap();
    assert_eq!(writes.load(Ordering::Relaxed), before + 1, "written inline");
    assert_eq!(answer(st).await, b"now");
}

/// Opens `calls` streams together (one task, joined, as `join_all` does)
/// and checks every answer; returns the writes they took.
async fn joined_burst(client: &Connection, writes: &AtomicUsize, calls: usize) -> usize {
    let before = writes.load(Ordering::Relaxed);
    let mut burst: Vec<_> = (0..calls)
        .map(|i| {
            Some(Box::pin(async move {
                let body = Bytes::from(format!("call {i}"));
                let st = client.open(Metadata::new(), body, true).await.unwrap();
                assert_eq!(answer(st).await, format!("call {i}").as_bytes());
            }))
        })
        .collect();
    // Polled in turn from one task, as `join_all` does.
    std::future::poll_fn(|cx| {
        for call in burst.iter_mut() {
            if call
                .as_mut()
                .is_some_and(|f| f.as_mut().poll(cx).is_ready())
            {
                *call = None;
            }
        }
        if burst.iter().all(Option::is_none) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    writes.load(Ordering::Relaxed) - before
}

#[tokio::test(flavor = "current_thread")]
async fn the_first_call_of_a_burst_after_a_burst_waits_for_the_rest() {
    const CALLS: usize = 16;
    let (client, writes) = setup().await;
    warm_up(&client).await;
    // The first burst's first call is alone when it opens: it writes at
    // once, the other fifteen together.
    assert_eq!(joined_burst(&client, &writes, CALLS).await, 2);
    // Every stream of the first burst has ended: the second burst's first
    // call is alone too, but the connection's last write carried a burst,
    // so it waits for the rest: one write for all sixteen.
    for round in 0..3 {
        let n = joined_burst(&client, &writes, CALLS).await;
        assert_eq!(n, 1, "round {round}: {n} writes for {CALLS} calls");
    }
    // A lone call after a burst goes through the connection task once
    // (nothing written while `open` runs) ...
    let before = writes.load(Ordering::Relaxed);
    let st = client
        .open(Metadata::new(), Bytes::from_static(b"one"), true)
        .await
        .unwrap();
    assert_eq!(writes.load(Ordering::Relaxed), before, "written inline");
    assert_eq!(answer(st).await, b"one");
    // ... and that write found it alone: the next lone call writes inline.
    let before = writes.load(Ordering::Relaxed);
    let st = client
        .open(Metadata::new(), Bytes::from_static(b"two"), true)
        .await
        .unwrap();
    assert_eq!(
        writes.load(Ordering::Relaxed),
        before + 1,
        "not written inline"
    );
    assert_eq!(answer(st).await, b"two");
}
