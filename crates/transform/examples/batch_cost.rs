//! What sealed batches save, in instructions, on the record layer alone:
//! `ROUNDS` rounds of 64 unary calls' frames (each an `OPEN` with its
//! method and `END_STREAM`, answered by a `DATA` with a status and a
//! 7-byte reply), encoded and decoded over one session: plain (encryption
//! off), one record per frame, or one batch per 64 frames, as a writer
//! flushing 64 calls at once would. Count it with callgrind:
//!
//! ```sh
//! cargo build --release -p weft-transform --example batch_cost
//! cargo xtask instr --n1 100 --n2 600 -- target/release/examples/batch_cost {N} plain
//! cargo xtask instr --n1 100 --n2 600 -- target/release/examples/batch_cost {N} frames
//! cargo xtask instr --n1 100 --n2 600 -- target/release/examples/batch_cost {N} batched
//! ```
//!
//! (instructions per operation are per round: divide by 64 for a call).

use bytes::{Bytes, BytesMut};
use weft_frame::{Flags, Frame, FrameType, Metadata};
use weft_transform::{EncryptionPolicy, HandshakeConfig, Offer, Session, handshake_in_memory};

/// Calls per round, as in the gate's 64-in-flight cells.
const CALLS: u32 = 64;

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let (encryption, batched) = match args.next().as_deref() {
        Some("plain") => (EncryptionPolicy::Off, false),
        Some("frames") | None => (EncryptionPolicy::Required, false),
        Some("batched") => (EncryptionPolicy::Required, true),
        Some(other) => panic!("usage: batch_cost ROUNDS plain|frames|batched (not {other})"),
    };
    let config = HandshakeConfig {
        offer: Offer {
            encryption,
            ..Offer::default()
        },
        ..HandshakeConfig::default()
    };
    let (mut client, mut server) = handshake_in_memory(config.clone(), config).expect("handshake");
    if batched {
        assert!(client.outbound.allow_batches() && server.outbound.allow_batches());
    }
    let requests: Vec<Frame> = (0..CALLS)
        .map(|i| Frame {
            ty: FrameType::OPEN,
            flags: Flags::END_STREAM,
            stream_id: i * 2 + 1,
            metadata: Metadata::builder().method("n").finish(),
            payload: Bytes::new(),
        })
        .collect();
    let replies: Vec<Frame> = (0..CALLS)
        .map(|i| Frame {
            ty: FrameType::DATA,
            flags: Flags::END_STREAM,
            stream_id: i * 2 + 1,
            metadata: Metadata::builder().status(0).finish(),
            payload: Bytes::from_static(b"{\"n\":1}"),
        })
        .collect();
    let mut wire = BytesMut::with_capacity(1 << 16);
    let mut frames = 0usize;
    for _ in 0..rounds {
        frames += one_way(&mut client, &mut server, &requests, batched, &mut wire);
        frames += one_way(&mut server, &mut client, &replies, batched, &mut wire);
    }
    println!(
        "{rounds} rounds, {frames} frames, {} records each way",
        client.outbound.records()
    );
}

/// Seals `frames` from `a` and opens them at `b`; returns how many arrived.
fn one_way(
    a: &mut Session,
    b: &mut Session,
    frames: &[Frame],
    batched: bool,
    wire: &mut BytesMut,
) -> usize {
    if batched {
        a.outbound.encode_batched(frames, wire).expect("seal");
    } else {
        for f in frames {
            a.outbound.encode(f, wire).expect("seal");
        }
    }
    let mut n = 0;
    while let Some(f) = b.inbound.decode(wire).expect("open") {
        std::hint::black_box(f);
        n += 1;
    }
    assert_eq!(n, frames.len());
    n
}
