//! Secrets never appear in `Debug` output, and the key types zeroize.

use weft_transform::noise::{HandshakeState, Pattern, RingEphemeral, TransportKeys};
use weft_transform::{
    EncryptionPolicy, Handshake, HandshakeConfig, Offer, Role, handshake_in_memory,
};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Whether `text` shows `secret` the way `Debug` prints bytes (decimal
/// list) or as hex.
fn shows(text: &str, secret: &[u8]) -> bool {
    let decimal = format!("{:?}", &secret[..6]);
    let decimal = decimal.trim_matches(|c| c == '[' || c == ']');
    let hex: String = secret[..6].iter().map(|b| format!("{b:02x}")).collect();
    text.contains(decimal) || text.to_lowercase().contains(&hex)
}

fn psk_config(psk: [u8; 32]) -> HandshakeConfig {
    HandshakeConfig {
        offer: Offer {
            encryption: EncryptionPolicy::Required,
            ..Offer::default()
        },
        psk: Some(psk.into()),
        ..HandshakeConfig::default()
    }
}

#[test]
fn debug_output_never_shows_a_secret() {
    let psk: [u8; 32] = std::array::from_fn(|i| 200 - i as u8);
    let config = psk_config(psk);
    // The check itself works: the raw array is found.
    assert!(shows(&format!("{psk:?}"), &psk));
    assert!(!shows(&format!("{config:?}"), &psk), "{config:?}");
    assert!(!shows(&format!("{config:#?}"), &psk));
    let hs = Handshake::new(Role::Initiator, config.clone()).unwrap();
    assert!(!shows(&format!("{hs:?}"), &psk), "{hs:?}");
    let (a, b) = handshake_in_memory(config.clone(), config).unwrap();
    for text in [
        format!("{a:?}"),
        format!("{b:?}"),
        format!("{:?}", a.outbound),
    ] {
        assert!(!shows(&text, &psk), "{text}");
    }
}

/// A finished Noise NNpsk0 handshake between two of our states.
fn transport_keys(psk: [u8; 32]) -> (HandshakeState, TransportKeys) {
    let state = |initiator| {
        let e = Box::new(RingEphemeral::generate().unwrap());
        HandshakeState::new(Pattern::NNpsk0, initiator, b"p", Some(psk), e).unwrap()
    };
    let (mut i, mut r) = (state(true), state(false));
    let (mut m1, mut m2, mut out) = (Vec::new(), Vec::new(), Vec::new());
    i.write_message(b"", &mut m1).unwrap();
    r.read_message(&m1, &mut out).unwrap();
    r.write_message(b"", &mut m2).unwrap();
    i.read_message(&m2, &mut out).unwrap();
    let keys = i.split().unwrap();
    (i, keys)
}

#[test]
fn session_keys_are_never_printed_and_zeroize() {
    let psk = [0x5a; 32];
    let (state, keys) = transport_keys(psk);
    let text = format!("{keys:?} {state:?}");
    assert!(!shows(&text, &keys.initiator_to_responder), "{text}");
    assert!(!shows(&text, &keys.responder_to_initiator), "{text}");
    assert!(!shows(&text, &psk), "{text}");
    let key = keys.initiator_to_responder;
    let (send, recv) = keys.ciphers(true, u64::MAX);
    let text = format!("{send:?} {recv:?}");
    assert!(!shows(&text, &key), "{text}");
    // `ciphers` took the keys; a second pair needs a second handshake.
    let (_, mut keys) = transport_keys(psk);
    // Zeroed on drop (the trait is the guarantee), and zeroize clears them.
    fn zeroed_on_drop<T: ZeroizeOnDrop>(_: &T) {}
    zeroed_on_drop(&keys);
    assert_ne!(keys.initiator_to_responder, [0; 32]);
    keys.zeroize();
    assert_eq!(keys.initiator_to_responder, [0; 32]);
    assert_eq!(keys.responder_to_initiator, [0; 32]);
}

#[test]
fn transport_keys_debug_shows_the_handshake_hash_only() {
    // What it does print: the (public) handshake hash, for logs.
    let (_, keys) = transport_keys([0x5a; 32]);
    let text = format!("{keys:?}");
    assert!(text.starts_with("TransportKeys"), "{text}");
    assert!(shows(&text, &keys.handshake_hash), "{text}");
}
