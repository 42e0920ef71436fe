//! docs/PROTOCOL.md's appendix A, read from the document itself: every
//! vector in it must be reproduced by weft (the weft v1 handshakes and the
//! key update by weft-transform, the Noise vectors by its Noise layer), and
//! must agree with the data files in tests/data it was taken from (the key
//! update with what weft computes), so the document cannot drift from what
//! is tested.
// These checks need real AES-256-GCM: the fuzz-only null cipher (compiled only
// under `cfg(fuzzing)`) authenticates nothing, so they do not build with it.
#![cfg(not(fuzzing))]

mod common;
mod known_answers;

use known_answers::{
    Fields, check_identity, check_key_update, check_weft, identity_fields, key_update_vector,
    noise_fields, pattern_of, run_noise, weft_fields,
};
use serde_json::Value;

/// The appendix's vectors: each ```text block of `field = value` lines
/// after the heading "## Appendix A".
fn appendix() -> Vec<Fields> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/PROTOCOL.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let start = doc
        .find("\n## Appendix A. Test vectors\n")
        .expect("PROTOCOL.md has appendix A");
    let mut vectors = Vec::new();
    let mut block: Option<Fields> = None;
    for line in doc[start..].lines() {
        match (line, &mut block) {
            ("```text", None) => block = Some(Fields::new()),
            ("```", Some(_)) => vectors.push(block.take().unwrap()),
            (_, Some(fields)) => {
                let (k, v) = line
                    .split_once(" = ")
                    .unwrap_or_else(|| panic!("not `field = value`: {line}"));
                let old = fields.insert(k.to_owned(), v.to_owned());
                assert!(old.is_none(), "{k} twice");
            }
            (_, None) if line.starts_with("## ") && !line.starts_with("## Appendix A") => break,
            _ => {}
        }
    }
    assert!(block.is_none(), "unclosed block");
    vectors
}

fn data(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"].as_array().unwrap().clone()
}

/// What the appendix must hold, from the data files: the weft vectors
/// whole, the Noise ones up to the end of the handshake.
fn expected() -> Vec<Fields> {
    let mut all: Vec<Fields> = data("weft-v1-handshake.json")
        .iter()
        .map(weft_fields)
        .collect();
    all.extend(data("weft-v1-identity.json").iter().map(identity_fields));
    // Computed here rather than read from a file: it is weft's own output.
    all.push(key_update_vector());
    for file in ["nn-aesgcm-sha256.json", "xx-ik-aesgcm-sha256.json"] {
        for v in data(file) {
            let full = noise_fields(&v, None);
            let Some(p) = known_answers::PATTERNS
                .iter()
                .find(|p| p.protocol_name() == full["name"])
            else {
                continue; // NNpsk2: not a weft pattern
            };
            all.push(noise_fields(&v, Some(p.message_count())));
        }
    }
    all
}

#[test]
fn the_appendix_holds_the_tested_vectors_exactly() {
    let (got, want) = (appendix(), expected());
    let names = |v: &[Fields]| v.iter().map(|f| f["name"].clone()).collect::<Vec<_>>();
    assert_eq!(names(&got), names(&want));
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{}", g["name"]);
    }
}

#[test]
fn weft_reproduces_every_appendix_vector() {
    let vectors = appendix();
    let mut kinds = (0, 0, 0, 0);
    for v in &vectors {
        match v["kind"].as_str() {
            "weft-v1" => {
                check_weft(v);
                kinds.0 += 1;
            }
            "weft-v1-identity" => {
                check_identity(v);
                kinds.1 += 1;
            }
            "weft-v1-key-update" => {
                check_key_update(v);
                kinds.3 += 1;
            }
            "noise" => {
                let n = run_noise(v);
                assert_eq!(n, pattern_of(v).message_count(), "{}", v["name"]);
                kinds.2 += 1;
            }
            other => panic!("unknown kind {other}"),
        }
    }
    assert_eq!(
        kinds,
        (2, 2, 6, 1),
        "NN and NNpsk0; XX and IK; the six Noise patterns; a key update"
    );
}
