//! The Diffie-Hellman step behind a small trait, so tests can use fixed keys.
//!
//! ring generates X25519 keys but cannot import a fixed private key, which
//! the published test vectors need. Production uses [`RingEphemeral`]; tests
//! implement [`Ephemeral`] with any X25519 library.

use ring::agreement::{self, EphemeralPrivateKey, UnparsedPublicKey, X25519};
use ring::rand::SystemRandom;

use super::NoiseError;

/// Length of an X25519 public key and of a shared secret.
pub const DH_LEN: usize = 32;

/// One X25519 ephemeral key pair (Noise's `e`). NN and NNpsk0 use it for
/// one Diffie-Hellman, XX and IK for two.
pub trait Ephemeral: Send + std::fmt::Debug {
    /// The public key, as sent on the wire.
    fn public_key(&self) -> [u8; DH_LEN];

    /// X25519 with the peer's public key. The caller rejects an all-zero
    /// result (a small-order peer key). A single-use implementation (ring's)
    /// fails a second call with [`NoiseError::OutOfTurn`].
    fn diffie_hellman(&mut self, peer: &[u8; DH_LEN]) -> Result<[u8; DH_LEN], NoiseError>;
}

/// An ephemeral X25519 key from ring and the system random number generator.
pub struct RingEphemeral {
    /// `None` once used: ring's ephemeral keys agree once.
    key: Option<EphemeralPrivateKey>,
    public: [u8; DH_LEN],
}

impl std::fmt::Debug for RingEphemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingEphemeral")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl RingEphemeral {
    /// Generates a fresh key pair.
    pub fn generate() -> Result<RingEphemeral, NoiseError> {
        let rng = SystemRandom::new();
        let key = EphemeralPrivateKey::generate(&X25519, &rng).map_err(|_| NoiseError::Rng)?;
        let pk = key.compute_public_key().map_err(|_| NoiseError::Rng)?;
        let mut public = [0u8; DH_LEN];
        public.copy_from_slice(pk.as_ref());
        Ok(RingEphemeral {
            key: Some(key),
            public,
        })
    }
}

impl Ephemeral for RingEphemeral {
    fn public_key(&self) -> [u8; DH_LEN] {
        self.public
    }

    fn diffie_hellman(&mut self, peer: &[u8; DH_LEN]) -> Result<[u8; DH_LEN], NoiseError> {
        let key = self.key.take().ok_or(NoiseError::OutOfTurn)?;
        let peer = UnparsedPublicKey::new(&X25519, peer);
        agreement::agree_ephemeral(key, &peer, |secret| {
            let mut out = [0u8; DH_LEN];
            out.copy_from_slice(secret);
            out
        })
        // ring refuses an all-zero shared secret itself.
        .map_err(|_| NoiseError::InvalidKeyShare)
    }
}
