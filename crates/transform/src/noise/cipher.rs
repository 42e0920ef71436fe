//! Noise's `CipherState` for AESGCM: a key and a 64-bit counter nonce.

#[cfg(not(fuzzing))]
use ring::aead::Aad;
use ring::aead::{AES_256_GCM, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

use zeroize::Zeroize;

use super::NoiseError;

/// Key length of AES-256-GCM.
pub const KEY_LEN: usize = 32;
/// Length of the AES-GCM authentication tag.
pub const TAG_LEN: usize = 16;

/// A Noise `CipherState` (AESGCM): key `k` and counter nonce `n`.
///
/// Only when compiled with `--cfg fuzzing` (which cargo-fuzz sets, and
/// nothing else does) it encrypts nothing and its tag is 16 zero bytes, so a
/// fuzzer can reach what lies behind record authentication. There is no
/// cargo feature for it: `--all-features` cannot turn it on, and the `weft`
/// facade refuses to compile under `cfg(fuzzing)` (docs/SECURITY.md, "The
/// fuzz-only null cipher").
///
/// The nonce is 4 zero bytes followed by `n` as a big-endian u64 (Noise
/// section 12.4). `n` starts at 0, grows by one per successful operation,
/// and never wraps: once it reaches the limit (at most 2^64 - 1, which Noise
/// reserves) every operation fails.
pub struct CipherState {
    key: LessSafeKey,
    n: u64,
    limit: u64,
}

impl std::fmt::Debug for CipherState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CipherState")
            .field("n", &self.n)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl CipherState {
    /// A cipher with key `k`, nonce 0 and the Noise limit (2^64 - 1).
    pub fn new(k: &[u8; KEY_LEN]) -> CipherState {
        CipherState::with_limit(k, u64::MAX)
    }

    /// A cipher that refuses to use nonce `limit` or above.
    pub fn with_limit(k: &[u8; KEY_LEN], limit: u64) -> CipherState {
        let key = UnboundKey::new(&AES_256_GCM, k).expect("AES-256-GCM takes a 32-byte key");
        CipherState {
            key: LessSafeKey::new(key),
            n: 0,
            limit,
        }
    }

    /// The next nonce value.
    pub fn nonce(&self) -> u64 {
        self.n
    }

    /// Noise's `Rekey()` (section 4.2): `k = REKEY(k)`, the first 32 bytes
    /// of `ENCRYPT(k, 2^64 - 1, empty, 32 zero bytes)`. The nonce `n` is
    /// kept, as Noise specifies. Allocates nothing; the intermediate bytes
    /// are zeroed.
    pub fn rekey(&mut self) {
        let mut nonce = [0xffu8; NONCE_LEN];
        nonce[..4].fill(0);
        let mut next = [0u8; KEY_LEN];
        // Sealing 32 bytes under a valid key cannot fail; the tag is unused.
        let _ = self.seal(Nonce::assume_unique_for_key(nonce), &[], &mut next);
        let key = UnboundKey::new(&AES_256_GCM, &next).expect("AES-256-GCM takes a 32-byte key");
        next.zeroize();
        self.key = LessSafeKey::new(key);
    }

    /// Test-only: moves the nonce forward by `n` without using it, to reach
    /// the far end of a key's life in a test that runs in seconds.
    #[cfg(test)]
    pub(crate) fn skip_for_testing(&mut self, n: u64) {
        self.n += n;
    }

    /// How many more operations the limit allows.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.n)
    }

    fn next_nonce(&self) -> Result<Nonce, NoiseError> {
        if self.n >= self.limit {
            return Err(NoiseError::NonceExhausted);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce[4..].copy_from_slice(&self.n.to_be_bytes());
        Ok(Nonce::assume_unique_for_key(nonce))
    }

    /// Encrypts `in_out` in place with associated data `ad`; returns the tag
    /// (which goes after the ciphertext). On failure `in_out` is zeroed, so
    /// a caller that sends the buffer anyway sends no plaintext. Allocates
    /// nothing.
    pub fn encrypt_in_place(
        &mut self,
        ad: &[u8],
        in_out: &mut [u8],
    ) -> Result<[u8; TAG_LEN], NoiseError> {
        let sealed = self
            .next_nonce()
            .and_then(|nonce| self.seal(nonce, ad, in_out));
        match sealed {
            Ok(tag) => {
                self.n += 1;
                Ok(tag)
            }
            Err(e) => {
                in_out.zeroize();
                Err(e)
            }
        }
    }

    /// Decrypts ciphertext-then-tag in place; returns the plaintext length
    /// (the plaintext is `in_out[..len]`). On failure the nonce does not
    /// advance and `in_out` is zeroed (nothing unauthenticated stays
    /// readable). Allocates nothing.
    pub fn decrypt_in_place(&mut self, ad: &[u8], in_out: &mut [u8]) -> Result<usize, NoiseError> {
        let opened = if in_out.len() < TAG_LEN {
            Err(NoiseError::Decrypt)
        } else {
            self.next_nonce()
                .and_then(|nonce| self.open(nonce, ad, in_out))
        };
        match opened {
            Ok(len) => {
                self.n += 1;
                Ok(len)
            }
            Err(e) => {
                in_out.zeroize();
                Err(e)
            }
        }
    }

    #[cfg(not(fuzzing))]
    fn seal(
        &self,
        nonce: Nonce,
        ad: &[u8],
        in_out: &mut [u8],
    ) -> Result<[u8; TAG_LEN], NoiseError> {
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(ad), in_out)
            .map_err(|_| NoiseError::NonceExhausted)?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    #[cfg(not(fuzzing))]
    fn open(&self, nonce: Nonce, ad: &[u8], in_out: &mut [u8]) -> Result<usize, NoiseError> {
        self.key
            .open_in_place(nonce, Aad::from(ad), in_out)
            .map(|plain| plain.len())
            .map_err(|_| NoiseError::Decrypt)
    }

    /// Fuzzing only: no encryption, an all-zero tag.
    #[cfg(fuzzing)]
    fn seal(&self, _: Nonce, _: &[u8], _: &mut [u8]) -> Result<[u8; TAG_LEN], NoiseError> {
        let _ = &self.key;
        Ok([0; TAG_LEN])
    }

    /// Fuzzing only: accepts any record whose tag is all zero.
    #[cfg(fuzzing)]
    fn open(&self, _: Nonce, _: &[u8], in_out: &mut [u8]) -> Result<usize, NoiseError> {
        let len = in_out.len() - TAG_LEN;
        if in_out[len..] == [0; TAG_LEN] {
            Ok(len)
        } else {
            Err(NoiseError::Decrypt)
        }
    }

    /// Appends the encryption of `plaintext` (ciphertext then tag) to `out`.
    /// On failure `out` is left as it was: the copy of the plaintext it
    /// held meanwhile is zeroed and removed.
    pub fn encrypt(
        &mut self,
        ad: &[u8],
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), NoiseError> {
        let start = out.len();
        out.extend_from_slice(plaintext);
        match self.encrypt_in_place(ad, &mut out[start..]) {
            Ok(tag) => {
                out.extend_from_slice(&tag);
                Ok(())
            }
            Err(e) => {
                // `encrypt_in_place` zeroed the copy; drop it.
                out.truncate(start);
                Err(e)
            }
        }
    }

    /// Appends the decryption of `ciphertext` (ciphertext then tag) to `out`.
    /// On failure `out` is left as it was (what was decrypted into it
    /// meanwhile is zeroed first).
    pub fn decrypt(
        &mut self,
        ad: &[u8],
        ciphertext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), NoiseError> {
        let start = out.len();
        out.extend_from_slice(ciphertext);
        match self.decrypt_in_place(ad, &mut out[start..]) {
            Ok(len) => {
                out.truncate(start + len);
                Ok(())
            }
            Err(e) => {
                out.truncate(start);
                Err(e)
            }
        }
    }
}
