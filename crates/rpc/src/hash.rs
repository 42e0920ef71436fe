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
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
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
}
