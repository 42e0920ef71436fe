//! The published Noise test vectors (Cacophony, see tests/data/README.md)
//! for every pattern weft implements, `Noise_NN`, `NNpsk0`, `XX`, `XXpsk3`,
//! `IK` and `IKpsk2` (`_25519_AESGCM_SHA256`), run through weft's Noise
//! layer with fixed ephemeral and static keys: every handshake message, the
//! handshake hash, the static keys each side learns and every transport
//! message must match. (docs/PROTOCOL.md's appendix A carries the same
//! vectors; `protocol_appendix.rs` checks them there.)
// These checks need real AES-256-GCM: the fuzz-only null cipher (compiled only
// under `cfg(fuzzing)`) authenticates nothing, so they do not build with it.
#![cfg(not(fuzzing))]

mod common;
mod known_answers;

use common::FixedEphemeral;
use known_answers::{Fields, noise_fields, run_noise};
use serde_json::Value;
use weft_transform::StaticKey;
use weft_transform::noise::{HandshakeState, Pattern, StaticKeys};

/// The entries of one of the Cacophony files in tests/data.
fn file(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

/// The Cacophony entries weft runs, whole (transport messages included).
fn cacophony() -> Vec<Fields> {
    let mut all = file("nn-aesgcm-sha256.json");
    all.extend(file("xx-ik-aesgcm-sha256.json"));
    all.iter()
        .map(|v| noise_fields(v, None))
        .filter(|f| f["name"] != "Noise_NNpsk2_25519_AESGCM_SHA256")
        .collect()
}

fn vector(pattern: Pattern) -> Fields {
    cacophony()
        .into_iter()
        .find(|v| v["name"] == pattern.protocol_name())
        .unwrap_or_else(|| panic!("no vector for {pattern:?}"))
}

fn hex32(v: &Fields, key: &str) -> [u8; 32] {
    hex::decode(&v[key]).unwrap().try_into().unwrap()
}

#[test]
fn every_pattern_matches_its_vector() {
    for pattern in known_answers::PATTERNS {
        let checked = run_noise(&vector(pattern));
        assert!(checked >= 4, "{pattern:?}: {checked} messages");
    }
    assert_eq!(run_noise(&vector(Pattern::NN)), 6);
    assert_eq!(run_noise(&vector(Pattern::XX)), 6);
}

#[test]
fn nnpsk0_vector_fails_with_a_wrong_psk() {
    let v = vector(Pattern::NNpsk0);
    let m0 = hex::decode(&v["msg1.ciphertext"]).unwrap();
    let mut wrong = hex32(&v, "resp_psk");
    wrong[0] ^= 1;
    let resp_e = FixedEphemeral::from_hex(&v["resp_ephemeral"]);
    let mut resp = HandshakeState::new(
        Pattern::NNpsk0,
        false,
        &hex::decode(&v["resp_prologue"]).unwrap(),
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
fn ik_vector_fails_against_another_responder_key() {
    // The initiator pinned a key the responder does not hold: the first
    // message does not decrypt.
    let v = vector(Pattern::IK);
    let e = |who: &str| FixedEphemeral::from_hex(&v[&format!("{who}_ephemeral")]);
    let prologue = hex::decode(&v["init_prologue"]).unwrap();
    let keys = |who: &str, remote| StaticKeys {
        local: Some(StaticKey::from_private(hex32(&v, &format!("{who}_static")))),
        remote,
    };
    let pinned = Some(StaticKey::from_private([7; 32]).public_key());
    let mut init = HandshakeState::with_static(
        Pattern::IK,
        true,
        &prologue,
        None,
        e("init").boxed(),
        keys("init", pinned),
    )
    .unwrap();
    let mut resp = HandshakeState::with_static(
        Pattern::IK,
        false,
        &prologue,
        None,
        e("resp").boxed(),
        keys("resp", None),
    )
    .unwrap();
    let mut wire = Vec::new();
    init.write_message(b"hello", &mut wire).unwrap();
    assert!(resp.read_message(&wire, &mut Vec::new()).is_err());
}

#[test]
fn data_files_keep_their_entries() {
    let names = |f: &str| -> Vec<String> {
        file(f)
            .iter()
            .map(|v| v["protocol_name"].as_str().unwrap().to_owned())
            .collect()
    };
    // NNpsk2 is kept though weft does not implement it.
    assert_eq!(
        names("nn-aesgcm-sha256.json"),
        [
            "Noise_NN_25519_AESGCM_SHA256",
            "Noise_NNpsk0_25519_AESGCM_SHA256",
            "Noise_NNpsk2_25519_AESGCM_SHA256"
        ]
    );
    assert_eq!(
        names("xx-ik-aesgcm-sha256.json"),
        [
            "Noise_XX_25519_AESGCM_SHA256",
            "Noise_XXpsk3_25519_AESGCM_SHA256",
            "Noise_IK_25519_AESGCM_SHA256",
            "Noise_IKpsk2_25519_AESGCM_SHA256"
        ]
    );
}
