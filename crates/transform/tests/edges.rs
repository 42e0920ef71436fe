//! Boundaries a mutation run (cargo-mutants, see docs/TESTING.md) showed no
//! other test would notice if they moved: one behaviour per test.
// Encrypted records need real AES-256-GCM (not the fuzz-only null cipher).
#![cfg(not(feature = "dangerous-null-cipher-for-fuzzing"))]

mod common;

use bytes::{Bytes, BytesMut};
use common::{config, pair};
use tokio_util::codec::Decoder;
use weft_frame::{Flags, Frame, FrameCodec, FrameError, FrameType, Limits, Reason};
use weft_transform::{DEFAULT_COMPRESSION_MIN_SIZE, EncryptionPolicy, Session, passthrough};

/// Whether the frame at the start of `wire` carries `COMPRESSED` (header byte 2).
fn compressed_on_the_wire(wire: &[u8]) -> bool {
    Flags(wire[2]).contains(Flags::COMPRESSED)
}

fn deflate_pair() -> (Session, Session) {
    pair(
        config(EncryptionPolicy::Off, true, None),
        config(EncryptionPolicy::Off, true, None),
    )
}

fn encrypted_pair() -> (Session, Session) {
    pair(
        config(EncryptionPolicy::Required, false, None),
        config(EncryptionPolicy::Required, false, None),
    )
}

/// Encodes `frame` on `a`, checks `b` decodes it unchanged, returns whether
/// it travelled compressed.
fn send(a: &mut Session, b: &mut Session, frame: &Frame) -> bool {
    let mut wire = BytesMut::new();
    a.outbound.encode(frame, &mut wire).unwrap();
    let compressed = compressed_on_the_wire(&wire);
    assert_eq!(b.inbound.decode(&mut wire).unwrap().as_ref(), Some(frame));
    assert!(wire.is_empty());
    compressed
}

#[test]
fn an_empty_encrypted_end_stream_frame_round_trips() {
    // Its record is exactly one tag long: the shortest valid record.
    let (mut a, mut b) = encrypted_pair();
    let end = Frame::new(FrameType::DATA, Flags::END_STREAM, 1, Bytes::new());
    let mut wire = BytesMut::new();
    a.outbound.encode(&end, &mut wire).unwrap();
    assert_eq!(wire.len(), 16 + 16);
    assert_eq!(b.inbound.decode(&mut wire).unwrap(), Some(end));
}

#[test]
fn payloads_below_the_minimum_size_are_sent_uncompressed() {
    let (mut a, mut b) = deflate_pair();
    let at = |len| Frame::new(FrameType::DATA, Flags::NONE, 1, vec![b'a'; len].into());
    assert!(send(&mut a, &mut b, &at(DEFAULT_COMPRESSION_MIN_SIZE)));
    assert!(!send(&mut a, &mut b, &at(DEFAULT_COMPRESSION_MIN_SIZE - 1)));
}

#[test]
fn only_data_and_open_payloads_are_compressed() {
    // The peer treats a compressed control frame as a protocol error.
    let (mut a, mut b) = deflate_pair();
    let text = vec![b'a'; 4 * DEFAULT_COMPRESSION_MIN_SIZE];
    let open = Frame::new(FrameType::OPEN, Flags::NONE, 1, text.clone().into());
    assert!(send(&mut a, &mut b, &open));
    let goaway = Frame::goaway(1, Reason::NO_ERROR, &text);
    assert!(!send(&mut a, &mut b, &goaway));
}

/// The `buffered` count of a truncation error at EOF.
fn truncated_count(err: &FrameError) -> usize {
    match err {
        FrameError::Truncated { buffered } => *buffered,
        other => panic!("expected a truncation, got {other}"),
    }
}

#[test]
fn every_pipeline_counts_a_cut_frame_the_same() {
    // The same frame cut inside its header and inside its body.
    let frame = Frame::new(FrameType::DATA, Flags::NONE, 1, vec![3; 100].into());
    for cut in [10, 26] {
        let mut wire = BytesMut::new();
        FrameCodec::default()
            .encode_frame(&frame, &mut wire)
            .unwrap();
        wire.truncate(cut);
        let codec = FrameCodec::default()
            .decode_eof(&mut wire.clone())
            .unwrap_err();
        assert_eq!(truncated_count(&codec), cut, "frame codec");

        let (_, mut plain) = passthrough(Limits::default());
        let err = plain.decode_eof(&mut wire.clone()).unwrap_err();
        assert_eq!(
            truncated_count(err.frame_error().unwrap()),
            cut,
            "passthrough"
        );

        let (mut a, mut b) = deflate_pair();
        let mut deflated = BytesMut::new();
        a.outbound.encode(&frame, &mut deflated).unwrap();
        deflated.truncate(cut);
        let err = b.inbound.decode_eof(&mut deflated).unwrap_err();
        assert_eq!(truncated_count(err.frame_error().unwrap()), cut, "deflate");

        let (mut a, mut b) = encrypted_pair();
        let mut sealed = BytesMut::new();
        a.outbound.encode(&frame, &mut sealed).unwrap();
        sealed.truncate(cut);
        let err = b.inbound.decode_eof(&mut sealed).unwrap_err();
        assert_eq!(
            truncated_count(err.frame_error().unwrap()),
            cut,
            "encrypted"
        );
    }
}
