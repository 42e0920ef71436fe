//! Per-frame raw deflate (RFC 1951) with miniz_oxide: one compressor and one
//! decompressor per connection, reset before every frame so no dictionary
//! is shared across frames, and buffers reused so steady state allocates
//! nothing.
//!
//! ## Settings, measured
//!
//! Round trip (reset + compress, init + inflate) of the 1.3 KiB reference
//! JSON, `deflate_settings` in benches/benches/transform.rs, medians of one
//! run on the 2-core build machine:
//!
//! | level | blocks | round trip | size ratio |
//! |---|---|---|---|
//! | 1 | static | 14.9 µs | 0.127 |
//! | 1 | dynamic | 15.8 µs | 0.103 |
//! | 3 | static | 18.2 µs | 0.126 |
//! | 6 | dynamic | 20.6 µs | 0.104 |
//! | 6 | static | 19.6 µs | 0.126 |
//! | 9 | static | 19.5 µs | 0.126 |
//!
//! Level 1 (greedy, one probe: miniz_oxide's fast path) with static Huffman
//! blocks is the cheapest, so that is the choice. The gain from static blocks
//! is small here because `CompressorOxide::reset` alone costs about 7.2 µs
//! (it clears some 300 KiB of tables and buffers) and inflating about 4.6 µs
//! of the round trip; miniz_oxide offers no cheaper reset that would keep
//! frames independent. A smaller special-purpose encoder for small frames
//! would be the next step.

use bytes::{Bytes, BytesMut};
use miniz_oxide::deflate::core::{
    CompressionStrategy, CompressorOxide, TDEFLFlush, TDEFLStatus, compress,
    create_comp_flags_from_zip_params,
};
use miniz_oxide::inflate::TINFLStatus;
use miniz_oxide::inflate::core::{DecompressorOxide, decompress, inflate_flags};

use crate::error::DecompressError;

/// The compression level (miniz_oxide 0 to 10). Measured in
/// benches/benches/transform.rs (`deflate_settings`); see docs/PROTOCOL.md
/// section 4 for why this one.
pub const LEVEL: u8 = 1;
/// Whether blocks use the static Huffman code (RFC 1951 section 3.2.6)
/// instead of per-block dynamic tables. Measured with [`LEVEL`].
pub const STATIC_BLOCKS: bool = true;

/// The miniz_oxide flags for a raw deflate stream at `level`, with static
/// Huffman blocks when `static_blocks`.
pub fn deflate_flags(level: u8, static_blocks: bool) -> u32 {
    let strategy = if static_blocks {
        CompressionStrategy::Fixed
    } else {
        CompressionStrategy::Default
    };
    // Negative window bits: raw deflate, no zlib header or checksum.
    create_comp_flags_from_zip_params(i32::from(level), -15, strategy as i32)
}

/// A reusable raw-deflate compressor.
pub(crate) struct Compressor {
    state: Box<CompressorOxide>,
    dirty: bool,
}

impl Compressor {
    pub(crate) fn new() -> Compressor {
        Compressor {
            state: Box::new(CompressorOxide::new(deflate_flags(LEVEL, STATIC_BLOCKS))),
            dirty: false,
        }
    }

    /// Appends the deflate of `input` to `dst` if it is shorter than
    /// `input` and inflates within `max_ratio`; returns its length. Otherwise
    /// leaves `dst` as it was and returns `None` (send it uncompressed).
    pub(crate) fn compress_into(
        &mut self,
        input: &[u8],
        max_ratio: u32,
        dst: &mut BytesMut,
    ) -> Option<usize> {
        if self.dirty {
            self.state.reset();
        }
        self.dirty = true;
        let start = dst.len();
        // Output may use at most input.len() - 1 bytes; if it needs more,
        // compressing does not pay.
        let room = input.len().checked_sub(1)?;
        dst.resize(start + room, 0);
        let (status, consumed, written) = compress(
            &mut self.state,
            input,
            &mut dst[start..],
            TDEFLFlush::Finish,
        );
        let ratio_ok = (input.len() as u64) <= u64::from(max_ratio) * written as u64;
        if status == TDEFLStatus::Done && consumed == input.len() && ratio_ok {
            dst.truncate(start + written);
            Some(written)
        } else {
            dst.truncate(start);
            None
        }
    }
}

/// A reusable raw-deflate decompressor with a reusable output buffer.
pub(crate) struct Decompressor {
    state: Box<DecompressorOxide>,
    out: BytesMut,
}

/// First guess at the inflated size, as a multiple of the input.
const FIRST_GUESS_FACTOR: usize = 16;
/// Smallest first guess.
const MIN_GUESS: usize = 4096;

impl Decompressor {
    pub(crate) fn new() -> Decompressor {
        Decompressor {
            state: Box::default(),
            out: BytesMut::new(),
        }
    }

    /// Inflates `input`, which must be one complete raw deflate stream, to at
    /// most `limit` bytes. Memory grows by doubling up to `limit`, never
    /// beyond it.
    pub(crate) fn decompress(
        &mut self,
        input: &[u8],
        limit: usize,
    ) -> Result<Bytes, DecompressError> {
        self.state.init();
        let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        let mut size = input
            .len()
            .saturating_mul(FIRST_GUESS_FACTOR)
            .max(MIN_GUESS)
            .min(limit);
        self.out.clear();
        self.out.resize(size, 0);
        let (mut in_pos, mut out_pos) = (0, 0);
        loop {
            let (status, read, written) = decompress(
                &mut self.state,
                &input[in_pos..],
                &mut self.out,
                out_pos,
                flags,
            );
            in_pos += read;
            out_pos += written;
            match status {
                TINFLStatus::Done if in_pos == input.len() => {
                    self.out.truncate(out_pos);
                    return Ok(self.out.split().freeze());
                }
                TINFLStatus::Done => return Err(self.fail(DecompressError::TrailingData)),
                TINFLStatus::HasMoreOutput if size >= limit => {
                    return Err(self.fail(DecompressError::TooLarge { limit }));
                }
                TINFLStatus::HasMoreOutput => {
                    size = size.saturating_mul(2).min(limit);
                    self.out.resize(size, 0);
                }
                TINFLStatus::NeedsMoreInput | TINFLStatus::FailedCannotMakeProgress => {
                    return Err(self.fail(DecompressError::Truncated));
                }
                _ => return Err(self.fail(DecompressError::Corrupt)),
            }
        }
    }

    fn fail(&mut self, why: DecompressError) -> DecompressError {
        self.out.clear();
        why
    }
}
