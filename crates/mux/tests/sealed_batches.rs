//! An encrypted connection seals the small frames of one write as one
//! record (PROTOCOL 5.2) once the peer's settings say it reads them, and a
//! lone call's frame as its own record: the records on the wire, parsed
//! from the client's bytes after the handshake, show which.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use weft_frame::{FrameType, HEADER_LEN};
use weft_mux::pipeline::{EncryptionPolicy, HandshakeConfig};
use weft_mux::{Config, Connection, Metadata};
use weft_testkit::{echo_all, pair_over};

/// The frame type of a sealed batch's record.
const BATCH: FrameType = FrameType(0x08);

/// A transport that keeps a copy of the bytes written through it once
/// `wire` is `Some` (after the handshake, whose messages are not records).
struct Recorded<T> {
    inner: T,
    wire: Arc<Mutex<Option<Vec<u8>>>>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Recorded<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Recorded<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && let Some(w) = self.wire.lock().unwrap().as_mut()
        {
            w.extend_from_slice(&buf[..n]);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The types of the whole records in what `wire` recorded (every record
/// starts with a frame header whose lengths cover its body).
fn records(wire: &Mutex<Option<Vec<u8>>>) -> Vec<FrameType> {
    let wire = wire.lock().unwrap();
    let wire: &[u8] = wire.as_deref().unwrap_or_default();
    let mut at = 0;
    let mut out = Vec::new();
    while wire.len() - at >= HEADER_LEN {
        let word = |i: usize| u32::from_be_bytes(wire[at + i..at + i + 4].try_into().unwrap());
        let body = word(8) as usize + word(12) as usize;
        if wire.len() - at < HEADER_LEN + body {
            break;
        }
        out.push(FrameType(wire[at + 1]));
        at += HEADER_LEN + body;
    }
    assert_eq!(at, wire.len(), "the client's bytes end inside a record");
    out
}

fn count(records: &[FrameType], ty: FrameType) -> usize {
    records.iter().filter(|t| **t == ty).count()
}

async fn call(client: Connection) {
    let mut st = client
        .open(Metadata::new(), Bytes::from_static(b"ping"), true)
        .await
        .unwrap();
    let mut got = 0;
    while let Some(c) = st.recv().await.unwrap() {
        got += c.data.len();
    }
    assert_eq!(got, 4);
}

#[tokio::test(flavor = "current_thread")]
async fn calls_in_flight_go_in_sealed_batches_and_a_lone_call_does_not() {
    let (a, b) = tokio::io::duplex(1 << 20);
    let wire = Arc::new(Mutex::new(None));
    let a = Recorded {
        inner: a,
        wire: wire.clone(),
    };
    let mut hs = HandshakeConfig::default();
    hs.offer.encryption = EncryptionPolicy::Required;
    let mut config = Config::default();
    config.handshake(hs);
    let ((client, _), (_server, incoming)) = pair_over(a, b, config.clone(), config).await;
    assert!(client.negotiated().encrypted);
    *wire.lock().unwrap() = Some(Vec::new());
    tokio::spawn(echo_all(incoming));

    call(client.clone()).await;
    let alone = records(&wire);
    assert_eq!(count(&alone, BATCH), 0, "a lone call batched: {alone:?}");
    assert!(count(&alone, FrameType::OPEN) >= 1, "{alone:?}");

    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..64 {
        calls.spawn(call(client.clone()));
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    let all = records(&wire);
    let after = &all[alone.len()..];
    let (batches, opens) = (count(after, BATCH), count(after, FrameType::OPEN));
    println!(
        "64 calls: {} records, {batches} batches, {opens} OPEN records",
        after.len()
    );
    assert!(
        batches >= 1,
        "no sealed batch for 64 calls in flight: {after:?}"
    );
    assert!(
        opens <= 8,
        "{opens} of 64 OPEN frames went as their own records"
    );
}
