//! The per-frame pipeline: outbound compress then seal, inbound open then
//! decompress. A disabled pipeline is the frame codec and one branch.

use bytes::{BufMut, Bytes, BytesMut};
use tokio_util::codec::Decoder;
use weft_frame::{Flags, Frame, FrameCodec, FrameType, HEADER_LEN, Header, Limits, Metadata};

mod batch;

use batch::Batching;
pub use batch::{BATCH, BATCH_SETTING, BATCH_SETTING_VALUE, Batch};

use crate::Negotiated;
use crate::compress::{Compressor, Decompressor};
use crate::error::{TransformError, TransformErrorKind};
use crate::handshake_kind::{FirstFrame, peek_rejection};
use crate::noise::TAG_LEN;
use crate::rekey::{OpenKey, SendKey};

/// Record overhead on the wire: the AES-GCM tag.
const TAG: u32 = TAG_LEN as u32;

fn fatal(kind: TransformErrorKind) -> TransformError {
    TransformError::new(kind)
}

/// Whether a frame type carries application bytes that may be compressed.
fn compressible(ty: FrameType) -> bool {
    ty == FrameType::DATA || ty == FrameType::OPEN
}

/// The two halves of a connection's pipeline and what the handshake agreed.
#[derive(Debug)]
pub struct Session {
    /// The write half.
    pub outbound: Outbound,
    /// The read half.
    pub inbound: Inbound,
    /// What was negotiated, and the peer's limits.
    pub negotiated: Negotiated,
    /// Whether the peer is proven yet (see `crate::proof`).
    pub(crate) proof: crate::proof::Proof,
}

/// Settings the pipeline halves are built from (the handshake's result plus
/// local configuration).
pub(crate) struct PipelineParams {
    pub(crate) local_limits: Limits,
    pub(crate) peer_limits: Limits,
    pub(crate) compression: bool,
    pub(crate) compression_min_size: usize,
    pub(crate) local_max_message: u32,
    pub(crate) local_max_ratio: u32,
    pub(crate) peer_max_ratio: u32,
    /// The largest payload the peer inflates (its offer's max message).
    pub(crate) peer_max_message: u32,
    pub(crate) seal: Option<SendKey>,
    pub(crate) open: Option<OpenKey>,
}

impl PipelineParams {
    pub(crate) fn build(self) -> (Outbound, Inbound) {
        let mut out_codec = FrameCodec::new(self.peer_limits);
        let mut in_codec = FrameCodec::new(self.local_limits);
        if self.open.is_some() {
            in_codec.set_overhead(TAG);
        }
        if self.seal.is_some() {
            out_codec.set_overhead(TAG);
        }
        let outbound = Outbound {
            plain: self.seal.is_none() && !self.compression,
            codec: out_codec,
            compressor: self.compression.then(Compressor::new),
            // u32 like the peer's limit: the two share one word, and the
            // write half sits in every connection's shared state, whose
            // size class a test holds.
            min_size: u32::try_from(self.compression_min_size.max(1)).unwrap_or(u32::MAX),
            peer_max_ratio: self.peer_max_ratio,
            peer_max_message: self.peer_max_message,
            seal: self.seal,
            batching: Batching::Off,
            poisoned: false,
        };
        let max_inflated = self.local_limits.max_payload.min(self.local_max_message) as usize;
        let inbound = Inbound {
            plain: self.open.is_none() && !self.compression,
            codec: in_codec,
            decompressor: self.compression.then(Decompressor::new),
            max_inflated,
            max_ratio: self.local_max_ratio,
            open: self.open,
            pending: Pending::Nothing,
            poisoned: false,
            watch: None,
        };
        (outbound, inbound)
    }
}

/// Plain passthrough halves (no handshake, no compression, no encryption),
/// for tests and benches. Both enforce `limits`.
pub fn passthrough(limits: Limits) -> (Outbound, Inbound) {
    PipelineParams {
        local_limits: limits,
        peer_limits: limits,
        compression: false,
        compression_min_size: usize::MAX,
        local_max_message: u32::MAX,
        local_max_ratio: 1,
        peer_max_ratio: 1,
        peer_max_message: u32::MAX,
        seal: None,
        open: None,
    }
    .build()
}

/// Write half: compresses (if negotiated and worth it), then seals; writes
/// the wire bytes of one frame to `dst`.
pub struct Outbound {
    /// No compression and no encryption: the fast path.
    plain: bool,
    codec: FrameCodec,
    compressor: Option<Compressor>,
    /// Payloads shorter than this go uncompressed.
    min_size: u32,
    peer_max_ratio: u32,
    /// Payloads longer than this go uncompressed: the peer would not
    /// inflate them (docs/PROTOCOL.md 4, a sender's rules).
    peer_max_message: u32,
    seal: Option<SendKey>,
    /// Whether frames may be sealed together (the peer reads batches).
    batching: Batching,
    poisoned: bool,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("compression", &self.compressor.is_some())
            .field("encryption", &self.seal.is_some())
            .field("batching", &self.batching)
            .field("records_sealed", &self.records())
            .field("key_updates", &self.key_updates())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl Outbound {
    /// Encodes `frame` into `dst`: header, metadata and payload, the payload
    /// deflated when compression was negotiated, the payload is at least the
    /// minimum size and at most the peer's max message, and deflate shrinks
    /// it within the peer's max ratio (the frame then carries `COMPRESSED`),
    /// and the whole sealed when encryption was negotiated.
    /// A `COMPRESSED` flag set by the caller is ignored: this half owns it.
    ///
    /// When the send key is due for an update (its [`RekeyLimits`](crate::RekeyLimits)
    /// would be crossed by this frame), a `KEY_UPDATE` record sealed under
    /// the old key goes into `dst` first and the frame is sealed under the
    /// new one: a connection is never closed for a key limit.
    ///
    /// Allocates nothing when `dst` has room. Errors are fatal: the frame is
    /// over the peer's limits, it is a `KEY_UPDATE` (this half owns those),
    /// or (never in practice) the 2^64 - 1 nonces of Noise are used up, so no
    /// key update is possible.
    #[inline]
    pub fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), TransformError> {
        if self.plain {
            // The passthrough: the frame codec alone.
            return match self.codec.encode_frame(frame, dst) {
                Ok(()) => Ok(()),
                Err(e) => Err(e.into()),
            };
        }
        self.encode_transformed(frame, dst)
    }

    /// Like [`encode`](Self::encode), but on the passthrough (no
    /// compression, no encryption) a payload of at least
    /// [`CHAIN_THRESHOLD`](weft_frame::CHAIN_THRESHOLD) bytes is not copied:
    /// header and metadata go into `dst` and the payload is returned, to be
    /// written right after `dst`'s bytes (a vectored write). A transformed
    /// frame is always encoded whole into `dst` (it is compressed or sealed
    /// there) and `None` returned.
    #[inline]
    pub fn encode_chained(
        &mut self,
        frame: &Frame,
        dst: &mut BytesMut,
    ) -> Result<Option<bytes::Bytes>, TransformError> {
        if self.plain {
            return match self.codec.encode_head(frame, dst) {
                Ok(chained) => Ok(chained),
                Err(e) => Err(e.into()),
            };
        }
        self.encode_transformed(frame, dst).map(|()| None)
    }

    fn encode_transformed(
        &mut self,
        frame: &Frame,
        dst: &mut BytesMut,
    ) -> Result<(), TransformError> {
        if self.poisoned {
            return Err(fatal(TransformErrorKind::Poisoned));
        }
        let header = checked_header(frame, self.codec.limits())?;
        if let Some(seal) = &mut self.seal {
            if frame.ty == FrameType::KEY_UPDATE {
                return Err(fatal(TransformErrorKind::KeyUpdate("sent by the caller")));
            }
            // Compression only shrinks: the uncompressed size bounds the record.
            if seal.is_due(frame.metadata.len() + frame.payload.len()) {
                seal.update(dst).inspect_err(|_| self.poisoned = true)?;
            }
        }
        let start = dst.len();
        dst.reserve(frame.encoded_len() + TAG_LEN);
        let overhead = if self.seal.is_some() { TAG } else { 0 };
        let header = self.put_plain(frame, header, overhead, dst);
        let Some(seal) = &mut self.seal else {
            return Ok(());
        };
        // The header as written, the tag counted: the record's AAD.
        let raw = header.to_bytes();
        match seal.seal(&raw, &mut dst[start + HEADER_LEN..]) {
            Ok(tag) => {
                dst.put_slice(&tag);
                Ok(())
            }
            Err(e) => {
                dst.truncate(start);
                self.poisoned = true;
                Err(e)
            }
        }
    }

    /// Appends `frame` (its `header` from [`checked_header`]) to `dst` as a
    /// plain frame: the header with `overhead` bytes added to its payload
    /// length (a record's tag, which its caller appends), the metadata, the
    /// payload (deflated when that is negotiated and worth it, the header
    /// then rewritten with `COMPRESSED` and the deflated length). Returns
    /// the header as written. Always inlined: with a batch's `push` as a second caller, LTO
    /// stopped inlining it into `encode`, which cost a sequential call about
    /// 118 instructions.
    #[inline(always)]
    fn put_plain(
        &mut self,
        frame: &Frame,
        mut header: Header,
        overhead: u32,
        dst: &mut BytesMut,
    ) -> Header {
        let at = dst.len();
        // `checked_header` bounded the payload far below `u32::MAX`.
        header.payload_len += overhead;
        // The final header right away (most frames go uncompressed), rather
        // than a zeroed slot filled in after: one write of it per frame.
        dst.put_slice(&header.to_bytes());
        dst.put_slice(frame.metadata.as_bytes());
        let payload = &frame.payload[..];
        let compressed = match &mut self.compressor {
            Some(c)
                if (self.min_size as usize..=self.peer_max_message as usize)
                    .contains(&payload.len())
                    && compressible(frame.ty) =>
            {
                c.compress_into(payload, self.peer_max_ratio, dst)
            }
            _ => None,
        };
        match compressed {
            Some(len) => {
                header.flags = header.flags.with(Flags::COMPRESSED);
                header.payload_len = len as u32 + overhead;
                header.write(header_slot(dst, at));
            }
            None => dst.put_slice(payload),
        }
        header
    }

    /// Records sealed so far in this direction, `KEY_UPDATE` records
    /// included (the nonce; 0 when not encrypting).
    pub fn records(&self) -> u64 {
        self.seal.as_ref().map_or(0, SendKey::nonce)
    }

    /// How many times the send key was updated (0 when not encrypting).
    pub fn key_updates(&self) -> u64 {
        self.seal.as_ref().map_or(0, SendKey::generation)
    }

    /// Test-only access to the send key.
    #[cfg(test)]
    pub(crate) fn send_key_mut(&mut self) -> &mut SendKey {
        self.seal.as_mut().expect("an encrypting half")
    }

    /// Whether frames go as they are, neither compressed nor sealed (see
    /// [`plain_codec`](Self::plain_codec)).
    #[inline]
    pub fn is_plain(&self) -> bool {
        self.plain
    }

    /// The frame codec alone, when frames go as they are (neither
    /// compressed nor sealed): [`encode`](Self::encode) is then its
    /// `encode_frame`, and a frame may be encoded whenever it is made
    /// (there is nothing to batch). `None` on a transformed half.
    #[inline]
    pub fn plain_codec(&mut self) -> Option<&mut FrameCodec> {
        if self.plain {
            Some(&mut self.codec)
        } else {
            None
        }
    }

    /// Whether frames are sealed.
    pub fn is_encrypting(&self) -> bool {
        self.seal.is_some()
    }

    /// Whether payloads may be compressed.
    pub fn is_compressing(&self) -> bool {
        self.compressor.is_some()
    }
}

/// `frame`'s header without `COMPRESSED` (the write half owns that flag),
/// checked against the peer's `limits`.
#[inline]
fn checked_header(frame: &Frame, limits: &Limits) -> Result<Header, TransformError> {
    let mut header = frame.header();
    header.flags = header.flags.without(Flags::COMPRESSED);
    header.check(limits, 0)?;
    Ok(header)
}

fn header_slot(dst: &mut BytesMut, start: usize) -> &mut [u8; HEADER_LEN] {
    (&mut dst[start..start + HEADER_LEN])
        .try_into()
        .expect("header slot is HEADER_LEN bytes")
}

/// Read half: opens (when encrypted), then decompresses (when the frame says
/// so); `Ok(None)` until a whole frame is buffered.
pub struct Inbound {
    /// No decryption, no decompression and not failed: the fast path.
    plain: bool,
    codec: FrameCodec,
    decompressor: Option<Decompressor>,
    max_inflated: usize,
    max_ratio: u32,
    open: Option<OpenKey>,
    /// What is held between calls: a record's header, or a batch's frames.
    pending: Pending,
    poisoned: bool,
    /// After an XX handshake (initiator), until the first frame: the
    /// server may reject our key there.
    watch: Option<RejectionWatch>,
}

/// What an [`Inbound`] watching for a rejection needs to report it.
#[derive(Clone, Copy)]
struct RejectionWatch {
    our_key: Option<[u8; 32]>,
    /// The `plain` flag to restore once the first frame is not one.
    plain: bool,
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbound")
            .field("compression", &self.decompressor.is_some())
            .field("encryption", &self.open.is_some())
            .field("pending", &self.pending)
            .field("records_opened", &self.records())
            .field("key_updates", &self.key_updates())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl Inbound {
    /// Decodes the next frame from `src`, consuming exactly its bytes.
    ///
    /// A record is authenticated before anything in it is used (before its
    /// metadata is parsed and before decompression). Fatal errors (see
    /// [`TransformError::is_fatal`]) leave this half failing for good; a
    /// per-frame decompression error consumes that frame and the next call
    /// goes on with the following one. Allocates nothing in steady state.
    ///
    /// A sealed batch is opened whole and its plaintext put back at the
    /// front of `src`; its frames then come out one per call, before
    /// anything read after it. So `src` must be the same buffer from call
    /// to call, only appended to (the tokio-util contract).
    #[inline]
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, TransformError> {
        let (header, body) = if self.plain {
            // The passthrough: the frame codec's split.
            match self.codec.decode_body(src) {
                Ok(Some(found)) => found,
                Ok(None) => return Ok(None),
                Err(e) => return self.fail(e.into()),
            }
        } else if let Pending::Batch { left } = self.pending {
            // The frames of an opened batch, most frames at 64 in flight:
            // straight to the batch, past the record path's checks (a
            // poisoned half holds no batch, see `poison`, and the
            // rejection watch ends at the first frame, before any batch).
            match self.split_from_batch(left as usize, src) {
                Ok(found) => found,
                Err(e) => return self.fail(e),
            }
        } else {
            return self.decode_slow(src);
        };
        // One way out for both: a frame split off the read buffer, built
        // here (inlined into the caller's loop). The batch path out of
        // line cost its call, and its frame returned through memory, about
        // 25 instructions a frame; inlined beside the plain path's own
        // copy of this tail, LLVM merged the two and the plain path paid
        // about 5 a frame in register shuffles. A plain half has no
        // decompressor: a `COMPRESSED` frame is `UnexpectedCompression`,
        // fatal, in `inflate`.
        self.finish(&header, body)
    }

    /// Records a fatal error: this half fails for good from now on.
    #[cold]
    fn fail(&mut self, e: TransformError) -> Result<Option<Frame>, TransformError> {
        self.poison();
        Err(e)
    }

    /// Leaves this half failing for good: off the passthrough, and holding
    /// no batch, so `decode`'s batch path never runs on a poisoned half.
    fn poison(&mut self) {
        self.plain = false;
        self.poisoned = true;
        self.pending = Pending::Nothing;
    }

    fn decode_slow(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, TransformError> {
        if self.poisoned {
            return Err(fatal(TransformErrorKind::Poisoned));
        }
        let result = self.decode_transformed(src);
        if let Err(e) = &result
            && e.is_fatal()
        {
            self.poison();
        }
        result
    }

    /// Like [`decode`](Self::decode) at the end of input: bytes left that do
    /// not make a whole frame are a truncation error, never a partial frame.
    pub fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, TransformError> {
        if let Some(frame) = self.decode(src)? {
            return Ok(Some(frame));
        }
        let result = if !matches!(self.pending, Pending::Header(_)) {
            // No header kept here (the passthrough never keeps one): every
            // pipeline reports the same `buffered` for the same cut frame.
            self.codec.decode_eof(src).map_err(Into::into)
        } else {
            // The codec leaves a record's header in `src` until the whole
            // record is buffered: `src` is all of the cut record.
            Err(weft_frame::FrameError::Truncated {
                buffered: src.len(),
            }
            .into())
        };
        match result {
            Err(e) => self.fail(e),
            ok => ok,
        }
    }

    /// Treats a rejection as the first frame as the server's verdict on
    /// our key (XX initiator), until another frame arrives.
    pub(crate) fn watch_for_rejection(&mut self, our_key: Option<[u8; 32]>) {
        self.watch = Some(RejectionWatch {
            our_key,
            plain: self.plain,
        });
        self.plain = false;
    }

    fn decode_transformed(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, TransformError> {
        if let Some(w) = self.watch {
            match peek_rejection(src) {
                FirstFrame::Unknown => return Ok(None),
                FirstFrame::Rejection(reason) => {
                    return Err(fatal(TransformErrorKind::Rejected {
                        reason,
                        our_key: w.our_key,
                    }));
                }
                FirstFrame::Other => {
                    self.watch = None;
                    // Not poisoned: `decode_slow` returns before this then.
                    self.plain = w.plain;
                    if self.plain {
                        return self.decode(src);
                    }
                }
            }
        }
        if let Pending::Batch { left } = self.pending {
            return self.next_in_batch(left, src);
        }
        self.decode_records(src)
    }

    /// Decodes records until one yields a frame: a key update is applied
    /// in place and the next record follows; an opened batch hands out its
    /// first frame. `Ok(None)` while no whole record is buffered.
    ///
    /// The frame goes back from `finish` as it is: wrapping it in a
    /// "what this record was" value to unwrap in a loop of the caller
    /// moved each record's frame twice more.
    fn decode_records(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, TransformError> {
        loop {
            if let (Pending::Nothing, Some(raw)) = (self.pending, src.first_chunk::<HEADER_LEN>()) {
                self.pending = Pending::Header(*raw);
            }
            let Some((mut header, mut body)) = self.codec.decode_raw(src)? else {
                return Ok(None);
            };
            let pending = std::mem::replace(&mut self.pending, Pending::Nothing);
            if let Some(open) = &mut self.open {
                let Pending::Header(aad) = pending else {
                    unreachable!("a decoded header was buffered whole first");
                };
                if header.payload_len < TAG {
                    return Err(fatal(TransformErrorKind::ShortRecord));
                }
                let len = open.open(&aad, &mut body)?;
                header.payload_len -= TAG;
                if header.ty == BATCH {
                    let left = self.take_batch(&header, body, len, src)?;
                    return self.next_in_batch(left, src);
                }
                body.truncate(len);
                if header.ty == FrameType::KEY_UPDATE {
                    // Consumed here: the next record follows.
                    open.update(&header, &body)?;
                    continue;
                }
            }
            return self.finish(&header, body.freeze());
        }
    }

    /// Builds an authenticated frame out of its metadata block (checked
    /// here) and payload, and inflates the payload if flagged.
    /// A fatal error poisons this half right here, so the batch path
    /// returns this result as it is (checking each frame's result for a
    /// fatal error on its way out moved the frame once more). The frame
    /// is built in the returned value, not first as the codec's
    /// `Result<Frame, _>` to be unwrapped and moved again (about 17
    /// instructions a frame). Always inlined: a call returns its large
    /// `Result` through memory, about 65 instructions per frame on the
    /// encrypted path.
    #[inline(always)]
    fn finish(
        &mut self,
        header: &Header,
        mut payload: Bytes,
    ) -> Result<Option<Frame>, TransformError> {
        let metadata = match self
            .codec
            .split_metadata(&mut payload, header.metadata_len as usize)
        {
            Ok(metadata) => metadata,
            Err(e) => return self.fail(e.into()),
        };
        self.build(header, metadata, payload)
    }

    /// [`finish`](Self::finish) once the metadata block is checked: the
    /// frame, its payload inflated if flagged. Always inlined, as
    /// `finish` is.
    #[inline(always)]
    fn build(
        &mut self,
        header: &Header,
        metadata: Metadata,
        payload: Bytes,
    ) -> Result<Option<Frame>, TransformError> {
        if !header.flags.contains(Flags::COMPRESSED) {
            return Ok(Some(Frame::from_header(header, metadata, payload)));
        }
        match self.inflate(Frame::from_header(header, metadata, payload)) {
            Ok(frame) => Ok(Some(frame)),
            Err(e) if e.is_fatal() => self.fail(e),
            Err(e) => Err(e),
        }
    }

    /// Inflates the payload of a frame flagged `COMPRESSED`, within our
    /// max message and max ratio. Out of `finish`: most frames go
    /// uncompressed, and inflating costs far more than the call.
    fn inflate(&mut self, mut frame: Frame) -> Result<Frame, TransformError> {
        let Some(d) = &mut self.decompressor else {
            return Err(fatal(TransformErrorKind::UnexpectedCompression));
        };
        if !compressible(frame.ty) {
            return Err(fatal(TransformErrorKind::UnexpectedCompression));
        }
        let by_ratio = frame.payload.len().saturating_mul(self.max_ratio as usize);
        let limit = self.max_inflated.min(by_ratio);
        frame.payload = d.decompress(&frame.payload, limit).map_err(|why| {
            TransformError::new(TransformErrorKind::Decompress {
                ty: frame.ty,
                stream_id: frame.stream_id,
                why,
            })
        })?;
        frame.flags = frame.flags.without(Flags::COMPRESSED);
        Ok(frame)
    }

    /// Records opened so far in this direction, `KEY_UPDATE` records
    /// included (the nonce; 0 when not encrypted).
    pub fn records(&self) -> u64 {
        self.open.as_ref().map_or(0, OpenKey::nonce)
    }

    /// Bytes a record adds to each frame on the wire beyond the frame's
    /// own header, metadata and payload: the AEAD tag when this half
    /// decrypts, else 0. A reader sizes its buffers from it so that they
    /// hold whole records.
    pub fn record_overhead(&self) -> usize {
        if self.open.is_some() { TAG_LEN } else { 0 }
    }

    /// How many times the peer updated its send key (0 when not encrypted).
    pub fn key_updates(&self) -> u64 {
        self.open.as_ref().map_or(0, OpenKey::generation)
    }

    /// Test-only access to the receive key.
    #[cfg(test)]
    pub(crate) fn open_key_mut(&mut self) -> &mut OpenKey {
        self.open.as_mut().expect("a decrypting half")
    }
}

/// What the read half holds between calls.
#[derive(Clone, Copy, Debug)]
enum Pending {
    /// Nothing: the read buffer starts with a record (or a frame).
    Nothing,
    /// The raw header of the record being buffered: the AAD must be the
    /// bytes as received, reserved byte included.
    Header([u8; HEADER_LEN]),
    /// An opened batch at the front of the read buffer: `left` bytes of
    /// its frames, then its 16-byte tag, to be skipped after them.
    Batch {
        /// Plaintext bytes of the batch not yet handed out.
        left: u32,
    },
}
