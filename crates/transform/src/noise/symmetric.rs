//! Noise's `SymmetricState` over SHA-256 and HMAC-SHA256 (ring).

use ring::{digest, hmac};
use zeroize::Zeroize;

use super::{CipherState, KEY_LEN, NoiseError};

/// Hash length of SHA-256.
pub(crate) const HASH_LEN: usize = 32;

/// HMAC-SHA256 of the concatenated `parts` under `key`.
fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; HASH_LEN] {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    for p in parts {
        ctx.update(p);
    }
    let mut out = [0u8; HASH_LEN];
    out.copy_from_slice(ctx.sign().as_ref());
    out
}

/// Noise's HKDF (section 4.3) with three outputs; callers use what they need.
fn hkdf(ck: &[u8; HASH_LEN], ikm: &[u8]) -> [[u8; HASH_LEN]; 3] {
    let mut temp = hmac(ck, &[ikm]);
    let o1 = hmac(&temp, &[&[1]]);
    let o2 = hmac(&temp, &[&o1, &[2]]);
    let o3 = hmac(&temp, &[&o2, &[3]]);
    temp.zeroize();
    [o1, o2, o3]
}

/// `ck`, `h` and the handshake cipher.
pub(crate) struct SymmetricState {
    ck: [u8; HASH_LEN],
    h: [u8; HASH_LEN],
    cipher: Option<CipherState>,
}

impl Drop for SymmetricState {
    /// Zeroes the chaining key and the hash.
    fn drop(&mut self) {
        self.ck.zeroize();
        self.h.zeroize();
    }
}

impl SymmetricState {
    /// `InitializeSymmetric(protocol_name)`.
    pub(crate) fn new(protocol_name: &[u8]) -> SymmetricState {
        let mut h = [0u8; HASH_LEN];
        if protocol_name.len() <= HASH_LEN {
            h[..protocol_name.len()].copy_from_slice(protocol_name);
        } else {
            h.copy_from_slice(digest::digest(&digest::SHA256, protocol_name).as_ref());
        }
        SymmetricState {
            ck: h,
            h,
            cipher: None,
        }
    }

    /// Whether a key is in place (`HasKey()`): encrypted fields carry a tag.
    pub(crate) fn has_key(&self) -> bool {
        self.cipher.is_some()
    }

    pub(crate) fn handshake_hash(&self) -> [u8; HASH_LEN] {
        self.h
    }

    pub(crate) fn mix_hash(&mut self, data: &[u8]) {
        let mut ctx = digest::Context::new(&digest::SHA256);
        ctx.update(&self.h);
        ctx.update(data);
        self.h.copy_from_slice(ctx.finish().as_ref());
    }

    pub(crate) fn mix_key(&mut self, ikm: &[u8]) {
        let [ck, mut k, mut unused] = hkdf(&self.ck, ikm);
        self.ck = ck;
        self.cipher = Some(CipherState::new(&k));
        k.zeroize();
        unused.zeroize();
    }

    pub(crate) fn mix_key_and_hash(&mut self, ikm: &[u8]) {
        let [ck, temp_h, mut k] = hkdf(&self.ck, ikm);
        self.ck = ck;
        self.mix_hash(&temp_h);
        self.cipher = Some(CipherState::new(&k));
        k.zeroize();
    }

    /// Appends `EncryptAndHash(plaintext)` to `out`.
    pub(crate) fn encrypt_and_hash(
        &mut self,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), NoiseError> {
        let start = out.len();
        match &mut self.cipher {
            Some(c) => c.encrypt(&self.h, plaintext, out)?,
            None => out.extend_from_slice(plaintext),
        }
        let h_input = out[start..].to_vec();
        self.mix_hash(&h_input);
        Ok(())
    }

    /// Appends `DecryptAndHash(ciphertext)` to `out`.
    pub(crate) fn decrypt_and_hash(
        &mut self,
        ciphertext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), NoiseError> {
        match &mut self.cipher {
            Some(c) => c.decrypt(&self.h, ciphertext, out)?,
            None => out.extend_from_slice(ciphertext),
        }
        self.mix_hash(ciphertext);
        Ok(())
    }

    /// `Split()`: the initiator-to-responder and responder-to-initiator keys.
    pub(crate) fn split(&self) -> ([u8; KEY_LEN], [u8; KEY_LEN]) {
        let [k1, k2, mut unused] = hkdf(&self.ck, &[]);
        unused.zeroize();
        (k1, k2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_protocol_names_are_hashed_short_ones_padded() {
        let long = b"Noise_NNpsk0+psk2_25519_AESGCM_SHA256_and_more";
        let ss = SymmetricState::new(long);
        let expected = digest::digest(&digest::SHA256, long);
        assert_eq!(&ss.handshake_hash()[..], expected.as_ref());
        let short = SymmetricState::new(b"Noise_NN");
        assert_eq!(&short.handshake_hash()[..8], b"Noise_NN");
        assert_eq!(short.handshake_hash()[8..], [0; 24]);
    }
}
