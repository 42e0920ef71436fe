//! Noise's `HandshakeState` for the two patterns weft uses, NN and NNpsk0:
//!
//! ```text
//! NN:          NNpsk0:
//!   -> e         -> psk, e
//!   <- e, ee     <- e, ee
//! ```

use zeroize::{Zeroize, ZeroizeOnDrop};

use super::{CipherState, DH_LEN, Ephemeral, NoiseError, SymmetricState, TAG_LEN};

/// The handshake pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// `Noise_NN_25519_AESGCM_SHA256`: unauthenticated ephemeral exchange.
    NN,
    /// `Noise_NNpsk0_25519_AESGCM_SHA256`: both sides prove they hold a
    /// 32-byte pre-shared key.
    NNpsk0,
}

impl Pattern {
    /// The full Noise protocol name.
    pub fn protocol_name(self) -> &'static str {
        match self {
            Pattern::NN => "Noise_NN_25519_AESGCM_SHA256",
            Pattern::NNpsk0 => "Noise_NNpsk0_25519_AESGCM_SHA256",
        }
    }
}

/// The keys and hash a finished handshake yields. The keys are zeroed on
/// drop and never printed.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct TransportKeys {
    /// Initiator-to-responder key (Noise's `c1`).
    pub initiator_to_responder: [u8; 32],
    /// Responder-to-initiator key (Noise's `c2`).
    pub responder_to_initiator: [u8; 32],
    /// The handshake hash `h`.
    pub handshake_hash: [u8; 32],
}

impl std::fmt::Debug for TransportKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportKeys")
            .field("handshake_hash", &self.handshake_hash)
            .finish_non_exhaustive()
    }
}

impl TransportKeys {
    /// The two transport ciphers as (ours to send, ours to receive).
    pub fn ciphers(&self, initiator: bool, limit: u64) -> (CipherState, CipherState) {
        let c1 = CipherState::with_limit(&self.initiator_to_responder, limit);
        let c2 = CipherState::with_limit(&self.responder_to_initiator, limit);
        if initiator { (c1, c2) } else { (c2, c1) }
    }
}

/// A Noise `HandshakeState` for NN or NNpsk0 with any prologue and payloads.
///
/// It writes and reads whole Noise messages; weft's framing, offers and
/// policy live in [`crate::Handshake`].
pub struct HandshakeState {
    pattern: Pattern,
    initiator: bool,
    ss: SymmetricState,
    e: Option<Box<dyn Ephemeral>>,
    re: Option<[u8; DH_LEN]>,
    psk: Option<[u8; 32]>,
    /// Messages processed so far (0, 1 or 2).
    step: u8,
}

impl std::fmt::Debug for HandshakeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeState")
            .field("pattern", &self.pattern)
            .field("initiator", &self.initiator)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl Drop for HandshakeState {
    /// Zeroes the pre-shared key (the chaining key is zeroed by its
    /// `SymmetricState`).
    fn drop(&mut self) {
        self.psk.zeroize();
    }
}

impl HandshakeState {
    /// `Initialize`: `psk` must be `Some` exactly for [`Pattern::NNpsk0`].
    /// `ephemeral` is this side's key pair for the one DH of the pattern.
    pub fn new(
        pattern: Pattern,
        initiator: bool,
        prologue: &[u8],
        psk: Option<[u8; 32]>,
        ephemeral: Box<dyn Ephemeral>,
    ) -> Result<HandshakeState, NoiseError> {
        if psk.is_some() != (pattern == Pattern::NNpsk0) {
            return Err(NoiseError::PskMismatch);
        }
        let mut ss = SymmetricState::new(pattern.protocol_name().as_bytes());
        ss.mix_hash(prologue);
        Ok(HandshakeState {
            pattern,
            initiator,
            ss,
            e: Some(ephemeral),
            re: None,
            psk,
            step: 0,
        })
    }

    /// Whether both messages have been processed.
    pub fn is_finished(&self) -> bool {
        self.step == 2
    }

    /// Whether the next message is ours to write.
    pub fn is_my_turn(&self) -> bool {
        !self.is_finished() && (self.step == 0) == self.initiator
    }

    /// The current handshake hash `h`.
    pub fn handshake_hash(&self) -> [u8; 32] {
        self.ss.handshake_hash()
    }

    /// Appends the next message, carrying `payload`, to `out`.
    pub fn write_message(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), NoiseError> {
        if !self.is_my_turn() {
            return Err(NoiseError::OutOfTurn);
        }
        if self.step == 0 {
            self.mix_psk();
        }
        let e_pub = self.e.as_ref().ok_or(NoiseError::OutOfTurn)?.public_key();
        out.extend_from_slice(&e_pub);
        self.mix_e(&e_pub);
        if self.step == 1 {
            self.ee()?;
        }
        self.ss.encrypt_and_hash(payload, out)?;
        self.step += 1;
        Ok(())
    }

    /// Reads the peer's next message, appending its payload to `payload`.
    /// Any failure leaves the handshake unusable.
    pub fn read_message(
        &mut self,
        message: &[u8],
        payload: &mut Vec<u8>,
    ) -> Result<(), NoiseError> {
        if self.is_my_turn() || self.is_finished() {
            return Err(NoiseError::OutOfTurn);
        }
        let (re, rest) = message
            .split_first_chunk::<DH_LEN>()
            .ok_or(NoiseError::ShortMessage)?;
        if self.psk.is_some() || self.step == 1 {
            // A key is in place: the payload carries a tag.
            if rest.len() < TAG_LEN {
                return Err(NoiseError::ShortMessage);
            }
        }
        if self.step == 0 {
            self.mix_psk();
        }
        self.re = Some(*re);
        self.mix_e(re);
        if self.step == 1 {
            self.ee()?;
        }
        self.ss.decrypt_and_hash(rest, payload)?;
        self.step += 1;
        Ok(())
    }

    /// `Split()` after the last message.
    pub fn split(&self) -> Result<TransportKeys, NoiseError> {
        if !self.is_finished() {
            return Err(NoiseError::OutOfTurn);
        }
        let (k1, k2) = self.ss.split();
        Ok(TransportKeys {
            initiator_to_responder: k1,
            responder_to_initiator: k2,
            handshake_hash: self.ss.handshake_hash(),
        })
    }

    /// The `psk` token at the start of the first message (psk0).
    fn mix_psk(&mut self) {
        if let Some(psk) = self.psk {
            self.ss.mix_key_and_hash(&psk);
        }
    }

    /// The `e` token: hash the ephemeral public key, and with a PSK also mix
    /// it into the key (Noise section 9.2).
    fn mix_e(&mut self, e_pub: &[u8; DH_LEN]) {
        self.ss.mix_hash(e_pub);
        if self.psk.is_some() {
            self.ss.mix_key(e_pub);
        }
    }

    /// The `ee` token. Rejects an all-zero result: the peer sent a
    /// small-order point.
    fn ee(&mut self) -> Result<(), NoiseError> {
        let e = self.e.take().ok_or(NoiseError::OutOfTurn)?;
        let re = self.re.ok_or(NoiseError::OutOfTurn)?;
        let mut shared = e.diffie_hellman(&re)?;
        if shared == [0u8; DH_LEN] {
            return Err(NoiseError::InvalidKeyShare);
        }
        self.ss.mix_key(&shared);
        shared.zeroize();
        Ok(())
    }
}
