//! Property: records delivered in any chunking (one byte at a time, random
//! chunks, all at once) decode to the same frames, in every mode. This
//! guards the read half's handling of a header split across reads (the
//! header bytes are the record's associated data).
// These checks need real AES-256-GCM: the fuzz-only null cipher (compiled only
// under `cfg(fuzzing)`) authenticates nothing, so they do not build with it.
#![cfg(not(fuzzing))]

mod common;

use bytes::{Bytes, BytesMut};
use common::{json_payload, run_pair};
use proptest::prelude::*;
use weft_frame::{Flags, Frame, FrameType, Limits, Metadata};
use weft_transform::{EncryptionPolicy, HandshakeConfig, Inbound, Offer, Outbound, passthrough};

fn halves(mode: u8) -> (Outbound, Inbound) {
    if mode == 0 {
        return passthrough(Limits::default());
    }
    let config = HandshakeConfig {
        offer: Offer {
            encryption: if mode & 1 == 1 {
                EncryptionPolicy::Required
            } else {
                EncryptionPolicy::Off
            },
            compression: mode & 2 == 2,
            ..Offer::default()
        },
        ..HandshakeConfig::default()
    };
    let o = run_pair(config.clone(), config);
    (o.initiator.unwrap().outbound, o.responder.unwrap().inbound)
}

fn frames(sizes: &[usize]) -> Vec<Frame> {
    let json = json_payload();
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| Frame {
            ty: if i % 2 == 0 {
                FrameType::DATA
            } else {
                FrameType::OPEN
            },
            flags: Flags::NONE,
            stream_id: 2 * i as u32 + 1,
            metadata: if i % 3 == 0 {
                Metadata::builder().method("svc/m").finish()
            } else {
                Metadata::new()
            },
            payload: Bytes::from(json.iter().cycle().take(n).copied().collect::<Vec<u8>>()),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_chunking_gives_the_same_frames(
        mode in 0u8..4,
        sizes in prop::collection::vec(0usize..3000, 1..6),
        chunks in prop::collection::vec(1usize..40, 1..64),
    ) {
        let (mut out, mut inb) = halves(mode);
        let sent = frames(&sizes);
        let mut wire = BytesMut::new();
        for f in &sent {
            out.encode(f, &mut wire).unwrap();
        }
        let mut got = Vec::new();
        let mut src = BytesMut::new();
        let mut at = 0;
        let mut i = 0;
        while at < wire.len() {
            let n = chunks[i % chunks.len()].min(wire.len() - at);
            i += 1;
            src.extend_from_slice(&wire[at..at + n]);
            at += n;
            while let Some(f) = inb.decode(&mut src).unwrap() {
                got.push(f);
            }
        }
        prop_assert!(inb.decode_eof(&mut src).unwrap().is_none());
        prop_assert_eq!(got, sent);
    }

    #[test]
    fn any_chunking_of_sealed_batches_gives_the_same_frames(
        compression in any::<bool>(),
        sizes in prop::collection::vec(0usize..3000, 1..12),
        groups in prop::collection::vec(1usize..5, 1..8),
        chunks in prop::collection::vec(1usize..200, 1..64),
        per_read in 1usize..4,
    ) {
        let (mut out, mut inb) = halves(1 | if compression { 2 } else { 0 });
        prop_assert!(out.allow_batches());
        let sent = frames(&sizes);
        let mut wire = BytesMut::new();
        let mut at = 0;
        for (i, g) in groups.iter().cycle().enumerate() {
            if at >= sent.len() {
                break;
            }
            let end = (at + g).min(sent.len());
            // Every other group as single records, to interleave both.
            if i % 3 == 2 {
                for f in &sent[at..end] {
                    out.encode(f, &mut wire).unwrap();
                }
            } else {
                out.encode_batched(&sent[at..end], &mut wire).unwrap();
            }
            at = end;
        }
        let mut got = Vec::new();
        let mut src = BytesMut::new();
        let (mut at, mut i) = (0, 0);
        while at < wire.len() {
            let n = chunks[i % chunks.len()].min(wire.len() - at);
            i += 1;
            src.extend_from_slice(&wire[at..at + n]);
            at += n;
            // A few frames per read: more bytes arrive mid-batch.
            for _ in 0..per_read {
                match inb.decode(&mut src).unwrap() {
                    Some(f) => got.push(f),
                    None => break,
                }
            }
        }
        while let Some(f) = inb.decode_eof(&mut src).unwrap() {
            got.push(f);
        }
        prop_assert_eq!(got, sent);
        prop_assert_eq!(inb.records(), out.records());
    }
}
