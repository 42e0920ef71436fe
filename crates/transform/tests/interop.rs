//! Live interop with the `snow` crate, an independent Noise implementation:
//!
//! - the Noise layer against snow in both directions, for NN and NNpsk0,
//!   with arbitrary prologue and payloads: equal handshake hashes and one
//!   transport message each way;
//! - weft's whole handshake (preface, HANDSHAKE frames, offers) against a
//!   peer built from snow and docs/PROTOCOL.md alone, in both roles: equal
//!   handshake hashes and one sealed record each way (the snow side seals
//!   and opens records with ring directly, using snow's split keys);
//! - wrong pre-shared keys fail in both directions;
//! - weft's XX and IK handshakes (kinds 03, 05) against a snow peer in
//!   both roles;
//! - key updates (section 5.1): our `Rekey()` equals snow's, and a peer
//!   that seals and opens `KEY_UPDATE` records with ring alone follows
//!   weft's updates and is followed by weft, both ways.
// These checks need real AES-256-GCM: the fuzz-only null cipher (compiled only
// under `cfg(fuzzing)`) authenticates nothing, so they do not build with it.
#![cfg(not(fuzzing))]

mod common;

use bytes::BytesMut;
use common::{handshake_frame, json_payload, offer_bytes, prologue};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use weft_frame::preface::PREFACE;
use weft_frame::{Flags, Frame, FrameType, HEADER_LEN, Header, Metadata};
use weft_transform::noise::CipherState;
use weft_transform::noise::{HandshakeState, Pattern, RingEphemeral};
use weft_transform::{
    EncryptionPolicy, Handshake, HandshakeConfig, Offer, RekeyLimits, Role, Session,
};

fn snow_builder(
    pattern: Pattern,
    prologue: &[u8],
    psk: Option<&[u8; 32]>,
) -> snow::Builder<'static> {
    let prologue: &'static [u8] = Box::leak(prologue.to_vec().into_boxed_slice());
    let mut b = snow::Builder::new(pattern.protocol_name().parse().unwrap())
        .prologue(prologue)
        .unwrap();
    if let Some(k) = psk {
        let k: &'static [u8; 32] = Box::leak(Box::new(*k));
        b = b.psk(0, k).unwrap();
    }
    b
}

fn ours(
    pattern: Pattern,
    initiator: bool,
    prologue: &[u8],
    psk: Option<[u8; 32]>,
) -> HandshakeState {
    let e = Box::new(RingEphemeral::generate().unwrap());
    HandshakeState::new(pattern, initiator, prologue, psk, e).unwrap()
}

/// Our Noise layer as `we_initiate ? initiator : responder` against snow.
fn noise_layer_round(pattern: Pattern, we_initiate: bool) {
    let psk = (pattern == Pattern::NNpsk0).then_some([0x42; 32]);
    let prologue = b"any prologue at all";
    let mut us = ours(pattern, we_initiate, prologue, psk);
    let b = snow_builder(pattern, prologue, psk.as_ref());
    let mut them = if we_initiate {
        b.build_responder().unwrap()
    } else {
        b.build_initiator().unwrap()
    };
    let mut buf = [0u8; 1024];
    let mut payload = Vec::new();
    let msgs: [&[u8]; 2] = [b"first payload", b"second, longer payload"];
    for (i, p) in msgs.iter().enumerate() {
        let our_turn = (i == 0) == we_initiate;
        if our_turn {
            let mut wire = Vec::new();
            us.write_message(p, &mut wire).unwrap();
            let n = them.read_message(&wire, &mut buf).unwrap();
            assert_eq!(&buf[..n], *p);
        } else {
            let n = them.write_message(p, &mut buf).unwrap();
            payload.clear();
            us.read_message(&buf[..n], &mut payload).unwrap();
            assert_eq!(payload, *p);
        }
    }
    assert!(us.is_finished() && them.is_handshake_finished());
    assert_eq!(&us.handshake_hash()[..], them.get_handshake_hash());
    let (mut send, mut recv) = us.split().unwrap().ciphers(we_initiate, u64::MAX);
    let mut them = them.into_transport_mode().unwrap();
    // One transport message each way.
    let mut wire = Vec::new();
    send.encrypt(&[], b"from weft", &mut wire).unwrap();
    let n = them.read_message(&wire, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"from weft");
    let n = them.write_message(b"from snow", &mut buf).unwrap();
    let mut plain = Vec::new();
    recv.decrypt(&[], &buf[..n], &mut plain).unwrap();
    assert_eq!(plain, b"from snow");
}

#[test]
fn noise_nn_interoperates_with_snow_both_ways() {
    noise_layer_round(Pattern::NN, true);
    noise_layer_round(Pattern::NN, false);
}

#[test]
fn noise_nnpsk0_interoperates_with_snow_both_ways() {
    noise_layer_round(Pattern::NNpsk0, true);
    noise_layer_round(Pattern::NNpsk0, false);
}

#[test]
fn wrong_psk_fails_against_snow_both_ways() {
    for we_initiate in [true, false] {
        let mut us = ours(Pattern::NNpsk0, we_initiate, b"p", Some([1; 32]));
        let b = snow_builder(Pattern::NNpsk0, b"p", Some(&[2; 32]));
        let mut buf = [0u8; 1024];
        if we_initiate {
            let mut them = b.build_responder().unwrap();
            let mut wire = Vec::new();
            us.write_message(b"hello", &mut wire).unwrap();
            assert!(them.read_message(&wire, &mut buf).is_err());
        } else {
            let mut them = b.build_initiator().unwrap();
            let n = them.write_message(b"hello", &mut buf).unwrap();
            let mut out = Vec::new();
            assert!(us.read_message(&buf[..n], &mut out).is_err());
            assert!(out.is_empty());
        }
    }
}

/// Record protection as docs/PROTOCOL.md section 5 describes it, with ring.
struct RingRecords {
    key: LessSafeKey,
    n: u64,
}

impl RingRecords {
    fn new(k: [u8; 32]) -> RingRecords {
        RingRecords {
            key: LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &k).unwrap()),
            n: 0,
        }
    }

    /// Noise's `Rekey()` written from the spec with ring: the key becomes
    /// the first 32 bytes of the encryption of 32 zero bytes under nonce
    /// 2^64 - 1 with empty associated data; the counter is kept.
    fn rekey(&mut self) {
        let mut k = [0u8; 32];
        let mut n = [0xffu8; 12];
        n[..4].fill(0);
        let _tag = self
            .key
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(n), Aad::empty(), &mut k)
            .unwrap();
        self.key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &k).unwrap());
    }

    fn nonce(&mut self) -> Nonce {
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&self.n.to_be_bytes());
        self.n += 1;
        Nonce::assume_unique_for_key(n)
    }

    fn seal(&mut self, frame: &Frame) -> BytesMut {
        let mut header = frame.header();
        header.payload_len += 16;
        let aad = header.to_bytes();
        let mut body = frame.metadata.as_bytes().to_vec();
        body.extend_from_slice(&frame.payload);
        let nonce = self.nonce();
        self.key
            .seal_in_place_append_tag(nonce, Aad::from(&aad), &mut body)
            .unwrap();
        let mut out = BytesMut::from(&aad[..]);
        out.extend_from_slice(&body);
        out
    }

    /// Opens one record; returns (header, metadata + payload).
    fn open(&mut self, wire: &[u8]) -> (Header, Vec<u8>) {
        let raw: [u8; HEADER_LEN] = wire[..HEADER_LEN].try_into().unwrap();
        let header = Header::parse(&raw).unwrap();
        let mut body = wire[HEADER_LEN..].to_vec();
        assert_eq!(body.len(), header.body_len());
        let nonce = self.nonce();
        let n = self
            .key
            .open_in_place(nonce, Aad::from(&raw), &mut body)
            .unwrap()
            .len();
        body.truncate(n);
        (header, body)
    }
}

/// weft's `Handshake` in `role` against a snow-based peer speaking the
/// documented wire format; returns our session and the peer's (send,
/// receive) record protection and handshake hash.
fn weft_against_snow(
    role: Role,
    psk: Option<[u8; 32]>,
) -> (Session, RingRecords, RingRecords, Vec<u8>) {
    weft_against_snow_with(role, psk, RekeyLimits::default())
}

fn weft_against_snow_with(
    role: Role,
    psk: Option<[u8; 32]>,
    rekey: RekeyLimits,
) -> (Session, RingRecords, RingRecords, Vec<u8>) {
    let config = HandshakeConfig {
        rekey,
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            compression: false,
            ..Offer::default()
        },
        psk: psk.map(Into::into),
        ..HandshakeConfig::default()
    };
    let (pattern, kind) = if psk.is_some() {
        (Pattern::NNpsk0, 2u8)
    } else {
        (Pattern::NN, 1u8)
    };
    let mut weft = Handshake::new(role, config).unwrap();
    let b = snow_builder(pattern, &prologue(), psk.as_ref());
    let peer_offer = offer_bytes(2, false, 65_536, 100);
    let mut buf = [0u8; 1024];
    let mut from_weft = BytesMut::new();
    weft.poll_transmit(&mut from_weft);
    let mut them = if role == Role::Responder {
        // snow initiates: preface, then HANDSHAKE(kind, message 1).
        let mut them = b.build_initiator().unwrap();
        let n = them.write_message(&peer_offer, &mut buf).unwrap();
        let mut msg = vec![kind];
        msg.extend_from_slice(&buf[..n]);
        let mut to_weft = BytesMut::from(&PREFACE[..]);
        to_weft.extend_from_slice(&handshake_frame(&msg));
        weft.handle_input(&mut to_weft).unwrap();
        assert!(weft.is_complete());
        weft.poll_transmit(&mut from_weft);
        let reply = &from_weft[PREFACE.len() + HEADER_LEN..];
        assert_eq!(reply[0], kind);
        let n = them.read_message(&reply[1..], &mut buf).unwrap();
        assert_eq!(n, 21, "responder offer + selection");
        assert_eq!(&buf[..20], &offer_bytes(2, false, 65_536, 100)[..]);
        assert_eq!(buf[20], 0x01, "selection: encrypted, not compressed");
        them
    } else {
        // weft initiates; snow answers with its offer and the selection.
        let mut them = b.build_responder().unwrap();
        let msg1 = &from_weft[PREFACE.len() + HEADER_LEN..];
        assert_eq!(msg1[0], kind);
        let n = them.read_message(&msg1[1..], &mut buf).unwrap();
        assert_eq!(n, 20, "initiator offer");
        let mut reply_payload = peer_offer.clone();
        reply_payload.push(0x01);
        let n = them.write_message(&reply_payload, &mut buf).unwrap();
        let mut msg = vec![kind];
        msg.extend_from_slice(&buf[..n]);
        let mut to_weft = BytesMut::from(&PREFACE[..]);
        to_weft.extend_from_slice(&handshake_frame(&msg));
        weft.handle_input(&mut to_weft).unwrap();
        assert!(weft.is_complete());
        them
    };
    let hash = them.get_handshake_hash().to_vec();
    let (k1, k2) = them.dangerously_get_raw_split();
    let session = weft.into_session().unwrap();
    let (send, recv) = if role == Role::Responder {
        (RingRecords::new(k1), RingRecords::new(k2))
    } else {
        (RingRecords::new(k2), RingRecords::new(k1))
    };
    (session, send, recv, hash)
}

#[test]
fn weft_handshake_interoperates_with_a_snow_peer_in_both_roles() {
    for role in [Role::Initiator, Role::Responder] {
        for psk in [None, Some([9u8; 32])] {
            let (mut session, mut send, mut recv, hash) = weft_against_snow(role, psk);
            assert_eq!(session.negotiated.handshake_hash.unwrap().to_vec(), hash);
            assert!(session.negotiated.encrypted && !session.negotiated.compressed);
            // A responder is proven by the initiator's first record.
            let responder = role == Role::Responder;
            assert_eq!(session.awaits_first_record(), responder);
            assert_eq!(
                session.negotiated.authenticated,
                psk.is_some() && !responder
            );
            let frame = Frame {
                ty: FrameType::DATA,
                flags: Flags::END_STREAM,
                stream_id: 1,
                metadata: Metadata::builder().method("svc/echo").finish(),
                payload: json_payload(),
            };
            // weft to the snow side.
            let mut wire = BytesMut::new();
            session.outbound.encode(&frame, &mut wire).unwrap();
            let (header, body) = recv.open(&wire);
            assert_eq!(header.payload_len as usize, frame.payload.len() + 16);
            assert_eq!(
                &body[..frame.metadata.len()],
                &frame.metadata.as_bytes()[..]
            );
            assert_eq!(&body[frame.metadata.len()..], &frame.payload[..]);
            // The snow side to weft.
            let mut wire = send.seal(&frame);
            assert_eq!(session.read_first_frame(&mut wire).unwrap().unwrap(), frame);
            assert!(!session.awaits_first_record());
            assert_eq!(session.negotiated.authenticated, psk.is_some());
        }
    }
}

#[test]
fn weft_handshake_rejects_a_snow_peer_with_another_psk() {
    let config = HandshakeConfig {
        psk: Some([1; 32].into()),
        ..HandshakeConfig::default()
    };
    let mut weft = Handshake::new(Role::Responder, config).unwrap();
    let mut them = snow_builder(Pattern::NNpsk0, &prologue(), Some(&[2; 32]))
        .build_initiator()
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = them
        .write_message(&offer_bytes(1, true, 65_536, 100), &mut buf)
        .unwrap();
    let mut msg = vec![2u8];
    msg.extend_from_slice(&buf[..n]);
    let mut to_weft = BytesMut::from(&PREFACE[..]);
    to_weft.extend_from_slice(&handshake_frame(&msg));
    // The answer is a rejection (reason 01, authentication), never keys.
    let err = common::rejection(&mut weft, &mut to_weft);
    assert!(err.is_authentication(), "{err}");
}

#[test]
fn our_rekey_equals_snows() {
    let b = || snow_builder(Pattern::NN, b"rekey", None);
    let mut init = b().build_initiator().unwrap();
    let mut resp = b().build_responder().unwrap();
    let mut buf = [0u8; 256];
    let mut out = [0u8; 256];
    let n = init.write_message(&[], &mut buf).unwrap();
    resp.read_message(&buf[..n], &mut out).unwrap();
    let n = resp.write_message(&[], &mut buf).unwrap();
    init.read_message(&buf[..n], &mut out).unwrap();
    let (k1, _) = init.dangerously_get_raw_split();
    let mut resp = resp.into_transport_mode().unwrap();
    let mut ours = CipherState::new(&k1);
    for round in 0..3u8 {
        // Rekey() keeps the nonce: record `round` under the key after it.
        ours.rekey();
        resp.rekey_incoming();
        let mut ct = Vec::new();
        ours.encrypt(&[], &[round; 5], &mut ct).unwrap();
        let n = resp.read_message(&ct, &mut out).unwrap();
        assert_eq!(&out[..n], &[round; 5]);
    }
}

#[test]
fn key_updates_interoperate_with_a_peer_built_from_the_document_both_ways() {
    let rekey = RekeyLimits {
        records: 3,
        ..RekeyLimits::default()
    };
    for role in [Role::Initiator, Role::Responder] {
        let (mut session, mut send, mut recv, _) = weft_against_snow_with(role, None, rekey);
        let frame = |i: u8| {
            Frame::new(
                FrameType::PING,
                Flags::NONE,
                0,
                bytes::Bytes::from(vec![i; 8]),
            )
        };
        // weft to the peer: it follows every KEY_UPDATE it opens.
        let mut wire = BytesMut::new();
        for i in 0..20 {
            session.outbound.encode(&frame(i), &mut wire).unwrap();
        }
        let (mut pings, mut updates) = (0u8, 0u64);
        while !wire.is_empty() {
            let len = HEADER_LEN
                + Header::parse(wire[..HEADER_LEN].try_into().unwrap())
                    .unwrap()
                    .body_len();
            let record = wire.split_to(len);
            let (header, body) = recv.open(&record);
            if header.ty == FrameType::KEY_UPDATE {
                updates += 1;
                assert_eq!(body, updates.to_be_bytes(), "generation");
                recv.rekey();
            } else {
                assert_eq!(body, vec![pings; 8]);
                pings += 1;
            }
        }
        assert_eq!((pings, updates), (20, 9));
        // The peer to weft: its updates, sealed by hand, are followed.
        for generation in 1..=4u64 {
            let mut wire = send.seal(&frame(0));
            let update = Frame::new(
                FrameType::KEY_UPDATE,
                Flags::NONE,
                0,
                bytes::Bytes::from(generation.to_be_bytes().to_vec()),
            );
            wire.extend_from_slice(&send.seal(&update));
            send.rekey();
            wire.extend_from_slice(&send.seal(&frame(1)));
            assert_eq!(
                session.inbound.decode(&mut wire).unwrap().unwrap(),
                frame(0)
            );
            assert_eq!(
                session.inbound.decode(&mut wire).unwrap().unwrap(),
                frame(1)
            );
        }
        assert_eq!(session.inbound.key_updates(), 4);
    }
}

/// Our Noise layer against snow for a static-key pattern, in one role:
/// equal hashes, each side learns the other's static key, and one transport
/// message each way.
fn static_pattern_round(pattern: Pattern, we_initiate: bool) {
    use weft_transform::StaticKey;
    use weft_transform::noise::StaticKeys;
    let psk = pattern.has_psk().then_some([0x24; 32]);
    let (ours_priv, theirs_priv) = ([0x11; 32], [0x22; 32]);
    let ours_pub = StaticKey::from_private(ours_priv).public_key();
    let theirs_pub = StaticKey::from_private(theirs_priv).public_key();
    let prologue = b"static interop";
    let keys = StaticKeys {
        local: Some(StaticKey::from_private(ours_priv)),
        remote: (we_initiate && pattern.needs_remote_static()).then_some(theirs_pub),
    };
    let e: Box<dyn weft_transform::noise::Ephemeral> =
        Box::new(common::FixedEphemeral::new([0x33; 32]));
    let mut us = HandshakeState::with_static(pattern, we_initiate, prologue, psk, e, keys).unwrap();
    let mut b = snow::Builder::new(pattern.protocol_name().parse().unwrap())
        .prologue(prologue)
        .unwrap()
        .local_private_key(&theirs_priv)
        .unwrap();
    if !we_initiate && pattern.needs_remote_static() {
        b = b.remote_public_key(&ours_pub).unwrap();
    }
    let psk_ref = psk.as_ref();
    if let Some(k) = psk_ref {
        let at = if pattern == Pattern::XXpsk3 { 3 } else { 2 };
        b = b.psk(at, k).unwrap();
    }
    let mut them = if we_initiate {
        b.build_responder().unwrap()
    } else {
        b.build_initiator().unwrap()
    };
    let mut buf = [0u8; 1024];
    for i in 0..pattern.message_count() {
        let payload = format!("message {i}").into_bytes();
        let ours_turn = (i % 2 == 0) == we_initiate;
        let mut got = Vec::new();
        if ours_turn {
            let mut wire = Vec::new();
            us.write_message(&payload, &mut wire).unwrap();
            let n = them.read_message(&wire, &mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
        } else {
            let n = them.write_message(&payload, &mut buf).unwrap();
            us.read_message(&buf[..n], &mut got).unwrap();
        }
        assert_eq!(got, payload, "{pattern:?} message {i}");
    }
    assert!(us.is_finished() && them.is_handshake_finished());
    assert_eq!(us.handshake_hash().to_vec(), them.get_handshake_hash());
    assert_eq!(us.remote_static(), Some(theirs_pub));
    assert_eq!(them.get_remote_static(), Some(&ours_pub[..]));
    let (mut send, mut recv) = us.split().unwrap().ciphers(we_initiate, u64::MAX);
    let mut them = them.into_transport_mode().unwrap();
    let mut wire = Vec::new();
    send.encrypt(&[], b"to snow", &mut wire).unwrap();
    let n = them.read_message(&wire, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"to snow");
    let n = them.write_message(b"to weft", &mut buf).unwrap();
    let mut got = Vec::new();
    recv.decrypt(&[], &buf[..n], &mut got).unwrap();
    assert_eq!(got, b"to weft");
}

#[test]
fn noise_xx_and_ik_interoperate_with_snow_both_ways() {
    for pattern in [Pattern::XX, Pattern::XXpsk3, Pattern::IK, Pattern::IKpsk2] {
        static_pattern_round(pattern, true);
        static_pattern_round(pattern, false);
    }
}

/// weft's whole handshake with static keys (XX or IK, kind `kind`) in
/// `role` against a snow peer speaking docs/PROTOCOL.md; then one record
/// each way.
fn weft_identity_against_snow(role: Role, pattern: Pattern, kind: u8) {
    use weft_transform::{KeyHex, StaticKey};
    let (weft_priv, snow_priv) = ([0x31; 32], [0x42; 32]);
    let weft_pub = StaticKey::from_private(weft_priv).public_key();
    let snow_pub = StaticKey::from_private(snow_priv).public_key();
    let ik = pattern.needs_remote_static();
    let config = HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            compression: false,
            ..Offer::default()
        },
        identity: Some(StaticKey::from_private(weft_priv)),
        server_key: (role == Role::Initiator && ik).then_some(snow_pub),
        ..HandshakeConfig::default()
    };
    let mut weft = Handshake::new(role, config).unwrap();
    let mut b = snow::Builder::new(pattern.protocol_name().parse().unwrap())
        .prologue(Box::leak(prologue().into_boxed_slice()))
        .unwrap()
        .local_private_key(&snow_priv)
        .unwrap();
    if role == Role::Responder && ik {
        b = b.remote_public_key(&weft_pub).unwrap();
    }
    let offer = offer_bytes(2, false, 65_536, 100);
    let mut buf = [0u8; 1024];
    let framed = |body: &[u8]| {
        let mut msg = vec![kind];
        msg.extend_from_slice(body);
        handshake_frame(&msg)
    };
    let mut from_weft = BytesMut::new();
    weft.poll_transmit(&mut from_weft);
    let _ = from_weft.split_to(PREFACE.len());
    let mut them = if role == Role::Responder {
        let mut them = b.build_initiator().unwrap();
        let n = them.write_message(&offer, &mut buf).unwrap();
        let mut to_weft = BytesMut::from(&PREFACE[..]);
        to_weft.extend_from_slice(&framed(&buf[..n]));
        weft.handle_input(&mut to_weft).unwrap();
        weft.poll_transmit(&mut from_weft);
        assert_eq!(from_weft[HEADER_LEN], kind);
        let n = them
            .read_message(&from_weft[HEADER_LEN + 1..], &mut buf)
            .unwrap();
        assert_eq!(n, 21, "responder offer + selection");
        if !ik {
            assert!(
                !weft.is_complete(),
                "XX: the third message is still to come"
            );
            let n = them.write_message(&[], &mut buf).unwrap();
            weft.handle_input(&mut BytesMut::from(&framed(&buf[..n])[..]))
                .unwrap();
        }
        them
    } else {
        let mut them = b.build_responder().unwrap();
        assert_eq!(from_weft[HEADER_LEN], kind);
        let n = them
            .read_message(&from_weft[HEADER_LEN + 1..], &mut buf)
            .unwrap();
        assert_eq!(n, 20, "initiator offer");
        let mut reply = offer.clone();
        reply.push(0x01);
        let n = them.write_message(&reply, &mut buf).unwrap();
        let mut to_weft = BytesMut::from(&PREFACE[..]);
        to_weft.extend_from_slice(&framed(&buf[..n]));
        weft.handle_input(&mut to_weft).unwrap();
        if !ik {
            let mut third = BytesMut::new();
            weft.poll_transmit(&mut third);
            assert_eq!(third[HEADER_LEN], kind);
            let n = them
                .read_message(&third[HEADER_LEN + 1..], &mut buf)
                .unwrap();
            assert_eq!(n, 0, "the third message has no payload");
        }
        them
    };
    assert!(
        weft.is_complete() && them.is_handshake_finished(),
        "{pattern:?} {role:?}"
    );
    assert_eq!(them.get_remote_static(), Some(&weft_pub[..]));
    let hash = them.get_handshake_hash().to_vec();
    let (k1, k2) = them.dangerously_get_raw_split();
    let mut session = weft.into_session().unwrap();
    assert_eq!(session.negotiated.handshake_hash.unwrap().to_vec(), hash);
    assert_eq!(
        session.negotiated.peer_key.map(|k| KeyHex(&k).to_string()),
        Some(KeyHex(&snow_pub).to_string())
    );
    let (mut send, mut recv) = if role == Role::Responder {
        (RingRecords::new(k1), RingRecords::new(k2))
    } else {
        (RingRecords::new(k2), RingRecords::new(k1))
    };
    let frame = Frame::new(
        FrameType::PING,
        Flags::NONE,
        0,
        bytes::Bytes::from_static(&[3; 8]),
    );
    let mut wire = BytesMut::new();
    session.outbound.encode(&frame, &mut wire).unwrap();
    assert_eq!(recv.open(&wire).1, vec![3; 8]);
    let mut wire = send.seal(&frame);
    assert_eq!(session.inbound.decode(&mut wire).unwrap().unwrap(), frame);
}

#[test]
fn weft_xx_and_ik_handshakes_interoperate_with_a_snow_peer_in_both_roles() {
    for role in [Role::Initiator, Role::Responder] {
        weft_identity_against_snow(role, Pattern::XX, 0x03);
        weft_identity_against_snow(role, Pattern::IK, 0x05);
    }
}
