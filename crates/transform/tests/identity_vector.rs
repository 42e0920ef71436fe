//! weft-level known answers for the static-key handshakes (XX: the server's
//! key learnt; IK: the server's key pinned), default offers, fixed keys
//! (tests/data/weft-v1-identity.json): the whole byte stream of each side
//! and the handshake hash. weft must reproduce them byte for byte, and so
//! must an independent initiator and responder built from snow and the
//! layouts of docs/PROTOCOL.md 3.1-3.3 (kinds `03` and `05`).
// Real AES-256-GCM only (see weft_vector.rs).
#![cfg(not(feature = "dangerous-null-cipher-for-fuzzing"))]

mod common;

use bytes::BytesMut;
use common::{FixedEphemeral, handshake_frame, offer_bytes, prologue};
use serde_json::Value;
use weft_frame::preface::PREFACE;
use weft_transform::{Handshake, HandshakeConfig, Role, StaticKey};

fn vectors() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/weft-v1-identity.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

fn key(v: &Value, name: &str) -> [u8; 32] {
    hex::decode(v[name].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap()
}

/// Whether the vector pins the server's key (IK) or learns it (XX).
fn pinned(v: &Value) -> bool {
    match v["pattern"].as_str().unwrap() {
        "IK" => true,
        "XX" => false,
        other => panic!("no pattern {other}"),
    }
}

/// What each side sent, in order, and the handshake hash.
#[derive(Debug, PartialEq)]
struct Transcript {
    initiator: String,
    responder: String,
    hash: String,
}

impl Transcript {
    fn of(v: &Value) -> Transcript {
        let s = |k: &str| v[k].as_str().unwrap().to_owned();
        Transcript {
            initiator: s("initiator_bytes"),
            responder: s("responder_bytes"),
            hash: s("handshake_hash"),
        }
    }
}

/// weft's `Handshake` on both sides with the vector's keys, run to the end.
fn weft_transcript(v: &Value) -> Transcript {
    let server = StaticKey::from_private(key(v, "responder_static"));
    let client_cfg = HandshakeConfig {
        identity: Some(StaticKey::from_private(key(v, "initiator_static"))),
        server_key: pinned(v).then(|| server.public_key()),
        ..HandshakeConfig::default()
    };
    let server_cfg = HandshakeConfig {
        identity: Some(server),
        ..HandshakeConfig::default()
    };
    let ie = FixedEphemeral::new(key(v, "initiator_ephemeral"));
    let re = FixedEphemeral::new(key(v, "responder_ephemeral"));
    let mut a = Handshake::with_ephemeral(Role::Initiator, client_cfg, ie.boxed()).unwrap();
    let mut b = Handshake::with_ephemeral(Role::Responder, server_cfg, re.boxed()).unwrap();
    let (mut sent_a, mut sent_b) = (Vec::new(), Vec::new());
    // At most three messages: a bounded exchange, whatever goes wrong.
    for _ in 0..4 {
        let mut ab = BytesMut::new();
        a.poll_transmit(&mut ab);
        sent_a.extend_from_slice(&ab);
        b.handle_input(&mut ab).unwrap();
        let mut ba = BytesMut::new();
        b.poll_transmit(&mut ba);
        sent_b.extend_from_slice(&ba);
        a.handle_input(&mut ba).unwrap();
    }
    assert!(a.is_complete() && b.is_complete());
    let (sa, sb) = (a.into_session().unwrap(), b.into_session().unwrap());
    let hash = sa.negotiated.handshake_hash.unwrap();
    assert_eq!(sb.negotiated.handshake_hash, Some(hash));
    // Each side learnt the other's static key.
    let public = |name| StaticKey::from_private(key(v, name)).public_key();
    assert_eq!(sa.negotiated.peer_key, Some(public("responder_static")));
    assert_eq!(sb.negotiated.peer_key, Some(public("initiator_static")));
    Transcript {
        initiator: hex::encode(sent_a),
        responder: hex::encode(sent_b),
        hash: hex::encode(hash),
    }
}

/// The same handshake from snow and PROTOCOL.md alone: each side's stream
/// is its preface, then one `HANDSHAKE` frame per Noise message, each
/// message prefixed with the kind byte; the payloads are the default offer,
/// the responder's offer and selection (encrypted + compressed), and (XX's
/// third message) nothing.
fn snow_transcript(v: &Value) -> Transcript {
    let (pattern, kind) = if pinned(v) {
        ("Noise_IK_25519_AESGCM_SHA256", 5u8)
    } else {
        ("Noise_XX_25519_AESGCM_SHA256", 3u8)
    };
    let prologue = prologue();
    let responder_public = StaticKey::from_private(key(v, "responder_static")).public_key();
    let build = |initiator: bool| {
        let (s, e) = if initiator {
            ("initiator_static", "initiator_ephemeral")
        } else {
            ("responder_static", "responder_ephemeral")
        };
        let (s, e) = (key(v, s), key(v, e));
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
    Transcript {
        initiator: hex::encode(sent_i),
        responder: hex::encode(sent_r),
        hash: hex::encode(init.get_handshake_hash()),
    }
}

#[test]
fn weft_reproduces_its_identity_vectors() {
    let all = vectors();
    let patterns: Vec<_> = all.iter().map(|v| v["pattern"].as_str()).collect();
    assert_eq!(patterns, [Some("XX"), Some("IK")]);
    for v in &all {
        assert_eq!(weft_transcript(v), Transcript::of(v), "{}", v["name"]);
    }
}

#[test]
fn snow_reproduces_weft_identity_vectors() {
    for v in vectors() {
        assert_eq!(snow_transcript(&v), Transcript::of(&v), "{}", v["name"]);
    }
}
