//! Handshake outcomes across policies and round trips through every mode.
// These checks need real AES-256-GCM: the fuzz-only null cipher (compiled only
// under `cfg(fuzzing)`) authenticates nothing, so they do not build with it.
#![cfg(not(fuzzing))]

mod common;

use bytes::{Bytes, BytesMut};
use common::{config, json_payload, pair};
use weft_frame::{Flags, Frame, FrameType, Limits, Metadata};
use weft_transform::{EncryptionPolicy, HandshakeConfig, Offer, Session, passthrough};

fn sample(payload: Bytes) -> Frame {
    Frame {
        ty: FrameType::DATA,
        flags: Flags::END_STREAM,
        stream_id: 1,
        metadata: Metadata::builder().method("svc/echo").finish(),
        payload,
    }
}

/// Sends `frame` from `a` to `b` and back, checking both arrive unchanged.
fn round_trip(a: &mut Session, b: &mut Session, frame: &Frame) -> usize {
    let mut wire = BytesMut::new();
    a.outbound.encode(frame, &mut wire).unwrap();
    let len = wire.len();
    let got = b.inbound.decode(&mut wire).unwrap().unwrap();
    assert_eq!(&got, frame);
    assert!(wire.is_empty());
    b.outbound.encode(frame, &mut wire).unwrap();
    let got = a.inbound.decode(&mut wire).unwrap().unwrap();
    assert_eq!(&got, frame);
    len
}

#[test]
fn default_configs_negotiate_encryption_and_compression() {
    let (mut a, mut b) = pair(HandshakeConfig::default(), HandshakeConfig::default());
    for s in [&a, &b] {
        assert!(s.negotiated.encrypted && s.negotiated.compressed);
        assert!(!s.negotiated.authenticated);
    }
    assert!(a.negotiated.handshake_hash.is_some());
    assert_eq!(a.negotiated.handshake_hash, b.negotiated.handshake_hash);
    let frame = sample(json_payload());
    let wire_len = round_trip(&mut a, &mut b, &frame);
    assert!(wire_len < frame.encoded_len() / 2, "compressed: {wire_len}");
    assert_eq!(a.outbound.records(), 1);
    assert_eq!(a.inbound.records(), 1);
}

#[test]
fn psk_configs_authenticate() {
    let key = Some([7u8; 32]);
    let (mut a, mut b) = pair(
        config(EncryptionPolicy::Required, false, key),
        config(EncryptionPolicy::Preferred, true, key),
    );
    // The responder's peer is proven only by its first record: the
    // initiator's handshake message could be a replay.
    assert!(a.negotiated.authenticated && !b.negotiated.authenticated);
    assert!(b.awaits_first_record() && !a.awaits_first_record());
    assert!(a.negotiated.encrypted && !a.negotiated.compressed);
    assert!(a.negotiated.records_authenticated() && !b.negotiated.records_authenticated());
    let frame = sample(json_payload());
    let mut wire = BytesMut::new();
    a.outbound.encode(&frame, &mut wire).unwrap();
    assert_eq!(b.read_first_frame(&mut wire).unwrap().unwrap(), frame);
    assert!(b.negotiated.authenticated && !b.awaits_first_record());
    assert!(b.negotiated.records_authenticated());
    let wire_len = round_trip(&mut a, &mut b, &frame);
    assert_eq!(wire_len, frame.encoded_len() + 16, "sealed, not compressed");
}

#[test]
fn a_psk_session_with_encryption_off_authenticates_the_handshake_not_the_records() {
    let key = Some([7u8; 32]);
    let (mut a, mut b) = pair(
        config(EncryptionPolicy::Off, false, key),
        config(EncryptionPolicy::Preferred, false, key),
    );
    // The initiator saw the responder prove the key in its reply.
    assert!(a.negotiated.authenticated && !a.negotiated.encrypted);
    assert!(!a.negotiated.records_authenticated());
    // Records are plain frames: anyone on the path could have written them,
    // so the responder's first frame proves no key, as its replayable
    // handshake message did not: it never reports the peer authenticated.
    let frame = sample(json_payload());
    let mut wire = BytesMut::new();
    a.outbound.encode(&frame, &mut wire).unwrap();
    assert_eq!(b.read_first_frame(&mut wire).unwrap().unwrap(), frame);
    assert!(!b.awaits_first_record());
    assert!(!b.negotiated.authenticated && !b.negotiated.records_authenticated());
    assert_eq!(round_trip(&mut a, &mut b, &frame), frame.encoded_len());
    // NN: records sealed, but nobody was authenticated.
    let (a, _) = pair(HandshakeConfig::default(), HandshakeConfig::default());
    assert!(a.negotiated.encrypted && !a.negotiated.records_authenticated());
}

#[test]
fn both_off_is_a_plain_hello_with_compression() {
    let (mut a, mut b) = pair(
        config(EncryptionPolicy::Off, true, None),
        config(EncryptionPolicy::Off, true, None),
    );
    assert!(!a.negotiated.encrypted && a.negotiated.compressed);
    assert_eq!(a.negotiated.handshake_hash, None);
    let frame = sample(json_payload());
    assert!(round_trip(&mut a, &mut b, &frame) < frame.encoded_len());
}

#[test]
fn off_against_preferred_is_unencrypted() {
    for (x, y) in [
        (EncryptionPolicy::Off, EncryptionPolicy::Preferred),
        (EncryptionPolicy::Preferred, EncryptionPolicy::Off),
    ] {
        let (mut a, mut b) = pair(config(x, false, None), config(y, false, None));
        assert!(!a.negotiated.encrypted && !b.negotiated.encrypted);
        let frame = sample(json_payload());
        assert_eq!(round_trip(&mut a, &mut b, &frame), frame.encoded_len());
    }
}

#[test]
fn peer_limits_are_reported() {
    let small = HandshakeConfig {
        offer: Offer {
            max_payload: 20_000,
            max_message: 1 << 20,
            ..Offer::default()
        },
        max_ratio: 7,
        ..HandshakeConfig::default()
    };
    let (a, b) = pair(small, HandshakeConfig::default());
    assert_eq!(b.negotiated.peer_limits.max_payload, 20_000);
    assert_eq!(b.negotiated.peer_max_message, 1 << 20);
    assert_eq!(b.negotiated.peer_max_ratio, 7);
    assert_eq!(a.negotiated.peer_limits, Limits::default());
}

#[test]
fn small_and_incompressible_payloads_go_uncompressed() {
    let (mut a, mut b) = pair(HandshakeConfig::default(), HandshakeConfig::default());
    let small = sample(Bytes::from_static(b"tiny"));
    assert_eq!(round_trip(&mut a, &mut b, &small), small.encoded_len() + 16);
    // Pseudo-random bytes do not shrink.
    let mut x = 0x2545_f491_u32;
    let noise: Vec<u8> = (0..4000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let random = sample(Bytes::from(noise));
    assert_eq!(
        round_trip(&mut a, &mut b, &random),
        random.encoded_len() + 16
    );
}

#[test]
fn passthrough_round_trips_and_is_plain_frames() {
    let (mut out, mut inb) = passthrough(Limits::default());
    let frame = sample(json_payload());
    let mut wire = BytesMut::new();
    out.encode(&frame, &mut wire).unwrap();
    let mut plain = BytesMut::new();
    weft_frame::FrameCodec::default()
        .encode_frame(&frame, &mut plain)
        .unwrap();
    assert_eq!(wire, plain);
    assert_eq!(inb.decode(&mut wire).unwrap().unwrap(), frame);
    assert!(!out.is_encrypting() && !out.is_compressing());
    let n = weft_transform::Negotiated::default();
    assert!(!n.encrypted && !n.compressed && n.handshake_hash.is_none());
    assert_eq!(n.peer_limits, Limits::default());
}
