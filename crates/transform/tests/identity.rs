//! Static-key identities through weft's whole handshake (in memory): XX and
//! IK with and without a PSK, the allow-list, the pinned server key, the
//! rejections and what each side reports, and downgrade attempts.
#![cfg(not(fuzzing))]

mod common;

use bytes::BytesMut;
use weft_transform::{
    AllowList, EncryptionPolicy, Handshake, HandshakeConfig, HandshakeError, KeyHex, Offer,
    RejectReason, Role, Session, StaticKey, TransformError,
};

fn key(seed: u8) -> StaticKey {
    StaticKey::from_private([seed; 32])
}

fn client(me: &StaticKey, pin: Option<&StaticKey>, psk: Option<[u8; 32]>) -> HandshakeConfig {
    HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            ..Offer::default()
        },
        identity: Some(me.clone()),
        server_key: pin.map(StaticKey::public_key),
        psk: psk.map(Into::into),
        ..HandshakeConfig::default()
    }
}

fn server(me: &StaticKey, allow: Option<&[&StaticKey]>, psk: Option<[u8; 32]>) -> HandshakeConfig {
    HandshakeConfig {
        identity: Some(me.clone()),
        allow: allow.map(|keys| AllowList::new(keys.iter().map(|k| k.public_key()))),
        psk: psk.map(Into::into),
        ..HandshakeConfig::default()
    }
}

/// What a run produced: each side's session or error, and the bytes the
/// server sent after the client completed (its rejection, in XX).
struct Run {
    client: Result<Session, HandshakeError>,
    server: Result<Session, HandshakeError>,
    late: BytesMut,
    /// The kind byte of the client's first message.
    kind: u8,
}

fn run(c: HandshakeConfig, s: HandshakeConfig) -> Run {
    let mut a = Handshake::new(Role::Initiator, c).unwrap();
    let mut b = Handshake::new(Role::Responder, s).unwrap();
    let (mut a_to_b, mut b_to_a) = (BytesMut::new(), BytesMut::new());
    let mut kind = None;
    let (mut a_err, mut b_err) = (None, None);
    for _ in 0..6 {
        a.poll_transmit(&mut a_to_b);
        if kind.is_none() && a_to_b.len() > 24 {
            kind = Some(a_to_b[24]);
        }
        b.poll_transmit(&mut b_to_a);
        if b_err.is_none() {
            b_err = b.handle_input(&mut a_to_b).err();
        }
        b.poll_transmit(&mut b_to_a);
        if a_err.is_none() && !a.is_complete() {
            a_err = a.handle_input(&mut b_to_a).err();
        }
        if b_err.is_some() {
            break;
        }
    }
    a.poll_transmit(&mut a_to_b);
    if b_err.is_none() && !b.is_complete() {
        b_err = b.handle_input(&mut a_to_b).err();
    }
    b.poll_transmit(&mut b_to_a);
    let b_result = match b_err {
        Some(e) => Err(e),
        None => b.into_session(),
    };
    Run {
        client: match a_err {
            Some(e) => Err(e),
            None => a.into_session(),
        },
        server: b_result,
        late: b_to_a,
        kind: kind.unwrap(),
    }
}

/// The client's first frame decode: the server's late rejection, if any.
fn first_frame(session: &mut Session, late: &mut BytesMut) -> Result<(), TransformError> {
    session.inbound.decode(late).map(|_| ())
}

#[test]
fn xx_and_ik_with_and_without_psk_authenticate_both_keys() {
    let (c, s) = (key(1), key(2));
    let psk = Some([9; 32]);
    let cases = [
        (
            "XX",
            client(&c, None, None),
            server(&s, Some(&[&c]), None),
            0x03,
        ),
        (
            "XXpsk3",
            client(&c, None, psk),
            server(&s, Some(&[&c]), psk),
            0x04,
        ),
        (
            "IK",
            client(&c, Some(&s), None),
            server(&s, Some(&[&c]), None),
            0x05,
        ),
        (
            "IKpsk2",
            client(&c, Some(&s), psk),
            server(&s, Some(&[&c]), psk),
            0x06,
        ),
    ];
    for (name, cc, sc, kind) in cases {
        let r = run(cc, sc);
        assert_eq!(r.kind, kind, "{name}");
        let (mut a, mut b) = (r.client.unwrap(), r.server.unwrap());
        assert_eq!(a.negotiated.peer_key, Some(s.public_key()), "{name}");
        assert_eq!(b.negotiated.peer_key, Some(c.public_key()), "{name}");
        assert_eq!(a.negotiated.handshake_hash, b.negotiated.handshake_hash);
        // A one-message pattern's responder is proven by the client's
        // first record (its message could be a replay); XX's third
        // message already proved it.
        let xx = matches!(kind, 0x03 | 0x04);
        assert_eq!(b.awaits_first_record(), !xx, "{name}");
        assert_eq!(b.negotiated.authenticated, xx, "{name}");
        let mut first = BytesMut::new();
        let hello = weft_frame::Frame::ping([2; 8], false);
        a.outbound.encode(&hello, &mut first).unwrap();
        assert_eq!(b.read_first_frame(&mut first).unwrap(), Some(hello));
        // The server checked the client against its allow-list.
        assert!(b.negotiated.authenticated, "{name}");
        // The client checked the server only when it pinned it (IK) or
        // shares a PSK.
        assert_eq!(a.negotiated.authenticated, kind != 0x03, "{name}");
        let mut late = r.late;
        assert!(late.is_empty(), "{name}: no late rejection");
        let mut wire = BytesMut::new();
        let ping = weft_frame::Frame::ping([1; 8], false);
        b.outbound.encode(&ping, &mut wire).unwrap();
        assert_eq!(
            a.inbound.decode(&mut wire).unwrap().unwrap(),
            ping,
            "{name}"
        );
        assert!(first_frame(&mut a, &mut late).is_ok());
    }
}

#[test]
fn a_client_key_not_on_the_allow_list_is_named_on_both_sides() {
    let (c, s, other) = (key(1), key(2), key(3));
    // IK: the server knows the client's key after the first message.
    let r = run(
        client(&c, Some(&s), None),
        server(&s, Some(&[&other]), None),
    );
    let se = r.server.unwrap_err();
    assert_eq!(se.rejected_key(), Some(c.public_key()));
    let hex = KeyHex(&c.public_key()).to_string();
    assert!(se.to_string().contains(&hex), "{se}");
    let ce = r.client.unwrap_err();
    assert_eq!(ce.peer_rejection(), Some(RejectReason::KeyNotAllowed));
    assert_eq!(ce.rejected_key(), Some(c.public_key()));
    assert!(
        ce.to_string()
            .contains(&format!("our key {hex} is not on its allow-list")),
        "{ce}"
    );
    // XX: after the third message, the rejection is the client's first frame.
    let r = run(client(&c, None, None), server(&s, Some(&[&other]), None));
    assert_eq!(r.server.unwrap_err().rejected_key(), Some(c.public_key()));
    let mut a = r.client.expect("the client completes its side of XX");
    let mut late = r.late;
    let e = first_frame(&mut a, &mut late).unwrap_err();
    assert_eq!(e.rejected(), Some(RejectReason::KeyNotAllowed));
    assert!(e.is_fatal() && e.to_string().contains(&hex), "{e}");
}

#[test]
fn the_allow_list_reloads_without_a_restart() {
    let (c, s) = (key(1), key(2));
    let allow = AllowList::new([]);
    let mut sc = server(&s, None, None);
    sc.allow = Some(allow.clone());
    assert!(run(client(&c, Some(&s), None), sc.clone()).server.is_err());
    allow.replace([c.public_key()]);
    assert!(run(client(&c, Some(&s), None), sc.clone()).server.is_ok());
    // Revoked again: the next handshake fails.
    allow.replace([]);
    assert!(run(client(&c, Some(&s), None), sc).server.is_err());
    let text = "# comment\n\n";
    let keys =
        AllowList::parse_keys(&format!("{text}{} laptop\n", KeyHex(&c.public_key()))).unwrap();
    assert_eq!(keys, vec![c.public_key()]);
    let bad = AllowList::parse_keys("abc\n").unwrap_err();
    assert!(bad.to_string().contains("line 1"), "{bad}");
}

#[test]
fn a_server_without_the_pinned_key_is_refused_clearly() {
    let (c, s, impostor) = (key(1), key(2), key(3));
    // The client pinned `s`; the server holds `impostor`.
    let r = run(client(&c, Some(&s), None), server(&impostor, None, None));
    let se = r.server.unwrap_err();
    assert!(se.is_authentication(), "{se}");
    assert!(
        se.to_string()
            .contains(&KeyHex(&impostor.public_key()).to_string()),
        "{se}"
    );
    let ce = r.client.unwrap_err();
    assert!(ce.is_authentication(), "{ce}");
    assert_eq!(ce.rejected_key(), Some(s.public_key()));
    assert!(
        ce.to_string()
            .contains(&KeyHex(&s.public_key()).to_string()),
        "{ce}"
    );
}

#[test]
fn identity_peers_never_fall_back_to_nn_or_a_psk_alone() {
    let (c, s) = (key(1), key(2));
    let psk = Some([5; 32]);
    let plain_client = |psk: Option<[u8; 32]>| HandshakeConfig {
        psk: psk.map(Into::into),
        ..HandshakeConfig::default()
    };
    // A server with a key pair against a client without one (NN, NNpsk0).
    for p in [None, psk] {
        let r = run(plain_client(p), server(&s, None, p));
        assert!(r.server.unwrap_err().is_policy_conflict());
        let ce = r.client.unwrap_err();
        assert_eq!(
            ce.peer_rejection(),
            Some(RejectReason::IdentityRequired),
            "{ce}"
        );
        assert!(ce.is_policy_conflict() && ce.to_string().contains("requires a client key pair"));
    }
    // A client with a key pair against a PSK-only server.
    let r = run(client(&c, None, psk), plain_client(psk));
    assert!(r.server.unwrap_err().is_policy_conflict());
    let ce = r.client.unwrap_err();
    assert_eq!(ce.peer_rejection(), Some(RejectReason::NoIdentity), "{ce}");
    // A PSK on one side only, with identities.
    let r = run(client(&c, None, psk), server(&s, None, None));
    let ce = r.client.unwrap_err();
    assert_eq!(ce.peer_rejection(), Some(RejectReason::PskMismatch), "{ce}");
    // Another PSK (XXpsk3): the third message fails, the client hears it.
    let r = run(client(&c, None, psk), server(&s, None, Some([6; 32])));
    assert!(r.server.unwrap_err().is_authentication());
    let mut a = r.client.unwrap();
    let mut late = r.late;
    let e = first_frame(&mut a, &mut late).unwrap_err();
    assert_eq!(e.rejected(), Some(RejectReason::Authentication), "{e}");
}

#[test]
fn a_pin_needs_a_key_pair_and_debug_hides_private_keys() {
    let s = key(2);
    let c = HandshakeConfig {
        server_key: Some(s.public_key()),
        ..HandshakeConfig::default()
    };
    assert!(Handshake::new(Role::Initiator, c).unwrap_err().is_config());
    let k = key(200);
    let private = *k.private_bytes();
    let text = format!("{k:?} {:?}", client(&k, Some(&s), None));
    let private_hex = KeyHex(&private).to_string();
    assert!(!text.contains(&private_hex[..12]), "{text}");
    assert!(
        text.contains(&KeyHex(&k.public_key()).to_string()),
        "{text}"
    );
}

#[test]
fn the_in_memory_driver_completes_the_three_message_xx() {
    // XX's responder completes only on the third message, after the
    // initiator: `handshake_in_memory` (and `drive_pair` under it) must
    // not stop when just one side is done.
    let (c, s) = (key(1), key(2));
    for psk in [None, Some([9; 32])] {
        let (a, b) = weft_transform::handshake_in_memory(
            client(&c, None, psk),
            server(&s, Some(&[&c]), psk),
        )
        .unwrap();
        assert_eq!(a.negotiated.peer_key, Some(s.public_key()));
        assert_eq!(b.negotiated.peer_key, Some(c.public_key()));
        assert_eq!(a.negotiated.handshake_hash, b.negotiated.handshake_hash);
    }
}

/// The error of an IK client (key 1, pinning key 2) whose server's reply
/// (the bytes after its preface) went through `change`.
fn ik_client_error(mut change: impl FnMut(&mut BytesMut)) -> HandshakeError {
    let (c, s) = (key(1), key(2));
    let o = common::run_pair_with(
        Handshake::new(Role::Initiator, client(&c, Some(&s), None)).unwrap(),
        Handshake::new(Role::Responder, server(&s, None, None)).unwrap(),
        |to_server, bytes| {
            if !to_server && bytes.len() > weft_frame::preface::PREFACE_LEN {
                change(bytes);
            }
        },
    );
    o.initiator.unwrap_err()
}

#[test]
fn a_reply_that_does_not_open_leaves_the_pinned_key_unproven() {
    // IK: the reply is the server's proof that it holds the pinned key.
    // One flipped bit in it (past the preface) and the client names the key.
    let e = ik_client_error(|reply| {
        let last = reply.len() - 1;
        reply[last] ^= 1;
    });
    assert!(e.is_authentication() && e.peer_rejection().is_none(), "{e}");
    let s = key(2);
    assert_eq!(e.rejected_key(), Some(s.public_key()));
    let hex = KeyHex(&s.public_key()).to_string();
    assert!(
        e.to_string()
            .contains(&format!("did not prove it holds the pinned key {hex}")),
        "{e}"
    );
}

/// A frame of type `ty` on stream 0 without metadata, whose payload
/// (`payload_len` bytes claimed) starts `ff 02` as a rejection's does.
fn rejection_like(ty: weft_frame::FrameType, payload_len: u32) -> BytesMut {
    let header = weft_frame::Header {
        ty,
        flags: weft_frame::Flags::NONE,
        stream_id: 0,
        metadata_len: 0,
        payload_len,
    };
    let mut wire = BytesMut::from(&header.to_bytes()[..]);
    wire.extend_from_slice(&[0xff, 0x02]);
    wire.resize(weft_frame::HEADER_LEN + payload_len as usize, 0);
    wire
}

#[test]
fn only_an_xx_client_reads_its_first_frame_as_a_rejection() {
    // A rejection after the handshake exists only for XX's client (the
    // server checks its key after the last message). The same bytes
    // anywhere else are an unauthenticated record, never a rejection.
    let reject = || rejection_like(weft_frame::FrameType::HANDSHAKE, 2);
    let (c, s) = (key(1), key(2));
    let ik = run(client(&c, Some(&s), None), server(&s, None, None));
    let xx = run(client(&c, None, None), server(&s, None, None));
    for (name, mut session) in [
        ("IK client", ik.client.unwrap()),
        ("IK server", ik.server.unwrap()),
        ("XX server", xx.server.unwrap()),
    ] {
        let e = first_frame(&mut session, &mut reject()).unwrap_err();
        assert_eq!(e.rejected(), None, "{name}: {e}");
        assert!(e.is_fatal(), "{name}: {e}");
    }
    let e = first_frame(&mut xx.client.unwrap(), &mut reject()).unwrap_err();
    assert_eq!(e.rejected(), Some(RejectReason::KeyNotAllowed), "{e}");
}

#[test]
fn the_third_xx_message_carries_no_payload() {
    // A hand-written XX initiator (our Noise layer and the protocol
    // document): its third message with a payload is malformed.
    use common::{FixedEphemeral, handshake_frame, offer_bytes, prologue};
    use weft_frame::{HEADER_LEN, preface::PREFACE};
    use weft_transform::noise::{HandshakeState, Pattern, StaticKeys};
    for (payload, accepted) in [(&b""[..], true), (&b"x"[..], false)] {
        let mut resp = Handshake::new(Role::Responder, server(&key(2), None, None)).unwrap();
        let keys = StaticKeys {
            local: Some(key(1)),
            remote: None,
        };
        let e = FixedEphemeral::new([5; 32]).boxed();
        let mut noise =
            HandshakeState::with_static(Pattern::XX, true, &prologue(), None, e, keys).unwrap();
        let mut msg1 = vec![0x03];
        noise
            .write_message(&offer_bytes(2, false, 65_536, 100), &mut msg1)
            .unwrap();
        let mut wire = BytesMut::from(&PREFACE[..]);
        wire.extend_from_slice(&handshake_frame(&msg1));
        resp.handle_input(&mut wire).unwrap();
        let mut reply = BytesMut::new();
        resp.poll_transmit(&mut reply);
        let msg2 = &reply[PREFACE.len() + HEADER_LEN..];
        noise.read_message(&msg2[1..], &mut Vec::new()).unwrap();
        let mut msg3 = vec![0x03];
        noise.write_message(payload, &mut msg3).unwrap();
        let mut wire = BytesMut::from(&handshake_frame(&msg3)[..]);
        resp.handle_input(&mut wire).unwrap();
        let mut out = BytesMut::new();
        resp.poll_transmit(&mut out);
        if accepted {
            assert!(out.is_empty() && resp.into_session().is_ok());
        } else {
            // A rejection (`ff`, reason 06 malformed) goes out, then the error.
            assert_eq!(out.get(HEADER_LEN..), Some(&[0xff, 0x06][..]));
            let e = resp.into_session().unwrap_err();
            assert!(e.is_protocol(), "{e}");
            assert!(e.to_string().contains("third message payload"), "{e}");
        }
    }
}

#[test]
fn a_short_reply_to_a_pinned_client_is_malformed_not_an_unproven_key() {
    // Only a reply that fails to authenticate leaves the pinned key
    // unproven; one too short to hold a key share is just malformed.
    let e = ik_client_error(|reply| {
        *reply = BytesMut::from(&common::handshake_frame(&[0x05, 1, 2, 3])[..]);
    });
    assert!(e.is_protocol() && !e.is_authentication(), "{e}");
    assert_eq!(e.rejected_key(), None);
}

#[test]
fn a_responder_ignores_a_pinned_server_key_in_its_config() {
    // `server_key` is for initiators: one config shared by both roles works.
    let (c, s) = (key(1), key(2));
    let mut sc = server(&s, None, None);
    sc.server_key = Some(c.public_key());
    let r = run(client(&c, Some(&s), None), sc);
    assert_eq!(r.kind, 0x05);
    assert!(r.server.is_ok() && r.client.is_ok());
}

#[test]
fn key_pairs_compare_by_public_key_and_export_their_private_bytes() {
    let k = StaticKey::generate().unwrap();
    assert_eq!(k, k.clone());
    assert_ne!(key(1), key(2));
    let again = StaticKey::from_private(*k.private_bytes());
    assert_eq!(again.public_key(), k.public_key());
}

#[test]
fn an_xx_client_takes_only_an_exact_rejection_frame_for_one() {
    // `ff 02` behind a HANDSHAKE header of another length, or behind a
    // stream-0 header of another type: records that fail, not rejections.
    let (c, s) = (key(1), key(2));
    for (name, mut wire) in [
        (
            "HANDSHAKE of 3 bytes",
            rejection_like(weft_frame::FrameType::HANDSHAKE, 3),
        ),
        (
            "PING of 2 bytes",
            rejection_like(weft_frame::FrameType::PING, 2),
        ),
        (
            "PING record",
            rejection_like(weft_frame::FrameType::PING, 2 + 16),
        ),
    ] {
        let mut a = run(client(&c, None, None), server(&s, None, None))
            .client
            .unwrap();
        let e = first_frame(&mut a, &mut wire).unwrap_err();
        assert_eq!(e.rejected(), None, "{name}: {e}");
        assert!(e.is_fatal(), "{name}: {e}");
    }
}
