//! Key updates: each direction's record key, how long it may be used, and
//! the `KEY_UPDATE` record that replaces it (docs/PROTOCOL.md section 5.1).
//!
//! The sender decides when its key is due (by records and by bytes, its own
//! [`RekeyLimits`]); it seals a `KEY_UPDATE` record under the old key and
//! switches to Noise's `Rekey()` of it. The receiver opens that record with
//! the old key and switches the same way before the next record. Each
//! direction is independent; nothing waits for the peer.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{BufMut, BytesMut};
use weft_frame::{Flags, FrameType, HEADER_LEN, Header};

use crate::error::{TransformError, TransformErrorKind};
use crate::noise::{CipherState, NoiseError, TAG_LEN};

/// Hard limit on records under one key, enforced by every receiver:
/// 2^24, below the 2^24.5 full-size records RFC 8446 section 5.5 allows
/// AES-GCM per key.
pub const MAX_RECORDS_PER_KEY: u64 = 1 << 24;
/// Hard limit on plaintext bytes under one key, enforced by every receiver:
/// 2^38, below the 2^24.5 records of 2^14 bytes (2^38.5 bytes) of RFC 8446
/// section 5.5.
pub const MAX_BYTES_PER_KEY: u64 = 1 << 38;
/// Default records a sender seals under one key before it updates it: 2^20,
/// 16 times below [`MAX_RECORDS_PER_KEY`].
pub const DEFAULT_REKEY_RECORDS: u64 = 1 << 20;
/// Default plaintext bytes a sender seals under one key before it updates
/// it: 2^30 (1 GiB), 256 times below [`MAX_BYTES_PER_KEY`].
pub const DEFAULT_REKEY_BYTES: u64 = 1 << 30;

/// Plaintext of a `KEY_UPDATE` record: the new key's generation, u64 BE.
const KEY_UPDATE_BODY: usize = 8;

/// When a sender replaces its record key: after `records` records or
/// `bytes` plaintext bytes under one key, whichever comes first (the
/// `KEY_UPDATE` record itself included). A local choice, never sent to the
/// peer; the peer enforces only [`MAX_RECORDS_PER_KEY`] and
/// [`MAX_BYTES_PER_KEY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RekeyLimits {
    /// Records per key, 2 to [`MAX_RECORDS_PER_KEY`]. Default
    /// [`DEFAULT_REKEY_RECORDS`] (2^20).
    pub records: u64,
    /// Plaintext bytes per key, 1 to `MAX_BYTES_PER_KEY / 2`. Default
    /// [`DEFAULT_REKEY_BYTES`] (2^30). A single record larger than this is
    /// still sent, alone under its key.
    pub bytes: u64,
}

impl Default for RekeyLimits {
    fn default() -> Self {
        RekeyLimits {
            records: DEFAULT_REKEY_RECORDS,
            bytes: DEFAULT_REKEY_BYTES,
        }
    }
}

impl RekeyLimits {
    /// Whether the limits are in range; `Err` says which is not.
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        if !(2..=MAX_RECORDS_PER_KEY).contains(&self.records) {
            return Err("rekey record limit must be between 2 and 2^24");
        }
        if !(1..=MAX_BYTES_PER_KEY / 2).contains(&self.bytes) {
            return Err("rekey byte limit must be between 1 and 2^37");
        }
        Ok(())
    }
}

/// Key updates this process has sent and received, over all connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyUpdates {
    /// `KEY_UPDATE` records sealed (our send keys replaced).
    pub sent: u64,
    /// `KEY_UPDATE` records opened (peers' send keys replaced).
    pub received: u64,
}

/// The counter of key updates in the `metrics` facade, labelled
/// `direction` = `sent` or `received` (recorded only if the application
/// installed a recorder).
pub const KEY_UPDATES: &str = "weft_key_updates_total";

static SENT: AtomicU64 = AtomicU64::new(0);
static RECEIVED: AtomicU64 = AtomicU64::new(0);

/// Key updates sent and received by this process so far, over all
/// connections (for load generators and tests; relaxed counters).
pub fn key_updates() -> KeyUpdates {
    KeyUpdates {
        sent: SENT.load(Ordering::Relaxed),
        received: RECEIVED.load(Ordering::Relaxed),
    }
}

fn fatal(kind: TransformErrorKind) -> TransformError {
    TransformError::new(kind)
}

/// The send half's key, its generation and its use so far.
pub(crate) struct SendKey {
    cipher: CipherState,
    /// 0 for the key from the handshake, +1 per update.
    generation: u64,
    records: u64,
    bytes: u64,
    limits: RekeyLimits,
}

impl SendKey {
    pub(crate) fn new(cipher: CipherState, limits: RekeyLimits) -> SendKey {
        SendKey {
            cipher,
            generation: 0,
            records: 0,
            bytes: 0,
            limits,
        }
    }

    /// Whether the key must be updated before a record of at most
    /// `plaintext` bytes (the update record must still fit under it).
    #[inline]
    pub(crate) fn is_due(&self, plaintext: usize) -> bool {
        let bytes = self.bytes + (plaintext + KEY_UPDATE_BODY) as u64;
        self.records > 0 && (self.records + 2 > self.limits.records || bytes > self.limits.bytes)
    }

    /// Seals `in_out` in place with `aad`; returns the tag.
    #[inline]
    pub(crate) fn seal(
        &mut self,
        aad: &[u8],
        in_out: &mut [u8],
    ) -> Result<[u8; TAG_LEN], TransformError> {
        let tag = self
            .cipher
            .encrypt_in_place(aad, in_out)
            .map_err(|_| fatal(TransformErrorKind::SendLimit))?;
        self.records += 1;
        self.bytes += in_out.len() as u64;
        Ok(tag)
    }

    /// Appends a `KEY_UPDATE` record sealed under the current key, then
    /// replaces the key. Fails only when the nonce space (2^64 - 1) is
    /// used up, with nothing written.
    pub(crate) fn update(&mut self, dst: &mut BytesMut) -> Result<(), TransformError> {
        if self.cipher.remaining() < 2 {
            return Err(fatal(TransformErrorKind::SendLimit));
        }
        let generation = self.generation + 1;
        let raw = key_update_header().to_bytes();
        let mut body = generation.to_be_bytes();
        let tag = self.seal(&raw, &mut body)?;
        dst.reserve(HEADER_LEN + KEY_UPDATE_BODY + TAG_LEN);
        dst.put_slice(&raw);
        dst.put_slice(&body);
        dst.put_slice(&tag);
        self.cipher.rekey();
        self.generation = generation;
        self.records = 0;
        self.bytes = 0;
        SENT.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(KEY_UPDATES, "direction" => "sent").increment(1);
        Ok(())
    }

    /// Records sealed under all keys so far (the nonce).
    pub(crate) fn nonce(&self) -> u64 {
        self.cipher.nonce()
    }

    /// How many times the key was updated.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Test-only: pretends `n` records were sealed under the current key.
    #[cfg(test)]
    pub(crate) fn skip_for_testing(&mut self, n: u64) {
        self.cipher.skip_for_testing(n);
        self.records += n;
    }
}

/// The header of every `KEY_UPDATE` record.
fn key_update_header() -> Header {
    Header {
        ty: FrameType::KEY_UPDATE,
        flags: Flags::NONE,
        stream_id: 0,
        metadata_len: 0,
        payload_len: (KEY_UPDATE_BODY + TAG_LEN) as u32,
    }
}

/// The receive half's key, its generation and its use so far.
pub(crate) struct OpenKey {
    cipher: CipherState,
    generation: u64,
    records: u64,
    bytes: u64,
}

impl OpenKey {
    pub(crate) fn new(cipher: CipherState) -> OpenKey {
        OpenKey {
            cipher,
            generation: 0,
            records: 0,
            bytes: 0,
        }
    }

    /// Opens one record in place; returns the plaintext length. A record
    /// beyond a key's hard limits (the 2^24 + 1st, or one whose plaintext
    /// would take the key past 2^38 bytes) is refused before it is opened.
    #[inline]
    pub(crate) fn open(&mut self, aad: &[u8], in_out: &mut [u8]) -> Result<usize, TransformError> {
        let plaintext = in_out.len().saturating_sub(TAG_LEN) as u64;
        if self.records >= MAX_RECORDS_PER_KEY || self.bytes + plaintext > MAX_BYTES_PER_KEY {
            return Err(fatal(TransformErrorKind::ReceiveLimit));
        }
        let len = self
            .cipher
            .decrypt_in_place(aad, in_out)
            .map_err(|e| match e {
                NoiseError::NonceExhausted => fatal(TransformErrorKind::ReceiveLimit),
                _ => fatal(TransformErrorKind::Open),
            })?;
        self.records += 1;
        self.bytes += len as u64;
        Ok(len)
    }

    /// Applies an authenticated `KEY_UPDATE` record (`header` with the tag
    /// already removed from its payload length, `plaintext` its body):
    /// checks it, then replaces the key.
    pub(crate) fn update(
        &mut self,
        header: &Header,
        plaintext: &[u8],
    ) -> Result<(), TransformError> {
        let bad = |what| fatal(TransformErrorKind::KeyUpdate(what));
        if header.stream_id != 0 || header.flags != Flags::NONE || header.metadata_len != 0 {
            return Err(bad("KEY_UPDATE header"));
        }
        let body: [u8; KEY_UPDATE_BODY] = plaintext
            .try_into()
            .map_err(|_| bad("KEY_UPDATE body length"))?;
        if u64::from_be_bytes(body) != self.generation + 1 {
            return Err(bad("KEY_UPDATE generation out of order"));
        }
        self.cipher.rekey();
        self.generation += 1;
        self.records = 0;
        self.bytes = 0;
        RECEIVED.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(KEY_UPDATES, "direction" => "received").increment(1);
        Ok(())
    }

    /// Records opened under all keys so far (the nonce).
    pub(crate) fn nonce(&self) -> u64 {
        self.cipher.nonce()
    }

    /// How many times the key was updated.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Test-only: pretends `n` records were opened under the current key.
    #[cfg(test)]
    pub(crate) fn skip_for_testing(&mut self, n: u64) {
        self.cipher.skip_for_testing(n);
        self.records += n;
    }
}

#[cfg(test)]
mod tests;
