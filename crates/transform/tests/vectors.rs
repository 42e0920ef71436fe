//! The published Noise test vectors (Cacophony, see tests/data/README.md) for
//! `Noise_NN_25519_AESGCM_SHA256` and `Noise_NNpsk0_25519_AESGCM_SHA256`,
//! run through weft's Noise layer with fixed ephemeral keys: every handshake
//! message, the handshake hash and every transport message must match.
// These checks need real AES-256-GCM: the fuzz-only null cipher feature
// (see Cargo.toml) authenticates nothing, so they do not build with it.
#![cfg(not(feature = "dangerous-null-cipher-for-fuzzing"))]

mod common;

use common::FixedEphemeral;
use serde_json::Value;
use weft_transform::noise::{HandshakeState, Pattern};

fn hex_field(v: &Value, key: &str) -> Vec<u8> {
    hex::decode(v[key].as_str().unwrap_or_else(|| panic!("missing {key}"))).unwrap()
}

fn vectors() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/nn-aesgcm-sha256.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

fn psk(v: &Value, key: &str) -> Option<[u8; 32]> {
    v.get(key).map(|list| {
        hex::decode(list[0].as_str().unwrap())
            .unwrap()
            .try_into()
            .unwrap()
    })
}

/// Runs one vector; returns how many messages were checked.
fn run(v: &Value, pattern: Pattern) -> usize {
    assert_eq!(
        v["protocol_name"].as_str().unwrap(),
        pattern.protocol_name()
    );
    let init_e = FixedEphemeral::from_hex(v["init_ephemeral"].as_str().unwrap());
    let resp_e = FixedEphemeral::from_hex(v["resp_ephemeral"].as_str().unwrap());
    let mut init = HandshakeState::new(
        pattern,
        true,
        &hex_field(v, "init_prologue"),
        psk(v, "init_psks"),
        init_e.boxed(),
    )
    .unwrap();
    let mut resp = HandshakeState::new(
        pattern,
        false,
        &hex_field(v, "resp_prologue"),
        psk(v, "resp_psks"),
        resp_e.boxed(),
    )
    .unwrap();
    let messages = v["messages"].as_array().unwrap();
    assert!(messages.len() > 2, "vector has transport messages");
    for (i, m) in messages.iter().take(2).enumerate() {
        let payload = hex_field(m, "payload");
        let expected = hex_field(m, "ciphertext");
        let (writer, reader) = if i == 0 {
            (&mut init, &mut resp)
        } else {
            (&mut resp, &mut init)
        };
        let mut wire = Vec::new();
        writer.write_message(&payload, &mut wire).unwrap();
        assert_eq!(hex::encode(&wire), hex::encode(&expected), "message {i}");
        let mut read = Vec::new();
        reader.read_message(&wire, &mut read).unwrap();
        assert_eq!(read, payload, "payload {i}");
    }
    assert!(init.is_finished() && resp.is_finished());
    let hash = hex_field(v, "handshake_hash");
    assert_eq!(init.handshake_hash().to_vec(), hash);
    assert_eq!(resp.handshake_hash().to_vec(), hash);
    let (mut i_send, mut i_recv) = init.split().unwrap().ciphers(true, u64::MAX);
    let (mut r_send, mut r_recv) = resp.split().unwrap().ciphers(false, u64::MAX);
    for (i, m) in messages.iter().enumerate().skip(2) {
        let payload = hex_field(m, "payload");
        let expected = hex_field(m, "ciphertext");
        // Transport messages alternate, initiator first, as in the handshake.
        let (send, recv) = if i % 2 == 0 {
            (&mut i_send, &mut r_recv)
        } else {
            (&mut r_send, &mut i_recv)
        };
        let mut wire = Vec::new();
        send.encrypt(&[], &payload, &mut wire).unwrap();
        assert_eq!(
            hex::encode(&wire),
            hex::encode(&expected),
            "transport message {i}"
        );
        let mut read = Vec::new();
        recv.decrypt(&[], &wire, &mut read).unwrap();
        assert_eq!(read, payload);
    }
    assert_eq!(init_e.calls() + resp_e.calls(), 2, "one DH per side");
    messages.len()
}

#[test]
fn noise_nn_vector_matches() {
    let all = vectors();
    let v = all
        .iter()
        .find(|v| v["protocol_name"] == "Noise_NN_25519_AESGCM_SHA256")
        .unwrap();
    assert_eq!(run(v, Pattern::NN), 6);
}

#[test]
fn noise_nnpsk0_vector_matches() {
    let all = vectors();
    let v = all
        .iter()
        .find(|v| v["protocol_name"] == "Noise_NNpsk0_25519_AESGCM_SHA256")
        .unwrap();
    assert!(run(v, Pattern::NNpsk0) >= 4);
}

#[test]
fn nnpsk0_vector_fails_with_a_wrong_psk() {
    let all = vectors();
    let v = all
        .iter()
        .find(|v| v["protocol_name"] == "Noise_NNpsk0_25519_AESGCM_SHA256")
        .unwrap();
    let m0 = hex_field(&v["messages"][0], "ciphertext");
    let mut wrong = psk(v, "resp_psks").unwrap();
    wrong[0] ^= 1;
    let resp_e = FixedEphemeral::from_hex(v["resp_ephemeral"].as_str().unwrap());
    let mut resp = HandshakeState::new(
        Pattern::NNpsk0,
        false,
        &hex_field(v, "resp_prologue"),
        Some(wrong),
        resp_e.boxed(),
    )
    .unwrap();
    let mut out = Vec::new();
    assert!(resp.read_message(&m0, &mut out).is_err());
    assert!(out.is_empty(), "no payload released");
    assert_eq!(resp_e.calls(), 0, "no key agreement before authentication");
}

#[test]
fn data_file_keeps_its_three_vectors() {
    let names: Vec<String> = vectors()
        .iter()
        .map(|v| v["protocol_name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "Noise_NN_25519_AESGCM_SHA256",
            "Noise_NNpsk0_25519_AESGCM_SHA256",
            "Noise_NNpsk2_25519_AESGCM_SHA256"
        ]
    );
}
