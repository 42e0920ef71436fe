//! A sealed batch byte by byte (the vector of docs/PROTOCOL.md 5.2, also
//! checked against an independent AES-GCM), and the key accounting of
//! batches.

use bytes::{Bytes, BytesMut};
use weft_frame::{Flags, Frame, FrameType, Limits, Metadata};

use crate::noise::CipherState;
use crate::pipeline::{Inbound, Outbound, PipelineParams};
use crate::rekey::{OpenKey, RekeyLimits, SendKey};

/// The vector's key: bytes 00 to 1f.
fn key() -> [u8; 32] {
    std::array::from_fn(|i| i as u8)
}

/// Both halves of one direction under `key()`, nonce 0, batches allowed.
fn halves(rekey: RekeyLimits) -> (Outbound, Inbound) {
    let params = |seal, open| PipelineParams {
        local_limits: Limits::default(),
        peer_limits: Limits::default(),
        compression: false,
        compression_min_size: usize::MAX,
        local_max_message: u32::MAX,
        local_max_ratio: 1,
        peer_max_ratio: 1,
        peer_max_message: u32::MAX,
        seal,
        open,
    };
    let (mut out, _) = params(Some(SendKey::new(CipherState::new(&key()), rekey)), None).build();
    let (_, inb) = params(None, Some(OpenKey::new(CipherState::new(&key())))).build();
    assert!(out.allow_batches());
    (out, inb)
}

/// The vector's frames: a call's `OPEN` (method `n`), its `DATA` with
/// `END_STREAM`, and a connection `WINDOW_UPDATE`.
fn frames() -> Vec<Frame> {
    vec![
        Frame {
            ty: FrameType::OPEN,
            flags: Flags::NONE,
            stream_id: 1,
            metadata: Metadata::builder().method("n").finish(),
            payload: Bytes::new(),
        },
        Frame::new(
            FrameType::DATA,
            Flags::END_STREAM,
            1,
            Bytes::from_static(b"weft"),
        ),
        Frame::window_update(0, 4096),
    ]
}

/// docs/PROTOCOL.md 5.2's vector: the whole record (header, ciphertext,
/// tag) of `frames()` sealed as one batch under `key()` at counter 0.
const VECTOR: &str = concat!(
    // header: version 1, type 08, flags 0, reserved 0, stream 0,
    // metadata length 0, payload length 76 (60 + the tag)
    "0108000000000000000000000000004c",
    // the three frames (60 bytes), encrypted
    "0fbdb5deb52c83bc08a8a931182c9199d343573d2981612f809eb382c5ff",
    "5d564e5fe6b85d97de7232c071f5c1ce694ea90741e6797146a150b62f26",
    // tag
    "cf12041b4f076cb23b6bf630dc3bb056",
);

#[test]
fn a_batch_is_sealed_as_the_protocol_vector_says_and_opens_to_its_frames() {
    let (mut out, mut inb) = halves(RekeyLimits::default());
    let mut wire = BytesMut::new();
    out.encode_batched(&frames(), &mut wire).unwrap();
    assert_eq!(hex::encode(&wire), VECTOR);
    assert_eq!(out.records(), 1, "one record, one nonce");
    for f in frames() {
        assert_eq!(inb.decode(&mut wire).unwrap(), Some(f));
    }
    assert_eq!(inb.decode(&mut wire).unwrap(), None);
    assert_eq!(inb.records(), 1);
}

#[test]
fn a_key_due_within_a_batch_is_updated_before_the_batch_begins() {
    let (mut out, mut inb) = halves(RekeyLimits::default());
    // One record short of the sender's limit: a batch could cross it.
    out.send_key_mut()
        .skip_for_testing(RekeyLimits::default().records - 1);
    inb.open_key_mut()
        .skip_for_testing(RekeyLimits::default().records - 1);
    let mut wire = BytesMut::new();
    out.encode_batched(&frames(), &mut wire).unwrap();
    assert_eq!(out.key_updates(), 1);
    // The KEY_UPDATE record comes first, alone, then the batch.
    assert_eq!(wire[1], FrameType::KEY_UPDATE.0);
    assert_eq!(wire[16 + 8 + 16 + 1], super::BATCH.0);
    for f in frames() {
        assert_eq!(inb.decode(&mut wire).unwrap(), Some(f));
    }
    assert_eq!(inb.key_updates(), 1);
    assert!(wire.is_empty());
}

#[test]
fn a_batch_counts_its_whole_plaintext_against_the_key() {
    // A byte limit just above one batch: the second batch updates first.
    let batch_len: usize = frames().iter().map(Frame::encoded_len).sum();
    let limits = RekeyLimits {
        records: 1 << 20,
        bytes: (Limits::default().max_payload as usize + batch_len) as u64,
    };
    let (mut out, mut inb) = halves(limits);
    let mut wire = BytesMut::new();
    out.encode_batched(&frames(), &mut wire).unwrap();
    assert_eq!(out.key_updates(), 0);
    out.encode_batched(&frames(), &mut wire).unwrap();
    assert_eq!(
        out.key_updates(),
        1,
        "{batch_len} bytes already under the key"
    );
    let mut got = Vec::new();
    while let Some(f) = inb.decode(&mut wire).unwrap() {
        got.push(f);
    }
    assert_eq!(got.len(), 6);
}

/// A batch that ends up holding one frame leaves as that frame's own
/// record, byte for byte what `encode` seals under the same key and
/// nonce; with two frames it stays a batch. (A writer begins a batch
/// before it knows whether a second frame follows.)
#[test]
fn a_batch_of_one_frame_is_sealed_as_the_frames_own_record() {
    for frame in frames() {
        let (mut batched, mut inb) = halves(RekeyLimits::default());
        let (mut alone, _) = halves(RekeyLimits::default());
        let mut wire = BytesMut::new();
        let mut batch = batched.begin_batch(&mut wire).unwrap().unwrap();
        assert!(batched.push(&mut batch, &frame, &mut wire).unwrap());
        batched.seal_batch(batch, &mut wire).unwrap();
        let mut want = BytesMut::new();
        alone.encode(&frame, &mut want).unwrap();
        assert_eq!(wire, want, "{:?}", frame.ty);
        assert_eq!(batched.records(), 1);
        assert_eq!(inb.decode(&mut wire).unwrap(), Some(frame));
        assert!(wire.is_empty());
    }
    let (mut out, _) = halves(RekeyLimits::default());
    let mut wire = BytesMut::new();
    let mut batch = out.begin_batch(&mut wire).unwrap().unwrap();
    for frame in &frames()[..2] {
        assert!(out.push(&mut batch, frame, &mut wire).unwrap());
    }
    out.seal_batch(batch, &mut wire).unwrap();
    assert_eq!(wire[1], super::BATCH.0, "two frames: a batch");
}

/// The vector as docs/PROTOCOL.md 5.2 prints it (the hex runs after
/// "record (92 bytes):"), so the document cannot drift from the test.
#[test]
fn the_protocol_document_prints_the_same_vector() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/PROTOCOL.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let start = doc
        .find("record (92 bytes):")
        .expect("section 5.2's vector");
    let block = &doc[start..];
    let end = block.find("```").expect("the vector's block ends");
    let hex: String = block[..end]
        .split_whitespace()
        .filter(|w| w.len() >= 16 && w.chars().all(|c| c.is_ascii_hexdigit()))
        .collect();
    assert_eq!(hex, VECTOR);
}

/// Replies' trailers in a batch: the usual ok status (stepped over, not
/// checked) and blocks of its length that are not it, which go through
/// the metadata check like any other: each frame comes out as sent, with
/// its own metadata and payload, and a bad block of that length still
/// fails the half.
#[test]
fn trailers_of_the_ok_status_length_come_out_as_sent() {
    let (mut out, mut inb) = halves(RekeyLimits::default());
    let reply = |id, metadata: Metadata, payload: &'static [u8]| Frame {
        ty: FrameType::DATA,
        flags: Flags::END_STREAM,
        stream_id: id,
        metadata,
        payload: Bytes::from_static(payload),
    };
    let failed = Metadata::builder().status(1).finish();
    assert_eq!(failed.len(), Metadata::ok_status().len());
    let sent = vec![
        reply(1, Metadata::ok_status(), b"\x00\x00\x00\x01a"),
        reply(3, failed, b""),
        reply(5, Metadata::ok_status(), b""),
        frames().remove(0),
        reply(7, Metadata::ok_status(), b"tail"),
    ];
    let mut wire = BytesMut::new();
    out.encode_batched(&sent, &mut wire).unwrap();
    assert_eq!(out.records(), 1, "one batch");
    let mut got = Vec::new();
    while let Some(frame) = inb.decode(&mut wire).unwrap() {
        got.push(frame);
    }
    assert!(wire.is_empty(), "{} bytes left", wire.len());
    assert_eq!(got, sent);
    for frame in &got {
        assert_eq!(
            frame.metadata.is_ok_status(),
            frame.metadata == Metadata::ok_status()
        );
    }

    // A 7-byte block that is no valid metadata (the status entry's length
    // runs past its end), where the ok status would be
    // (written by hand into the batch: the write half would not send it).
    let (mut out, mut inb) = halves(RekeyLimits::default());
    let mut plain = BytesMut::new();
    let header = weft_frame::Header {
        ty: FrameType::DATA,
        flags: Flags::END_STREAM,
        stream_id: 1,
        metadata_len: 7,
        payload_len: 0,
    };
    plain.extend_from_slice(&header.to_bytes());
    plain.extend_from_slice(&[0x03, 0, 9, 0, 0, 0, 0]);
    let mut wire = BytesMut::new();
    let batch = out.begin_batch(&mut wire).unwrap().unwrap();
    wire.extend_from_slice(&plain);
    out.seal_batch(batch, &mut wire).unwrap();
    let err = inb.decode(&mut wire).unwrap_err();
    assert!(err.is_fatal(), "{err}");
    assert!(inb.decode(&mut wire).is_err(), "the half stays failed");
}
