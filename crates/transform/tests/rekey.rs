//! Key updates (docs/PROTOCOL.md section 5.1): by records and by bytes,
//! each direction on its own, records in flight across an update, and the
//! hostile cases (forged, replayed, out of order, malformed, sent by the
//! caller).
#![cfg(not(fuzzing))]

mod common;

use bytes::{Bytes, BytesMut};
use common::{config, json_payload, offer_bytes, raw_initiator, seal_record};
use weft_frame::{Flags, Frame, FrameType, HEADER_LEN, Metadata, Reason};
use weft_transform::noise::CipherState;
use weft_transform::{
    EncryptionPolicy, Handshake, HandshakeConfig, RekeyLimits, Role, Session, handshake_in_memory,
};

fn with_rekey(records: u64, bytes: u64, compression: bool) -> HandshakeConfig {
    let mut c = config(EncryptionPolicy::Required, compression, None);
    c.rekey = RekeyLimits { records, bytes };
    c
}

/// A mix of every frame shape the mux sends.
fn frame(i: usize) -> Frame {
    let id = (i as u32 % 50) * 2 + 1;
    match i % 5 {
        0 => Frame {
            ty: FrameType::OPEN,
            flags: Flags::NONE,
            stream_id: id,
            metadata: Metadata::builder().method("svc/method").finish(),
            payload: json_payload(),
        },
        1 => Frame::new(
            FrameType::DATA,
            Flags::END_STREAM,
            id,
            Bytes::from(vec![i as u8; i % 300]),
        ),
        2 => Frame::new(FrameType::PING, Flags::NONE, 0, Bytes::from_static(&[7; 8])),
        3 => Frame::new(
            FrameType::WINDOW_UPDATE,
            Flags::NONE,
            0,
            Bytes::from_static(&[0, 1, 0, 0]),
        ),
        _ => Frame::new(
            FrameType::RESET,
            Flags::NONE,
            id,
            Bytes::from_static(&[0, 0, 0, 8]),
        ),
    }
}

/// Sends frames `range` from `a` to `b`, `batch` at a time in flight, and
/// checks each arrives as sent.
fn send(a: &mut Session, b: &mut Session, range: std::ops::Range<usize>, batch: usize) {
    let mut wire = BytesMut::new();
    let frames: Vec<Frame> = range.map(frame).collect();
    for chunk in frames.chunks(batch) {
        for f in chunk {
            a.outbound.encode(f, &mut wire).unwrap();
        }
        for f in chunk {
            assert_eq!(&b.inbound.decode(&mut wire).unwrap().unwrap(), f);
        }
        assert!(wire.is_empty());
    }
}

#[test]
fn keys_update_by_records_each_direction_on_its_own() {
    let (mut a, mut b) =
        handshake_in_memory(with_rekey(4, 1 << 30, true), with_rekey(50, 1 << 30, true)).unwrap();
    // 3 frames then an update per key; 7 records in flight at a time.
    send(&mut a, &mut b, 0..100, 7);
    assert_eq!(
        (a.outbound.key_updates(), b.inbound.key_updates()),
        (33, 33)
    );
    send(&mut b, &mut a, 0..100, 1);
    assert_eq!((b.outbound.key_updates(), a.inbound.key_updates()), (2, 2));
    // Both directions go on after many updates.
    send(&mut a, &mut b, 100..400, 64);
    assert_eq!(a.outbound.key_updates(), 133);
}

#[test]
fn keys_update_by_bytes() {
    // No compression: each OPEN carries about 1.3 KiB; 4 KiB per key.
    let (mut a, mut b) = handshake_in_memory(
        with_rekey(1 << 20, 4096, false),
        with_rekey(1 << 20, 4096, false),
    )
    .unwrap();
    send(&mut a, &mut b, 0..500, 10);
    let bytes: usize = (0..500)
        .map(|i| {
            let f = frame(i);
            f.metadata.len() + f.payload.len()
        })
        .sum();
    let updates = a.outbound.key_updates();
    assert!(
        updates as usize >= bytes / 4096,
        "{updates} updates for {bytes} bytes"
    );
    assert!(
        (updates as usize) < bytes / 2000,
        "{updates} updates for {bytes} bytes"
    );
    assert_eq!(b.inbound.key_updates(), updates);
}

#[test]
fn a_frame_alone_over_the_byte_limit_is_sent_under_a_fresh_key() {
    let (mut a, mut b) = handshake_in_memory(
        with_rekey(1 << 20, 100, false),
        with_rekey(1 << 20, 100, false),
    )
    .unwrap();
    // 1.3 KiB each, so every frame after the first goes under its own key.
    let mut wire = BytesMut::new();
    for _ in 0..20 {
        a.outbound.encode(&frame(0), &mut wire).unwrap();
    }
    for _ in 0..20 {
        assert_eq!(b.inbound.decode(&mut wire).unwrap().unwrap(), frame(0));
    }
    assert_eq!(
        (a.outbound.key_updates(), b.inbound.key_updates()),
        (19, 19)
    );
}

/// A responder session and a hand-made initiator's (send, receive) ciphers.
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

fn key_update(cipher: &mut CipherState, generation: u64) -> BytesMut {
    seal_record(
        cipher,
        FrameType::KEY_UPDATE,
        Flags::NONE,
        0,
        &generation.to_be_bytes(),
    )
}

fn ping(cipher: &mut CipherState) -> BytesMut {
    seal_record(cipher, FrameType::PING, Flags::NONE, 0, &[1; 8])
}

#[test]
fn an_independent_sender_following_the_document_is_understood() {
    // Hand-sealed updates (Noise's Rekey() on a bare CipherState) decode.
    let (mut s, mut c) = hostile_pair();
    for generation in 1..=5 {
        let mut w = ping(&mut c);
        w.extend_from_slice(&key_update(&mut c, generation));
        c.rekey();
        w.extend_from_slice(&ping(&mut c));
        assert_eq!(
            s.inbound.decode(&mut w).unwrap().unwrap().ty,
            FrameType::PING
        );
        assert_eq!(
            s.inbound.decode(&mut w).unwrap().unwrap().ty,
            FrameType::PING
        );
        assert!(w.is_empty());
    }
    assert_eq!(s.inbound.key_updates(), 5);
}

#[test]
fn a_forged_key_update_fails_authentication() {
    let (mut s, mut c) = hostile_pair();
    let mut w = key_update(&mut c, 1);
    let tag_at = w.len() - 1;
    w[tag_at] ^= 1;
    let err = s.inbound.decode(&mut w).unwrap_err();
    assert!(err.is_authentication() && err.is_fatal(), "{err}");
    assert_eq!(err.reason(), Reason::PROTOCOL_ERROR);
    // A key update sealed under a key the attacker made up fails too.
    let (mut s, _) = hostile_pair();
    let mut forger = CipherState::new(&[9; 32]);
    let err = s
        .inbound
        .decode(&mut key_update(&mut forger, 1))
        .unwrap_err();
    assert!(err.is_authentication(), "{err}");
}

#[test]
fn a_replayed_or_reordered_key_update_fails_authentication() {
    // Replayed: a genuine update record seen again later.
    let (mut s, mut c) = hostile_pair();
    let mut w = key_update(&mut c, 1);
    let replay = w.clone();
    s.inbound.decode(&mut w).unwrap();
    c.rekey();
    s.inbound.decode(&mut ping(&mut c)).unwrap().unwrap();
    let err = s.inbound.decode(&mut replay.clone()).unwrap_err();
    assert!(err.is_authentication(), "{err}");
    // Reordered: the record after an update delivered before it.
    let (mut s, mut c) = hostile_pair();
    let update = key_update(&mut c, 1);
    c.rekey();
    let mut after = ping(&mut c);
    let err = s.inbound.decode(&mut after).unwrap_err();
    assert!(err.is_authentication(), "{err}");
    drop(update);
    // A record still under the old key after the update.
    let (mut s, mut c) = hostile_pair();
    let mut w = key_update(&mut c, 1);
    w.extend_from_slice(&ping(&mut c));
    assert!(s.inbound.decode(&mut w).unwrap_err().is_authentication());
}

#[test]
fn an_authentic_but_malformed_key_update_is_a_clear_fatal_error() {
    type Make = fn(&mut CipherState) -> BytesMut;
    let cases: [(&str, Make); 4] = [
        ("generation skipped", |c| key_update(c, 2)),
        ("generation zero", |c| key_update(c, 0)),
        ("short body", |c| {
            seal_record(c, FrameType::KEY_UPDATE, Flags::NONE, 0, &[0, 0, 0, 1])
        }),
        ("with flags", |c| {
            seal_record(c, FrameType::KEY_UPDATE, Flags::ACK, 0, &1u64.to_be_bytes())
        }),
    ];
    for (name, make) in cases {
        let (mut s, mut c) = hostile_pair();
        let mut w = make(&mut c);
        let err = s.inbound.decode(&mut w).unwrap_err();
        assert!(err.is_key_update() && err.is_fatal(), "{name}: {err}");
        assert_eq!(err.reason(), Reason::PROTOCOL_ERROR, "{name}");
        assert!(err.to_string().contains("bad key update"), "{name}: {err}");
        // The half stays failed.
        c.rekey();
        assert!(s.inbound.decode(&mut ping(&mut c)).is_err(), "{name}");
    }
    // On a stream: the frame layer refuses it before it is opened.
    let (mut s, mut c) = hostile_pair();
    let mut w = seal_record(
        &mut c,
        FrameType::KEY_UPDATE,
        Flags::NONE,
        1,
        &1u64.to_be_bytes(),
    );
    let err = s.inbound.decode(&mut w).unwrap_err();
    assert!(
        err.is_fatal() && err.reason() == Reason::PROTOCOL_ERROR,
        "{err}"
    );
}

#[test]
fn the_caller_cannot_send_a_key_update() {
    let (mut a, _b) =
        handshake_in_memory(with_rekey(4, 1 << 30, false), with_rekey(4, 1 << 30, false)).unwrap();
    let mut w = BytesMut::new();
    let f = Frame::new(
        FrameType::KEY_UPDATE,
        Flags::NONE,
        0,
        Bytes::from_static(&[0; 8]),
    );
    let err = a.outbound.encode(&f, &mut w).unwrap_err();
    assert!(err.is_key_update(), "{err}");
    assert!(w.is_empty());
}

#[test]
fn a_key_update_record_is_exactly_as_documented() {
    // 16-byte header (type 07, flags 0, stream 0, metadata 0, payload 24),
    // then the sealed 8-byte generation and the tag.
    let (mut a, mut b) =
        handshake_in_memory(with_rekey(2, 1 << 30, false), with_rekey(2, 1 << 30, false)).unwrap();
    let mut w = BytesMut::new();
    a.outbound.encode(&frame(2), &mut w).unwrap();
    let first = w.len();
    a.outbound.encode(&frame(2), &mut w).unwrap();
    assert_eq!(
        w.len(),
        first + HEADER_LEN + 24 + first,
        "update, then the frame"
    );
    let update = &w[first..first + HEADER_LEN];
    let mut expected = [0u8; HEADER_LEN];
    expected[0] = 1; // version
    expected[1] = 0x07;
    expected[15] = 24;
    assert_eq!(update, expected);
    b.inbound.decode(&mut w).unwrap().unwrap();
    b.inbound.decode(&mut w).unwrap().unwrap();
    assert_eq!(b.inbound.key_updates(), 1);
}
