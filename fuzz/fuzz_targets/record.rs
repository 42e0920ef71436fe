//! Record fuzz target: arbitrary bytes, in chunks the input chooses, into
//! the read half of a session that negotiated encryption and compression.
//! Built by cargo-fuzz with `--cfg fuzzing`, which gives weft-transform a null cipher,
//! so a record "authenticates" when its 16-byte tag is all zero and the
//! fuzzer reaches metadata parsing and bounded decompression behind it.
//!
//! Nothing may panic; after a fatal error the half keeps failing; a
//! per-frame (decompression) error names a stream and the half goes on.
//! Input: byte 0 seeds the chunk sizes, byte 1 picks compression on or off.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use weft_transform::{EncryptionPolicy, HandshakeConfig, Offer, handshake_in_memory};

fuzz_target!(|input: &[u8]| {
    let [seed, pick, data @ ..] = input else { return };
    let config = HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            compression: pick & 1 == 1,
            ..Offer::default()
        },
        ..HandshakeConfig::default()
    };
    let Ok((_, mut session)) = handshake_in_memory(config.clone(), config) else {
        panic!("in-memory handshake failed");
    };
    let mut src = BytesMut::new();
    let (mut at, mut i) = (0, 0usize);
    while at < data.len() {
        let n = (usize::from(seed.rotate_left(i as u32 % 8)) % 97 + 1).min(data.len() - at);
        i += 1;
        src.extend_from_slice(&data[at..at + n]);
        at += n;
        loop {
            match session.inbound.decode(&mut src) {
                Ok(Some(frame)) => {
                    let _ = (frame.metadata.method(), frame.metadata.timeout());
                    assert!(frame.payload.len() <= 4 << 20);
                }
                Ok(None) => break,
                Err(e) if e.is_fatal() => {
                    assert!(session.inbound.decode(&mut src).is_err(), "fatal is final");
                    return;
                }
                Err(e) => assert!(e.stream_id().is_some()),
            }
        }
    }
    let _ = session.inbound.decode_eof(&mut src);
});
