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
