//! The write buffer: encoded frames in one buffer, with large payloads
//! chained after their headers instead of copied into it, and written
//! with vectored writes (h2's `CHAIN_THRESHOLD`: copying a small payload
//! is cheaper than one more `iovec`, copying a large one is the cost).

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::AsyncWrite;

/// Payloads chained at most at once: each adds up to two `IoSlice`s to a
/// write (its bytes and the buffer bytes before it); the encoder stops
/// taking frames when this many wait. 64 payloads of 64 KiB are 4 MiB, more
/// than a write batch holds (`write::MAX_BATCH`), and 129
/// slices stay well under `IOV_MAX` (1024 on Linux).
const MAX_CHAINED: usize = 64;

/// Slices a vectored write passes at most.
const MAX_SLICES: usize = 2 * MAX_CHAINED + 1;

/// Bytes to write, in order: `bytes` with each chained payload inserted
/// at its offset.
pub(super) struct WriteBuf {
    /// Encoded frames: headers, small frames, sealed records.
    pub(super) bytes: BytesMut,
    /// The chained payloads: boxed on the first one, so a connection that
    /// never sends a large payload carries one pointer for them (the
    /// connection's state has a size class to fit).
    chain: Option<Box<Chain>>,
}

/// Large payloads waiting, in order.
#[derive(Default)]
struct Chain {
    /// Each goes after the buffer bytes up to its `at`.
    queue: VecDeque<Chained>,
    /// Payload bytes left in `queue`.
    len: usize,
    /// Bytes consumed from the front of `bytes` since it was last rewound:
    /// `at` offsets count from there.
    consumed: usize,
}

/// A payload written after the buffer's bytes up to `at`.
struct Chained {
    /// Offset in the buffer (counted from where `consumed` started).
    at: usize,
    payload: Bytes,
}

impl WriteBuf {
    /// A buffer with `capacity` bytes reserved and nothing chained.
    pub(super) fn with_capacity(capacity: usize) -> WriteBuf {
        WriteBuf {
            bytes: BytesMut::with_capacity(capacity),
            chain: None,
        }
    }

    /// Whether payloads are chained now.
    fn chained(&self) -> Option<&Chain> {
        self.chain.as_deref().filter(|c| !c.queue.is_empty())
    }

    /// Bytes waiting to be written, chained payloads included.
    pub(super) fn len(&self) -> usize {
        self.bytes.len() + self.chained().map_or(0, |c| c.len)
    }

    /// Whether nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.chained().is_none()
    }

    /// Bytes a write of at most `batch` bytes has room for (0: none, also
    /// when `copied` bytes are in the buffer or no payload may be chained).
    /// One look at the chain, as the encoder asks before every frame.
    pub(super) fn room(&self, batch: usize, copied: usize) -> usize {
        if self.bytes.len() >= copied {
            return 0;
        }
        match self.chained() {
            None => batch.saturating_sub(self.bytes.len()),
            Some(c) if c.queue.len() >= MAX_CHAINED => 0,
            Some(c) => batch.saturating_sub(self.bytes.len() + c.len),
        }
    }

    /// Chains `payload` after the bytes encoded so far.
    pub(super) fn chain(&mut self, payload: Bytes) {
        let at = self.bytes.len();
        let c = self.chain.get_or_insert_default();
        c.len += payload.len();
        c.queue.push_back(Chained {
            at: c.consumed + at,
            payload,
        });
    }

    /// Drops everything waiting (a failed write).
    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        if let Some(c) = &mut self.chain {
            **c = Chain::default();
        }
    }

    /// Writes what it can of the front: one plain write when nothing is
    /// chained, else one vectored write. Returns the bytes written, already
    /// consumed.
    pub(super) fn poll_write<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        let res = match self.chained() {
            None => Pin::new(io).poll_write(cx, &self.bytes),
            Some(c) => {
                let mut slices = [IoSlice::new(&[]); MAX_SLICES];
                let n = fill(&self.bytes, c, &mut slices);
                Pin::new(io).poll_write_vectored(cx, &slices[..n])
            }
        };
        if let Poll::Ready(Ok(n)) = res {
            self.consume(n);
        }
        res
    }

    /// Drops the first `n` bytes written.
    fn consume(&mut self, mut n: usize) {
        let bytes = &mut self.bytes;
        let Some(c) = self.chain.as_deref_mut() else {
            if n == bytes.len() {
                // All written (the usual case): rewind rather than advance.
                // Advanced first (as before), the buffer's start crept up
                // by every write, and once its room ran short the next
                // encode's `reserve` shifted it back: about 20 instructions
                // a write more, two writes a sequential call.
                bytes.clear();
            } else {
                bytes.advance(n);
            }
            return;
        };
        while let Some(front) = c.queue.front_mut() {
            let before = front.at - c.consumed;
            let k = before.min(n);
            bytes.advance(k);
            c.consumed += k;
            n -= k;
            if k < before {
                return;
            }
            let k = front.payload.len().min(n);
            front.payload.advance(k);
            c.len -= k;
            n -= k;
            if !front.payload.is_empty() {
                return;
            }
            c.queue.pop_front();
        }
        if n == bytes.len() {
            bytes.clear();
            c.consumed = 0;
        } else {
            bytes.advance(n);
            c.consumed += n;
        }
    }
}

/// Fills `slices` with `bytes` and `chain`'s payloads in order; returns how
/// many it used.
fn fill<'a>(bytes: &'a [u8], chain: &'a Chain, slices: &mut [IoSlice<'a>; MAX_SLICES]) -> usize {
    let (mut n, mut pos) = (0, 0);
    for c in &chain.queue {
        let at = c.at - chain.consumed;
        if at > pos {
            slices[n] = IoSlice::new(&bytes[pos..at]);
            n += 1;
            pos = at;
        }
        slices[n] = IoSlice::new(&c.payload);
        n += 1;
    }
    if bytes.len() > pos {
        slices[n] = IoSlice::new(&bytes[pos..]);
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink taking at most `step` bytes per write, vectored or not.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut left = self.step;
            for b in bufs {
                let n = b.len().min(left);
                self.got.extend_from_slice(&b[..n]);
                left -= n;
            }
            Poll::Ready(Ok(self.step - left))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn room_counts_copied_and_chained_bytes_and_stops_at_the_chain_limit() {
        let mut w = WriteBuf::with_capacity(64);
        assert_eq!(w.room(100, 50), 100);
        w.bytes.extend_from_slice(&[1; 10]);
        w.chain(Bytes::from(vec![2; 30]));
        assert_eq!(w.room(100, 50), 60);
        assert_eq!(w.room(35, 50), 0);
        // Copied bytes have their own bound.
        assert_eq!(w.room(100, 10), 0);
        for _ in 1..MAX_CHAINED {
            w.chain(Bytes::from_static(b"x"));
        }
        assert_eq!(w.room(usize::MAX, usize::MAX), 0, "the chain is full");
    }

    /// A buffer written whole is rewound, not advanced: its room stays
    /// where it was, so the next frames need no shift back by `reserve`.
    #[test]
    fn a_buffer_written_whole_keeps_its_room() {
        let mut w = WriteBuf::with_capacity(64);
        let cap = w.bytes.capacity();
        let mut io = Trickle {
            got: Vec::new(),
            step: usize::MAX,
        };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for round in 0..3u8 {
            w.bytes.extend_from_slice(&[round; 40]);
            let Poll::Ready(Ok(40)) = w.poll_write(&mut io, &mut cx) else {
                panic!("the sink takes it all");
            };
            assert!(w.is_empty());
            assert_eq!(w.bytes.capacity(), cap, "round {round}");
        }
        assert_eq!(io.got.len(), 120);
    }

    /// Bytes and chained payloads interleaved, appended while earlier ones
    /// are half written, come out in order at every write size.
    #[test]
    fn writes_bytes_and_chained_payloads_in_order() {
        for step in [1, 3, 7, 100, 1000, 10_000] {
            let mut w = WriteBuf::with_capacity(16);
            let mut io = Trickle {
                got: Vec::new(),
                step,
            };
            let mut want = Vec::new();
            let mut cx = Context::from_waker(std::task::Waker::noop());
            for round in 0u8..20 {
                let head = [round; 5];
                w.bytes.extend_from_slice(&head);
                want.extend_from_slice(&head);
                if round % 3 != 2 && w.room(usize::MAX, usize::MAX) > 0 {
                    let payload = Bytes::from(vec![round.wrapping_mul(7); 50 + round as usize]);
                    want.extend_from_slice(&payload);
                    w.chain(payload);
                }
                assert_eq!(w.len(), want.len() - io.got.len());
                // Write part of it before the next round appends more.
                if round % 2 == 0 {
                    let Poll::Ready(Ok(_)) = w.poll_write(&mut io, &mut cx) else {
                        panic!("the sink is always ready");
                    };
                }
            }
            while !w.is_empty() {
                let Poll::Ready(Ok(n)) = w.poll_write(&mut io, &mut cx) else {
                    panic!("the sink is always ready");
                };
                assert!(n > 0);
            }
            assert_eq!(w.len(), 0);
            assert_eq!(io.got, want, "step {step}");
        }
    }
}
