//! Noise's `HandshakeState` for the patterns weft uses, driven by their
//! token lists (Noise sections 5.3 and 7):
//!
//! ```text
//! NN:        NNpsk0:         XX:               XXpsk3:               IK:                IKpsk2:
//!   -> e       -> psk, e       -> e              -> e                  <- s               <- s
//!   <- e, ee   <- e, ee        <- e, ee, s, es   <- e, ee, s, es       ...                ...
//!                              -> s, se          -> s, se, psk         -> e, es, s, ss    -> e, es, s, ss
//!                                                                      <- e, ee, se       <- e, ee, se, psk
//! ```

use zeroize::{Zeroize, ZeroizeOnDrop};

use super::{CipherState, DH_LEN, Ephemeral, NoiseError, StaticKey, SymmetricState, TAG_LEN};

/// The handshake pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// `Noise_NN_25519_AESGCM_SHA256`: unauthenticated ephemeral exchange.
    NN,
    /// `Noise_NNpsk0_25519_AESGCM_SHA256`: both sides prove they hold a
    /// 32-byte pre-shared key.
    NNpsk0,
    /// `Noise_XX_25519_AESGCM_SHA256`: both sides send their static keys
    /// (encrypted) and prove they hold them; three messages.
    XX,
    /// `Noise_XXpsk3_25519_AESGCM_SHA256`: XX plus a pre-shared key.
    XXpsk3,
    /// `Noise_IK_25519_AESGCM_SHA256`: the initiator already knows the
    /// responder's static key; two messages.
    IK,
    /// `Noise_IKpsk2_25519_AESGCM_SHA256`: IK plus a pre-shared key.
    IKpsk2,
}

/// One token of a message pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    E,
    S,
    EE,
    ES,
    SE,
    SS,
    Psk,
}

use Token::{E, EE, ES, Psk, S, SE, SS};

impl Pattern {
    /// The full Noise protocol name.
    pub fn protocol_name(self) -> &'static str {
        match self {
            Pattern::NN => "Noise_NN_25519_AESGCM_SHA256",
            Pattern::NNpsk0 => "Noise_NNpsk0_25519_AESGCM_SHA256",
            Pattern::XX => "Noise_XX_25519_AESGCM_SHA256",
            Pattern::XXpsk3 => "Noise_XXpsk3_25519_AESGCM_SHA256",
            Pattern::IK => "Noise_IK_25519_AESGCM_SHA256",
            Pattern::IKpsk2 => "Noise_IKpsk2_25519_AESGCM_SHA256",
        }
    }

    /// The message patterns, initiator first, alternating.
    fn messages(self) -> &'static [&'static [Token]] {
        match self {
            Pattern::NN => &[&[E], &[E, EE]],
            Pattern::NNpsk0 => &[&[Psk, E], &[E, EE]],
            Pattern::XX => &[&[E], &[E, EE, S, ES], &[S, SE]],
            Pattern::XXpsk3 => &[&[E], &[E, EE, S, ES], &[S, SE, Psk]],
            Pattern::IK => &[&[E, ES, S, SS], &[E, EE, SE]],
            Pattern::IKpsk2 => &[&[E, ES, S, SS], &[E, EE, SE, Psk]],
        }
    }

    /// Whether the pattern uses a pre-shared key.
    pub fn has_psk(self) -> bool {
        matches!(self, Pattern::NNpsk0 | Pattern::XXpsk3 | Pattern::IKpsk2)
    }

    /// Whether both sides have static keys (XX, IK and their psk forms).
    pub fn has_static_keys(self) -> bool {
        !matches!(self, Pattern::NN | Pattern::NNpsk0)
    }

    /// Whether the initiator must know the responder's static key before
    /// the handshake (IK's pre-message `<- s`).
    pub fn needs_remote_static(self) -> bool {
        matches!(self, Pattern::IK | Pattern::IKpsk2)
    }

    /// How many handshake messages the pattern has.
    pub fn message_count(self) -> usize {
        self.messages().len()
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
    /// The two transport ciphers as (ours to send, ours to receive). Takes
    /// the keys, which are zeroed as they go: two cipher pairs from one
    /// `TransportKeys` would seal two streams under one key and nonce
    /// sequence, which breaks AES-GCM. Read
    /// [`handshake_hash`](Self::handshake_hash) first if it is needed.
    ///
    /// ```compile_fail
    /// # use weft_transform::noise::TransportKeys;
    /// let keys = TransportKeys {
    ///     initiator_to_responder: [1; 32],
    ///     responder_to_initiator: [2; 32],
    ///     handshake_hash: [3; 32],
    /// };
    /// let first = keys.ciphers(true, u64::MAX);
    /// let second = keys.ciphers(true, u64::MAX); // error: `keys` was moved
    /// ```
    pub fn ciphers(self, initiator: bool, limit: u64) -> (CipherState, CipherState) {
        let c1 = CipherState::with_limit(&self.initiator_to_responder, limit);
        let c2 = CipherState::with_limit(&self.responder_to_initiator, limit);
        if initiator { (c1, c2) } else { (c2, c1) }
    }
}

/// The keys one side brings to a handshake besides its ephemeral key.
#[derive(Clone, Debug, Default)]
pub struct StaticKeys {
    /// This side's static key pair (XX and IK, both sides).
    pub local: Option<StaticKey>,
    /// The peer's static public key known in advance (IK initiator).
    pub remote: Option<[u8; DH_LEN]>,
}

/// A Noise `HandshakeState` for one of the [`Pattern`]s, with any prologue
/// and payloads.
///
/// It writes and reads whole Noise messages; weft's framing, offers and
/// policy live in [`crate::Handshake`].
pub struct HandshakeState {
    pattern: Pattern,
    initiator: bool,
    ss: SymmetricState,
    e: Option<Box<dyn Ephemeral>>,
    s: Option<StaticKey>,
    re: Option<[u8; DH_LEN]>,
    rs: Option<[u8; DH_LEN]>,
    psk: Option<[u8; 32]>,
    /// Messages processed so far.
    step: usize,
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
    /// `SymmetricState`, the static key by its own type).
    fn drop(&mut self) {
        self.psk.zeroize();
    }
}

impl HandshakeState {
    /// `Initialize` for NN or NNpsk0: `psk` must be `Some` exactly for a
    /// psk pattern. `ephemeral` is this side's ephemeral key pair.
    pub fn new(
        pattern: Pattern,
        initiator: bool,
        prologue: &[u8],
        psk: Option<[u8; 32]>,
        ephemeral: Box<dyn Ephemeral>,
    ) -> Result<HandshakeState, NoiseError> {
        HandshakeState::with_static(
            pattern,
            initiator,
            prologue,
            psk,
            ephemeral,
            StaticKeys::default(),
        )
    }

    /// `Initialize` for any pattern: `keys.local` is required by XX and IK
    /// (both sides), `keys.remote` by an IK initiator (the responder's
    /// public key), and neither may be given otherwise.
    pub fn with_static(
        pattern: Pattern,
        initiator: bool,
        prologue: &[u8],
        psk: Option<[u8; 32]>,
        ephemeral: Box<dyn Ephemeral>,
        keys: StaticKeys,
    ) -> Result<HandshakeState, NoiseError> {
        if psk.is_some() != pattern.has_psk() {
            return Err(NoiseError::PskMismatch);
        }
        let needs_remote = pattern.needs_remote_static() && initiator;
        if keys.local.is_some() != pattern.has_static_keys()
            || keys.remote.is_some() != needs_remote
        {
            return Err(NoiseError::StaticKeyMismatch);
        }
        let mut ss = SymmetricState::new(pattern.protocol_name().as_bytes());
        ss.mix_hash(prologue);
        if pattern.needs_remote_static() {
            // The pre-message `<- s`: the responder's static public key.
            let responder_s = match (&keys.local, keys.remote) {
                (_, Some(rs)) => rs,
                (Some(s), None) => s.public_key(),
                (None, None) => return Err(NoiseError::StaticKeyMismatch),
            };
            ss.mix_hash(&responder_s);
        }
        Ok(HandshakeState {
            pattern,
            initiator,
            ss,
            e: Some(ephemeral),
            s: keys.local,
            re: None,
            rs: keys.remote,
            psk,
            step: 0,
        })
    }

    /// Whether every message has been processed.
    pub fn is_finished(&self) -> bool {
        self.step == self.pattern.message_count()
    }

    /// Whether the next message is ours to write.
    pub fn is_my_turn(&self) -> bool {
        !self.is_finished() && self.step.is_multiple_of(2) == self.initiator
    }

    /// The current handshake hash `h`.
    pub fn handshake_hash(&self) -> [u8; 32] {
        self.ss.handshake_hash()
    }

    /// The peer's static public key, once known (received, or given for
    /// IK), in its canonical encoding ([`crate::canonical_key`]): a peer
    /// that sends its key with bit 255 set is still one identity. The
    /// transcript hashes the bytes as sent.
    pub fn remote_static(&self) -> Option<[u8; DH_LEN]> {
        self.rs.map(crate::canonical_key)
    }

    /// Appends the next message, carrying `payload`, to `out`.
    pub fn write_message(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), NoiseError> {
        if !self.is_my_turn() {
            return Err(NoiseError::OutOfTurn);
        }
        for &token in self.pattern.messages()[self.step] {
            match token {
                E => {
                    let e_pub = self.e.as_ref().ok_or(NoiseError::OutOfTurn)?.public_key();
                    out.extend_from_slice(&e_pub);
                    self.mix_e(&e_pub);
                }
                S => {
                    let s_pub = self.s.as_ref().ok_or(NoiseError::OutOfTurn)?.public_key();
                    self.ss.encrypt_and_hash(&s_pub, out)?;
                }
                Psk => self.mix_psk(),
                dh => self.dh(dh)?,
            }
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
        let mut rest = message;
        for &token in self.pattern.messages()[self.step] {
            match token {
                E => {
                    let (re, tail) = rest
                        .split_first_chunk::<DH_LEN>()
                        .ok_or(NoiseError::ShortMessage)?;
                    rest = tail;
                    self.re = Some(*re);
                    self.mix_e(re);
                }
                S => {
                    let len = DH_LEN + if self.ss.has_key() { TAG_LEN } else { 0 };
                    if rest.len() < len {
                        return Err(NoiseError::ShortMessage);
                    }
                    let (field, tail) = rest.split_at(len);
                    rest = tail;
                    let mut rs = Vec::with_capacity(DH_LEN);
                    self.ss.decrypt_and_hash(field, &mut rs)?;
                    let rs: [u8; DH_LEN] = rs.try_into().map_err(|_| NoiseError::Decrypt)?;
                    self.rs = Some(rs);
                }
                Psk => self.mix_psk(),
                dh => self.dh(dh)?,
            }
        }
        if self.ss.has_key() && rest.len() < TAG_LEN {
            return Err(NoiseError::ShortMessage);
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

    /// The `psk` token.
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

    /// A Diffie-Hellman token (`ee`, `es`, `se`, `ss`). `es` is the
    /// initiator's ephemeral with the responder's static, `se` the other
    /// way round. Rejects an all-zero result: the peer sent a small-order
    /// point.
    fn dh(&mut self, token: Token) -> Result<(), NoiseError> {
        // (use our static key, use the peer's static key)
        let (local_s, remote_s) = match (token, self.initiator) {
            (EE, _) => (false, false),
            (SS, _) => (true, true),
            (ES, true) | (SE, false) => (false, true),
            (ES, false) | (SE, true) => (true, false),
            _ => return Err(NoiseError::OutOfTurn),
        };
        let remote = if remote_s { self.rs } else { self.re };
        let remote = remote.ok_or(NoiseError::OutOfTurn)?;
        let mut shared = if local_s {
            self.s
                .as_ref()
                .ok_or(NoiseError::OutOfTurn)?
                .diffie_hellman(&remote)?
        } else {
            self.e
                .as_mut()
                .ok_or(NoiseError::OutOfTurn)?
                .diffie_hellman(&remote)?
        };
        if shared == [0u8; DH_LEN] {
            return Err(NoiseError::InvalidKeyShare);
        }
        self.ss.mix_key(&shared);
        shared.zeroize();
        Ok(())
    }
}
