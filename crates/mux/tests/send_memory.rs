//! Send-side memory against a peer that never grants credit (hostile
//! catalogue item 45), counted by a global allocator: 128 streams each fill
//! their send buffer with small messages while the peer's windows are
//! exhausted. Each stream may hold at most its send buffer plus a small
//! fixed amount, whatever the message size: the buffer counts the real
//! memory of what it holds (per-message overhead included), not payload
//! bytes alone. Runs without the test harness, alone on the main thread.

mod support;

use std::alloc::System;

use bytes::Bytes;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use support::Scripted;
use weft_mux::{Config, Metadata};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const STREAMS: u32 = 128;
const SEND_BUFFER: usize = 64 * 1024;
/// The fixed allowance per stream on top of its send buffer.
const PER_STREAM_FIXED: usize = 4 * 1024;

fn live_bytes() -> i64 {
    let s = GLOBAL.stats();
    // A realloc's growth is already in `bytes_allocated` (and its shrinking
    // in `bytes_deallocated`): `bytes_reallocated` would count it twice.
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

fn main() {
    for message in [8usize, 100, 1000] {
        item_45_stalled_streams_hold_at_most_their_send_buffer(message);
    }
    println!("send_memory: stalled streams stay within their send buffers");
}

fn item_45_stalled_streams_hold_at_most_their_send_buffer(message: usize) {
    let mut config = Config::default();
    config
        .max_send_buffer(SEND_BUFFER)
        .max_concurrent_streams(STREAMS as usize);
    let mut t = Scripted::server(config);
    let ids: Vec<u32> = (0..STREAMS).map(|i| 2 * i + 1).collect();
    for &id in &ids {
        t.open(id, b"", false);
        assert_eq!(t.s.accept(), Some(id));
    }
    drop(t.out());
    let before = live_bytes();
    let mut sent = 0usize;
    for &id in &ids {
        loop {
            let mut data = Bytes::from(vec![7u8; message]);
            let mut md = Metadata::new();
            let all = t.s.send_some(id, &mut md, &mut data, false).unwrap();
            sent += 1;
            // What reaches the wire is the peer's problem: drop it.
            drop(t.out());
            if !all {
                break;
            }
            assert!(sent < 10_000_000, "the send buffer never filled");
        }
    }
    let held = (live_bytes() - before).max(0) as usize;
    let per_stream = held / STREAMS as usize;
    println!(
        "{message}-byte messages: {per_stream} bytes held per stalled stream ({} sends each)",
        sent / STREAMS as usize
    );
    assert!(
        per_stream <= SEND_BUFFER + PER_STREAM_FIXED,
        "{message}-byte messages: {per_stream} bytes per stream, over {SEND_BUFFER} + {PER_STREAM_FIXED}"
    );
    drop(t);
}
