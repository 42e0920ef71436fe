//! Handshake fuzz target: arbitrary bytes, in chunks the input chooses,
//! into a responder and into an initiator that has sent its first message.
//! Nothing may panic; whatever the input, a handshake that completes must
//! give a session, and one that fails must keep failing and send nothing.
//!
//! Input: byte 0 picks the configuration (pre-shared key or not, encryption
//! policy, compression), byte 1 seeds the chunk sizes, the rest is the peer.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use weft_transform::{EncryptionPolicy, Handshake, HandshakeConfig, Offer, Role};

fn config(pick: u8) -> HandshakeConfig {
    let encryption = match pick % 3 {
        0 => EncryptionPolicy::Off,
        1 => EncryptionPolicy::Preferred,
        _ => EncryptionPolicy::Required,
    };
    HandshakeConfig {
        offer: Offer {
            encryption,
            compression: pick & 0x10 != 0,
            ..Offer::default()
        },
        psk: (pick & 0x20 != 0).then(|| [0x11; 32].into()),
        // Static keys: the responder then speaks XX and IK only.
        identity: (pick & 0x40 != 0)
            .then(|| weft_transform::StaticKey::from_private([0x22; 32])),
        ..HandshakeConfig::default()
    }
}

fn feed(mut hs: Handshake, seed: u8, data: &[u8]) {
    let mut out = BytesMut::new();
    hs.poll_transmit(&mut out);
    let mut src = BytesMut::new();
    let (mut at, mut i) = (0, 0usize);
    while at < data.len() {
        let n = (usize::from(seed.rotate_left(i as u32 % 8)) % 64 + 1).min(data.len() - at);
        i += 1;
        src.extend_from_slice(&data[at..at + n]);
        at += n;
        match hs.handle_input(&mut src) {
            Ok(()) => {
                if hs.is_complete() {
                    hs.poll_transmit(&mut out);
                    let _ = hs.into_session();
                    return;
                }
            }
            Err(_) => {
                let mut after = BytesMut::new();
                hs.poll_transmit(&mut after);
                assert!(after.is_empty(), "a failed handshake sends nothing more");
                assert!(hs.handle_input(&mut src).is_err(), "failure is final");
                assert!(hs.into_session().is_err());
                return;
            }
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let [pick, seed, data @ ..] = input else { return };
    if let Ok(hs) = Handshake::new(Role::Responder, config(*pick)) {
        feed(hs, *seed, data);
    }
    if let Ok(hs) = Handshake::new(Role::Initiator, config(*pick)) {
        feed(hs, *seed, data);
    }
});
