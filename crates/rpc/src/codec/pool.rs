//! Reassembly buffers of large messages, reused across messages and
//! connections.
//!
//! A message split over frames is copied into a buffer of its own, which
//! becomes the message's `Bytes`. Freshly allocated, a buffer of a MiB or
//! more is mapped by the allocator and unmapped when the message drops,
//! so every message paid its page faults again (a third of the CPU time
//! of a 1 MiB echo). Here the buffer returns to a process-wide pool when
//! the last `Bytes` of its message drops (`Bytes::from_owner`), and the
//! next large message takes it.
//!
//! What the pool keeps is bounded per process, not per connection: a
//! message's `Bytes` may outlive its connection, and 10,000 connections
//! must not multiply the bound. At most [`POOL_BUFFERS`] buffers and
//! [`POOL_BYTES`] bytes are kept, none smaller than [`POOL_MIN`] (the
//! allocator's own free lists serve those) nor larger than
//! [`POOL_MAX_BUFFER`]; when full, smaller buffers make way for a larger
//! one, and a buffer beyond the bounds is freed as before.
//! Pooled memory is memory the process already held for a message; a peer
//! cannot make it grow past the bounds, and taking from it never reserves
//! more than a message may (see [`MessageDecoder`](super::MessageDecoder)).

use std::sync::{Mutex, MutexGuard};

/// Smallest buffer the pool keeps.
pub(crate) const POOL_MIN: usize = 32 * 1024;
/// Largest buffer the pool keeps.
pub(crate) const POOL_MAX_BUFFER: usize = 8 * 1024 * 1024;
/// Most bytes the pool keeps, per process.
pub(crate) const POOL_BYTES: usize = 32 * 1024 * 1024;
/// Most buffers the pool keeps, per process.
pub(crate) const POOL_BUFFERS: usize = 16;

/// Free buffers (empty, capacity kept) and their total capacity.
struct Free {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

static FREE: Mutex<Free> = Mutex::new(Free {
    bufs: Vec::new(),
    bytes: 0,
});

/// The pool's lock; a panic elsewhere while it was held leaves the list
/// consistent (every update is one push or one removal), so a poisoned
/// lock is used as is.
fn free() -> MutexGuard<'static, Free> {
    FREE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A buffer that goes back to the pool when dropped.
#[derive(Debug, Default)]
pub(crate) struct Pooled(Vec<u8>);

impl Pooled {
    /// An empty buffer with room for at least `min` bytes: the smallest
    /// pooled one holding `whole` bytes if there is one (a message then
    /// never regrows), else the smallest holding `min`, else a new one of
    /// exactly `min`.
    pub(crate) fn take(min: usize, whole: usize) -> Pooled {
        if min >= POOL_MIN / 2 {
            let mut f = free();
            let fits = |need: usize| {
                f.bufs
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.capacity() >= need)
                    .min_by_key(|(_, b)| b.capacity())
                    .map(|(i, _)| i)
            };
            if let Some(i) = fits(whole).or_else(|| fits(min)) {
                let buf = f.bufs.swap_remove(i);
                f.bytes -= buf.capacity();
                return Pooled(buf);
            }
        }
        Pooled(Vec::with_capacity(min))
    }

    /// The bytes held.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.0
    }

    /// Bytes held.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Room for bytes, held or not.
    pub(crate) fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Appends `bytes` (within the capacity: the caller made room).
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let cap = self.0.capacity();
        if !(POOL_MIN..=POOL_MAX_BUFFER).contains(&cap) {
            return;
        }
        let mut f = free();
        // Full: smaller buffers make way for a larger one (a workload
        // whose messages grew must not find the pool full of the old
        // sizes); nothing larger is evicted.
        while f.bufs.len() == POOL_BUFFERS || f.bytes + cap > POOL_BYTES {
            let smallest = f
                .bufs
                .iter()
                .enumerate()
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, b)| (i, b.capacity()));
            match smallest {
                Some((i, c)) if c < cap => {
                    f.bufs.swap_remove(i);
                    f.bytes -= c;
                }
                _ => return,
            }
        }
        let mut buf = std::mem::take(&mut self.0);
        buf.clear();
        f.bytes += cap;
        f.bufs.push(buf);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The pool is process-wide and tests run in parallel: tests that take
    /// large buffers from it hold this, so one's buffers are not another's.
    pub(crate) fn serial() -> MutexGuard<'static, ()> {
        static SERIAL: Mutex<()> = Mutex::new(());
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the pool holds now: buffers and bytes.
    fn pooled() -> (usize, usize) {
        let f = free();
        (f.bufs.len(), f.bytes)
    }

    /// Pooled buffers of at least `n` bytes.
    pub(crate) fn pooled_at_least(n: usize) -> usize {
        free().bufs.iter().filter(|b| b.capacity() >= n).count()
    }

    #[test]
    fn buffers_come_back_within_the_bounds() {
        let _serial = serial();
        // Many large buffers dropped at once: the pool keeps what its
        // bounds allow and frees the rest.
        let bufs: Vec<Pooled> = (0..3 * POOL_BUFFERS)
            .map(|_| {
                let mut b = Pooled::take(1024 * 1024, 1024 * 1024);
                b.extend_from_slice(&[1; 100]);
                b
            })
            .collect();
        drop(bufs);
        let (n, bytes) = pooled();
        assert!(n <= POOL_BUFFERS && bytes <= POOL_BYTES, "{n} {bytes}");
        assert!(n > 0, "some came back");
        // Taken again: emptied, and no smaller than asked.
        let b = Pooled::take(512 * 1024, 1024 * 1024);
        assert!(b.is_empty() && b.capacity() >= 512 * 1024);
        // Too small or too large to keep: freed, not pooled.
        let small = Pooled::take(1024, 1024);
        assert!(small.capacity() < POOL_MIN);
        drop(small);
        drop(Pooled(Vec::with_capacity(POOL_MAX_BUFFER + 1)));
        let (_, bytes) = pooled();
        assert!(bytes <= POOL_BYTES);
    }
}
