//! The published Noise test vectors (Cacophony, see tests/data/README.md)
//! for the static-key patterns, `Noise_XX`, `XXpsk3`, `IK` and `IKpsk2`
//! (`_25519_AESGCM_SHA256`), run through weft's Noise layer with fixed
//! ephemeral and static keys: every handshake message, the handshake hash,
//! the static keys each side learns and every transport message must match.
#![cfg(not(feature = "dangerous-null-cipher-for-fuzzing"))]

mod common;

use common::FixedEphemeral;
use serde_json::Value;
use weft_transform::StaticKey;
use weft_transform::noise::{HandshakeState, Pattern, StaticKeys};

fn hex_field(v: &Value, key: &str) -> Vec<u8> {
    hex::decode(v[key].as_str().unwrap_or_else(|| panic!("missing {key}"))).unwrap()
}

fn key32(v: &Value, key: &str) -> Option<[u8; 32]> {
    v.get(key).map(|_| hex_field(v, key).try_into().unwrap())
}

fn psk(v: &Value, key: &str) -> Option<[u8; 32]> {
    v.get(key).map(|list| {
        hex::decode(list[0].as_str().unwrap())
            .unwrap()
            .try_into()
            .unwrap()
    })
}

fn vector(name: &str) -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/xx-ik-aesgcm-sha256.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["protocol_name"] == name)
        .unwrap_or_else(|| panic!("no vector for {name}"))
        .clone()
}

/// Runs one vector; returns how many messages were checked.
fn run(pattern: Pattern) -> usize {
    let v = vector(pattern.protocol_name());
    let side = |initiator: bool| {
        let who = if initiator { "init" } else { "resp" };
        let e = FixedEphemeral::from_hex(v[format!("{who}_ephemeral")].as_str().unwrap());
        let keys = StaticKeys {
            local: key32(&v, &format!("{who}_static")).map(StaticKey::from_private),
            remote: key32(&v, &format!("{who}_remote_static")),
        };
        let prologue = hex_field(&v, &format!("{who}_prologue"));
        let psk = psk(&v, &format!("{who}_psks"));
        HandshakeState::with_static(pattern, initiator, &prologue, psk, e.boxed(), keys).unwrap()
    };
    let (mut init, mut resp) = (side(true), side(false));
    let messages = v["messages"].as_array().unwrap();
    let handshake = pattern.message_count();
    assert!(messages.len() > handshake, "vector has transport messages");
    for (i, m) in messages.iter().take(handshake).enumerate() {
        let payload = hex_field(m, "payload");
        let (writer, reader) = if i % 2 == 0 {
            (&mut init, &mut resp)
        } else {
            (&mut resp, &mut init)
        };
        let mut wire = Vec::new();
        writer.write_message(&payload, &mut wire).unwrap();
        assert_eq!(
            hex::encode(&wire),
            hex::encode(hex_field(m, "ciphertext")),
            "message {i}"
        );
        let mut read = Vec::new();
        reader.read_message(&wire, &mut read).unwrap();
        assert_eq!(read, payload, "payload {i}");
    }
    assert!(init.is_finished() && resp.is_finished());
    let hash = hex_field(&v, "handshake_hash");
    assert_eq!(init.handshake_hash().to_vec(), hash);
    assert_eq!(resp.handshake_hash().to_vec(), hash);
    // Each side learnt the other's static public key.
    let public = |who: &str| StaticKey::from_private(key32(&v, who).unwrap()).public_key();
    assert_eq!(init.remote_static(), Some(public("resp_static")));
    assert_eq!(resp.remote_static(), Some(public("init_static")));
    let (mut i_send, mut i_recv) = init.split().unwrap().ciphers(true, u64::MAX);
    let (mut r_send, mut r_recv) = resp.split().unwrap().ciphers(false, u64::MAX);
    for (i, m) in messages.iter().enumerate().skip(handshake) {
        let payload = hex_field(m, "payload");
        // Transport messages keep alternating after the handshake.
        let (send, recv) = if i % 2 == 0 {
            (&mut i_send, &mut r_recv)
        } else {
            (&mut r_send, &mut i_recv)
        };
        let mut wire = Vec::new();
        send.encrypt(&[], &payload, &mut wire).unwrap();
        assert_eq!(
            hex::encode(&wire),
            hex::encode(hex_field(m, "ciphertext")),
            "transport {i}"
        );
        let mut read = Vec::new();
        recv.decrypt(&[], &wire, &mut read).unwrap();
        assert_eq!(read, payload);
    }
    messages.len()
}

#[test]
fn noise_xx_vector_matches() {
    assert_eq!(run(Pattern::XX), 6);
}

#[test]
fn noise_xxpsk3_vector_matches() {
    assert_eq!(run(Pattern::XXpsk3), 6);
}

#[test]
fn noise_ik_vector_matches() {
    assert_eq!(run(Pattern::IK), 6);
}

#[test]
fn noise_ikpsk2_vector_matches() {
    assert_eq!(run(Pattern::IKpsk2), 6);
}

#[test]
fn ik_vector_fails_against_another_responder_key() {
    // The initiator pinned a key the responder does not hold: the first
    // message does not decrypt.
    let v = vector(Pattern::IK.protocol_name());
    let e = |who: &str| FixedEphemeral::from_hex(v[format!("{who}_ephemeral")].as_str().unwrap());
    let mut init = HandshakeState::with_static(
        Pattern::IK,
        true,
        &hex_field(&v, "init_prologue"),
        None,
        e("init").boxed(),
        StaticKeys {
            local: key32(&v, "init_static").map(StaticKey::from_private),
            remote: Some(StaticKey::from_private([7; 32]).public_key()),
        },
    )
    .unwrap();
    let mut resp = HandshakeState::with_static(
        Pattern::IK,
        false,
        &hex_field(&v, "resp_prologue"),
        None,
        e("resp").boxed(),
        StaticKeys {
            local: key32(&v, "resp_static").map(StaticKey::from_private),
            remote: None,
        },
    )
    .unwrap();
    let mut wire = Vec::new();
    init.write_message(b"hello", &mut wire).unwrap();
    assert!(resp.read_message(&wire, &mut Vec::new()).is_err());
}
