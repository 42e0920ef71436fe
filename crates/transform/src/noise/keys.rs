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
    /// Key pairs are equal when their public keys are (canonically).
    fn eq(&self, other: &StaticKey) -> bool {
        crate::canonical_key(self.public) == crate::canonical_key(other.public)
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

    /// The private bytes as 64 lower-case hex digits (a key file's text,
    /// read back by [`crate::parse_key_hex`]); zeroed when dropped. Written
    /// into one allocation of its final size, so no copy is left behind.
    pub fn private_hex(&self) -> Zeroizing<String> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let private = self.private_bytes();
        let mut text = Zeroizing::new(String::with_capacity(2 * DH_LEN));
        for b in private.iter() {
            text.push(char::from(DIGITS[usize::from(b >> 4)]));
            text.push(char::from(DIGITS[usize::from(b & 0xf)]));
        }
        text
    }

    /// Test support only: the same key pair, presenting its public key with
    /// bit 255 set, which X25519 ignores (the other encoding a hostile key
    /// holder could send). weft canonicalises keys, so this is still one
    /// identity; hostile tests use it to prove that.
    #[doc(hidden)]
    pub fn with_bit_255_set_for_testing(mut self) -> StaticKey {
        self.public[31] |= 0x80;
        self
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
