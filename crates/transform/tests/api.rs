//! The public API's edges: configuration checks, malformed handshake
//! messages that are not in the hostile catalogue, Noise misuse, error
//! texts and predicates, and the in-memory helpers.
// These checks need real AES-256-GCM: the fuzz-only null cipher (compiled only
// under `cfg(fuzzing)`) authenticates nothing, so they do not build with it.
#![cfg(not(fuzzing))]

mod common;

use bytes::{Bytes, BytesMut};
use common::{FixedEphemeral, handshake_frame, json_payload, offer_bytes};
use weft_frame::preface::PREFACE;
use weft_frame::{Flags, Frame, FrameCodec, FrameType, Limits, Reason};
use weft_transform::noise::{
    CipherState, HandshakeState, NoiseError, Pattern, RingEphemeral, StaticKeys,
};
use weft_transform::{
    EncryptionPolicy, Handshake, HandshakeConfig, MIN_MAX_METADATA, Offer, Role, StaticKey,
    drive_pair, handshake_in_memory, passthrough,
};

fn responder_error(message: &[u8], config: HandshakeConfig) -> weft_transform::HandshakeError {
    let mut hs = Handshake::new(Role::Responder, config).unwrap();
    let mut input = BytesMut::from(&PREFACE[..]);
    input.extend_from_slice(&handshake_frame(message));
    common::rejection(&mut hs, &mut input)
}

#[test]
fn in_memory_helpers_complete_a_handshake() {
    let (a, b) =
        handshake_in_memory(HandshakeConfig::default(), HandshakeConfig::default()).unwrap();
    assert_eq!(a.negotiated.handshake_hash, b.negotiated.handshake_hash);
    let refused = handshake_in_memory(
        HandshakeConfig {
            offer: Offer {
                encryption: EncryptionPolicy::Required,
                ..Offer::default()
            },
            ..HandshakeConfig::default()
        },
        HandshakeConfig {
            offer: Offer {
                encryption: EncryptionPolicy::Off,
                ..Offer::default()
            },
            ..HandshakeConfig::default()
        },
    );
    assert!(refused.unwrap_err().is_policy_conflict());
    let fixed = drive_pair(
        Handshake::with_ephemeral(
            Role::Initiator,
            HandshakeConfig::default(),
            FixedEphemeral::new([1; 32]).boxed(),
        )
        .unwrap(),
        Handshake::with_ephemeral(
            Role::Responder,
            HandshakeConfig::default(),
            FixedEphemeral::new([2; 32]).boxed(),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(fixed.0.negotiated.encrypted);
}

#[test]
fn allow_lists_that_would_check_nothing_are_config_errors_saying_what_to_add() {
    use weft_transform::{AllowList, StaticKey};
    let allow = || Some(AllowList::new([]));
    let identity = || Some(StaticKey::from_private([3; 32]));
    let cases = [
        (
            Role::Responder,
            HandshakeConfig {
                allow: allow(),
                ..HandshakeConfig::default()
            },
            "invalid configuration: an allow-list needs a key pair of our own (identity): \
             without one no client proves a key and the list would check nothing",
        ),
        (
            Role::Initiator,
            HandshakeConfig {
                allow: allow(),
                identity: identity(),
                ..HandshakeConfig::default()
            },
            "invalid configuration: an allow-list is for servers and a client would ignore it: \
             to check the server, pin its public key (server_key, with an identity of our own)",
        ),
        (
            Role::Initiator,
            HandshakeConfig {
                server_key: Some([9; 32]),
                ..HandshakeConfig::default()
            },
            "invalid configuration: a pinned server key needs a key pair of our own (identity)",
        ),
    ];
    for (role, config, text) in cases {
        let e = config.check(role).unwrap_err();
        assert!(e.is_config());
        assert_eq!(
            e.config_problem(),
            text.strip_prefix("invalid configuration: ")
        );
        assert_eq!(e.to_string(), format!("handshake failed: {text}"));
        // Every handshake checks it first.
        let e = Handshake::new(role, config).unwrap_err();
        assert_eq!(e.to_string(), format!("handshake failed: {text}"));
    }
    // What is fine: an allow-list with an identity on a server.
    let server = HandshakeConfig {
        allow: allow(),
        identity: identity(),
        ..HandshakeConfig::default()
    };
    assert!(server.check(Role::Responder).is_ok());
    assert_eq!(
        HandshakeConfig::default()
            .check(Role::Initiator)
            .map_err(|e| e.is_config()),
        Ok(())
    );
}

#[test]
fn invalid_configurations_are_rejected_up_front() {
    let with = |f: &dyn Fn(&mut HandshakeConfig)| {
        let mut c = HandshakeConfig::default();
        f(&mut c);
        Handshake::new(Role::Initiator, c).unwrap_err()
    };
    for e in [
        with(&|c| c.offer.max_payload = 1000),
        with(&|c| {
            c.limits.max_payload = 2 << 20;
            c.offer.max_payload = 2 << 20;
        }),
        with(&|c| c.offer.max_message = 0),
        with(&|c| c.max_ratio = 0),
        with(&|c| c.rekey.records = 1),
        with(&|c| c.rekey.records = weft_transform::MAX_RECORDS_PER_KEY + 1),
        with(&|c| c.rekey.bytes = 0),
        with(&|c| c.rekey.bytes = weft_transform::MAX_BYTES_PER_KEY / 2 + 1),
    ] {
        assert!(e.is_config(), "{e}");
        assert!(e.to_string().contains("invalid configuration"));
    }
    // The effective max payload is the smaller of offer and limits.
    let c = HandshakeConfig {
        limits: Limits {
            max_payload: 20_000,
            ..Limits::default()
        },
        ..HandshakeConfig::default()
    };
    let (_, b) = handshake_in_memory(c, HandshakeConfig::default()).unwrap();
    assert_eq!(b.negotiated.peer_limits.max_payload, 20_000);
}

#[test]
fn malformed_messages_are_protocol_errors() {
    let psk_config = HandshakeConfig {
        psk: Some([1; 32].into()),
        ..HandshakeConfig::default()
    };
    // Unknown kind.
    assert!(responder_error(&[9, 1, 2, 3], HandshakeConfig::default()).is_protocol());
    // Plain hello against a pre-shared key, NN against a key, psk0 without one.
    let mut plain = vec![0u8];
    plain.extend_from_slice(&offer_bytes(0, true, 65_536, 100));
    assert!(responder_error(&plain, psk_config.clone()).is_policy_conflict());
    assert!(responder_error(&[1; 60], psk_config).is_policy_conflict());
    let err = responder_error(&[2; 60], HandshakeConfig::default());
    assert!(err.is_policy_conflict());
    assert!(err.to_string().contains("none is configured here"));
    // A plain hello that claims encryption is on.
    let mut lying = vec![0u8];
    lying.extend_from_slice(&offer_bytes(1, true, 65_536, 100));
    assert!(responder_error(&lying, HandshakeConfig::default()).is_protocol());
    // Bad offers inside a plain hello.
    for (at, value) in [(1, 7u8), (2, 2), (3, 1), (0, 2)] {
        let mut bad = plain.clone();
        bad[1 + at] = value;
        assert!(
            responder_error(&bad, HandshakeConfig::default()).is_protocol(),
            "{at}"
        );
    }
    let mut tiny_payload = vec![0u8];
    tiny_payload.extend_from_slice(&offer_bytes(0, true, 100, 100));
    assert!(responder_error(&tiny_payload, HandshakeConfig::default()).is_protocol());
    let mut short = plain.clone();
    short.pop();
    assert!(responder_error(&short, HandshakeConfig::default()).is_protocol());
    // A Noise message too short for its ephemeral key.
    assert!(responder_error(&[1; 10], HandshakeConfig::default()).is_protocol());
    // A non-zero reserved byte or flags in the HANDSHAKE frame header.
    let mut hs = Handshake::new(Role::Responder, HandshakeConfig::default()).unwrap();
    let mut input = BytesMut::from(&PREFACE[..]);
    let mut frame = handshake_frame(&plain);
    frame[3] = 1;
    input.extend_from_slice(&frame);
    assert!(hs.handle_input(&mut input).unwrap_err().is_protocol());
}

#[test]
fn a_peer_offer_with_either_message_limit_zero_is_rejected() {
    // Offer bytes 12..16 are max message, 16..20 max ratio (docs/PROTOCOL.md 3.4).
    for zeroed in [12..16, 16..20] {
        let mut hello = vec![0u8];
        hello.extend_from_slice(&offer_bytes(0, true, 65_536, 100));
        hello[1 + zeroed.start..1 + zeroed.end].fill(0);
        let err = responder_error(&hello, HandshakeConfig::default());
        assert!(err.is_protocol(), "bytes {zeroed:?} zero: {err}");
    }
}

/// An offer whose max metadata could not hold even the settings frame
/// (40 bytes) is refused in the handshake, with a rejection (`ff 06`)
/// and an error naming the field, not after it (docs/PROTOCOL.md 3.4).
#[test]
fn a_peer_offer_below_the_minimum_max_metadata_is_rejected_by_name() {
    let hello = |max_metadata: u32| {
        let mut hello = vec![0u8];
        hello.extend_from_slice(&offer_bytes(0, true, 65_536, 100));
        // Offer bytes 8..12 are max metadata.
        hello[1 + 8..1 + 12].copy_from_slice(&max_metadata.to_be_bytes());
        hello
    };
    for max_metadata in [0, 39, MIN_MAX_METADATA - 1] {
        let err = responder_error(&hello(max_metadata), HandshakeConfig::default());
        assert!(err.is_protocol(), "{max_metadata}: {err}");
        assert!(
            err.to_string().contains("max metadata below 1,024 bytes"),
            "{max_metadata}: {err}"
        );
    }
    let mut hs = Handshake::new(Role::Responder, HandshakeConfig::default()).unwrap();
    let mut input = BytesMut::from(&PREFACE[..]);
    input.extend_from_slice(&handshake_frame(&hello(MIN_MAX_METADATA)));
    hs.handle_input(&mut input).unwrap();
    assert!(hs.is_complete());
    assert!(
        hs.into_session().is_ok(),
        "the smallest allowed is accepted"
    );
    // Our own offer is held to the same range before anything is sent.
    let mut small = HandshakeConfig::default();
    small.limits.max_metadata = 39;
    let err = Handshake::new(Role::Initiator, small).unwrap_err();
    assert!(err.to_string().contains("max metadata"), "{err}");
}

#[test]
fn initiator_checks_the_reply() {
    let off = HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Off,
            ..Offer::default()
        },
        ..HandshakeConfig::default()
    };
    let reply = |msg: &[u8]| {
        let mut hs = Handshake::new(Role::Initiator, off.clone()).unwrap();
        let mut input = BytesMut::from(&PREFACE[..]);
        input.extend_from_slice(&handshake_frame(msg));
        hs.handle_input(&mut input).map(|()| hs.is_complete())
    };
    let mut good = vec![0u8];
    good.extend_from_slice(&offer_bytes(0, true, 65_536, 100));
    good.push(0x02);
    assert!(reply(&good).unwrap());
    // Another kind, a wrong length, a selection that does not follow.
    let mut other_kind = good.clone();
    other_kind[0] = 1;
    assert!(reply(&other_kind).unwrap_err().is_protocol());
    assert!(reply(&good[..good.len() - 1]).unwrap_err().is_protocol());
    let mut wrong_selection = good.clone();
    *wrong_selection.last_mut().unwrap() = 0x03;
    assert!(reply(&wrong_selection).unwrap_err().is_authentication());
    let mut refused_for_no_reason = good.clone();
    *refused_for_no_reason.last_mut().unwrap() = 0x80;
    assert!(
        reply(&refused_for_no_reason)
            .unwrap_err()
            .is_authentication()
    );
    // Offers that conflict (the responder requires encryption) but a reply
    // that does not refuse: the selection was tampered with.
    let mut conflict_not_refused = vec![0u8];
    conflict_not_refused.extend_from_slice(&offer_bytes(2, true, 65_536, 100));
    conflict_not_refused.push(0x00);
    let err = reply(&conflict_not_refused).unwrap_err();
    assert!(
        err.is_authentication() && !err.is_policy_conflict(),
        "{err}"
    );
}

#[test]
fn handshake_state_is_reported_and_bytes_after_it_are_left_alone() {
    let mut a = Handshake::new(Role::Initiator, HandshakeConfig::default()).unwrap();
    let mut b = Handshake::new(Role::Responder, HandshakeConfig::default()).unwrap();
    assert!(format!("{a:?}").contains("Initiator"));
    assert!(b.handle_input(&mut BytesMut::new()).is_ok());
    let err = Handshake::new(Role::Responder, HandshakeConfig::default())
        .unwrap()
        .into_session()
        .unwrap_err();
    assert_eq!(err.to_string(), "handshake failed: handshake not complete");
    let mut to_b = BytesMut::new();
    a.poll_transmit(&mut to_b);
    to_b.extend_from_slice(b"first record bytes");
    b.handle_input(&mut to_b).unwrap();
    assert!(b.is_complete());
    assert_eq!(
        &to_b[..],
        b"first record bytes",
        "consumes only the handshake"
    );
    b.handle_input(&mut to_b).unwrap();
    assert_eq!(to_b.len(), 18);
    assert!(format!("{b:?}").contains("complete"));
    let mut to_a = BytesMut::new();
    b.poll_transmit(&mut to_a);
    a.handle_input(&mut to_a).unwrap();
    let session = a.into_session().unwrap();
    let text = format!("{session:?}");
    assert!(text.contains("Outbound") && text.contains("Inbound"));
}

#[test]
fn config_debug_hides_the_psk() {
    let c = HandshakeConfig {
        psk: Some([0xab; 32].into()),
        ..HandshakeConfig::default()
    };
    let text = format!("{c:?}");
    assert!(text.contains("redacted") && !text.contains("171"));
}

#[test]
fn noise_misuse_is_an_error() {
    let e = || Box::new(RingEphemeral::generate().unwrap());
    assert_eq!(
        HandshakeState::new(Pattern::NN, true, b"", Some([0; 32]), e()).unwrap_err(),
        NoiseError::PskMismatch
    );
    let mut init = HandshakeState::new(Pattern::NNpsk0, true, b"", Some([3; 32]), e()).unwrap();
    let mut resp = HandshakeState::new(Pattern::NNpsk0, false, b"", Some([3; 32]), e()).unwrap();
    let (mut m, mut p) = (Vec::new(), Vec::new());
    assert_eq!(resp.write_message(b"", &mut m), Err(NoiseError::OutOfTurn));
    assert_eq!(
        init.read_message(&[0; 64], &mut p),
        Err(NoiseError::OutOfTurn)
    );
    assert!(init.split().is_err());
    init.write_message(b"x", &mut m).unwrap();
    // psk0 message 1 must carry a tag.
    assert_eq!(
        resp.read_message(&m[..40], &mut p),
        Err(NoiseError::ShortMessage)
    );
    assert!(format!("{init:?}").contains("NNpsk0"));
    for e in [
        NoiseError::Decrypt,
        NoiseError::NonceExhausted,
        NoiseError::InvalidKeyShare,
        NoiseError::ShortMessage,
        NoiseError::OutOfTurn,
        NoiseError::PskMismatch,
        NoiseError::Rng,
    ] {
        assert!(!e.to_string().is_empty());
    }
    assert!(format!("{:?}", RingEphemeral::generate().unwrap()).contains("RingEphemeral"));
}

#[test]
fn static_keys_must_match_the_pattern_each_on_its_own() {
    let e = || Box::new(RingEphemeral::generate().unwrap());
    let ours = || Some(StaticKey::from_private([7; 32]));
    let theirs = Some(StaticKey::from_private([8; 32]).public_key());
    let with = |pattern, initiator, local, remote| {
        let keys = StaticKeys { local, remote };
        HandshakeState::with_static(pattern, initiator, b"", None, e(), keys).map(|_| ())
    };
    // Each of the two keys wrong while the other is right.
    for (name, result) in [
        ("XX without our key", with(Pattern::XX, true, None, None)),
        (
            "IK initiator without the server's",
            with(Pattern::IK, true, ours(), None),
        ),
        ("NN with our key", with(Pattern::NN, true, ours(), None)),
        (
            "IK responder told a remote key",
            with(Pattern::IK, false, ours(), theirs),
        ),
    ] {
        assert_eq!(result, Err(NoiseError::StaticKeyMismatch), "{name}");
    }
    assert_eq!(with(Pattern::XX, true, ours(), None), Ok(()));
    assert_eq!(with(Pattern::IK, true, ours(), theirs), Ok(()));
    assert_eq!(with(Pattern::IK, false, ours(), None), Ok(()));
}

#[test]
fn a_message_cut_inside_the_static_key_is_short() {
    // XX's second message: e (32), then the encrypted static key (32 + 16),
    // then the payload's tag. Cut inside the key: short, never a panic;
    // cut right after it, the payload's tag check refuses it the same way.
    let state = |initiator, seed| {
        let keys = StaticKeys {
            local: Some(StaticKey::from_private([seed; 32])),
            remote: None,
        };
        // XX uses the ephemeral key twice: not ring's single-use one.
        let e = FixedEphemeral::new([seed + 10; 32]).boxed();
        HandshakeState::with_static(Pattern::XX, initiator, b"", None, e, keys).unwrap()
    };
    for cut in [33, 32 + 47, 32 + 48] {
        let (mut init, mut resp) = (state(true, 1), state(false, 2));
        let (mut m1, mut m2, mut p) = (Vec::new(), Vec::new(), Vec::new());
        init.write_message(b"", &mut m1).unwrap();
        resp.read_message(&m1, &mut p).unwrap();
        resp.write_message(b"", &mut m2).unwrap();
        assert_eq!(m2.len(), 32 + 48 + 16);
        assert_eq!(
            init.read_message(&m2[..cut], &mut p),
            Err(NoiseError::ShortMessage),
            "cut at {cut}"
        );
    }
}

#[test]
fn has_transmit_says_whether_poll_transmit_has_bytes() {
    let key = |seed| Some(StaticKey::from_private([seed; 32]));
    // XX: the responder's reply is due before it is complete.
    let config = |seed| HandshakeConfig {
        identity: key(seed),
        ..HandshakeConfig::default()
    };
    let mut a = Handshake::new(Role::Initiator, config(1)).unwrap();
    let mut b = Handshake::new(Role::Responder, config(2)).unwrap();
    let take = |hs: &mut Handshake| {
        let had = hs.has_transmit();
        let mut out = BytesMut::new();
        hs.poll_transmit(&mut out);
        assert_eq!(
            had,
            !out.is_empty(),
            "has_transmit before {} bytes",
            out.len()
        );
        assert!(!hs.has_transmit(), "nothing left after poll_transmit");
        out
    };
    let (mut to_b, mut to_a) = (take(&mut a), take(&mut b));
    assert!(!to_b.is_empty() && !to_a.is_empty(), "both prefaces");
    b.handle_input(&mut to_b).unwrap();
    assert!(b.has_transmit() && !b.is_complete(), "the reply is due");
    to_a.extend_from_slice(&take(&mut b));
    a.handle_input(&mut to_a).unwrap();
    assert!(
        a.is_complete() && a.has_transmit(),
        "the third message is due"
    );
    let mut to_b = take(&mut a);
    b.handle_input(&mut to_b).unwrap();
    assert!(b.is_complete() && take(&mut b).is_empty());
}

#[test]
fn cipher_state_limits_and_short_input() {
    let mut c = CipherState::with_limit(&[1; 32], 1);
    assert!(format!("{c:?}").contains("limit"));
    let mut buf = *b"hello";
    c.encrypt_in_place(b"", &mut buf).unwrap();
    assert_eq!(c.nonce(), 1);
    assert_eq!(
        c.encrypt_in_place(b"", &mut buf),
        Err(NoiseError::NonceExhausted)
    );
    let mut d = CipherState::new(&[1; 32]);
    assert_eq!(
        d.decrypt_in_place(b"", &mut [0; 15]),
        Err(NoiseError::Decrypt)
    );
    let mut out = vec![7];
    assert_eq!(d.decrypt(b"", &[0; 20], &mut out), Err(NoiseError::Decrypt));
    assert_eq!(out, [7], "left as it was");
}

#[test]
fn transform_errors_have_texts_reasons_and_predicates() {
    // Oversize frame on a plain connection: a framing error.
    let (mut out, mut inb) = passthrough(Limits::default());
    let big = Frame::new(
        FrameType::DATA,
        Flags::NONE,
        1,
        Bytes::from(vec![0; 70_000]),
    );
    let err = out.encode(&big, &mut BytesMut::new()).unwrap_err();
    assert_eq!(err.reason(), Reason::FRAME_SIZE_ERROR);
    assert!(err.frame_error().is_some() && err.to_string().contains("framing"));
    assert!(std::error::Error::source(&err).is_some());
    // Truncation, then the half stays failed.
    let mut wire = BytesMut::new();
    FrameCodec::default()
        .encode_frame(
            &Frame::new(FrameType::DATA, Flags::NONE, 1, json_payload()),
            &mut wire,
        )
        .unwrap();
    wire.truncate(40);
    let err = inb.decode_eof(&mut wire).unwrap_err();
    assert!(err.is_truncated() && err.reason() == Reason::PROTOCOL_ERROR);
    let err = inb.decode(&mut wire).unwrap_err();
    assert!(err.to_string().contains("earlier fatal error"));
    assert!(format!("{inb:?}{out:?}").contains("poisoned: true"));
    // Encrypted halves: a record shorter than its tag, oversize outbound.
    let (mut a, mut b) =
        handshake_in_memory(HandshakeConfig::default(), HandshakeConfig::default()).unwrap();
    let mut short = BytesMut::new();
    FrameCodec::default()
        .encode_frame(
            &Frame::new(FrameType::DATA, Flags::NONE, 1, Bytes::from_static(b"tiny")),
            &mut short,
        )
        .unwrap();
    let err = b.inbound.decode(&mut short).unwrap_err();
    assert!(
        err.is_fatal()
            && err
                .to_string()
                .contains("shorter than its authentication tag")
    );
    assert!(
        a.outbound
            .encode(&big, &mut BytesMut::new())
            .unwrap_err()
            .is_fatal()
    );
    assert!(a.outbound.is_encrypting() && a.outbound.is_compressing());
    // Texts of the remaining kinds.
    let mut tampered = BytesMut::new();
    a.outbound
        .encode(
            &Frame::new(FrameType::DATA, Flags::NONE, 1, json_payload()),
            &mut tampered,
        )
        .unwrap();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    let (_, mut c) =
        handshake_in_memory(HandshakeConfig::default(), HandshakeConfig::default()).unwrap();
    let err = c.inbound.decode(&mut tampered).unwrap_err();
    assert_eq!(err.to_string(), "record failed authentication");
    assert_eq!(err.reason(), Reason::PROTOCOL_ERROR);
    assert!(std::error::Error::source(&err).is_none());
}

#[test]
fn halves_and_errors_can_cross_threads() {
    fn send<T: Send + 'static>() {}
    fn send_sync<T: Send + Sync + 'static>() {}
    send::<Handshake>();
    send_sync::<weft_transform::Session>();
    send_sync::<weft_transform::Outbound>();
    send_sync::<weft_transform::Inbound>();
    send_sync::<weft_transform::TransformError>();
    send_sync::<weft_transform::HandshakeError>();
    send_sync::<weft_transform::Negotiated>();
    // Moving a live session to another thread keeps working.
    let (mut a, mut b) =
        handshake_in_memory(HandshakeConfig::default(), HandshakeConfig::default()).unwrap();
    let frame = Frame::new(FrameType::DATA, Flags::NONE, 1, json_payload());
    let mut wire = BytesMut::new();
    a.outbound.encode(&frame, &mut wire).unwrap();
    let got = std::thread::spawn(move || b.inbound.decode(&mut wire).unwrap().unwrap())
        .join()
        .unwrap();
    assert_eq!(got, frame);
}

/// `[is_authentication, is_policy_conflict, is_protocol, is_config]`.
fn handshake_predicates(e: &weft_transform::HandshakeError) -> [bool; 4] {
    [
        e.is_authentication(),
        e.is_policy_conflict(),
        e.is_protocol(),
        e.is_config(),
    ]
}

#[test]
fn each_handshake_error_predicate_holds_for_its_own_kind_only() {
    let with_psk = |psk: [u8; 32]| HandshakeConfig {
        psk: Some(psk.into()),
        ..HandshakeConfig::default()
    };
    let wrong_key = handshake_in_memory(with_psk([1; 32]), with_psk([2; 32])).unwrap_err();
    assert_eq!(
        handshake_predicates(&wrong_key),
        [true, false, false, false]
    );
    let off = HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Off,
            ..Offer::default()
        },
        ..HandshakeConfig::default()
    };
    let required = HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            ..Offer::default()
        },
        ..HandshakeConfig::default()
    };
    let conflict = handshake_in_memory(required, off).unwrap_err();
    assert_eq!(handshake_predicates(&conflict), [false, true, false, false]);
    let garbage = responder_error(&[9, 1, 2, 3], HandshakeConfig::default());
    assert_eq!(handshake_predicates(&garbage), [false, false, true, false]);
    let mut zero_limit = HandshakeConfig::default();
    zero_limit.offer.max_message = 0;
    let config = Handshake::new(Role::Initiator, zero_limit).unwrap_err();
    assert_eq!(handshake_predicates(&config), [false, false, false, true]);
}

/// An ephemeral whose key agreement fails as if the system RNG had.
#[derive(Debug)]
struct BrokenRng;

impl weft_transform::noise::Ephemeral for BrokenRng {
    fn public_key(&self) -> [u8; weft_transform::noise::DH_LEN] {
        [9; weft_transform::noise::DH_LEN]
    }

    fn diffie_hellman(
        &mut self,
        _: &[u8; weft_transform::noise::DH_LEN],
    ) -> Result<[u8; weft_transform::noise::DH_LEN], NoiseError> {
        Err(NoiseError::Rng)
    }
}

#[test]
fn a_failing_random_source_is_reported_as_such_not_as_authentication() {
    let initiator = Handshake::new(Role::Initiator, HandshakeConfig::default()).unwrap();
    let responder = Handshake::with_ephemeral(
        Role::Responder,
        HandshakeConfig::default(),
        Box::new(BrokenRng),
    )
    .unwrap();
    let err = drive_pair(initiator, responder).unwrap_err();
    assert!(!err.is_authentication(), "{err}");
    assert!(
        err.to_string().contains("random number generator failed"),
        "{err}"
    );
}

#[test]
fn a_handshake_message_of_exactly_the_maximum_size_is_framed() {
    // It fails on its content (an unknown kind), not on its size.
    let max = weft_transform::MAX_HANDSHAKE_MESSAGE as usize;
    let at_max = responder_error(&vec![9; max], HandshakeConfig::default());
    assert!(!at_max.to_string().contains("oversize"), "{at_max}");
    let over = responder_error(&vec![9; max + 1], HandshakeConfig::default());
    assert!(over.to_string().contains("oversize"), "{over}");
}
