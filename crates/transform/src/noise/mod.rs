//! The Noise layer: `Noise_NN`, `NNpsk0`, `XX`, `XXpsk3`, `IK` and
//! `IKpsk2`, all `_25519_AESGCM_SHA256` (Noise revision 34), with any
//! prologue and payloads.
//!
//! [`crate::Handshake`] builds weft's handshake on this; it is public so the
//! published test vectors and other Noise implementations can be checked
//! against it directly. SHA-256, HMAC, HKDF and AES-256-GCM come from ring;
//! X25519 sits behind the [`Ephemeral`] trait (ring for single-use
//! ephemeral keys); static keys ([`StaticKey`]) use x25519-dalek, because
//! ring cannot import or reuse an X25519 private key.

mod cipher;
mod dh;
mod handshake_state;
mod keys;
mod symmetric;

pub use cipher::{CipherState, KEY_LEN, TAG_LEN};
pub use dh::{DH_LEN, Ephemeral, RingEphemeral};
pub use handshake_state::{HandshakeState, Pattern, StaticKeys, TransportKeys};
pub(crate) use keys::ReusableEphemeral;
pub use keys::StaticKey;
pub(crate) use symmetric::SymmetricState;

/// Why a Noise operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoiseError {
    /// A ciphertext failed to authenticate.
    Decrypt,
    /// The nonce reached its limit; the key must not be used again.
    NonceExhausted,
    /// The Diffie-Hellman result is all zero: the peer's key has small order.
    InvalidKeyShare,
    /// A message is too short for its pattern.
    ShortMessage,
    /// A message was written or read out of turn.
    OutOfTurn,
    /// A pre-shared key was given for a pattern without one, or missing.
    PskMismatch,
    /// A static key was given for a pattern without one, or missing.
    StaticKeyMismatch,
    /// The system random number generator failed.
    Rng,
}

impl std::fmt::Display for NoiseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoiseError::Decrypt => "decryption failed",
            NoiseError::NonceExhausted => "nonce limit reached",
            NoiseError::InvalidKeyShare => "invalid key share",
            NoiseError::ShortMessage => "message too short",
            NoiseError::OutOfTurn => "message out of turn",
            NoiseError::PskMismatch => "pre-shared key does not match the pattern",
            NoiseError::StaticKeyMismatch => "static keys do not match the pattern",
            NoiseError::Rng => "random number generator failed",
        })
    }
}

impl std::error::Error for NoiseError {}
