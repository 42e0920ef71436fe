//! # weft-transform: the per-frame pipeline and the handshake that sets it up
//!
//! After the connection preface, each side runs a [`Handshake`]: one
//! `HANDSHAKE` frame each way (two from the initiator for XX) carrying a
//! Noise message whose payload is that side's [`Offer`]:
//! `Noise_NN_25519_AESGCM_SHA256` without credentials, `NNpsk0` with a
//! pre-shared key, and with static key pairs ([`StaticKey`], a peer's
//! identity) `XX` (or `IK` when the client pins the server's key), each
//! with the PSK mixed in when there is one (`XXpsk3`, `IKpsk2`). A server
//! checks client keys against its [`AllowList`]; a responder that refuses
//! says why ([`RejectReason`]). The offers are bound into the transcript,
//! the initiator re-checks the responder's selection, and the result is a
//! [`Session`]:
//!
//! ```text
//!  Frame ──► Outbound: deflate (if negotiated, big enough, shrinks) ──► AES-256-GCM seal ──► wire bytes
//!  wire bytes ──► Inbound: AES-256-GCM open (header as AAD) ──► inflate (if flagged, bounded) ──► Frame
//! ```
//!
//! Encryption is on iff neither side's policy is off; compression iff both
//! offer it. Keys are separate per direction, nonces count from 0 and never
//! wrap, and any record that fails to authenticate is fatal to the
//! connection. Each direction updates its key on its own, long before the
//! AES-GCM usage limits ([`RekeyLimits`]): the sender seals a `KEY_UPDATE`
//! record and switches to Noise's `Rekey()` of its key, the receiver follows
//! when it opens that record, so a connection never closes for a key limit.
//! Frames written together may be sealed as one record, a sealed batch
//! ([`Outbound::begin_batch`], docs/PROTOCOL.md 5.2), once the peer has
//! announced ([`BATCH_SETTING`]) that it reads them: one AES-GCM operation
//! per write instead of one per frame.
//! A disabled pipeline ([`passthrough`]) is the frame codec plus one branch.
//! In steady state nothing in the pipeline allocates.
//!
//! The byte-exact protocol is in docs/PROTOCOL.md (sections 3 to 5); what
//! each mode protects against is in docs/SECURITY.md.
//!
//! ## What this crate does not do
//! No I/O, no clock and no runtime: the handshake is a state machine fed
//! bytes and returning bytes, and its deadline is the driver's job
//! (`weft-mux`). It does not know about streams beyond the stream id it
//! reports with a per-frame decompression error, never retries a handshake
//! with weaker settings, and authenticates nothing without a pre-shared key,
//! an allow-list or a pinned key (`Noise_NN` stops passive eavesdroppers
//! only).
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod compress;
mod config;
mod error;
mod handshake;
mod handshake_kind;
mod identity;
pub mod noise;
mod offer;
mod pipeline;
mod proof;
mod refusal;
mod rekey;

pub use compress::{LEVEL as DEFLATE_LEVEL, STATIC_BLOCKS as DEFLATE_STATIC_BLOCKS, deflate_flags};
pub use config::{
    DEFAULT_COMPRESSION_MIN_SIZE, DEFAULT_MAX_MESSAGE, DEFAULT_MAX_RATIO, EncryptionPolicy,
    HandshakeConfig, Negotiated, Offer, Role,
};
pub use error::{HandshakeError, TransformError};
pub use handshake::{Handshake, MAX_HANDSHAKE_MESSAGE};
pub use handshake_kind::RejectReason;
pub use identity::{
    AllowList, KeyHex, KeyParseError, Psk, canonical_key, parse_key_hex, parse_public_key_hex,
};
pub use noise::StaticKey;
pub use offer::MIN_MAX_METADATA;
pub use pipeline::{
    BATCH, BATCH_SETTING, BATCH_SETTING_VALUE, Batch, Inbound, Outbound, Session, passthrough,
};
pub use refusal::{MAX_REFUSAL_TEXT, refusal};
pub use rekey::{
    DEFAULT_REKEY_BYTES, DEFAULT_REKEY_RECORDS, KEY_UPDATES, KeyUpdates, MAX_BYTES_PER_KEY,
    MAX_RECORDS_PER_KEY, RekeyLimits, key_updates,
};

/// Runs a whole handshake between two in-memory peers and returns
/// (initiator's session, responder's session). For tests and benches; a real
/// connection drives [`Handshake`] over its transport.
pub fn handshake_in_memory(
    initiator: HandshakeConfig,
    responder: HandshakeConfig,
) -> Result<(Session, Session), HandshakeError> {
    let a = Handshake::new(Role::Initiator, initiator)?;
    let b = Handshake::new(Role::Responder, responder)?;
    drive_pair(a, b)
}

/// Drives two handshakes against each other in memory until both are
/// complete or one fails; returns their sessions.
pub fn drive_pair(
    mut a: Handshake,
    mut b: Handshake,
) -> Result<(Session, Session), HandshakeError> {
    let (mut a_to_b, mut b_to_a) = (bytes::BytesMut::new(), bytes::BytesMut::new());
    // Two rounds suffice for a one-round-trip handshake; a few more cost nothing.
    for _ in 0..4 {
        a.poll_transmit(&mut a_to_b);
        b.poll_transmit(&mut b_to_a);
        b.handle_input(&mut a_to_b)?;
        a.handle_input(&mut b_to_a)?;
        if a.is_complete() && b.is_complete() {
            b.poll_transmit(&mut b_to_a);
            a.handle_input(&mut b_to_a)?;
            break;
        }
    }
    Ok((a.into_session()?, b.into_session()?))
}
