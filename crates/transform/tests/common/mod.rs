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

    fn diffie_hellman(self: Box<Self>, peer: &[u8; DH_LEN]) -> Result<[u8; DH_LEN], NoiseError> {
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
