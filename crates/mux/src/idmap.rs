//! A `HashMap` keyed by stream id with a multiplicative hash: ids are
//! small, dense and chosen by us or bounded by the stream cap, so SipHash's
//! protection against chosen keys buys nothing here and costs hundreds of
//! instructions per lookup on the round-trip path.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Map from stream id to `V`.
pub(crate) type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of a `u32` key.
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_spread_and_bytes_hash() {
        let mut a = IdHasher::default();
        a.write_u32(1);
        let mut b = IdHasher::default();
        b.write_u32(3);
        assert_ne!(a.finish(), b.finish());
        let mut c = IdHasher::default();
        c.write(&[1, 2]);
        assert_ne!(c.finish(), 0);
        let mut m: IdMap<u32> = IdMap::default();
        m.insert(7, 1);
        assert_eq!(m.get(&7), Some(&1));
    }
}
