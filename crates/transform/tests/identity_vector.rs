//! weft-level known answers for the static-key handshakes (XX: the server's
//! key learnt; IK: the server's key pinned), default offers, fixed keys
//! (tests/data/weft-v1-identity.json): the whole byte stream of each side
//! and the handshake hash. weft must reproduce them byte for byte, and so
//! must an independent initiator and responder built from snow and the
//! layouts of docs/PROTOCOL.md 3.1-3.3 (kinds `03` and `05`).
// Real AES-256-GCM only (see weft_vector.rs).
#![cfg(not(fuzzing))]

mod common;
mod known_answers;

use common::{handshake_frame, offer_bytes, prologue};
use known_answers::{Fields, check_identity, field, identity_fields, pinned, private};
use serde_json::Value;
use weft_frame::preface::PREFACE;
use weft_transform::StaticKey;

fn vectors() -> Vec<Fields> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/weft-v1-identity.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(identity_fields)
        .collect()
}

/// The same handshake from snow and PROTOCOL.md alone: each side's stream
/// is its preface, then one `HANDSHAKE` frame per Noise message, each
/// message prefixed with the kind byte; the payloads are the default offer,
/// the responder's offer and selection (encrypted + compressed), and (XX's
/// third message) nothing.
fn snow_transcript(v: &Fields) -> [String; 3] {
    let (pattern, kind) = if pinned(v) {
        ("Noise_IK_25519_AESGCM_SHA256", 5u8)
    } else {
        ("Noise_XX_25519_AESGCM_SHA256", 3u8)
    };
    let prologue = prologue();
    let responder_public = StaticKey::from_private(private(v, "responder_static")).public_key();
    let build = |initiator: bool| {
        let (s, e) = if initiator {
            ("initiator_static", "initiator_ephemeral")
        } else {
            ("responder_static", "responder_ephemeral")
        };
        let (s, e) = (private(v, s), private(v, e));
        let mut b = snow::Builder::new(pattern.parse().unwrap())
            .prologue(&prologue)
            .unwrap()
            .local_private_key(&s)
            .unwrap()
            .fixed_ephemeral_key_for_testing_only(&e);
        if initiator && pinned(v) {
            b = b.remote_public_key(&responder_public).unwrap();
        }
        if initiator {
            b.build_initiator().unwrap()
        } else {
            b.build_responder().unwrap()
        }
    };
    let (mut init, mut resp) = (build(true), build(false));
    let offer = offer_bytes(1, true, 65_536, 100);
    let mut reply = offer.clone();
    reply.push(0x03);
    let mut payloads = vec![offer, reply];
    if !pinned(v) {
        payloads.push(Vec::new());
    }
    let (mut sent_i, mut sent_r) = (PREFACE.to_vec(), PREFACE.to_vec());
    let mut buf = [0u8; 512];
    for (i, payload) in payloads.iter().enumerate() {
        let (writer, reader, sent) = if i % 2 == 0 {
            (&mut init, &mut resp, &mut sent_i)
        } else {
            (&mut resp, &mut init, &mut sent_r)
        };
        let n = writer.write_message(payload, &mut buf).unwrap();
        let mut msg = vec![kind];
        msg.extend_from_slice(&buf[..n]);
        sent.extend_from_slice(&handshake_frame(&msg));
        let got = reader.read_message(&buf[..n], &mut [0u8; 512]).unwrap();
        assert_eq!(got, payload.len());
    }
    assert!(init.is_handshake_finished() && resp.is_handshake_finished());
    assert_eq!(init.get_handshake_hash(), resp.get_handshake_hash());
    [sent_i, sent_r, init.get_handshake_hash().to_vec()].map(hex::encode)
}

#[test]
fn weft_reproduces_its_identity_vectors() {
    let all = vectors();
    let patterns: Vec<_> = all.iter().map(|v| field(v, "pattern")).collect();
    assert_eq!(patterns, ["XX", "IK"]);
    for v in &all {
        check_identity(v);
    }
}

#[test]
fn snow_reproduces_weft_identity_vectors() {
    for v in vectors() {
        let want = ["initiator_bytes", "responder_bytes", "handshake_hash"].map(|k| field(&v, k));
        assert_eq!(snow_transcript(&v), want, "{}", field(&v, "name"));
    }
}
