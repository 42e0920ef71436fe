//! Property: one flipped bit anywhere in a handshake or in a record is
//! detected. A handshake with a flipped bit never gives both sides a session
//! (at least one side fails or never completes, which the driver's deadline
//! then ends); a record with a flipped bit is never released.
//!
//! The only bytes exempt are the three reserved bytes of the responder's
//! preface: docs/PROTOCOL.md section 1 says they are ignored on receipt, and
//! the responder's preface is not part of the Noise prologue (the initiator
//! writes its first message before it arrives). The initiator's preface is
//! in the prologue, so even its reserved bytes are covered.
// These checks need real AES-256-GCM: the fuzz-only null cipher (compiled only
// under `cfg(fuzzing)`) authenticates nothing, so they do not build with it.
#![cfg(not(fuzzing))]

mod common;

use bytes::BytesMut;
use common::{json_payload, run_pair, run_pair_with};
use proptest::prelude::*;
use weft_frame::{Flags, Frame, FrameType, Metadata};
use weft_transform::{EncryptionPolicy, Handshake, HandshakeConfig, Offer, Role};

fn config(psk: bool, compression: bool) -> HandshakeConfig {
    HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            compression,
            ..Offer::default()
        },
        psk: psk.then(|| [0x5a; 32].into()),
        ..HandshakeConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn any_flipped_handshake_bit_fails(
        psk in any::<bool>(),
        to_responder in any::<bool>(),
        index in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        // Lengths of the two byte streams are fixed for a given mode.
        let stream_len = match (to_responder, psk) {
            (true, false) => 8 + 16 + 1 + 32 + 20,
            (true, true) => 8 + 16 + 1 + 32 + 20 + 16,
            (false, _) => 8 + 16 + 1 + 32 + 21 + 16,
        };
        let mut at = index.index(stream_len);
        if !to_responder && (5..8).contains(&at) {
            at = 4; // the version byte instead of an ignored reserved byte
        }
        let mut seen = [0usize; 2];
        let outcome = run_pair_with(
            Handshake::new(Role::Initiator, config(psk, true)).unwrap(),
            Handshake::new(Role::Responder, config(psk, true)).unwrap(),
            |dir, bytes| {
                let d = usize::from(dir);
                let start = seen[d];
                seen[d] += bytes.len();
                if dir == to_responder && (start..seen[d]).contains(&at) {
                    bytes[at - start] ^= 1 << bit;
                }
            },
        );
        prop_assert_eq!(seen[usize::from(to_responder)], stream_len);
        prop_assert!(
            outcome.initiator.is_err() || outcome.responder.is_err(),
            "flip at {} bit {} toward the {} went unnoticed",
            at, bit, if to_responder { "responder" } else { "initiator" }
        );
    }

    #[test]
    fn any_flipped_record_bit_fails(
        psk in any::<bool>(),
        compression in any::<bool>(),
        index in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let o = run_pair(config(psk, compression), config(psk, compression));
        let (mut a, mut b) = (o.initiator.unwrap(), o.responder.unwrap());
        let frame = Frame {
            ty: FrameType::DATA,
            flags: Flags::END_STREAM,
            stream_id: 1,
            metadata: Metadata::builder().method("svc/m").finish(),
            payload: json_payload(),
        };
        let mut wire = BytesMut::new();
        a.outbound.encode(&frame, &mut wire).unwrap();
        let at = index.index(wire.len());
        wire[at] ^= 1 << bit;
        let result = b.inbound.decode_eof(&mut wire);
        prop_assert!(result.is_err(), "flip at {} bit {} released a frame", at, bit);
        prop_assert!(result.unwrap_err().is_fatal());
    }
}
