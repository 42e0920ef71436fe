//! Boundaries a mutation run (cargo-mutants, see docs/TESTING.md) showed no
//! other test would notice if they moved: one behaviour per test.
// Encrypted records need real AES-256-GCM (not the fuzz-only null cipher).
#![cfg(not(fuzzing))]

mod common;

use bytes::{Bytes, BytesMut};
use common::{config, json_payload, pair, plain_compressed};
use miniz_oxide::deflate::compress_to_vec;
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

/// A sender compresses only payloads the peer will inflate: at most its
/// offer's max message (docs/PROTOCOL.md 4). A longer payload goes
/// uncompressed (it is within max payload), never as deflate that would
/// inflate beyond the peer's offer.
#[test]
fn payloads_over_the_peers_max_message_are_sent_uncompressed() {
    let mut small = config(EncryptionPolicy::Off, true, None);
    small.offer.max_message = 300;
    let (mut a, mut b) = pair(config(EncryptionPolicy::Off, true, None), small);
    let at = |len| Frame::new(FrameType::DATA, Flags::NONE, 1, vec![b'a'; len].into());
    assert!(send(&mut a, &mut b, &at(300)));
    assert!(!send(&mut a, &mut b, &at(301)));
    assert!(!send(&mut a, &mut b, &at(1_004)));
    // The other direction still compresses up to the default 4 MiB.
    assert!(send(&mut b, &mut a, &at(1_004)));
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

#[test]
fn a_payload_inflating_past_the_first_guess_round_trips() {
    // The decompressor first guesses 16 times the input and then doubles:
    // a payload packed more than 16:1 (within the 100:1 ratio limit) needs
    // the buffer to grow.
    let mut text = Vec::new();
    for i in 0..40u32 {
        text.extend_from_slice(&json_payload());
        text.extend_from_slice(&i.to_be_bytes());
    }
    let packed = compress_to_vec(&text, 1).len();
    assert!(
        packed * 16 < text.len() && packed * 100 > text.len(),
        "{packed}"
    );
    let (mut a, mut b) = deflate_pair();
    let frame = Frame::new(FrameType::DATA, Flags::NONE, 1, text.into());
    assert!(send(&mut a, &mut b, &frame));
}

#[test]
fn payloads_are_deflated_with_static_huffman_blocks() {
    // The measured choice (crate docs of compress.rs): level 1, static
    // blocks. A deflate block starts with BFINAL (1 bit), then BTYPE (2 bits,
    // 01 = static Huffman, 10 = dynamic).
    let (mut a, _) = deflate_pair();
    let frame = Frame::new(FrameType::DATA, Flags::NONE, 1, json_payload());
    let mut wire = BytesMut::new();
    a.outbound.encode(&frame, &mut wire).unwrap();
    assert!(compressed_on_the_wire(&wire));
    let first = wire[weft_frame::HEADER_LEN];
    assert_eq!((first >> 1) & 0b11, 0b01, "block type of {first:#04x}");
}

#[test]
fn each_deflate_fault_is_named() {
    let (mut a, mut b) = deflate_pair();
    let good = compress_to_vec(&json_payload(), 1);
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"garbage");
    for (payload, named) in [
        (vec![0xff; 40], "invalid deflate data"),
        (good[..good.len() / 2].to_vec(), "truncated deflate data"),
        (trailing, "data after the end of the deflate stream"),
    ] {
        let err = b
            .inbound
            .decode(&mut plain_compressed(3, payload))
            .unwrap_err();
        assert!(err.to_string().contains(named), "{err}");
    }
    let ok = Frame::new(FrameType::DATA, Flags::NONE, 1, json_payload());
    assert!(send(&mut a, &mut b, &ok));
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

/// `[is_authentication, is_record_limit, is_truncated, is_decompression_limit,
/// is_key_update, is_fatal]` (a bad key update: tests/rekey.rs).
fn predicates(e: &weft_transform::TransformError) -> [bool; 6] {
    [
        e.is_authentication(),
        e.is_record_limit(),
        e.is_truncated(),
        e.is_decompression_limit(),
        e.is_key_update(),
        e.is_fatal(),
    ]
}

#[test]
fn each_error_predicate_holds_for_its_own_kind_only() {
    let data = Frame::new(FrameType::DATA, Flags::NONE, 1, json_payload());
    // A record with a flipped tag bit.
    let (mut a, mut b) = encrypted_pair();
    let mut wire = BytesMut::new();
    a.outbound.encode(&data, &mut wire).unwrap();
    let last = wire.len() - 1;
    wire[last] ^= 1;
    let forged = b.inbound.decode(&mut wire).unwrap_err();
    assert_eq!(
        predicates(&forged),
        [true, false, false, false, false, true]
    );
    // (A record limit is out of reach here: keys are updated long before.)
    // A record cut short.
    let (mut a, mut b) = encrypted_pair();
    let mut wire = BytesMut::new();
    a.outbound.encode(&data, &mut wire).unwrap();
    wire.truncate(20);
    let cut = b.inbound.decode_eof(&mut wire).unwrap_err();
    assert_eq!(predicates(&cut), [false, false, true, false, false, true]);
    // A bomb: per frame, not fatal.
    let (_, mut b) = deflate_pair();
    let bomb = plain_compressed(1, compress_to_vec(&vec![0u8; 60 * 1024], 1));
    let bomb = b.inbound.decode(&mut bomb.clone()).unwrap_err();
    assert_eq!(predicates(&bomb), [false, false, false, true, false, false]);
}

#[test]
fn a_transport_error_is_an_internal_error_on_the_wire() {
    let io = weft_transform::TransformError::from(FrameError::Io(std::io::Error::other("reset")));
    assert_eq!(io.reason(), Reason::INTERNAL_ERROR);
    let size = weft_transform::TransformError::from(FrameError::PayloadTooLarge { len: 9, max: 8 });
    assert_eq!(size.reason(), Reason::FRAME_SIZE_ERROR);
}

#[test]
fn a_per_frame_error_names_the_type_of_the_frame_that_failed() {
    // A failed OPEN opens its id on the receiver (then it is reset), a
    // failed DATA does not: the error says which it was.
    let (_, mut b) = deflate_pair();
    let bad = Bytes::from(vec![0xff; 40]);
    for ty in [FrameType::OPEN, FrameType::DATA] {
        let mut wire = BytesMut::new();
        FrameCodec::default()
            .encode_frame(
                &Frame::new(ty, Flags::COMPRESSED, 5, bad.clone()),
                &mut wire,
            )
            .unwrap();
        let err = b.inbound.decode(&mut wire).unwrap_err();
        assert!(!err.is_fatal(), "{err}");
        assert_eq!((err.frame_type(), err.stream_id()), (Some(ty), Some(5)));
    }
    // A connection-level error belongs to no frame.
    let (mut a, mut b) = encrypted_pair();
    let mut wire = BytesMut::new();
    let data = Frame::new(FrameType::DATA, Flags::NONE, 1, json_payload());
    a.outbound.encode(&data, &mut wire).unwrap();
    let last = wire.len() - 1;
    wire[last] ^= 1;
    let forged = b.inbound.decode(&mut wire).unwrap_err();
    assert_eq!((forged.frame_type(), forged.stream_id()), (None, None));
}

/// A connection that negotiated no compression refuses a `COMPRESSED`
/// frame as fatal (PROTOCOL 4), and its read half stays failed: the
/// passthrough shares its frame's way out with the record path, whose
/// inflate step is where the flag is refused.
#[test]
fn a_plain_half_refuses_a_compressed_frame_for_good() {
    let (_, mut inbound) = passthrough(Limits::default());
    let mut wire = plain_compressed(3, compress_to_vec(b"hello", 1));
    let err = inbound.decode(&mut wire).unwrap_err();
    assert!(err.is_fatal(), "{err}");
    assert_eq!(err.reason(), Reason::PROTOCOL_ERROR);
    let mut next = BytesMut::new();
    FrameCodec::default()
        .encode_frame(
            &Frame::new(FrameType::DATA, Flags::NONE, 5, Bytes::from_static(b"x")),
            &mut next,
        )
        .unwrap();
    assert!(inbound.decode(&mut next).is_err(), "poisoned for good");
}
