//! Per-frame raw deflate (RFC 1951) with miniz_oxide. Every frame is its own
//! deflate stream (the state is reset before each, so no dictionary is
//! shared across frames), which means no state has to live with a
//! connection between frames: the compressor (about 300 KiB) and
//! decompressor (about 11 KiB) states are taken from a small process-wide
//! pool for one frame and returned right after. An idle connection with
//! compression negotiated holds no compression state at all, a busy one
//! holds it only while it encodes or decodes a frame, and the pool keeps at
//! most [`POOL_MAX`] of each, so the memory returns when connections close.
//! Buffers are reused, so steady state allocates nothing.
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

/// States of one kind kept for reuse: at most [`POOL_MAX`].
struct Pool<T> {
    free: std::sync::Mutex<Vec<T>>,
}

/// Most states of each kind the process keeps for reuse (compressor states
/// cost about 300 KiB each, decompressor states about 11 KiB). More are
/// created when more frames are in work at once, and freed after.
pub(crate) const POOL_MAX: usize = 8;

impl<T> Pool<T> {
    const fn new() -> Pool<T> {
        Pool {
            free: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Option<T> {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    fn give(&self, state: T) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < POOL_MAX {
            if free.capacity() == 0 {
                free.reserve_exact(POOL_MAX);
            }
            free.push(state);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// A compressor state and whether it has compressed since its last reset.
struct Deflater {
    state: Box<CompressorOxide>,
    dirty: bool,
}

static DEFLATERS: Pool<Deflater> = Pool::new();
static INFLATERS: Pool<Box<DecompressorOxide>> = Pool::new();

/// A raw-deflate compressor: state from the pool for each frame.
pub(crate) struct Compressor;

impl Compressor {
    /// Allocates nothing: the state is taken when the first frame is
    /// compressed.
    pub(crate) fn new() -> Compressor {
        Compressor
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
        // Output may use at most input.len() - 1 bytes; if it needs more,
        // compressing does not pay.
        let room = input.len().checked_sub(1)?;
        let mut d = DEFLATERS.take().unwrap_or_else(|| Deflater {
            state: Box::new(CompressorOxide::new(deflate_flags(LEVEL, STATIC_BLOCKS))),
            dirty: false,
        });
        if d.dirty {
            d.state.reset();
        }
        d.dirty = true;
        let start = dst.len();
        dst.resize(start + room, 0);
        let (status, consumed, written) =
            compress(&mut d.state, input, &mut dst[start..], TDEFLFlush::Finish);
        DEFLATERS.give(d);
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

/// A raw-deflate decompressor: state from the pool for each frame, and an
/// output buffer reused while it is small.
pub(crate) struct Decompressor {
    out: BytesMut,
}

/// Largest output buffer a decompressor keeps between frames; a larger one
/// goes with the frame it holds.
const RETAIN_MAX: usize = 8 * 1024;

/// First guess at the inflated size, as a multiple of the input.
const FIRST_GUESS_FACTOR: usize = 16;
/// Smallest first guess.
const MIN_GUESS: usize = 4096;

impl Decompressor {
    pub(crate) fn new() -> Decompressor {
        Decompressor {
            out: BytesMut::new(),
        }
    }

    /// Inflates `input` (see [`inflate`](Self::inflate)) with a pooled state.
    pub(crate) fn decompress(
        &mut self,
        input: &[u8],
        limit: usize,
    ) -> Result<Bytes, DecompressError> {
        let mut state = INFLATERS.take().unwrap_or_default();
        let result = self.inflate(&mut state, input, limit);
        INFLATERS.give(state);
        if self.out.capacity() > RETAIN_MAX {
            self.out = BytesMut::new();
        }
        result
    }

    /// Inflates `input`, which must be one complete raw deflate stream, to at
    /// most `limit` bytes. Memory grows by doubling up to `limit`, never
    /// beyond it.
    fn inflate(
        &mut self,
        state: &mut DecompressorOxide,
        input: &[u8],
        limit: usize,
    ) -> Result<Bytes, DecompressError> {
        state.init();
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
            let (status, read, written) =
                decompress(state, &input[in_pos..], &mut self.out, out_pos, flags);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_at_most_pool_max() {
        let pool: Pool<Box<DecompressorOxide>> = Pool::new();
        for _ in 0..POOL_MAX + 3 {
            pool.give(Box::default());
        }
        assert_eq!(pool.len(), POOL_MAX);
        assert!(pool.take().is_some());
        assert_eq!(pool.len(), POOL_MAX - 1);
    }

    #[test]
    fn idle_halves_hold_no_state_and_round_trip_through_the_pool() {
        // A connection's halves own no deflate state between frames.
        assert_eq!(std::mem::size_of::<Compressor>(), 0);
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        assert_eq!(d.out.capacity(), 0);
        let input = b"weft weft weft weft weft weft weft weft weft weft".repeat(20);
        for _ in 0..3 {
            let mut dst = BytesMut::new();
            let n = c
                .compress_into(&input, 100, &mut dst)
                .expect("compressible");
            assert_eq!(n, dst.len());
            let out = d.decompress(&dst, 1 << 20).unwrap();
            assert_eq!(&out[..], &input[..]);
        }
        // A big output buffer is not kept between frames.
        let big = vec![7u8; 64 * 1024];
        let mut dst = BytesMut::new();
        c.compress_into(&big, 1000, &mut dst).expect("compressible");
        let out = d.decompress(&dst, 1 << 20).unwrap();
        assert_eq!(out.len(), big.len());
        assert!(d.out.capacity() <= RETAIN_MAX, "{}", d.out.capacity());
    }

    #[test]
    fn an_output_buffer_of_exactly_retain_max_is_kept() {
        let mut d = Decompressor::new();
        d.out = BytesMut::with_capacity(RETAIN_MAX);
        // An empty stream leaves the whole buffer in place.
        let empty = miniz_oxide::deflate::compress_to_vec(b"", LEVEL);
        assert!(d.decompress(&empty, 1 << 20).unwrap().is_empty());
        assert_eq!(d.out.capacity(), RETAIN_MAX);
    }
}
