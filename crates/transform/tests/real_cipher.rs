//! Records are sealed with real AES-256-GCM in every build of this crate,
//! whatever cargo features are on. CI runs this file with `--all-features`:
//! cargo unifies features across one build, so a feature that swapped the
//! cipher would reach the `weft` binary through `--all-features`. The
//! fuzz-only null cipher is compiled under `cfg(fuzzing)` alone; under it
//! these tests fail, as they must (docs/SECURITY.md, "The fuzz-only null
//! cipher").

use bytes::{Bytes, BytesMut};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use weft_frame::{Flags, Frame, FrameType, Metadata};
use weft_transform::noise::{CipherState, TAG_LEN};
use weft_transform::{EncryptionPolicy, HandshakeConfig, Offer, handshake_in_memory};

const MARKER: &[u8] = b"a plaintext marker that must never be on the wire as it is";

fn encrypting() -> HandshakeConfig {
    HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            compression: false,
            ..Offer::default()
        },
        ..HandshakeConfig::default()
    }
}

#[test]
fn records_on_the_wire_are_ciphertext_under_a_nonzero_tag() {
    let (mut client, mut server) = handshake_in_memory(encrypting(), encrypting()).unwrap();
    assert!(client.negotiated.encrypted && server.negotiated.encrypted);
    let frame = Frame {
        ty: FrameType::DATA,
        flags: Flags::END_STREAM,
        stream_id: 1,
        metadata: Metadata::default(),
        payload: Bytes::from_static(MARKER),
    };
    let mut wire = BytesMut::new();
    client.outbound.encode(&frame, &mut wire).unwrap();
    assert!(
        !wire.windows(16).any(|w| MARKER.windows(16).any(|m| m == w)),
        "16 plaintext bytes in a row on the wire: {wire:x?}"
    );
    let tag = &wire[wire.len() - TAG_LEN..];
    assert_ne!(tag, [0; TAG_LEN], "an all-zero tag: the null cipher");
    // A forged tag does not open: records are authenticated.
    let mut forged = wire.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    assert!(server.inbound.decode(&mut forged).is_err());
    // The genuine record does (on a fresh pair: the failure above is fatal).
    let (mut client, mut server) = handshake_in_memory(encrypting(), encrypting()).unwrap();
    let mut wire = BytesMut::new();
    client.outbound.encode(&frame, &mut wire).unwrap();
    assert_eq!(server.inbound.decode(&mut wire).unwrap().unwrap(), frame);
}

#[test]
fn the_noise_cipher_state_matches_ring_aes_256_gcm() {
    let key = [0x42; 32];
    let ad = b"header";
    let mut ours = Vec::new();
    CipherState::new(&key)
        .encrypt(ad, MARKER, &mut ours)
        .unwrap();
    // Nonce 0: four zero bytes, then the counter as a big-endian u64.
    let reference = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key).unwrap());
    let mut theirs = MARKER.to_vec();
    reference
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key([0; 12]),
            Aad::from(ad),
            &mut theirs,
        )
        .unwrap();
    assert_eq!(ours, theirs);
    assert_ne!(&ours[..MARKER.len()], MARKER);
}

/// `Inbound::record_overhead` is what a record adds to a frame on the
/// wire (a reader sizes its buffers by it to hold whole records): the tag
/// when encrypted, nothing on the passthrough.
#[test]
fn a_records_overhead_is_what_it_adds_to_a_frame_on_the_wire() {
    let frame = Frame::new(
        FrameType::DATA,
        Flags::NONE,
        1,
        Bytes::from(vec![5; 64 * 1024]),
    );
    let (mut client, server) = handshake_in_memory(encrypting(), encrypting()).unwrap();
    let (mut plain_out, plain_in) = weft_transform::passthrough(Default::default());
    for (out, inbound) in [
        (&mut client.outbound, &server.inbound),
        (&mut plain_out, &plain_in),
    ] {
        let mut wire = BytesMut::new();
        out.encode(&frame, &mut wire).unwrap();
        assert_eq!(wire.len(), frame.encoded_len() + inbound.record_overhead());
    }
    assert_eq!(server.inbound.record_overhead(), TAG_LEN);
}
