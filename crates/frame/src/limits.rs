//! Size limits the decoder enforces from the header alone.

/// Default maximum payload per frame: 64 KiB.
pub const DEFAULT_MAX_PAYLOAD: u32 = 64 * 1024;
/// Default maximum metadata block per frame: 16 KiB.
pub const DEFAULT_MAX_METADATA: u32 = 16 * 1024;
/// Smallest `max_payload` a peer may configure: 16 KiB.
pub const MIN_MAX_PAYLOAD: u32 = 16 * 1024;
/// Largest `max_payload` a peer may configure: 1 MiB.
pub const MAX_MAX_PAYLOAD: u32 = 1024 * 1024;

/// Per-frame size limits.
///
/// Both are checked against the header before a single byte of the body is
/// buffered, so a peer can never make the decoder reserve more than
/// `16 + max_metadata + max_payload (+ record overhead)` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload (plaintext, after any decompression is *not* counted
    /// here: this is the size on the wire before record overhead). Default
    /// [`DEFAULT_MAX_PAYLOAD`] (64 KiB); memory cost: the read buffer may grow
    /// to this size per connection.
    pub max_payload: u32,
    /// Largest metadata block. Default [`DEFAULT_MAX_METADATA`] (16 KiB).
    pub max_metadata: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_metadata: DEFAULT_MAX_METADATA,
        }
    }
}

impl Limits {
    /// The largest frame on the wire these limits admit, header included,
    /// given `overhead` bytes of record protection.
    pub fn max_frame_len(&self, overhead: u32) -> usize {
        crate::HEADER_LEN
            + self.max_metadata as usize
            + self.max_payload as usize
            + overhead as usize
    }
}
