//! What each side sees when the pre-shared keys differ, per pattern, as
//! docs/PROTOCOL.md 3.9 states it: the responder rejects what it cannot
//! open (NNpsk0: the first message; XXpsk3: the third), while in IKpsk2 the
//! key is mixed in only at the end of the responder's reply, so the
//! responder completes and the initiator fails on reading that reply.
#![cfg(not(fuzzing))]

mod common;

use common::run_pair;
use weft_transform::{HandshakeConfig, RejectReason, StaticKey};

fn with(psk: u8, identity: Option<u8>, pin: Option<u8>) -> HandshakeConfig {
    HandshakeConfig {
        psk: Some([psk; 32].into()),
        identity: identity.map(|s| StaticKey::from_private([s; 32])),
        server_key: pin.map(|s| StaticKey::from_private([s; 32]).public_key()),
        ..HandshakeConfig::default()
    }
}

#[test]
fn nnpsk0_the_responder_rejects_the_first_message() {
    let o = run_pair(with(1, None, None), with(2, None, None));
    assert!(o.responder.unwrap_err().is_authentication());
    let e = o.initiator.unwrap_err();
    assert_eq!(
        e.peer_rejection(),
        Some(RejectReason::Authentication),
        "{e}"
    );
}

#[test]
fn ikpsk2_the_initiator_fails_on_the_reply() {
    // Client key 3, server key 4 pinned by the client.
    let o = run_pair(with(1, Some(3), Some(4)), with(2, Some(4), None));
    assert!(o.responder.is_ok(), "the responder cannot tell");
    let e = o.initiator.unwrap_err();
    assert_eq!(e.peer_rejection(), None, "{e}");
    assert!(e.is_authentication(), "{e}");
}
