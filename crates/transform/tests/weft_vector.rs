//! weft's own known-answer vectors (tests/data/weft-v1-handshake.json): weft
//! reproduces them byte for byte, and so does an independent peer built from
//! snow, ring and the layouts of docs/PROTOCOL.md.
// These checks need real AES-256-GCM: the fuzz-only null cipher (compiled only
// under `cfg(fuzzing)`) authenticates nothing, so they do not build with it.
#![cfg(not(fuzzing))]

mod common;
mod known_answers;

use common::{handshake_frame, offer_bytes, prologue};
use known_answers::{check_weft, first_frame, weft_fields};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use serde_json::Value;
use weft_frame::HEADER_LEN;
use weft_frame::preface::PREFACE;

fn vectors() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/weft-v1-handshake.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

fn hex_of(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap()).unwrap()
}

fn psk(v: &Value) -> Option<[u8; 32]> {
    v["psk"]
        .as_str()
        .map(|h| hex::decode(h).unwrap().try_into().unwrap())
}

#[test]
fn weft_reproduces_its_vectors() {
    let all = vectors();
    assert_eq!(all.len(), 2);
    for v in &all {
        check_weft(&weft_fields(v));
    }
}

#[test]
fn snow_reproduces_weft_vectors() {
    for v in vectors() {
        let key = psk(&v);
        let (pattern, kind) = match key {
            Some(_) => ("Noise_NNpsk0_25519_AESGCM_SHA256", 2u8),
            None => ("Noise_NN_25519_AESGCM_SHA256", 1u8),
        };
        let ie = hex_of(&v["initiator_ephemeral"]);
        let re = hex_of(&v["responder_ephemeral"]);
        let prologue = prologue();
        let build = |e: &[u8], initiator: bool| {
            let mut b = snow::Builder::new(pattern.parse().unwrap())
                .prologue(&prologue)
                .unwrap()
                .fixed_ephemeral_key_for_testing_only(e);
            if let Some(k) = &key {
                b = b.psk(0, k).unwrap();
            }
            if initiator {
                b.build_initiator().unwrap()
            } else {
                b.build_responder().unwrap()
            }
        };
        let mut init = build(&ie, true);
        let mut resp = build(&re, false);
        let default_offer = offer_bytes(1, true, 65_536, 100);
        let mut buf = [0u8; 256];
        // Initiator stream: preface, HANDSHAKE(kind || Noise message 1).
        let n = init.write_message(&default_offer, &mut buf).unwrap();
        let mut msg = vec![kind];
        msg.extend_from_slice(&buf[..n]);
        let mut stream = PREFACE.to_vec();
        stream.extend_from_slice(&handshake_frame(&msg));
        assert_eq!(hex::encode(&stream), v["initiator_bytes"].as_str().unwrap());
        resp.read_message(&buf[..n], &mut [0u8; 256]).unwrap();
        // Responder stream: its offer and the selection (encrypted + compressed).
        let mut reply = default_offer.clone();
        reply.push(0x03);
        let n = resp.write_message(&reply, &mut buf).unwrap();
        let mut msg = vec![kind];
        msg.extend_from_slice(&buf[..n]);
        let mut stream = PREFACE.to_vec();
        stream.extend_from_slice(&handshake_frame(&msg));
        assert_eq!(hex::encode(&stream), v["responder_bytes"].as_str().unwrap());
        init.read_message(&buf[..n], &mut [0u8; 256]).unwrap();
        assert_eq!(
            hex::encode(init.get_handshake_hash()),
            v["handshake_hash"].as_str().unwrap()
        );
        // First record: ring with snow's initiator-to-responder key, nonce 0.
        let (k1, _) = init.dangerously_get_raw_split();
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &k1).unwrap());
        let frame = first_frame();
        let mut header = frame.header();
        header.payload_len += 16;
        let aad = header.to_bytes();
        let mut body = frame.metadata.as_bytes().to_vec();
        body.extend_from_slice(&frame.payload);
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key([0; 12]),
            Aad::from(&aad),
            &mut body,
        )
        .unwrap();
        let mut record = aad.to_vec();
        record.extend_from_slice(&body);
        assert_eq!(record.len(), HEADER_LEN + frame.metadata.len() + 5 + 16);
        assert_eq!(
            hex::encode(&record),
            v["first_record"]["bytes"].as_str().unwrap()
        );
    }
}
