//! Messages over a stream: each message is a `u32` big-endian length and
//! that many bytes. A message may arrive split over several chunks (frames)
//! or several messages may share one; the decoder handles both and copies
//! nothing when a message sits whole in one chunk.
//!
//! Sans-I/O: [`MessageDecoder`] is fed chunks and returns messages; the
//! encoder functions return the bytes to send.

pub(crate) mod message;
pub(crate) mod pool;
pub(crate) mod typed;
pub(crate) mod wire;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::status::Status;
use pool::Pooled;
use weft_frame::{Metadata, MetadataBuilder};

/// Bytes of the length prefix in front of every message.
pub const PREFIX_LEN: usize = 4;

/// Default largest message, after decompression: 4 MiB.
pub const DEFAULT_MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// Messages up to this size are copied behind their prefix into one buffer
/// (one frame); larger ones are sent as the prefix and then the caller's
/// `Bytes` unchanged (no copy, one more frame).
pub const COPY_THRESHOLD: usize = 16 * 1024;

/// The prefix and body of an empty message, without allocating.
pub fn empty_message() -> Bytes {
    Bytes::from_static(&[0; PREFIX_LEN])
}

/// Out of line: the framing of every message checks its length, and the
/// formatting would otherwise be inlined into each caller.
#[cold]
#[inline(never)]
fn too_large(len: usize, max: usize) -> Status {
    Status::resource_exhausted(format!(
        "message of {len} bytes exceeds the {max}-byte limit"
    ))
}

/// Checks a message to send against the limit.
#[inline]
pub fn check_len(len: usize, max: usize) -> Result<u32, Status> {
    match u32::try_from(len) {
        Ok(n) if len <= max => Ok(n),
        _ => Err(too_large(len, max)),
    }
}

/// A message framed for sending: one buffer when small, prefix and body
/// apart when large.
#[derive(Debug)]
pub enum Framed {
    /// Prefix and body in one buffer.
    One(Bytes),
    /// The prefix, then the caller's body untouched.
    Two(Bytes, Bytes),
}

/// Frames `body` (see [`COPY_THRESHOLD`]), checking it against `max`.
#[inline]
pub fn frame(body: Bytes, max: usize) -> Result<Framed, Status> {
    frame_ref(&body, max)
}

/// [`frame`] from a reference: only a large message keeps the caller's
/// bytes (sent apart, after its prefix), so only it takes a reference on
/// them; a small one is copied behind its prefix where it lies (a clone
/// just to copy it counted a reference up and down again, an atomic
/// pair, on every call of a caller that keeps its request, as a
/// `Channel` does for a retry).
pub(crate) fn frame_ref(body: &Bytes, max: usize) -> Result<Framed, Status> {
    let len = check_len(body.len(), max)?;
    if body.is_empty() {
        return Ok(Framed::One(empty_message()));
    }
    if body.len() > COPY_THRESHOLD {
        return Ok(Framed::Two(prefix(len), body.clone()));
    }
    // The length is known and checked: the prefix is written once, not
    // zeroed and patched as `frame_with` must for a serializer's output.
    Ok(Framed::One(in_arena(|buf| {
        buf.reserve(PREFIX_LEN + body.len());
        buf.put_u32(len);
        buf.put_slice(body);
        buf.split().freeze()
    })))
}

/// Size of the blocks the per-thread framing arena takes from the allocator.
pub const ARENA_BLOCK: usize = 16 * 1024;

thread_local! {
    /// Framing arena: messages are written behind their prefix at its end
    /// and split off as `Bytes` sharing its block, so framing a small
    /// message allocates nothing in steady state (one block per ~16 KiB of
    /// messages, and none while earlier messages are already released).
    static ARENA: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
}

/// Frames a message produced by `write` (e.g. a serializer writing through
/// `BufMut::writer`) in one buffer, prefix included, checking it against
/// `max`. The outer error is `write`'s own.
pub fn frame_with<E>(
    max: usize,
    write: impl FnOnce(&mut BytesMut) -> Result<(), E>,
) -> Result<Result<Bytes, Status>, E> {
    match frame_written(max, write, Err, Ok) {
        Ok(b) => Ok(Ok(b)),
        Err(Ok(too_large)) => Ok(Err(too_large)),
        Err(Err(e)) => Err(e),
    }
}

/// [`frame_with`] with each failure made the caller's error where it
/// happens: `failed` makes `write`'s, `too_large` the limit's. A codec's
/// encode makes both a `Status`, so its message comes back as one
/// `Result`: through `frame_with`'s nested one, unwrapped and wrapped
/// again, a serializer's message cost about 15 instructions more.
#[inline(always)]
pub(crate) fn frame_written<E, F>(
    max: usize,
    write: impl FnOnce(&mut BytesMut) -> Result<(), E>,
    failed: impl FnOnce(E) -> F,
    too_large: impl FnOnce(Status) -> F,
) -> Result<Bytes, F> {
    in_arena(|buf| {
        buf.put_slice(&[0; PREFIX_LEN]);
        if let Err(e) = write(buf) {
            buf.clear();
            return Err(failed(e));
        }
        let body_len = buf.len() - PREFIX_LEN;
        match check_len(body_len, max) {
            Ok(n) => {
                buf[..PREFIX_LEN].copy_from_slice(&n.to_be_bytes());
                Ok(buf.split().freeze())
            }
            Err(e) => {
                buf.clear();
                Err(too_large(e))
            }
        }
    })
}

/// A call's `OPEN` metadata built in the framing arena, as a small
/// message is: a block built per call (a call with a deadline carries its
/// remaining time) allocated a buffer and grew it about three times.
pub(crate) fn metadata_in_arena(
    build: impl FnOnce(MetadataBuilder) -> MetadataBuilder,
) -> Metadata {
    in_arena(|buf| {
        let (block, rest) = build(MetadataBuilder::new(std::mem::take(buf))).finish_keeping();
        *buf = rest;
        block
    })
}

/// The prefix of a large message sent apart from its body, cut from the
/// framing arena like a small message: a copy of the four bytes would be
/// an allocation per large message.
fn prefix(len: u32) -> Bytes {
    in_arena(|buf| {
        buf.put_u32(len);
        buf.split().freeze()
    })
}

/// Runs `f` on the framing arena, emptied (what was split off it before
/// stays with its `Bytes`) and with room for a prefix and a small body.
fn in_arena<R>(f: impl FnOnce(&mut BytesMut) -> R) -> R {
    ARENA.with(|cell| {
        // A re-entrant writer (framing a message while framing another)
        // gets a fresh buffer instead of a panic. Made only then: built
        // beside the arena for every message, its construction and drop
        // were paid by every message. `f` is called in one place, so it
        // is inlined here.
        let mut fresh = None;
        let mut guard = cell.try_borrow_mut();
        let buf = match guard.as_deref_mut() {
            Ok(a) => a,
            Err(_) => fresh.insert(BytesMut::new()),
        };
        buf.clear();
        if buf.capacity() < PREFIX_LEN + 64 {
            buf.reserve(ARENA_BLOCK);
        }
        f(buf)
    })
}

/// `io::Write` into a framing buffer, for a serializer: each write is
/// one `extend_from_slice`. `bytes::buf::Writer` bounds every write by
/// `remaining_mut` and goes through `write_all`'s loop, so the length of
/// even a one-byte token (`{`, `:`, `,`) was unknown where it was copied,
/// and each token cost a call to `memcpy`; serde_json writes an ordinary
/// struct in a dozen or more such tokens.
#[derive(Debug)]
pub(crate) struct Append<'a>(pub(crate) &'a mut BytesMut);

impl std::io::Write for Append<'_> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    #[inline]
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How far ahead of the bytes that arrived a split message's buffer is
/// reserved: at most this many times them (and never past the declared
/// length).
pub const RESERVE_AHEAD: usize = 32;

/// Reassembles messages from the chunks of one stream.
///
/// Memory is bounded by the limit: a declared length above it fails at
/// once (`RESOURCE_EXHAUSTED`), and a message split over chunks reserves
/// its buffer from the bytes that arrived (at most [`RESERVE_AHEAD`] times
/// them), never to the declared length on its say-so alone. The buffer of
/// a split message comes from a process-wide pool of large buffers and
/// goes back to it when the message's last `Bytes` drops (`pool.rs`: at
/// most 16 buffers and 32 MiB kept); a pooled buffer already large enough
/// for the whole message is preferred, since it costs no new memory.
#[derive(Debug)]
pub struct MessageDecoder {
    max: usize,
    prefix: [u8; PREFIX_LEN],
    prefix_len: usize,
    /// Length of the message being read, once its prefix is complete.
    want: Option<usize>,
    /// Body bytes of a message split over chunks.
    partial: Pooled,
}

impl MessageDecoder {
    /// A decoder refusing messages above `max` bytes.
    pub fn new(max: usize) -> MessageDecoder {
        MessageDecoder {
            max,
            prefix: [0; PREFIX_LEN],
            prefix_len: 0,
            want: None,
            partial: Pooled::default(),
        }
    }

    /// Takes the next whole message from the front of `chunk`, consuming
    /// what it uses. `Ok(None)` when `chunk` ran out first (feed the next
    /// chunk); the partial message is kept.
    pub fn decode(&mut self, chunk: &mut Bytes) -> Result<Option<Bytes>, Status> {
        let want = match self.want {
            Some(w) => w,
            None => {
                if self.prefix_len == 0 && chunk.len() >= PREFIX_LEN {
                    chunk.copy_to_slice(&mut self.prefix);
                } else {
                    let n = (PREFIX_LEN - self.prefix_len).min(chunk.len());
                    chunk.copy_to_slice(&mut self.prefix[self.prefix_len..self.prefix_len + n]);
                    self.prefix_len += n;
                    if self.prefix_len < PREFIX_LEN {
                        return Ok(None);
                    }
                }
                self.prefix_len = 0;
                let w = u32::from_be_bytes(self.prefix) as usize;
                if w > self.max {
                    return Err(too_large(w, self.max));
                }
                self.want = Some(w);
                w
            }
        };
        if self.partial.is_empty() && chunk.len() >= want {
            // Zero copy: the whole message is in this chunk.
            self.want = None;
            let msg = if chunk.len() == want {
                std::mem::take(chunk)
            } else {
                chunk.split_to(want)
            };
            return Ok(Some(msg));
        }
        let n = (want - self.partial.len()).min(chunk.len());
        self.make_room(want, n);
        self.partial.extend_from_slice(&chunk[..n]);
        if n == chunk.len() {
            // Emptied by a copy: let go of the connection's read buffer now
            // (an empty slice would keep all of it until the next chunk).
            *chunk = Bytes::new();
        } else {
            chunk.advance(n);
        }
        if self.partial.len() < want {
            return Ok(None);
        }
        self.want = None;
        Ok(Some(Bytes::from_owner(std::mem::take(&mut self.partial))))
    }

    /// Makes room in `partial` for `n` more bytes of a `want`-byte
    /// message: when it must grow, to [`RESERVE_AHEAD`] times what will
    /// have arrived, capped at `want`. A large message so gets one buffer
    /// sized from its first chunk (a 64 KiB frame covers 2 MiB) and is
    /// copied into it once, instead of a buffer doubling (and copying
    /// itself) as the chunks arrive; a declared length is still never
    /// reserved on its own say-so.
    fn make_room(&mut self, want: usize, n: usize) {
        let len = self.partial.len();
        if self.partial.capacity() - len >= n {
            return;
        }
        let target = want.min((len + n).saturating_mul(RESERVE_AHEAD));
        let mut grown = Pooled::take(target, want);
        grown.extend_from_slice(self.partial.as_slice());
        // The old buffer goes back to the pool.
        self.partial = grown;
    }

    /// Whether a message has been started but not finished: at the end of
    /// the stream that means the peer cut a message short.
    pub fn is_mid_message(&self) -> bool {
        self.want.is_some() || self.prefix_len > 0
    }

    /// The error for a stream that ended inside a message.
    pub fn truncated() -> Status {
        Status::internal("stream ended inside a message")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Code;

    fn wire(msgs: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in msgs {
            match frame(Bytes::copy_from_slice(m), usize::MAX).unwrap() {
                Framed::One(b) => out.extend_from_slice(&b),
                Framed::Two(p, b) => {
                    out.extend_from_slice(&p);
                    out.extend_from_slice(&b);
                }
            }
        }
        out
    }

    fn decode_chunks(chunks: Vec<Bytes>, max: usize) -> Result<(Vec<Bytes>, bool), Status> {
        let mut d = MessageDecoder::new(max);
        let mut out = Vec::new();
        for mut c in chunks {
            while let Some(m) = d.decode(&mut c)? {
                out.push(m);
            }
            assert!(c.is_empty());
        }
        Ok((out, d.is_mid_message()))
    }

    #[test]
    fn every_split_point_gives_the_same_messages() {
        let _serial = pool::tests::serial();
        let big = vec![7u8; COPY_THRESHOLD + 5];
        let msgs: [&[u8]; 4] = [b"hello", b"", b"{\"n\":1}", &big];
        let bytes = wire(&msgs);
        for a in 0..bytes.len() {
            for b in [
                a,
                (a + 1).min(bytes.len()),
                (a + 4000).min(bytes.len()),
                bytes.len(),
            ] {
                let chunks = vec![
                    Bytes::copy_from_slice(&bytes[..a]),
                    Bytes::copy_from_slice(&bytes[a..b]),
                    Bytes::copy_from_slice(&bytes[b..]),
                ];
                let (got, mid) = decode_chunks(chunks, usize::MAX).unwrap();
                assert!(!mid);
                let got: Vec<&[u8]> = got.iter().map(|m| &m[..]).collect();
                assert_eq!(got, msgs, "split at {a}/{b}");
            }
        }
    }

    #[test]
    fn one_byte_at_a_time() {
        let bytes = wire(&[b"abc", b"de"]);
        let chunks = bytes
            .iter()
            .map(|b| Bytes::copy_from_slice(&[*b]))
            .collect();
        let (got, mid) = decode_chunks(chunks, 16).unwrap();
        assert_eq!(got, [&b"abc"[..], &b"de"[..]]);
        assert!(!mid);
    }

    #[test]
    fn a_message_in_one_chunk_is_not_copied() {
        let chunk = Bytes::from(wire(&[b"zero-copy"]));
        let body_ptr = chunk[PREFIX_LEN..].as_ptr();
        let mut c = chunk;
        let m = MessageDecoder::new(64).decode(&mut c).unwrap().unwrap();
        assert_eq!(m.as_ptr(), body_ptr);
        assert_eq!(&m[..], b"zero-copy");
    }

    #[test]
    fn oversize_declared_length_fails_before_buffering() {
        let mut d = MessageDecoder::new(10);
        let mut c = Bytes::from_static(&[0, 0, 0, 11, 1]);
        let e = d.decode(&mut c).unwrap_err();
        assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED);
        assert!(e.message().contains("11 bytes"));
        // u32::MAX declared, one byte sent: nothing reserved.
        let mut d = MessageDecoder::new(DEFAULT_MAX_MESSAGE);
        let mut c = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 1]);
        assert!(d.decode(&mut c).is_err());
        assert_eq!(d.partial.capacity(), 0);
    }

    #[test]
    fn a_split_message_is_reserved_once_from_its_first_chunk() {
        let _serial = pool::tests::serial();
        let body: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
        let bytes = wire(&[&body]);
        let mut d = MessageDecoder::new(usize::MAX);
        let mut buffers = Vec::new();
        let mut got = None;
        for c in bytes.chunks(64 * 1024) {
            let mut c = Bytes::copy_from_slice(c);
            if let Some(m) = d.decode(&mut c).unwrap() {
                got = Some(m);
            }
            buffers.push(d.partial.as_slice().as_ptr());
        }
        let got = got.expect("the message is whole");
        assert_eq!(&got[..], &body[..]);
        // One buffer, allocated at the first chunk, the message's own.
        buffers.dedup();
        assert_eq!(buffers.len(), 2, "reserved once, then given away");
        assert_eq!(got.as_ptr(), buffers[0]);
        // A declared 4 MiB with 10 bytes sent reserves 32 times those.
        let mut d = MessageDecoder::new(DEFAULT_MAX_MESSAGE);
        let mut c = Bytes::from_static(&[0, 0x40, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert!(d.decode(&mut c).unwrap().is_none());
        assert_eq!(d.partial.capacity(), 10 * RESERVE_AHEAD);
    }

    /// Decodes one message sent in 64 KiB chunks.
    fn split_message(bytes: &[u8]) -> Bytes {
        let mut d = MessageDecoder::new(usize::MAX);
        let mut got = None;
        for c in bytes.chunks(64 * 1024) {
            let mut c = Bytes::copy_from_slice(c);
            if let Some(m) = d.decode(&mut c).unwrap() {
                got = Some(m);
            }
            assert!(c.is_empty());
        }
        got.expect("the message is whole")
    }

    /// A large message's buffer goes back to the pool once its last
    /// `Bytes` (a slice of it included) drops, and the next large message
    /// takes it instead of a new allocation; never while a slice lives.
    #[test]
    fn the_next_large_message_reuses_the_buffer_once_the_last_is_dropped() {
        let _serial = pool::tests::serial();
        let body: Vec<u8> = (0..3 * 1024 * 1024 + 123).map(|i| (i % 13) as u8).collect();
        let bytes = wire(&[&body]);
        let whole = || pool::tests::pooled_at_least(body.len());
        let first = split_message(&bytes);
        let part = first.slice(10..20);
        let pooled = whole();
        drop(first);
        assert_eq!(whole(), pooled, "returned while a slice lives");
        assert_eq!(&part[..], &body[10..20]);
        drop(part);
        assert_eq!(whole(), pooled + 1, "returned once the last slice dropped");
        let second = split_message(&bytes);
        assert_eq!(whole(), pooled, "the next message took it");
        assert_eq!(&second[..], &body[..]);
        drop(second);
        assert_eq!(whole(), pooled + 1);
    }

    #[test]
    fn a_cut_message_is_reported_mid_message() {
        let bytes = wire(&[b"abcdef"]);
        let (got, mid) = decode_chunks(vec![Bytes::copy_from_slice(&bytes[..7])], 64).unwrap();
        assert!(got.is_empty() && mid);
        let (_, mid) = decode_chunks(vec![Bytes::copy_from_slice(&bytes[..2])], 64).unwrap();
        assert!(mid);
        assert_eq!(MessageDecoder::truncated().code(), Code::INTERNAL);
    }

    #[test]
    fn framing_sizes_and_limits() {
        assert_eq!(&empty_message()[..], &[0, 0, 0, 0]);
        assert!(matches!(frame(Bytes::new(), 0).unwrap(), Framed::One(b) if b.len() == 4));
        match frame(Bytes::from_static(b"{\"n\":1}"), 64).unwrap() {
            Framed::One(b) => assert_eq!(&b[..], b"\0\0\0\x07{\"n\":1}"),
            Framed::Two(..) => panic!("small message split"),
        }
        let big = Bytes::from(vec![1u8; COPY_THRESHOLD + 1]);
        let ptr = big.as_ptr();
        match frame(big, usize::MAX).unwrap() {
            Framed::Two(p, b) => {
                assert_eq!(
                    u32::from_be_bytes(p[..].try_into().unwrap()) as usize,
                    COPY_THRESHOLD + 1
                );
                assert_eq!(b.as_ptr(), ptr);
            }
            Framed::One(_) => panic!("large message copied"),
        }
        let e = frame(Bytes::from_static(b"12345"), 4).unwrap_err();
        assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED);
    }

    /// A large message's prefix is cut from the framing arena, not copied
    /// into an allocation of its own: consecutive prefixes sit side by
    /// side in one block.
    #[test]
    fn large_messages_prefixes_share_the_arena() {
        let big = Bytes::from(vec![1u8; COPY_THRESHOLD + 1]);
        let prefixes: Vec<Bytes> = (0..3)
            .map(|_| match frame(big.clone(), usize::MAX).unwrap() {
                Framed::Two(p, _) => p,
                Framed::One(_) => panic!("large message copied"),
            })
            .collect();
        for pair in prefixes.windows(2) {
            assert_eq!(pair[1].as_ptr(), pair[0].as_ptr().wrapping_add(PREFIX_LEN));
        }
        assert_eq!(
            &prefixes[2][..],
            &((COPY_THRESHOLD + 1) as u32).to_be_bytes()
        );
    }

    /// Small messages are cut one after another from the arena's block
    /// (no allocation each), and the largest copied message, which needs
    /// more room than a whole block, is framed in one buffer.
    #[test]
    fn small_messages_share_the_arena_and_the_largest_copied_one_is_whole() {
        let small: Vec<Bytes> = (0..3u8)
            .map(|i| match frame(Bytes::from(vec![i; 10]), 64).unwrap() {
                Framed::One(b) => b,
                Framed::Two(..) => panic!("small message split"),
            })
            .collect();
        for pair in small.windows(2) {
            assert_eq!(
                pair[1].as_ptr(),
                pair[0].as_ptr().wrapping_add(PREFIX_LEN + 10)
            );
        }
        assert_eq!(&small[2][..], &[0, 0, 0, 10, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]);
        let body: Bytes = (0..COPY_THRESHOLD)
            .map(|i| i as u8)
            .collect::<Vec<_>>()
            .into();
        match frame(body.clone(), usize::MAX).unwrap() {
            Framed::One(b) => {
                assert_eq!(&b[..PREFIX_LEN], &(COPY_THRESHOLD as u32).to_be_bytes());
                assert_eq!(&b[PREFIX_LEN..], &body[..]);
            }
            Framed::Two(..) => panic!("a message at the copy threshold split"),
        }
    }

    #[test]
    fn frame_with_writes_prefix_and_checks_limit() {
        let b = frame_with::<()>(64, |v| {
            v.put_slice(b"{\"n\":1}");
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(&b[..], b"\0\0\0\x07{\"n\":1}");
        let e = frame_with::<()>(3, |v| {
            v.put_slice(b"abcd");
            Ok(())
        })
        .unwrap()
        .unwrap_err();
        assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED);
        assert_eq!(frame_with(3, |_| Err("boom")).unwrap_err(), "boom");
        // A nested call still works, and large messages too.
        let outer = frame_with::<()>(usize::MAX, |v| {
            let inner = frame_with::<()>(8, |w| {
                w.put_u8(1);
                Ok(())
            })
            .unwrap()
            .unwrap();
            v.put_slice(&inner);
            v.put_bytes(0, 5 * ARENA_BLOCK);
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(outer.len(), 4 + 5 + 5 * ARENA_BLOCK);
        assert_eq!(&outer[4..9], &[0, 0, 0, 1, 1]);
    }
}
