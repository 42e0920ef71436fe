//! Sealed batches: one record over several frames written together
//! (docs/PROTOCOL.md section 5.2), as a TLS record carries many HTTP/2
//! frames. A record costs one AEAD operation whatever its length (about 850
//! instructions in ring to seal a small record, against tens per extra block),
//! so when 64 calls' frames leave in one write, one record instead of 64
//! takes the per-record cost off the call.
//!
//! The write half fills a batch frame by frame ([`Outbound::begin_batch`],
//! [`Outbound::push`], [`Outbound::seal_batch`]) in the same buffer the
//! writer flushes: a frame is encoded where it is sent, and moved once, 16
//! bytes on, when the batch's header goes in before it at sealing (a batch
//! of one frame is sealed as that frame's record, unmoved); the read half
//! opens a batch like any record and then hands out its frames one per
//! `decode` call.
//! A sender batches only once the peer has announced it reads batches
//! ([`BATCH_SETTING`] in its settings frame), so a peer that predates them
//! never receives one.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use weft_frame::{Flags, Frame, FrameType, HEADER_LEN, Header};

use super::{Inbound, Outbound, Pending, TAG, checked_header, fatal, header_slot};
use crate::error::{TransformError, TransformErrorKind};

/// The record type of a sealed batch: `08`.
pub const BATCH: FrameType = FrameType(0x08);

/// The settings entry (docs/PROTOCOL.md 6.1) by which a receiver announces
/// that it reads sealed batches; its value is [`BATCH_SETTING_VALUE`].
pub const BATCH_SETTING: &[u8] = b"sealed-batch";

/// The value of [`BATCH_SETTING`]: the batch format, u32 big-endian 1. A
/// sender that reads another value sends no batches (a later format).
pub const BATCH_SETTING_VALUE: [u8; 4] = 1u32.to_be_bytes();

fn bad(what: &'static str) -> TransformError {
    fatal(TransformErrorKind::Batch(what))
}

/// Whether the write half may seal batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Batching {
    /// The peer has not announced [`BATCH_SETTING`] (or records are not
    /// sealed): one record per frame.
    Off,
    /// The peer reads batches.
    Allowed,
}

/// A batch being filled in a write buffer: where its frames begin and how
/// much plaintext it may still take. Seal it with
/// [`Outbound::seal_batch`] into the same buffer, with nothing else
/// written to that buffer meanwhile.
///
/// The frames go in first and the batch's header is put before them when
/// it is sealed (moving them once, a few hundred bytes at most calls in
/// flight): a batch that ends up holding one frame then goes as that
/// frame's own record with nothing moved, so a writer may begin a batch
/// before it knows whether a second frame follows.
#[derive(Debug)]
#[must_use = "a batch must be sealed, or its frames go out unsealed"]
pub struct Batch {
    /// Offset of the batch's first frame in the buffer.
    start: usize,
    /// The buffer's length when the batch is full: its start plus the
    /// peer's max payload (the plaintext a batch may hold). Kept as an
    /// end rather than a length, so a frame's fit is one addition and one
    /// comparison.
    end: usize,
}

impl Batch {
    /// Plaintext bytes in the batch so far (the frames, headers included).
    fn len(&self, dst: &BytesMut) -> usize {
        dst.len().saturating_sub(self.start)
    }
}

impl Outbound {
    /// Lets this half seal batches: call it when the peer's settings frame
    /// carries [`BATCH_SETTING`] with [`BATCH_SETTING_VALUE`]. Returns
    /// whether batches are now on (never without encryption: a plain
    /// connection has no records to batch).
    pub fn allow_batches(&mut self) -> bool {
        if self.seal.is_some() {
            self.batching = Batching::Allowed;
        }
        self.batches_allowed()
    }

    /// Whether [`begin_batch`](Self::begin_batch) starts batches.
    pub fn batches_allowed(&self) -> bool {
        self.batching == Batching::Allowed
    }

    /// Starts a batch at the end of `dst`, or returns `None` when batches
    /// are not allowed (encode each frame with [`encode`](Self::encode)).
    ///
    /// When the send key would be due within a batch of the largest size,
    /// the `KEY_UPDATE` record goes into `dst` first, so a key update never
    /// lands inside a batch. Writes nothing else: the batch's header goes
    /// in when it is sealed. Allocates nothing when `dst` has room.
    #[inline]
    pub fn begin_batch(&mut self, dst: &mut BytesMut) -> Result<Option<Batch>, TransformError> {
        if self.poisoned {
            return Err(fatal(TransformErrorKind::Poisoned));
        }
        let (Batching::Allowed, Some(seal)) = (self.batching, &mut self.seal) else {
            return Ok(None);
        };
        let limit = self.codec.limits().max_payload as usize;
        if seal.is_due(limit) {
            seal.update(dst).inspect_err(|_| self.poisoned = true)?;
        }
        let start = dst.len();
        Ok(Some(Batch {
            start,
            end: start + limit,
        }))
    }

    /// Appends `frame` to `batch` (compressed as [`encode`](Self::encode)
    /// would). `Ok(false)`, with nothing written, when the frame does not
    /// fit in what the batch may still hold: seal the batch and push the
    /// frame into a new one (a frame too large for an empty batch cannot
    /// be batched: [`encode`](Self::encode) it).
    ///
    /// Errors: the frame is over the peer's limits, or of a type that never
    /// rides in a batch (`HANDSHAKE`, `KEY_UPDATE`, a batch).
    ///
    /// Always inlined: it is the batch path's frame encoder, as the codec's
    /// `encode_frame` is the plain path's (inlined into the writer). Out of
    /// line, the call and its frame's way through memory cost about 35
    /// instructions a frame; `#[inline]` alone left it out of line.
    #[inline(always)]
    pub fn push(
        &mut self,
        batch: &mut Batch,
        frame: &Frame,
        dst: &mut BytesMut,
    ) -> Result<bool, TransformError> {
        if self.poisoned {
            return Err(fatal(TransformErrorKind::Poisoned));
        }
        if !may_ride(frame.ty) {
            return Err(bad("a HANDSHAKE, KEY_UPDATE or batch pushed into a batch"));
        }
        let header = checked_header(frame, self.codec.limits())?;
        // Compression only shrinks: the frame as given bounds its bytes.
        if dst.len() + frame.encoded_len() > batch.end {
            return Ok(false);
        }
        dst.reserve(frame.encoded_len() + TAG as usize);
        self.put_plain(frame, header, 0, dst);
        Ok(true)
    }

    /// Seals `batch`: puts its header before its frames, encrypts them in
    /// place under the next nonce and appends the tag. An empty batch
    /// leaves nothing, and a batch of one frame goes as that frame's own
    /// record, as [`encode`](Self::encode) would have sealed it (a batch
    /// of one costs more than the record: the peer reads it through the
    /// batch's path and 16 bytes more are sealed).
    /// Errors are fatal: `dst` lost the batch's bytes since
    /// [`begin_batch`](Self::begin_batch), or the nonces are used up.
    pub fn seal_batch(&mut self, batch: Batch, dst: &mut BytesMut) -> Result<(), TransformError> {
        if self.poisoned {
            return Err(fatal(TransformErrorKind::Poisoned));
        }
        if dst.len() < batch.start {
            self.poisoned = true;
            return Err(bad("the write buffer lost the batch"));
        }
        let len = batch.len(dst);
        if len == 0 {
            return Ok(());
        }
        let Some(seal) = &mut self.seal else {
            // `begin_batch` starts none without a key.
            return Err(bad("a batch on a connection without encryption"));
        };
        let raw = match lone_frame(&dst[batch.start..]) {
            Some(mut header) => {
                // The frame's own record: its payload length counts the
                // tag (`encode`'s layout).
                header.payload_len += TAG;
                header.to_bytes()
            }
            None => {
                // The batch's header goes before its frames.
                dst.reserve(HEADER_LEN + TAG as usize);
                dst.put_slice(&[0; HEADER_LEN]);
                dst.copy_within(batch.start..batch.start + len, batch.start + HEADER_LEN);
                batch_header(len).to_bytes()
            }
        };
        header_slot(dst, batch.start).copy_from_slice(&raw);
        match seal.seal(&raw, &mut dst[batch.start + HEADER_LEN..]) {
            Ok(tag) => {
                dst.put_slice(&tag);
                Ok(())
            }
            Err(e) => {
                dst.truncate(batch.start);
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// Encodes `frames` in order into `dst`: in as few batches as fit the
    /// peer's max payload when batches are allowed (a frame too large for
    /// any batch goes alone as its own record), else one record each.
    pub fn encode_batched(
        &mut self,
        frames: &[Frame],
        dst: &mut BytesMut,
    ) -> Result<(), TransformError> {
        let mut open: Option<Batch> = None;
        for frame in frames {
            if let Some(batch) = open.as_mut() {
                if self.push(batch, frame, dst)? {
                    continue;
                }
                if let Some(full) = open.take() {
                    self.seal_batch(full, dst)?;
                }
            }
            match self.begin_batch(dst)? {
                Some(mut batch) => {
                    if !self.push(&mut batch, frame, dst)? {
                        self.seal_batch(batch, dst)?;
                        self.encode(frame, dst)?;
                        continue;
                    }
                    open = Some(batch);
                }
                None => self.encode(frame, dst)?,
            }
        }
        match open {
            Some(batch) => self.seal_batch(batch, dst),
            None => Ok(()),
        }
    }
}

/// The header of the one frame a batch's `plaintext` holds, or `None` when
/// it holds more (or, never from `push`, something that is not a frame).
#[inline]
fn lone_frame(plaintext: &[u8]) -> Option<Header> {
    let header = Header::parse(plaintext.first_chunk::<HEADER_LEN>()?).ok()?;
    (HEADER_LEN + header.body_len() == plaintext.len()).then_some(header)
}

/// The header of a batch of `len` plaintext bytes (the tag counted in the
/// payload length).
fn batch_header(len: usize) -> Header {
    Header {
        ty: BATCH,
        flags: Flags::NONE,
        stream_id: 0,
        metadata_len: 0,
        // `len` is at most the peer's max payload (1 MiB): no overflow.
        payload_len: u32::try_from(len).unwrap_or(u32::MAX) + TAG,
    }
}

/// Whether frames of type `ty` may ride in a batch: not the handshake's,
/// not key updates (a record of their own: the key changes after them),
/// and no batch inside a batch.
fn may_ride(ty: FrameType) -> bool {
    ty != FrameType::HANDSHAKE && ty != FrameType::KEY_UPDATE && ty != BATCH
}

impl Inbound {
    /// Takes an opened batch record (`header` with the tag no longer
    /// counted, `body` its plaintext of `len` bytes then its tag, split
    /// off the front of `src`): checks the header and puts the body back
    /// at the front of `src`, where [`next_in_batch`](Self::next_in_batch)
    /// hands its frames out as the codec would have split them. The body
    /// was split off right there, so putting it back copies nothing, and
    /// the read half holds no buffer of its own (it sits in every
    /// connection's state). Returns the batch's plaintext length.
    pub(super) fn take_batch(
        &mut self,
        header: &Header,
        mut body: BytesMut,
        len: usize,
        src: &mut BytesMut,
    ) -> Result<u32, TransformError> {
        if header.flags != Flags::NONE || header.stream_id != 0 || header.metadata_len != 0 {
            return Err(bad("batch header with flags, a stream id or metadata"));
        }
        if len == 0 {
            return Err(bad("empty batch"));
        }
        body.unsplit(std::mem::take(src));
        *src = body;
        // `len` is at most our max payload (1 MiB): it fits.
        let left = u32::try_from(len).map_err(|_| bad("batch over the size limit"))?;
        self.pending = Pending::Batch { left };
        Ok(left)
    }

    /// The next frame of the opened batch at the front of `src` (`left`
    /// bytes of frames, then the tag), checked against our limits as if
    /// it had come alone: a frame cut by the end of the batch, or one of a
    /// type that never rides in a batch, is fatal; a payload that fails
    /// to inflate is confined to its frame (it is consumed, and the next
    /// call goes on with the following one).
    ///
    /// A fatal error poisons this half here (and in `finish`), so the
    /// record path returns this result as it is. (`decode` takes a batch's
    /// later frames itself, by [`split_from_batch`](Self::split_from_batch).)
    pub(super) fn next_in_batch(
        &mut self,
        left: u32,
        src: &mut BytesMut,
    ) -> Result<Option<Frame>, TransformError> {
        let (header, body) = match self.split_from_batch(left as usize, src) {
            Ok(found) => found,
            Err(e) => return self.fail(e),
        };
        self.finish(&header, body)
    }

    /// Splits the next frame of the opened batch at the front of `src`
    /// (`left` bytes of frames, then the tag) off it, once its header is
    /// checked ([`batch_header`](Self::batch_header)): its header and its
    /// body (metadata then payload), to be built by `finish`. Steps over
    /// the tag after the batch's last frame. An error is fatal; the caller
    /// poisons this half.
    #[inline(always)]
    pub(super) fn split_from_batch(
        &mut self,
        left: usize,
        src: &mut BytesMut,
    ) -> Result<(Header, Bytes), TransformError> {
        let (header, rest) = self.batch_header(left, src)?;
        // The frame leaves the read buffer in one split, the header
        // stepped over on the frozen piece (a pointer bump), as the plain
        // codec's `decode` takes it. Two splits of the read buffer
        // (header and metadata, then payload) cost more now that LTO keeps
        // both out of line here. `finish` takes the metadata off the body
        // as the plain codec does (the ok status stepped over).
        let mut body = src.split_to(HEADER_LEN + header.body_len()).freeze();
        body.advance(HEADER_LEN);
        self.pending = match rest {
            0 => {
                src.advance(TAG as usize);
                Pending::Nothing
            }
            // `rest` < `left`, a u32.
            _ => Pending::Batch { left: rest as u32 },
        };
        Ok((header, body))
    }

    /// The header of the batch's next frame (at the front of `src`, within
    /// its first `left` bytes) once checked, and the batch's bytes left
    /// after that frame.
    #[inline(always)]
    fn batch_header(&self, left: usize, src: &BytesMut) -> Result<(Header, usize), TransformError> {
        let Some(raw) = src.get(..left).and_then(|b| b.first_chunk::<HEADER_LEN>()) else {
            return Err(bad("frame cut by the end of its batch"));
        };
        let header = Header::parse(raw)?;
        header.check(self.codec.limits(), 0)?;
        if !may_ride(header.ty) {
            return Err(bad("HANDSHAKE, KEY_UPDATE or batch inside a batch"));
        }
        match left.checked_sub(HEADER_LEN + header.body_len()) {
            Some(rest) => Ok((header, rest)),
            None => Err(bad("frame cut by the end of its batch")),
        }
    }
}

#[cfg(test)]
mod tests;
