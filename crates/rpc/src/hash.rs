//! A small, fast hasher (the multiply-rotate scheme of rustc's FxHash) for
//! the per-call lookups: the route table, the live-call table and the
//! client's method-metadata cache.
//!
//! It is not collision resistant, which is safe here: the route table is
//! fixed at start-up (a peer only looks names up, never inserts), the
//! live-call table is keyed by stream ids and bounded by the stream cap,
//! and the client cache holds local names and is bounded.

use std::hash::{BuildHasher, Hasher};

/// Builds [`Fx`] hashers.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FastHash;

impl BuildHasher for FastHash {
    type Hasher = Fx;
    fn build_hasher(&self) -> Fx {
        Fx(0)
    }
}

/// The hasher state.
#[derive(Debug)]
pub(crate) struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = fx_add(self.0, word);
    }
}

/// One step of the hash: `word` mixed into `state`.
#[inline(always)]
const fn fx_add(state: u64, word: u64) -> u64 {
    (state.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95)
}

/// `bytes` mixed into `state` a word at a time (the last 1 to 7 bytes as
/// one zero-padded word): what [`Fx`] does with a write, usable in a
/// constant, so a method key worked out at compile time
/// ([`MethodKey`](crate::MethodKey)) hashes a long name as the cache does.
#[inline]
pub(crate) const fn fx_bytes(mut state: u64, bytes: &[u8]) -> u64 {
    let (words, rest) = bytes.as_chunks::<8>();
    let mut i = 0;
    while i < words.len() {
        state = fx_add(state, u64::from_le_bytes(words[i]));
        i += 1;
    }
    if !rest.is_empty() {
        state = fx_add(state, tail_word(rest));
    }
    state
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = fx_bytes(self.0, bytes);
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The last 1 to 7 bytes of a string as the little-endian word they
/// start, zero above: what copying them into a zeroed `[u8; 8]` gives, read
/// as two overlapping loads (or three bytes) instead. That copy has a
/// length known only at run time, so it was a `memcpy` call on every hash
/// of a name whose length is not a multiple of 8: most method names.
/// A `const fn` (for [`fx_bytes`]), so its widenings are `as` casts.
#[inline]
pub(crate) const fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    debug_assert!(n >= 1 && n < 8);
    if n >= 4 {
        let lo = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let hi = u32::from_le_bytes([rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]]);
        // The two halves overlap for n < 8: the bytes they share land on
        // the same bits, so `|` keeps them as they are.
        lo as u64 | (hi as u64) << ((n - 4) * 8)
    } else {
        let (first, mid, last) = (rest[0], rest[n / 2], rest[n - 1]);
        first as u64 | (mid as u64) << (n / 2 * 8) | (last as u64) << ((n - 1) * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn maps_work_and_inputs_spread() {
        let mut m: HashMap<Box<str>, u32, FastHash> = HashMap::default();
        for (i, k) in ["echo", "svc/get", "a", "abcdefghijk", ""]
            .iter()
            .enumerate()
        {
            m.insert((*k).into(), i as u32);
        }
        assert_eq!(m.get("abcdefghijk"), Some(&3));
        assert_eq!(m.get(""), Some(&4));
        let h = |k: u32| FastHash.hash_one(k);
        assert_ne!(h(1), h(3));
        let s = |k: &str| FastHash.hash_one(k);
        assert_ne!(s("abcdefgh1"), s("abcdefgh2"));
        let mut f = FastHash.build_hasher();
        f.write_u8(1);
        f.write_u64(2);
        assert_ne!(f.finish(), 0);
    }

    /// The tail is read as the zero-padded word a copy would give, for
    /// every length and byte position (so hashes are what they were).
    #[test]
    fn a_tail_reads_as_its_zero_padded_word() {
        for n in 1..8 {
            // distinct bytes at every position, high bits set or not
            for base in [0x31u8, 0xC1] {
                let rest: Vec<u8> = (0..n).map(|i| base + 7 * i as u8).collect();
                let mut padded = [0u8; 8];
                padded[..n].copy_from_slice(&rest);
                assert_eq!(tail_word(&rest), u64::from_le_bytes(padded), "{rest:?}");
            }
        }
    }
}
