//! Helpers shared by the integration tests: a fixed-key X25519 ephemeral
//! (x25519-dalek) and an in-memory pair driver that reports both sides.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use weft_transform::noise::{DH_LEN, Ephemeral, NoiseError};
use weft_transform::{Handshake, HandshakeConfig, HandshakeError, Role, Session};
use x25519_dalek::{PublicKey, StaticSecret};

/// An X25519 key pair from fixed private bytes; counts Diffie-Hellman calls.
#[derive(Clone)]
pub struct FixedEphemeral {
    secret: StaticSecret,
    pub dh_calls: Arc<AtomicUsize>,
}

impl std::fmt::Debug for FixedEphemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixedEphemeral").finish_non_exhaustive()
    }
}

impl FixedEphemeral {
    pub fn new(private: [u8; 32]) -> FixedEphemeral {
        FixedEphemeral {
            secret: StaticSecret::from(private),
            dh_calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn from_hex(hex_key: &str) -> FixedEphemeral {
        FixedEphemeral::new(hex::decode(hex_key).unwrap().try_into().unwrap())
    }

    pub fn boxed(&self) -> Box<dyn Ephemeral> {
        Box::new(self.clone())
    }

    pub fn calls(&self) -> usize {
        self.dh_calls.load(Ordering::SeqCst)
    }
}

impl Ephemeral for FixedEphemeral {
    fn public_key(&self) -> [u8; DH_LEN] {
        PublicKey::from(&self.secret).to_bytes()
    }

    fn diffie_hellman(&mut self, peer: &[u8; DH_LEN]) -> Result<[u8; DH_LEN], NoiseError> {
        self.dh_calls.fetch_add(1, Ordering::SeqCst);
        Ok(self
            .secret
            .diffie_hellman(&PublicKey::from(*peer))
            .to_bytes())
    }
}

/// Both sides' outcome of an in-memory handshake.
pub struct Outcome {
    pub initiator: Result<Session, HandshakeError>,
    pub responder: Result<Session, HandshakeError>,
}

/// Drives two handshakes in memory, passing every byte through `tamper`
/// (direction: true = initiator to responder), until neither makes progress.
/// A side that never completes reports its `into_session` error.
pub fn run_pair_with(
    mut a: Handshake,
    mut b: Handshake,
    mut tamper: impl FnMut(bool, &mut BytesMut),
) -> Outcome {
    let (mut a_to_b, mut b_to_a) = (BytesMut::new(), BytesMut::new());
    let (mut a_err, mut b_err) = (None, None);
    for _ in 0..6 {
        let mut out = BytesMut::new();
        a.poll_transmit(&mut out);
        tamper(true, &mut out);
        a_to_b.extend_from_slice(&out);
        let mut out = BytesMut::new();
        b.poll_transmit(&mut out);
        tamper(false, &mut out);
        b_to_a.extend_from_slice(&out);
        if b_err.is_none() {
            b_err = b.handle_input(&mut a_to_b).err();
        }
        if a_err.is_none() {
            a_err = a.handle_input(&mut b_to_a).err();
        }
    }
    Outcome {
        initiator: match a_err {
            Some(e) => Err(e),
            None => a.into_session(),
        },
        responder: match b_err {
            Some(e) => Err(e),
            None => b.into_session(),
        },
    }
}

pub fn run_pair(a: HandshakeConfig, b: HandshakeConfig) -> Outcome {
    run_pair_with(
        Handshake::new(Role::Initiator, a).unwrap(),
        Handshake::new(Role::Responder, b).unwrap(),
        |_, _| {},
    )
}

/// A 1.3 KiB JSON payload: an array of small repeated objects.
pub fn json_payload() -> bytes::Bytes {
    let mut s = String::from("[");
    let mut id = 1;
    while s.len() < 1300 {
        if id > 1 {
            s.push(',');
        }
        s.push_str(&format!("{{\"id\":{id},\"name\":\"task\",\"done\":false}}"));
        id += 1;
    }
    s.push(']');
    bytes::Bytes::from(s)
}

use weft_frame::preface::PREFACE;
use weft_frame::{Flags, Frame, FrameType, HEADER_LEN, Header};
use weft_transform::noise::{CipherState, HandshakeState, Pattern};

/// An offer as docs/PROTOCOL.md section 3.4 lays it out.
pub fn offer_bytes(encryption: u8, compression: bool, max_payload: u32, max_ratio: u32) -> Vec<u8> {
    let mut o = vec![1, encryption, u8::from(compression), 0];
    o.extend_from_slice(&max_payload.to_be_bytes());
    o.extend_from_slice(&16_384u32.to_be_bytes());
    o.extend_from_slice(&(4u32 << 20).to_be_bytes());
    o.extend_from_slice(&max_ratio.to_be_bytes());
    o
}

/// A HANDSHAKE frame carrying `message`.
pub fn handshake_frame(message: &[u8]) -> Vec<u8> {
    let header = Header {
        ty: FrameType::HANDSHAKE,
        flags: Flags::NONE,
        stream_id: 0,
        metadata_len: 0,
        payload_len: message.len() as u32,
    };
    let mut out = header.to_bytes().to_vec();
    out.extend_from_slice(message);
    out
}

/// The Noise prologue of docs/PROTOCOL.md section 3.3.
pub fn prologue() -> Vec<u8> {
    let mut p = b"weft handshake v1".to_vec();
    p.extend_from_slice(&PREFACE);
    p
}

/// A hand-written initiator built from the protocol document and the Noise
/// layer alone (no weft `Handshake`): it completes a handshake with
/// `responder` and returns its (send, receive) ciphers, so tests can seal
/// any record a hostile peer could.
pub fn raw_initiator(
    responder: &mut Handshake,
    offer: &[u8],
    psk: Option<[u8; 32]>,
) -> Result<(CipherState, CipherState), HandshakeError> {
    let (pattern, kind) = match psk {
        Some(_) => (Pattern::NNpsk0, 2u8),
        None => (Pattern::NN, 1u8),
    };
    let e = weft_transform::noise::RingEphemeral::generate().unwrap();
    let mut noise = HandshakeState::new(pattern, true, &prologue(), psk, Box::new(e)).unwrap();
    let mut msg1 = vec![kind];
    noise.write_message(offer, &mut msg1).unwrap();
    let mut wire = BytesMut::from(&PREFACE[..]);
    wire.extend_from_slice(&handshake_frame(&msg1));
    responder.handle_input(&mut wire)?;
    assert!(responder.is_complete());
    let mut reply = BytesMut::new();
    responder.poll_transmit(&mut reply);
    let msg2 = &reply[PREFACE.len() + HEADER_LEN..];
    assert_eq!(msg2[0], kind);
    let mut payload = Vec::new();
    noise.read_message(&msg2[1..], &mut payload).unwrap();
    assert_eq!(payload.len(), 21, "responder offer + selection");
    Ok(noise.split().unwrap().ciphers(true, u64::MAX))
}

/// Seals one record by hand: header (payload length + 16) as AAD, metadata
/// and payload encrypted together, tag appended.
pub fn seal_record(
    cipher: &mut CipherState,
    ty: FrameType,
    flags: Flags,
    stream_id: u32,
    payload: &[u8],
) -> BytesMut {
    let header = Header {
        ty,
        flags,
        stream_id,
        metadata_len: 0,
        payload_len: payload.len() as u32 + 16,
    };
    let raw = header.to_bytes();
    let mut out = BytesMut::from(&raw[..]);
    let mut body = payload.to_vec();
    let tag = cipher.encrypt_in_place(&raw, &mut body).unwrap();
    out.extend_from_slice(&body);
    out.extend_from_slice(&tag);
    out
}

/// A handshake config with this policy, compression switch and key.
pub fn config(
    encryption: weft_transform::EncryptionPolicy,
    compression: bool,
    psk: Option<[u8; 32]>,
) -> HandshakeConfig {
    HandshakeConfig {
        offer: weft_transform::Offer {
            encryption,
            compression,
            ..weft_transform::Offer::default()
        },
        psk: psk.map(Into::into),
        ..HandshakeConfig::default()
    }
}

/// Both sessions of a handshake that must succeed.
pub fn pair(a: HandshakeConfig, b: HandshakeConfig) -> (Session, Session) {
    let o = run_pair(a, b);
    (o.initiator.unwrap(), o.responder.unwrap())
}

/// A responder's failure on `input`: an error at once (not weft at all), or
/// a rejection frame (`ff` and a reason) queued for the peer, then the
/// error.
pub fn rejection(hs: &mut Handshake, input: &mut BytesMut) -> HandshakeError {
    if let Err(e) = hs.handle_input(input) {
        return e;
    }
    assert!(hs.is_complete(), "neither an error nor a rejection");
    let mut out = BytesMut::new();
    hs.poll_transmit(&mut out);
    let frame = &out[out.len() - 18..];
    assert_eq!(&frame[..2], &[1, 6], "a HANDSHAKE frame");
    assert_eq!(frame[16], 0xff, "a rejection");
    hs.handle_input(&mut BytesMut::new()).unwrap_err()
}

/// A plain frame with `COMPRESSED` set and `payload` as its (claimed)
/// deflate data.
pub fn plain_compressed(stream_id: u32, payload: Vec<u8>) -> BytesMut {
    let mut wire = BytesMut::new();
    weft_frame::FrameCodec::default()
        .encode_frame(
            &Frame::new(
                FrameType::DATA,
                Flags::COMPRESSED,
                stream_id,
                payload.into(),
            ),
            &mut wire,
        )
        .unwrap();
    wire
}
