//! Known-answer vectors and their checks, shared by the tests that read
//! them from tests/data (`vectors.rs`, `weft_vector.rs`) and the one that
//! reads them from docs/PROTOCOL.md's appendix (`protocol_appendix.rs`).
//! A vector is a flat list of named hex fields, whatever its source.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use weft_frame::{Flags, Frame, FrameType, Metadata};
use weft_transform::noise::{HandshakeState, Pattern, StaticKeys};
use weft_transform::{Handshake, HandshakeConfig, Role, StaticKey};

use crate::common::FixedEphemeral;

/// Every Noise pattern weft implements.
pub const PATTERNS: [Pattern; 6] = [
    Pattern::NN,
    Pattern::NNpsk0,
    Pattern::XX,
    Pattern::XXpsk3,
    Pattern::IK,
    Pattern::IKpsk2,
];

/// A vector's fields by name (values in hex, but `name` and `kind`).
pub type Fields = BTreeMap<String, String>;

pub fn field<'a>(v: &'a Fields, key: &str) -> &'a str {
    v.get(key)
        .unwrap_or_else(|| panic!("{:?}: missing {key}", v.get("name")))
}

fn hex_field(v: &Fields, key: &str) -> Vec<u8> {
    hex::decode(field(v, key)).unwrap_or_else(|e| panic!("{key}: {e}"))
}

pub fn key32(v: &Fields, key: &str) -> Option<[u8; 32]> {
    v.get(key).map(|_| hex_field(v, key).try_into().unwrap())
}

/// A Cacophony entry as flat fields: `kind = noise`, `name` (the protocol
/// name), the keys, `handshake_hash`, and `msgN.payload` /
/// `msgN.ciphertext` for the first `messages` messages (all of them when
/// `None`; the handshake's when `Some(pattern.message_count())`).
pub fn noise_fields(v: &Value, messages: Option<usize>) -> Fields {
    let mut f = Fields::new();
    f.insert("kind".into(), "noise".into());
    f.insert("name".into(), v["protocol_name"].as_str().unwrap().into());
    for (key, value) in v.as_object().unwrap() {
        match (key.as_str(), value) {
            ("protocol_name" | "messages", _) => {}
            (k, Value::String(s)) => {
                f.insert(k.into(), s.clone());
            }
            // PSK lists hold one key in these vectors.
            (k, Value::Array(list)) => {
                assert_eq!(list.len(), 1, "{k}");
                f.insert(
                    k.trim_end_matches('s').into(),
                    list[0].as_str().unwrap().into(),
                );
            }
            (k, other) => panic!("{k}: {other}"),
        }
    }
    let all = v["messages"].as_array().unwrap();
    for (i, m) in all.iter().take(messages.unwrap_or(all.len())).enumerate() {
        for part in ["payload", "ciphertext"] {
            f.insert(
                format!("msg{}.{part}", i + 1),
                m[part].as_str().unwrap().into(),
            );
        }
    }
    f
}

/// A weft v1 entry of weft-v1-handshake.json as flat fields.
pub fn weft_fields(v: &Value) -> Fields {
    let mut f = strings(
        "weft-v1",
        v,
        &[
            "name",
            "initiator_ephemeral",
            "responder_ephemeral",
            "initiator_bytes",
            "responder_bytes",
            "handshake_hash",
        ],
    );
    if let Some(psk) = v["psk"].as_str() {
        f.insert("psk".into(), psk.into());
    }
    f.insert(
        "first_record".into(),
        v["first_record"]["bytes"].as_str().unwrap().into(),
    );
    f
}

/// An entry of weft-v1-identity.json as flat fields: kind
/// `weft-v1-identity`, `name`, `pattern` (`XX` or `IK`), the four private
/// keys, both sides' streams and the handshake hash.
pub fn identity_fields(v: &Value) -> Fields {
    strings(
        "weft-v1-identity",
        v,
        &[
            "name",
            "pattern",
            "initiator_static",
            "responder_static",
            "initiator_ephemeral",
            "responder_ephemeral",
            "initiator_bytes",
            "responder_bytes",
            "handshake_hash",
        ],
    )
}

/// Fields `kind` and each of `keys`, a string of `v`'s.
fn strings(kind: &str, v: &Value, keys: &[&str]) -> Fields {
    let mut f = Fields::new();
    f.insert("kind".into(), kind.into());
    for &key in keys {
        f.insert(key.into(), v[key].as_str().unwrap().into());
    }
    f
}

/// Whether an identity vector pins the server's key (IK) or learns it (XX).
pub fn pinned(v: &Fields) -> bool {
    match field(v, "pattern") {
        "IK" => true,
        "XX" => false,
        other => panic!("no pattern {other}"),
    }
}

/// A private key of an identity vector (all four are present).
pub fn private(v: &Fields, name: &str) -> [u8; 32] {
    key32(v, name).unwrap_or_else(|| panic!("{name}"))
}

/// Runs an identity vector through weft-transform's handshake with default
/// offers, the static keys given (the server's pinned for IK) and the
/// fixed ephemeral keys, to the end: both sides' whole streams and the
/// handshake hash must match byte for byte, and each side must learn the
/// other's static key.
pub fn check_identity(v: &Fields) {
    let server = StaticKey::from_private(private(v, "responder_static"));
    let client_cfg = HandshakeConfig {
        identity: Some(StaticKey::from_private(private(v, "initiator_static"))),
        server_key: pinned(v).then(|| server.public_key()),
        ..HandshakeConfig::default()
    };
    let server_cfg = HandshakeConfig {
        identity: Some(server),
        ..HandshakeConfig::default()
    };
    let ie = FixedEphemeral::new(private(v, "initiator_ephemeral"));
    let re = FixedEphemeral::new(private(v, "responder_ephemeral"));
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
    let name = field(v, "name");
    assert_eq!(hex::encode(sent_a), field(v, "initiator_bytes"), "{name}");
    assert_eq!(hex::encode(sent_b), field(v, "responder_bytes"), "{name}");
    assert!(a.is_complete() && b.is_complete(), "{name}");
    let (sa, sb) = (a.into_session().unwrap(), b.into_session().unwrap());
    let hash = sa.negotiated.handshake_hash.unwrap();
    assert_eq!(hex::encode(hash), field(v, "handshake_hash"), "{name}");
    assert_eq!(sb.negotiated.handshake_hash, Some(hash));
    let public = |k| StaticKey::from_private(private(v, k)).public_key();
    assert_eq!(sa.negotiated.peer_key, Some(public("responder_static")));
    assert_eq!(sb.negotiated.peer_key, Some(public("initiator_static")));
}

/// The pattern a Noise vector is for.
pub fn pattern_of(v: &Fields) -> Pattern {
    let name = field(v, "name");
    *PATTERNS
        .iter()
        .find(|p| p.protocol_name() == name)
        .unwrap_or_else(|| panic!("no pattern {name}"))
}

/// Runs a Noise vector through weft's Noise layer with its fixed keys:
/// every message given must match byte for byte, and be read back; the
/// handshake hash and the static keys each side learns must match.
/// Returns how many messages were checked.
pub fn run_noise(v: &Fields) -> usize {
    let pattern = pattern_of(v);
    let side = |who: &str, initiator: bool| {
        let e = FixedEphemeral::from_hex(field(v, &format!("{who}_ephemeral")));
        let keys = StaticKeys {
            local: key32(v, &format!("{who}_static")).map(StaticKey::from_private),
            remote: key32(v, &format!("{who}_remote_static")),
        };
        let prologue = hex_field(v, &format!("{who}_prologue"));
        let psk = key32(v, &format!("{who}_psk"));
        let hs = HandshakeState::with_static(pattern, initiator, &prologue, psk, e.boxed(), keys);
        (hs.unwrap(), e)
    };
    let ((mut init, init_e), (mut resp, resp_e)) = (side("init", true), side("resp", false));
    let handshake = pattern.message_count();
    let mut n = 0;
    while v.contains_key(&format!("msg{}.payload", n + 1)) {
        n += 1;
    }
    assert!(n >= handshake, "{}: {n} messages", field(v, "name"));
    for i in 0..handshake {
        let payload = hex_field(v, &format!("msg{}.payload", i + 1));
        let expected = hex_field(v, &format!("msg{}.ciphertext", i + 1));
        let (writer, reader) = if i % 2 == 0 {
            (&mut init, &mut resp)
        } else {
            (&mut resp, &mut init)
        };
        let mut wire = Vec::new();
        writer.write_message(&payload, &mut wire).unwrap();
        assert_eq!(
            hex::encode(&wire),
            hex::encode(&expected),
            "message {}",
            i + 1
        );
        let mut read = Vec::new();
        reader.read_message(&wire, &mut read).unwrap();
        assert_eq!(read, payload, "payload {}", i + 1);
    }
    assert!(init.is_finished() && resp.is_finished());
    let hash = hex_field(v, "handshake_hash");
    assert_eq!(init.handshake_hash().to_vec(), hash);
    assert_eq!(resp.handshake_hash().to_vec(), hash);
    if pattern.has_static_keys() {
        let public = |who: &str| StaticKey::from_private(key32(v, who).unwrap()).public_key();
        assert_eq!(init.remote_static(), Some(public("resp_static")));
        assert_eq!(resp.remote_static(), Some(public("init_static")));
    } else {
        assert_eq!(init_e.calls() + resp_e.calls(), 2, "one DH per side");
    }
    let (mut i_send, mut i_recv) = init.split().unwrap().ciphers(true, u64::MAX);
    let (mut r_send, mut r_recv) = resp.split().unwrap().ciphers(false, u64::MAX);
    for i in handshake..n {
        let payload = hex_field(v, &format!("msg{}.payload", i + 1));
        let expected = hex_field(v, &format!("msg{}.ciphertext", i + 1));
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
            hex::encode(&expected),
            "transport {}",
            i + 1
        );
        let mut read = Vec::new();
        recv.decrypt(&[], &wire, &mut read).unwrap();
        assert_eq!(read, payload);
    }
    n
}

/// The first record of the weft v1 vectors: DATA on stream 1, END_STREAM,
/// method `echo`, payload `hello`.
pub fn first_frame() -> Frame {
    Frame {
        ty: FrameType::DATA,
        flags: Flags::END_STREAM,
        stream_id: 1,
        metadata: Metadata::builder().method("echo").finish(),
        payload: Bytes::from_static(b"hello"),
    }
}

/// Runs a weft v1 vector through weft-transform's handshake with default
/// offers and its fixed ephemeral keys: both sides' whole streams, the
/// handshake hash and the first record must match byte for byte.
pub fn check_weft(v: &Fields) {
    let cfg = HandshakeConfig {
        psk: key32(v, "psk").map(Into::into),
        ..HandshakeConfig::default()
    };
    let ie = FixedEphemeral::from_hex(field(v, "initiator_ephemeral"));
    let re = FixedEphemeral::from_hex(field(v, "responder_ephemeral"));
    let mut a = Handshake::with_ephemeral(Role::Initiator, cfg.clone(), ie.boxed()).unwrap();
    let mut b = Handshake::with_ephemeral(Role::Responder, cfg, re.boxed()).unwrap();
    let mut ab = BytesMut::new();
    a.poll_transmit(&mut ab);
    assert_eq!(hex::encode(&ab), field(v, "initiator_bytes"));
    b.handle_input(&mut ab).unwrap();
    let mut ba = BytesMut::new();
    b.poll_transmit(&mut ba);
    assert_eq!(hex::encode(&ba), field(v, "responder_bytes"));
    a.handle_input(&mut ba).unwrap();
    let (mut sa, mut sb) = (a.into_session().unwrap(), b.into_session().unwrap());
    let hash = sa.negotiated.handshake_hash.unwrap();
    assert_eq!(hex::encode(hash), field(v, "handshake_hash"));
    assert_eq!(sb.negotiated.handshake_hash, Some(hash));
    let mut wire = BytesMut::new();
    sa.outbound.encode(&first_frame(), &mut wire).unwrap();
    assert_eq!(hex::encode(&wire), field(v, "first_record"));
    assert_eq!(
        sb.inbound.decode(&mut wire).unwrap().unwrap(),
        first_frame()
    );
}

/// The key-update vector of docs/PROTOCOL.md appendix A, computed by
/// weft-transform: the handshake of the `Noise_NN, default offers` vector
/// (same ephemeral keys), the initiator replacing its send key after
/// `rekey_records` records, and the initiator's first three records: the
/// first frame under the handshake's key (counter 0), the `KEY_UPDATE`
/// record (counter 1, still under that key, generation 1), and the first
/// frame again under the new key (counter 2).
pub fn key_update_vector() -> Fields {
    const INITIATOR_EPHEMERAL: &str =
        "893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a";
    const RESPONDER_EPHEMERAL: &str =
        "bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b";
    const REKEY_RECORDS: u64 = 2;
    let mut cfg = HandshakeConfig::default();
    cfg.rekey.records = REKEY_RECORDS;
    let ie = FixedEphemeral::from_hex(INITIATOR_EPHEMERAL);
    let re = FixedEphemeral::from_hex(RESPONDER_EPHEMERAL);
    let a = Handshake::with_ephemeral(Role::Initiator, cfg, ie.boxed()).unwrap();
    let b =
        Handshake::with_ephemeral(Role::Responder, HandshakeConfig::default(), re.boxed()).unwrap();
    let (mut sa, mut sb) = weft_transform::drive_pair(a, b).unwrap();
    let mut first = BytesMut::new();
    sa.outbound.encode(&first_frame(), &mut first).unwrap();
    let mut second = BytesMut::new();
    sa.outbound.encode(&first_frame(), &mut second).unwrap();
    assert_eq!(
        sa.outbound.key_updates(),
        1,
        "the second frame follows an update"
    );
    // 16-byte header, 8-byte generation, 16-byte tag.
    let update = second.split_to(40);
    // The responder, with no key-update setting, follows.
    let mut all = first.clone();
    all.extend_from_slice(&update);
    all.extend_from_slice(&second);
    for _ in 0..2 {
        assert_eq!(sb.inbound.decode(&mut all).unwrap().unwrap(), first_frame());
    }
    assert!(all.is_empty());
    assert_eq!(sb.inbound.key_updates(), 1);
    let mut f = Fields::new();
    for (k, v) in [
        (
            "name",
            "Noise_NN, a key update after the first record".to_owned(),
        ),
        ("kind", "weft-v1-key-update".to_owned()),
        ("initiator_ephemeral", INITIATOR_EPHEMERAL.to_owned()),
        ("responder_ephemeral", RESPONDER_EPHEMERAL.to_owned()),
        ("rekey_records", hex::encode(REKEY_RECORDS.to_be_bytes())),
        ("first_record", hex::encode(&first)),
        ("key_update_record", hex::encode(&update)),
        ("next_record", hex::encode(&second)),
    ] {
        f.insert(k.into(), v);
    }
    f
}

/// A key-update vector must be exactly what weft computes
/// ([`key_update_vector`], which also checks that a receiver follows it).
pub fn check_key_update(v: &Fields) {
    assert_eq!(v, &key_update_vector(), "{}", field(v, "name"));
}
