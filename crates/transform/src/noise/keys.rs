//! Long-lived X25519 key pairs (static keys, a peer's identity) and the
//! ephemeral keys of patterns that use one ephemeral key more than once.
//!
//! ring's X25519 keys are single-use and cannot be imported, so these use
//! x25519-dalek; its `StaticSecret` zeroes itself on drop. The random bytes
//! come from ring's system generator.

use ring::rand::{SecureRandom, SystemRandom};
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use super::{DH_LEN, Ephemeral, NoiseError};

/// An X25519 key pair that identifies one peer (Noise's `s`). The private
/// half is zeroed on drop and never printed.
#[derive(Clone)]
pub struct StaticKey {
    secret: StaticSecret,
    public: [u8; DH_LEN],
}

impl std::fmt::Debug for StaticKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticKey")
            .field("public", &crate::identity::KeyHex(&self.public))
            .finish_non_exhaustive()
    }
}

impl PartialEq for StaticKey {
    /// Key pairs are equal when their public keys are.
    fn eq(&self, other: &StaticKey) -> bool {
        self.public == other.public
    }
}

impl Eq for StaticKey {}

impl StaticKey {
    /// A fresh key pair from the system random number generator.
    pub fn generate() -> Result<StaticKey, NoiseError> {
        let mut bytes = Zeroizing::new([0u8; DH_LEN]);
        SystemRandom::new()
            .fill(&mut bytes[..])
            .map_err(|_| NoiseError::Rng)?;
        Ok(StaticKey::from_private(*bytes))
    }

    /// The key pair of these 32 private bytes (X25519 clamps them).
    pub fn from_private(private: [u8; DH_LEN]) -> StaticKey {
        let mut private = Zeroizing::new(private);
        let secret = StaticSecret::from(*private);
        private.fill(0);
        let public = PublicKey::from(&secret).to_bytes();
        StaticKey { secret, public }
    }

    /// The public key, as the peer pins or allows it.
    pub fn public_key(&self) -> [u8; DH_LEN] {
        self.public
    }

    /// The private bytes, for writing a key file; zeroed when dropped.
    pub fn private_bytes(&self) -> Zeroizing<[u8; DH_LEN]> {
        Zeroizing::new(self.secret.to_bytes())
    }

    /// X25519 with a peer's public key. Rejects an all-zero result.
    pub(crate) fn diffie_hellman(&self, peer: &[u8; DH_LEN]) -> Result<[u8; DH_LEN], NoiseError> {
        let shared = self.secret.diffie_hellman(&PublicKey::from(*peer));
        if !shared.was_contributory() {
            return Err(NoiseError::InvalidKeyShare);
        }
        Ok(shared.to_bytes())
    }
}

/// An ephemeral key that may take part in several Diffie-Hellman
/// operations of one handshake (XX and IK use `e` twice).
#[derive(Debug)]
pub(crate) struct ReusableEphemeral(pub(crate) StaticKey);

impl ReusableEphemeral {
    pub(crate) fn generate() -> Result<ReusableEphemeral, NoiseError> {
        StaticKey::generate().map(ReusableEphemeral)
    }
}

impl Ephemeral for ReusableEphemeral {
    fn public_key(&self) -> [u8; DH_LEN] {
        self.0.public_key()
    }

    fn diffie_hellman(&mut self, peer: &[u8; DH_LEN]) -> Result<[u8; DH_LEN], NoiseError> {
        self.0.diffie_hellman(peer)
    }
}
