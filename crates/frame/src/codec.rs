//! `FrameCodec`: the tokio-util `Decoder` and `Encoder` for frames.

use std::num::NonZeroUsize;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::metadata::LastValid;
use crate::{Frame, FrameError, HEADER_LEN, Header, Limits, Metadata};

/// Payloads at least this long are chained rather than copied by
/// [`FrameCodec::encode_head`], for vectored writes.
pub const CHAIN_THRESHOLD: usize = 1024;

/// Decodes and encodes frames.
///
/// Decoding follows the tokio-util contract: `Ok(None)` until a whole frame
/// is buffered (after reserving room for the rest), the header checked
/// against the [`Limits`] before any room is reserved for the body, and the
/// body split off the read buffer, so metadata and payload are `Bytes`
/// slices of it. Once the buffer holds a frame, decoding it allocates
/// nothing and copies no payload.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    limits: Limits,
    overhead: u32,
    /// `Some(n)` while the frame at the front of the read buffer, its
    /// header checked, is `n` bytes long and not all there yet. Its
    /// length rather than its header: the codec sits in every
    /// connection's state, twice, and this keeps it at 32 bytes with
    /// `last` beside it.
    waiting: Option<NonZeroUsize>,
    /// The last metadata block this decoder validated: a connection's
    /// calls repeat a few `OPEN` blocks, and a repeat is compared, not
    /// walked (see [`LastValid`] for the bounds).
    last: LastValid,
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new(Limits::default())
    }
}

impl FrameCodec {
    /// A codec with these limits and no record overhead.
    pub fn new(limits: Limits) -> FrameCodec {
        FrameCodec {
            limits,
            overhead: 0,
            waiting: None,
            last: LastValid::new(),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Allows `overhead` extra payload bytes on the wire beyond
    /// `max_payload` (the record layer's authentication tag).
    pub fn set_overhead(&mut self, overhead: u32) {
        self.overhead = overhead;
    }

    /// Decodes one frame's header and raw body (metadata then payload, as
    /// on the wire), without looking inside the body. This is the hook for
    /// the record layer, which must open the body before it is parsed.
    #[inline]
    pub fn decode_raw(
        &mut self,
        src: &mut BytesMut,
    ) -> Result<Option<(Header, BytesMut)>, FrameError> {
        let Some(header) = self.whole_frame(src)? else {
            return Ok(None);
        };
        let mut body = src.split_to(HEADER_LEN + header.body_len());
        body.advance(HEADER_LEN);
        Ok(Some((header, body)))
    }

    /// Like [`decode_raw`](Self::decode_raw), the body split off as
    /// [`decode`](Decoder::decode) splits it: frozen, the header stepped
    /// over on it (a pointer bump). For a layer that builds the frame
    /// itself ([`split_metadata`](Self::split_metadata),
    /// [`Frame::from_header`]) on a path it shares with frames of its own.
    #[inline(always)]
    pub fn decode_body(
        &mut self,
        src: &mut BytesMut,
    ) -> Result<Option<(Header, Bytes)>, FrameError> {
        let Some(header) = self.whole_frame(src)? else {
            return Ok(None);
        };
        let mut body = src.split_to(HEADER_LEN + header.body_len()).freeze();
        body.advance(HEADER_LEN);
        Ok(Some((header, body)))
    }

    /// Splits the metadata block (its first `len` bytes) off the body of
    /// a frame that [`decode_raw`](Self::decode_raw) returned, once the
    /// record layer has opened it, and checks it as
    /// [`decode`](Decoder::decode) does: against this decoder's last valid
    /// block first, the ok status stepped over (see
    /// [`LastValid::split_from`]); the payload is left in `body`. The
    /// caller builds the frame
    /// ([`Frame::from_header`]) where it returns it: a frame built here
    /// came back through memory and was moved once more on its way out
    /// (about 17 instructions a frame). Allocates nothing.
    #[inline(always)]
    pub fn split_metadata(&mut self, body: &mut Bytes, len: usize) -> Result<Metadata, FrameError> {
        Ok(self.last.split_from(body, len)?)
    }

    /// The header of the frame at the front of `src` once all of it is
    /// buffered; until then `None`, with room reserved for the rest.
    ///
    /// The header stays in `src` until the frame is whole (its length is
    /// kept in `waiting`, so a read that still falls short costs one
    /// comparison): the whole frame then leaves the buffer in one split,
    /// and the header is stepped over on that piece. Consuming the header
    /// on its own first cost a second update of the read buffer's view
    /// per frame (about 20 instructions, two frames per call).
    #[inline(always)]
    fn whole_frame(&mut self, src: &mut BytesMut) -> Result<Option<Header>, FrameError> {
        if let Some(need) = self.waiting {
            let need = need.get();
            if src.len() < need {
                src.reserve(need - src.len());
                return Ok(None);
            }
            // Whole now: the header, checked when the frame began, is
            // read again below (a frame split across reads only).
            self.waiting = None;
        }
        let Some(raw) = src.first_chunk::<HEADER_LEN>() else {
            src.reserve(HEADER_LEN - src.len());
            return Ok(None);
        };
        let header = Header::parse(raw)?;
        header.check(&self.limits, self.overhead)?;
        // No overflow: `check` bounded both lengths far below `usize::MAX`.
        let need = HEADER_LEN + header.body_len();
        if src.len() < need {
            self.waiting = NonZeroUsize::new(need);
            src.reserve(need - src.len());
            return Ok(None);
        }
        Ok(Some(header))
    }

    /// Checks a frame against the limits before sending it.
    #[inline]
    fn check_outbound(&self, frame: &Frame) -> Result<Header, FrameError> {
        let header = frame.header();
        header.check(&self.limits, 0)?;
        Ok(header)
    }

    /// Encodes a frame by copying it into `dst`. Allocates nothing when `dst`
    /// has room.
    #[inline]
    pub fn encode_frame(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        let header = self.check_outbound(frame)?;
        dst.reserve(frame.encoded_len());
        dst.put_slice(&header.to_bytes());
        if !frame.metadata.is_empty() {
            // Most frames carry none: skip the empty copy.
            dst.put_slice(frame.metadata.as_bytes());
        }
        dst.put_slice(&frame.payload);
        Ok(())
    }

    /// Encodes header and metadata into `dst`; a payload shorter than
    /// [`CHAIN_THRESHOLD`] is copied too and `None` returned, a longer one is
    /// returned for the caller to chain after `dst`'s bytes (a vectored
    /// write) instead of being copied.
    pub fn encode_head(
        &mut self,
        frame: &Frame,
        dst: &mut BytesMut,
    ) -> Result<Option<Bytes>, FrameError> {
        if frame.payload.len() < CHAIN_THRESHOLD {
            return self.encode_frame(frame, dst).map(|()| None);
        }
        let header = self.check_outbound(frame)?;
        dst.reserve(HEADER_LEN + frame.metadata.len());
        dst.put_slice(&header.to_bytes());
        dst.put_slice(frame.metadata.as_bytes());
        Ok(Some(frame.payload.clone()))
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = FrameError;

    #[inline]
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(header) = self.whole_frame(src)? else {
            return Ok(None);
        };
        // Frozen first: stepping over the header is then a pointer bump
        // on the `Bytes` rather than a `BytesMut` view update.
        let mut body = src.split_to(HEADER_LEN + header.body_len()).freeze();
        body.advance(HEADER_LEN);
        Frame::from_body_after(&header, body, &mut self.last).map(Some)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            // The bytes of the cut frame, its header included (it stays in
            // `src` until the frame is whole).
            None => Err(FrameError::Truncated {
                buffered: src.len(),
            }),
        }
    }
}

impl Encoder<Frame> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        self.encode_frame(&frame, dst)
    }
}

impl Encoder<&Frame> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        self.encode_frame(frame, dst)
    }
}
