//! The soak's messages and its random numbers.
//!
//! A message names its task, call and index, so a lost, duplicated,
//! reordered or misdelivered message is seen on arrival; its filler bytes
//! follow from the same three numbers, so a corrupted byte is seen too
//! (the check is byte for byte, without keeping what was sent).

use weft::{Bytes, Status};

/// The filler repeats a pattern this long: compressible (compressed
/// connections really deflate it), yet every byte is checked.
const PATTERN: usize = 16;

/// One soak message: task, call sequence, index within the call, count,
/// then `pad` filler bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Msg {
    pub(crate) task: u64,
    pub(crate) call: u64,
    pub(crate) index: u32,
    pub(crate) count: u32,
    pub(crate) pad: u16,
}

impl Msg {
    const HEADER: usize = 26;

    /// The message with another index (the same call's next message).
    pub(crate) fn at(self, index: u32) -> Msg {
        Msg { index, ..self }
    }

    /// Which call this is, across the run: one id per task and call.
    pub(crate) fn key(&self) -> (u64, u64) {
        (self.task, self.call)
    }

    /// The filler pattern of this task, call and index.
    fn pattern(&self) -> [u8; PATTERN] {
        let mut rng = Rng::seeded(self.task ^ self.call.rotate_left(24) ^ u64::from(self.index));
        let mut p = [0; PATTERN];
        for chunk in p.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next().to_le_bytes());
        }
        p
    }

    pub(crate) fn encode(self) -> Bytes {
        let mut b = Vec::with_capacity(Self::HEADER + usize::from(self.pad));
        b.extend_from_slice(&self.task.to_be_bytes());
        b.extend_from_slice(&self.call.to_be_bytes());
        b.extend_from_slice(&self.index.to_be_bytes());
        b.extend_from_slice(&self.count.to_be_bytes());
        b.extend_from_slice(&self.pad.to_be_bytes());
        let p = self.pattern();
        b.extend((0..usize::from(self.pad)).map(|j| p[j % PATTERN]));
        Bytes::from(b)
    }

    /// Parses and checks a message: its length and every filler byte.
    pub(crate) fn parse(b: &[u8]) -> Result<Msg, Status> {
        let bad = |what: &str| Status::invalid_argument(format!("not a soak message: {what}"));
        let (head, filler) = b
            .split_at_checked(Self::HEADER)
            .ok_or_else(|| bad("short"))?;
        let u64_at = |i: usize| u64::from_be_bytes(head[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_be_bytes(head[i..i + 4].try_into().unwrap());
        let m = Msg {
            task: u64_at(0),
            call: u64_at(8),
            index: u32_at(16),
            count: u32_at(20),
            pad: u16::from_be_bytes([head[24], head[25]]),
        };
        if filler.len() != usize::from(m.pad) {
            return Err(bad("length"));
        }
        let p = m.pattern();
        if let Some(j) = (0..filler.len()).find(|&j| filler[j] != p[j % PATTERN]) {
            return Err(bad(&format!("filler byte {j} differs")));
        }
        Ok(m)
    }
}

/// xorshift64*: deterministic per seed, no dependency.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn seeded(seed: u64) -> Rng {
        Rng(0x9E37_79B9_7F4A_7C15 ^ (seed.wrapping_add(1)).wrapping_mul(0xA24B_AED4_963E_E407))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_and_any_changed_byte_is_refused() {
        let m = Msg {
            task: 3,
            call: 77,
            index: 2,
            count: 5,
            pad: 100,
        };
        let bytes = m.encode();
        assert_eq!(Msg::parse(&bytes).unwrap(), m);
        for i in [0, 17, 25, 26, 60, bytes.len() - 1] {
            let mut b = bytes.to_vec();
            b[i] ^= 1;
            assert_ne!(Msg::parse(&b).ok(), Some(m), "byte {i} flipped");
        }
        assert!(Msg::parse(&bytes[..bytes.len() - 1]).is_err());
        assert!(Msg::parse(&bytes[..10]).is_err());
    }

    #[test]
    fn fillers_differ_between_calls_and_indices() {
        let m = Msg {
            task: 1,
            call: 1,
            index: 0,
            count: 1,
            pad: 64,
        };
        let a = m.encode();
        assert_ne!(a[26..], m.at(1).encode()[26..]);
        assert_ne!(a[26..], Msg { call: 2, ..m }.encode()[26..]);
    }
}
