//! Allocation counts with a counting global allocator (stats_alloc, so no
//! `unsafe` here). The allocator counts every thread, and libtest's own
//! threads allocate at random moments, so this file runs without the test
//! harness (`harness = false`): `main` runs alone on the main thread and a
//! failed check panics, failing `cargo test`.
//!
//! - Steady state: after a short warm-up, 200 round trips (outbound encode
//!   then inbound decode, the frame dropped) allocate nothing, in all four
//!   modes: passthrough, deflate only, AES-256-GCM only, deflate + GCM;
//!   and sealed batches of 64 frames (with and without deflate).
//! - A decompression bomb allocates no more than about twice its limit.

mod common;

use std::alloc::System;

use bytes::BytesMut;
use common::{json_payload, plain_compressed, run_pair};
use miniz_oxide::deflate::compress_to_vec;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use weft_frame::{Flags, Frame, FrameType, Limits, Metadata};
use weft_transform::{
    DEFAULT_REKEY_RECORDS, EncryptionPolicy, HandshakeConfig, Inbound, Offer, Outbound,
    RekeyLimits, passthrough,
};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn config(encryption: EncryptionPolicy, compression: bool, rekey_records: u64) -> HandshakeConfig {
    HandshakeConfig {
        offer: Offer {
            encryption,
            compression,
            ..Offer::default()
        },
        rekey: RekeyLimits {
            records: rekey_records,
            ..RekeyLimits::default()
        },
        ..HandshakeConfig::default()
    }
}

fn halves(encryption: bool, compression: bool, rekey_records: u64) -> (Outbound, Inbound) {
    let policy = if encryption {
        EncryptionPolicy::Required
    } else {
        EncryptionPolicy::Off
    };
    let o = run_pair(
        config(policy, compression, rekey_records),
        config(policy, compression, rekey_records),
    );
    let (a, b) = (o.initiator.unwrap(), o.responder.unwrap());
    assert_eq!(a.negotiated.encrypted, encryption);
    assert_eq!(a.negotiated.compressed, compression);
    (a.outbound, b.inbound)
}

/// Allocations (including reallocations) over `n` round trips after warm-up.
fn allocations_per_round_trips(out: &mut Outbound, inb: &mut Inbound, n: usize) -> (usize, usize) {
    let frame = Frame {
        ty: FrameType::DATA,
        flags: Flags::NONE,
        stream_id: 1,
        metadata: Metadata::new(),
        payload: json_payload(),
    };
    let mut wire = BytesMut::with_capacity(4096);
    let mut trip = |wire: &mut BytesMut| {
        out.encode(&frame, wire).unwrap();
        let got = inb.decode(wire).unwrap().unwrap();
        assert_eq!(got.payload.len(), frame.payload.len());
    };
    for _ in 0..8 {
        trip(&mut wire);
    }
    let region = Region::new(GLOBAL);
    for _ in 0..n {
        trip(&mut wire);
    }
    let change = region.change();
    (change.allocations + change.reallocations, n)
}

fn main() {
    steady_state_round_trips_allocate_nothing();
    batched_round_trips_allocate_nothing();
    item_08_bomb_allocates_near_its_limit();
    println!(
        "alloc: all modes (key updates too) allocate nothing per round trip; the bomb stays near its limit"
    );
}

fn steady_state_round_trips_allocate_nothing() {
    let modes = [
        ("passthrough", None),
        ("deflate", Some((false, true, DEFAULT_REKEY_RECORDS))),
        ("gcm", Some((true, false, DEFAULT_REKEY_RECORDS))),
        ("deflate+gcm", Some((true, true, DEFAULT_REKEY_RECORDS))),
        // A key update every 4 records: updating a key allocates nothing.
        ("gcm, key updates", Some((true, false, 5))),
    ];
    for (name, switches) in modes {
        let (mut out, mut inb) = match switches {
            None => passthrough(Limits::default()),
            Some((encryption, compression, rekey)) => halves(encryption, compression, rekey),
        };
        let (allocs, n) = allocations_per_round_trips(&mut out, &mut inb, 200);
        assert_eq!(allocs, 0, "{name}: {allocs} allocations in {n} round trips");
        assert!(
            name != "gcm, key updates" || out.key_updates() > 40,
            "{name}"
        );
    }
}

/// 64 frames sealed as batches and opened again, 100 times: the batch is
/// put back in the read buffer it came from, so nothing is copied or
/// allocated.
fn batched_round_trips_allocate_nothing() {
    for compression in [false, true] {
        let (mut out, mut inb) = halves(true, compression, DEFAULT_REKEY_RECORDS);
        assert!(out.allow_batches());
        let frames: Vec<Frame> = (0..64u32)
            .map(|i| Frame {
                ty: if i % 2 == 0 {
                    FrameType::OPEN
                } else {
                    FrameType::DATA
                },
                flags: Flags::NONE,
                stream_id: i * 2 + 1,
                metadata: Metadata::new(),
                payload: if i % 8 == 1 {
                    json_payload()
                } else {
                    bytes::Bytes::from_static(b"1")
                },
            })
            .collect();
        let mut wire = BytesMut::with_capacity(1 << 17);
        let mut trip = |wire: &mut BytesMut| {
            out.encode_batched(&frames, wire).unwrap();
            for f in &frames {
                let got = inb.decode(wire).unwrap().unwrap();
                assert_eq!(got.payload.len(), f.payload.len());
            }
            assert!(wire.is_empty());
        };
        for _ in 0..8 {
            trip(&mut wire);
        }
        let region = Region::new(GLOBAL);
        for _ in 0..100 {
            trip(&mut wire);
        }
        let change = region.change();
        let allocs = change.allocations + change.reallocations;
        assert_eq!(
            allocs, 0,
            "batches, compression {compression}: {allocs} allocations"
        );
        assert_eq!(inb.records(), out.records());
        assert!(out.records() < 108 * 2, "{} records", out.records());
    }
}

/// Item 8, memory: a compressed payload of 8 MiB of zeros (about 8 KiB on
/// the wire) against the default 64 KiB limit.
fn item_08_bomb_allocates_near_its_limit() {
    let (_, mut inb) = halves(false, true, DEFAULT_REKEY_RECORDS);
    let bomb = compress_to_vec(&vec![0u8; 8 << 20], 1);
    let mut wire = plain_compressed(3, bomb);
    let limit = Limits::default().max_payload as usize;
    let region = Region::new(GLOBAL);
    let err = inb.decode(&mut wire).unwrap_err();
    let change = region.change();
    assert!(err.is_decompression_limit() && !err.is_fatal(), "{err}");
    assert_eq!(err.stream_id(), Some(3));
    assert!(
        change.bytes_allocated + change.bytes_reallocated.max(0) as usize <= 2 * limit + 4096,
        "bomb allocated {} bytes against a limit of {limit}",
        change.bytes_allocated
    );
}
