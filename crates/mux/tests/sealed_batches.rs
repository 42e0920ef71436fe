//! An encrypted connection seals the small frames of one write as one
//! record (PROTOCOL 5.2) once the peer's settings say it reads them, and a
//! lone call's frame as its own record: the records on the wire, parsed
//! from the client's bytes after the handshake, show which.

use bytes::Bytes;
use weft_frame::{FrameType, HEADER_LEN};
use weft_mux::pipeline::{EncryptionPolicy, HandshakeConfig};
use weft_mux::{Config, Connection, Metadata};
use weft_testkit::{Tap, echo_all, pair_over};

/// The frame type of a sealed batch's record.
const BATCH: FrameType = FrameType(0x08);

/// The types of the whole records in `wire` (every record starts with a
/// frame header whose lengths cover its body).
fn records(wire: &[u8]) -> Vec<FrameType> {
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

/// Which end's bytes a test reads.
#[derive(Clone, Copy)]
enum Tapped {
    Client,
    Server,
}

/// An encrypted pair whose `tapped` end's bytes are recorded from now on,
/// the server echoing every call; the client's connection.
async fn encrypted_pair(tapped: Tapped) -> (Connection, std::sync::Arc<weft_testkit::Tapped>) {
    let (a, b) = tokio::io::duplex(1 << 20);
    let mut hs = HandshakeConfig::default();
    hs.offer.encryption = EncryptionPolicy::Required;
    let mut config = Config::default();
    config.handshake(hs);
    let (pair, seen) = match tapped {
        Tapped::Client => {
            let (a, seen) = Tap::new(a);
            (pair_over(a, b, config.clone(), config).await, seen)
        }
        Tapped::Server => {
            let (b, seen) = Tap::new(b);
            (pair_over(a, b, config.clone(), config).await, seen)
        }
    };
    let ((client, _), (_server, incoming)) = pair;
    assert!(client.negotiated().encrypted);
    seen.record();
    tokio::spawn(echo_all(incoming));
    (client, seen)
}

/// Makes 64 calls at once and waits for them all.
async fn calls_in_flight(client: &Connection) {
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..64 {
        calls.spawn(call(client.clone()));
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn calls_in_flight_go_in_sealed_batches_and_a_lone_call_does_not() {
    let (client, seen) = encrypted_pair(Tapped::Client).await;
    call(client.clone()).await;
    let alone = records(&seen.recorded());
    assert_eq!(count(&alone, BATCH), 0, "a lone call batched: {alone:?}");
    assert!(count(&alone, FrameType::OPEN) >= 1, "{alone:?}");

    calls_in_flight(&client).await;
    let all = records(&seen.recorded());
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

/// The server's replies to calls in flight are sealed together too, though
/// each reply's stream leaves the table as the reply is made (before the
/// write that carries it).
#[tokio::test(flavor = "current_thread")]
async fn replies_to_calls_in_flight_go_in_sealed_batches() {
    let (client, seen) = encrypted_pair(Tapped::Server).await;
    // One call first: the server's settings and the first reply behind us.
    call(client.clone()).await;
    let before = records(&seen.recorded()).len();
    calls_in_flight(&client).await;
    let all = records(&seen.recorded());
    let after = &all[before..];
    let (batches, data) = (count(after, BATCH), count(after, FrameType::DATA));
    println!(
        "64 replies: {} records, {batches} batches, {data} DATA records",
        after.len()
    );
    assert!(batches >= 1, "no sealed batch for 64 replies: {after:?}");
    assert!(data <= 8, "{data} of 64 replies went as their own records");
}
