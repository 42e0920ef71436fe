//! Sealed batches (docs/PROTOCOL.md 5.2): many frames in one record once
//! the peer reads them, one record each before, never on a plain
//! connection; and the hostile cases, each a typed fatal error: a frame
//! cut by the end of its batch, a type that never rides in one, an empty
//! batch, a header with flags, an oversize batch, a tampered or replayed
//! one.
#![cfg(not(fuzzing))]

mod common;

use bytes::{Bytes, BytesMut};
use common::{config, json_payload, offer_bytes, raw_initiator};
use weft_frame::{Flags, Frame, FrameType, HEADER_LEN, Header, Limits, Metadata};
use weft_transform::noise::CipherState;
use weft_transform::{
    BATCH, EncryptionPolicy, Handshake, Role, Session, TransformError, handshake_in_memory,
};

/// A mix of what the mux writes at 64 calls in flight.
fn frame(i: usize) -> Frame {
    let id = (i as u32 % 64) * 2 + 1;
    match i % 4 {
        0 => Frame {
            ty: FrameType::OPEN,
            flags: Flags::NONE,
            stream_id: id,
            metadata: Metadata::builder().method("svc/method").finish(),
            payload: Bytes::new(),
        },
        // Compressible when compression is on (over the minimum size).
        1 => Frame::new(FrameType::DATA, Flags::NONE, id, json_payload()),
        2 => Frame::new(
            FrameType::DATA,
            Flags::END_STREAM,
            id,
            Bytes::from(vec![i as u8; i % 40]),
        ),
        _ => Frame::window_update(0, 4096),
    }
}

fn encrypted(compression: bool) -> (Session, Session) {
    handshake_in_memory(
        config(EncryptionPolicy::Required, compression, None),
        config(EncryptionPolicy::Required, compression, None),
    )
    .unwrap()
}

fn decode_all(b: &mut Session, wire: &mut BytesMut) -> Vec<Frame> {
    let mut got = Vec::new();
    while let Some(f) = b.inbound.decode(wire).unwrap() {
        got.push(f);
    }
    assert!(wire.is_empty(), "{} bytes left", wire.len());
    got
}

/// The records on `wire`: (type, payload length), walking the headers.
fn records(wire: &[u8]) -> Vec<(FrameType, u32)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        let raw: &[u8; HEADER_LEN] = wire[at..at + HEADER_LEN].try_into().unwrap();
        let h = Header::parse(raw).unwrap();
        out.push((h.ty, h.payload_len));
        at += HEADER_LEN + h.body_len();
    }
    out
}

#[test]
fn frames_written_together_go_in_one_record_once_the_peer_reads_batches() {
    for compression in [false, true] {
        let (mut a, mut b) = encrypted(compression);
        assert!(a.outbound.allow_batches());
        let frames: Vec<Frame> = (0..64).map(frame).collect();
        let mut wire = BytesMut::new();
        a.outbound.encode_batched(&frames, &mut wire).unwrap();
        let recs = records(&wire);
        assert!(recs.iter().all(|(ty, _)| *ty == BATCH), "{recs:?}");
        let max = Limits::default().max_payload + 16;
        assert!(recs.iter().all(|(_, len)| *len <= max), "{recs:?}");
        // 16 JSON payloads of 1.3 KiB: a few batches of 64 KiB at most.
        assert!(recs.len() <= 2, "{} records for 64 frames", recs.len());
        assert_eq!(a.outbound.records(), recs.len() as u64);
        assert_eq!(decode_all(&mut b, &mut wire), frames);
        assert_eq!(b.inbound.records(), recs.len() as u64);
        // Single records and batches interleave on one counter.
        a.outbound.encode(&frame(0), &mut wire).unwrap();
        a.outbound.encode_batched(&frames[..3], &mut wire).unwrap();
        let mut want = vec![frame(0)];
        want.extend_from_slice(&frames[..3]);
        assert_eq!(decode_all(&mut b, &mut wire), want);
    }
}

#[test]
fn until_the_peer_reads_batches_each_frame_is_its_own_record() {
    let (mut a, mut b) = encrypted(false);
    assert!(!a.outbound.batches_allowed());
    let frames: Vec<Frame> = (0..10).map(frame).collect();
    let mut wire = BytesMut::new();
    assert!(a.outbound.begin_batch(&mut wire).unwrap().is_none());
    a.outbound.encode_batched(&frames, &mut wire).unwrap();
    assert!(records(&wire).iter().all(|(ty, _)| *ty != BATCH));
    assert_eq!(a.outbound.records(), 10);
    assert_eq!(decode_all(&mut b, &mut wire), frames);
}

#[test]
fn a_plain_connection_never_batches() {
    let (mut a, mut b) = handshake_in_memory(
        config(EncryptionPolicy::Off, true, None),
        config(EncryptionPolicy::Off, true, None),
    )
    .unwrap();
    assert!(!a.outbound.allow_batches());
    let frames: Vec<Frame> = (0..8).map(frame).collect();
    let mut wire = BytesMut::new();
    a.outbound.encode_batched(&frames, &mut wire).unwrap();
    assert_eq!(records(&wire).len(), 8);
    assert_eq!(decode_all(&mut b, &mut wire), frames);
}

#[test]
fn a_batch_never_holds_more_than_the_peers_max_payload() {
    let (mut a, mut b) = encrypted(false);
    a.outbound.allow_batches();
    let max = Limits::default().max_payload as usize;
    // Frames of a third of the limit: two per batch, the third does not fit.
    let third = Frame::new(
        FrameType::DATA,
        Flags::NONE,
        1,
        Bytes::from(vec![7; max / 3]),
    );
    // A frame at the limit fits no batch (its header is in the plaintext):
    // it goes as its own record.
    let whole = Frame::new(FrameType::DATA, Flags::NONE, 3, Bytes::from(vec![9; max]));
    let frames = vec![third.clone(), third.clone(), third.clone(), whole, third];
    let mut wire = BytesMut::new();
    a.outbound.encode_batched(&frames, &mut wire).unwrap();
    let tys: Vec<FrameType> = records(&wire).iter().map(|r| r.0).collect();
    // The third frame, alone before the large one, and the last, alone
    // after it, go as their own records: a batch of one costs more.
    assert_eq!(
        tys,
        [BATCH, FrameType::DATA, FrameType::DATA, FrameType::DATA]
    );
    assert!(records(&wire).iter().all(|r| r.1 as usize <= max + 16));
    assert_eq!(decode_all(&mut b, &mut wire), frames);
}

#[test]
fn frames_that_never_ride_in_a_batch_are_refused_by_the_sender() {
    let (mut a, _) = encrypted(false);
    a.outbound.allow_batches();
    let mut wire = BytesMut::new();
    let mut batch = a.outbound.begin_batch(&mut wire).unwrap().unwrap();
    for ty in [FrameType::KEY_UPDATE, FrameType::HANDSHAKE, BATCH] {
        let f = Frame::new(ty, Flags::NONE, 0, Bytes::from_static(&[0; 8]));
        assert!(
            a.outbound
                .push(&mut batch, &f, &mut wire)
                .unwrap_err()
                .is_batch()
        );
    }
    // An empty batch writes nothing.
    a.outbound.seal_batch(batch, &mut wire).unwrap();
    assert!(wire.is_empty());
    assert_eq!(a.outbound.records(), 0);
}

/// A responder session and a hand-made initiator's send cipher.
fn hostile_pair() -> (Session, CipherState) {
    let mut responder = Handshake::new(
        Role::Responder,
        config(EncryptionPolicy::Required, false, None),
    )
    .unwrap();
    let (send, _) =
        raw_initiator(&mut responder, &offer_bytes(2, false, 65_536, 100), None).unwrap();
    (responder.into_session().unwrap(), send)
}

/// A batch record sealed by hand as docs/PROTOCOL.md 5.2 lays it out,
/// with `flags`, `stream_id` and `metadata_len` in its header.
fn seal_batch_by_hand(
    cipher: &mut CipherState,
    plaintext: &[u8],
    flags: u8,
    stream_id: u32,
    metadata_len: u32,
) -> BytesMut {
    let header = Header {
        ty: BATCH,
        flags: Flags(flags),
        stream_id,
        metadata_len,
        payload_len: (plaintext.len() - metadata_len as usize) as u32 + 16,
    };
    let raw = header.to_bytes();
    let mut out = BytesMut::from(&raw[..]);
    let mut body = plaintext.to_vec();
    let tag = cipher.encrypt_in_place(&raw, &mut body).unwrap();
    out.extend_from_slice(&body);
    out.extend_from_slice(&tag);
    out
}

/// The plain encoding of `frames` (section 2), as a batch's plaintext.
fn plain(frames: &[Frame]) -> Vec<u8> {
    let mut out = BytesMut::new();
    let (mut o, _) = weft_transform::passthrough(Limits::default());
    for f in frames {
        o.encode(f, &mut out).unwrap();
    }
    out.to_vec()
}

/// What the responder makes of `wire`: the frames before the first error,
/// and that error.
fn receive(s: &mut Session, mut wire: BytesMut) -> (Vec<Frame>, TransformError) {
    let mut got = Vec::new();
    loop {
        match s.inbound.decode(&mut wire) {
            Ok(Some(f)) => got.push(f),
            Ok(None) => panic!("no error; frames {got:?}"),
            Err(e) => {
                assert!(e.is_fatal(), "{e}");
                // The half stays failed, as failed (not by decoding the
                // rest of the batch it was in).
                let again = s.inbound.decode(&mut wire).unwrap_err();
                assert!(again.to_string().contains("earlier fatal error"), "{again}");
                return (got, e);
            }
        }
    }
}

#[test]
fn a_hand_sealed_batch_of_an_independent_sender_is_understood() {
    let (mut s, mut c) = hostile_pair();
    let frames: Vec<Frame> = (0..9).map(frame).collect();
    let mut wire = seal_batch_by_hand(&mut c, &plain(&frames), 0, 0, 0);
    assert_eq!(decode_all(&mut s, &mut wire), frames);
}

#[test]
fn a_frame_cut_by_the_end_of_its_batch_is_fatal_after_the_whole_frames() {
    for cut in [1, 5, 17] {
        let (mut s, mut c) = hostile_pair();
        let frames = [frame(0), frame(2)];
        let mut pt = plain(&frames);
        pt.truncate(pt.len() - cut);
        let (got, e) = receive(&mut s, seal_batch_by_hand(&mut c, &pt, 0, 0, 0));
        let whole = usize::from(cut < plain(&frames[1..]).len());
        assert_eq!(got.len(), whole, "cut {cut}");
        assert!(e.is_batch(), "cut {cut}: {e}");
        assert!(e.to_string().contains("cut by the end"), "{e}");
    }
}

#[test]
fn a_key_update_handshake_or_batch_inside_a_batch_is_fatal() {
    for ty in [FrameType::KEY_UPDATE, FrameType::HANDSHAKE, BATCH] {
        let (mut s, mut c) = hostile_pair();
        let inner = Frame::new(
            ty,
            Flags::NONE,
            0,
            Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 1]),
        );
        let pt = plain(&[frame(0), inner, frame(2)]);
        let (got, e) = receive(&mut s, seal_batch_by_hand(&mut c, &pt, 0, 0, 0));
        assert_eq!(got, [frame(0)], "{ty:?}");
        assert!(e.is_batch(), "{ty:?}: {e}");
    }
}

#[test]
fn an_empty_batch_or_one_whose_header_has_flags_a_stream_or_metadata_is_fatal() {
    let (mut s, mut c) = hostile_pair();
    let (_, e) = receive(&mut s, seal_batch_by_hand(&mut c, &[], 0, 0, 0));
    assert!(e.is_batch() && e.to_string().contains("empty"), "{e}");
    let pt = plain(&[frame(0)]);
    for (flags, stream, metadata) in [(1, 0, 0), (0, 1, 0), (0, 0, 4)] {
        let (mut s, mut c) = hostile_pair();
        let (got, e) = receive(
            &mut s,
            seal_batch_by_hand(&mut c, &pt, flags, stream, metadata),
        );
        assert!(got.is_empty());
        assert!(e.is_batch(), "{flags} {stream} {metadata}: {e}");
    }
}

#[test]
fn an_inner_frame_over_our_limits_or_in_the_wrong_scope_is_a_framing_error() {
    // A PING on a stream; a frame claiming metadata over the limit.
    // (The sender's own encoder refuses both: written by hand.)
    let mut ping = plain(&[frame(0)]);
    let ping_header = Header {
        ty: FrameType::PING,
        flags: Flags::NONE,
        stream_id: 1,
        metadata_len: 0,
        payload_len: 8,
    };
    ping.extend_from_slice(&ping_header.to_bytes());
    ping.extend_from_slice(&[0; 8]);
    let mut over = plain(&[frame(0)]);
    over[8..12].copy_from_slice(&(1u32 << 24).to_be_bytes());
    for pt in [ping, over] {
        let (mut s, mut c) = hostile_pair();
        let (_, e) = receive(&mut s, seal_batch_by_hand(&mut c, &pt, 0, 0, 0));
        assert!(e.frame_error().is_some(), "{e}");
    }
}

/// A frame of a batch whose metadata does not parse, or that claims a
/// compression this connection did not negotiate, fails the connection at
/// that frame: the frames before it are handed out, and the half stays
/// failed (`receive` checks) rather than going on with the batch.
#[test]
fn a_batch_frame_with_bad_metadata_or_unnegotiated_compression_is_fatal() {
    let mut bad_metadata = plain(&[frame(2), frame(0)]);
    let method = bad_metadata
        .windows(b"svc/method".len())
        .position(|w| w == b"svc/method")
        .expect("the OPEN frame's method");
    bad_metadata[method] = 0xff;
    let mut compressed = plain(&[frame(2), frame(2)]);
    let second = plain(&[frame(2)]).len();
    compressed[second + 2] |= Flags::COMPRESSED.0;
    for (pt, metadata) in [(bad_metadata, true), (compressed, false)] {
        let (mut s, mut c) = hostile_pair();
        let (got, e) = receive(&mut s, seal_batch_by_hand(&mut c, &pt, 0, 0, 0));
        assert_eq!(got, [frame(2)], "{e}");
        assert_eq!(e.frame_error().is_some(), metadata, "{e}");
        if !metadata {
            assert!(e.to_string().contains("not negotiated"), "{e}");
        }
    }
}

#[test]
fn an_oversize_batch_is_refused_from_its_header_before_its_body_arrives() {
    let (mut s, _) = hostile_pair();
    let max = Limits::default().max_payload;
    let header = Header {
        ty: BATCH,
        flags: Flags::NONE,
        stream_id: 0,
        metadata_len: 0,
        payload_len: max + 17,
    };
    let mut wire = BytesMut::from(&header.to_bytes()[..]);
    let e = s.inbound.decode(&mut wire).unwrap_err();
    assert!(e.frame_error().is_some(), "{e}");
    assert!(wire.capacity() < max as usize, "room reserved for the body");
}

#[test]
fn a_tampered_or_replayed_batch_fails_to_authenticate() {
    let pt = plain(&[frame(0), frame(2)]);
    let (mut s, mut c) = hostile_pair();
    let mut wire = seal_batch_by_hand(&mut c, &pt, 0, 0, 0);
    wire[HEADER_LEN + 3] ^= 1;
    assert!(receive(&mut s, wire).1.is_authentication());
    // A replay: the second copy is opened at the next counter.
    let (mut s, mut c) = hostile_pair();
    let once = seal_batch_by_hand(&mut c, &pt, 0, 0, 0);
    let mut wire = once.clone();
    wire.extend_from_slice(&once);
    let (got, e) = receive(&mut s, wire);
    assert_eq!(got.len(), 2);
    assert!(e.is_authentication(), "{e}");
}
