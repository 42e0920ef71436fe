//! A whole frame and the typed payloads of control frames.

use bytes::{BufMut, Bytes, BytesMut};

use crate::metadata::LastValid;
use crate::{Flags, FrameError, FrameType, HEADER_LEN, Header, Metadata, Reason};

/// A decoded (or to-be-encoded) frame. Metadata and payload are `Bytes`
/// slices of the read buffer: decoding copies nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The frame type.
    pub ty: FrameType,
    /// The flags.
    pub flags: Flags,
    /// The stream id (0 for the connection).
    pub stream_id: u32,
    /// The metadata block (often empty).
    pub metadata: Metadata,
    /// The payload.
    pub payload: Bytes,
}

impl Frame {
    /// A frame with no metadata.
    pub fn new(ty: FrameType, flags: Flags, stream_id: u32, payload: Bytes) -> Frame {
        Frame {
            ty,
            flags,
            stream_id,
            metadata: Metadata::new(),
            payload,
        }
    }

    /// Builds a frame from a checked header and its body (metadata then
    /// payload), validating the metadata. Allocates nothing.
    #[inline]
    pub fn from_body(header: &Header, mut body: Bytes) -> Result<Frame, FrameError> {
        let metadata = body.split_to(header.metadata_len as usize);
        Ok(Frame {
            ty: header.ty,
            flags: header.flags,
            stream_id: header.stream_id,
            metadata: Metadata::from_bytes(metadata)?,
            payload: body,
        })
    }

    /// Like [`from_body`](Self::from_body), with the metadata checked
    /// through a connection's [`LastValid`]: a block equal to the last one
    /// that passed there is not walked again. Same result, same errors.
    ///
    /// Its own body rather than `from_body` calling it with a fresh
    /// `LastValid`: that would allocate the kept block's room per call.
    /// (A shared body taking the check as a closure measured 31 to 36
    /// instructions dearer per call at 64 in flight in the LTO build.)
    /// Always inlined: the record layer's batch path calls it beside the
    /// codec's `decode`, and LTO then kept it out of line there, its
    /// `Result` returned through memory (about 30 instructions a frame).
    #[inline(always)]
    pub fn from_body_after(
        header: &Header,
        mut body: Bytes,
        last: &mut LastValid,
    ) -> Result<Frame, FrameError> {
        let metadata = last.split_from(&mut body, header.metadata_len as usize)?;
        Ok(Frame::from_header(header, metadata, body))
    }

    /// A frame of `header`'s type, flags and stream id with this metadata
    /// and payload (the header's lengths are not looked at: the parts
    /// have theirs). For a layer that splits and checks a body itself,
    /// such as the record layer, which builds each opened frame right
    /// where it returns it. Allocates nothing.
    #[inline(always)]
    pub fn from_header(header: &Header, metadata: Metadata, payload: Bytes) -> Frame {
        Frame {
            ty: header.ty,
            flags: header.flags,
            stream_id: header.stream_id,
            metadata,
            payload,
        }
    }

    /// The header this frame encodes with.
    ///
    /// # Panics
    /// If metadata or payload is longer than `u32::MAX` bytes (a local bug:
    /// the limits are far lower).
    #[inline]
    pub fn header(&self) -> Header {
        Header {
            ty: self.ty,
            flags: self.flags,
            stream_id: self.stream_id,
            metadata_len: u32::try_from(self.metadata.len()).expect("metadata over 4 GiB"),
            payload_len: u32::try_from(self.payload.len()).expect("payload over 4 GiB"),
        }
    }

    /// Encoded length, header included.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.metadata.len() + self.payload.len()
    }

    /// Whether `END_STREAM` is set.
    #[inline]
    pub fn is_end_stream(&self) -> bool {
        self.flags.contains(Flags::END_STREAM)
    }

    /// A `WINDOW_UPDATE` granting `increment` bytes (stream 0: the connection).
    /// Its 4-byte payload is cut from a per-thread buffer
    /// (`small_payload`), not allocated: a long stream of small messages
    /// returns credit every quarter window, and that must not allocate.
    pub fn window_update(stream_id: u32, increment: u32) -> Frame {
        Frame::new(
            FrameType::WINDOW_UPDATE,
            Flags::NONE,
            stream_id,
            small_payload(&increment.to_be_bytes()),
        )
    }

    /// A `RESET` of `stream_id` with `reason`.
    pub fn reset(stream_id: u32, reason: Reason) -> Frame {
        Frame::new(
            FrameType::RESET,
            Flags::NONE,
            stream_id,
            Bytes::copy_from_slice(&reason.0.to_be_bytes()),
        )
    }

    /// A `PING` (or its answer when `ack`).
    pub fn ping(opaque: [u8; 8], ack: bool) -> Frame {
        let flags = if ack { Flags::ACK } else { Flags::NONE };
        Frame::new(
            FrameType::PING,
            flags,
            crate::CONNECTION_ID,
            Bytes::copy_from_slice(&opaque),
        )
    }

    /// A `GOAWAY` naming the last stream id the sender processed, a reason and
    /// optional debug text.
    pub fn goaway(last_stream_id: u32, reason: Reason, debug: &[u8]) -> Frame {
        let mut b = BytesMut::with_capacity(8 + debug.len());
        b.put_u32(last_stream_id);
        b.put_u32(reason.0);
        b.put_slice(debug);
        Frame::new(
            FrameType::GOAWAY,
            Flags::NONE,
            crate::CONNECTION_ID,
            b.freeze(),
        )
    }

    fn fixed<const N: usize>(&self) -> Result<[u8; N], FrameError> {
        self.payload[..]
            .try_into()
            .map_err(|_| FrameError::BadControlPayload {
                ty: self.ty,
                len: self.payload.len(),
            })
    }

    /// The increment of a `WINDOW_UPDATE` (exactly 4 bytes).
    pub fn parse_window_update(&self) -> Result<u32, FrameError> {
        self.fixed::<4>().map(u32::from_be_bytes)
    }

    /// The reason of a `RESET` (exactly 4 bytes).
    pub fn parse_reset(&self) -> Result<Reason, FrameError> {
        self.fixed::<4>().map(|b| Reason(u32::from_be_bytes(b)))
    }

    /// The opaque bytes of a `PING` (exactly 8 bytes).
    pub fn parse_ping(&self) -> Result<[u8; 8], FrameError> {
        self.fixed::<8>()
    }

    /// The last stream id, reason and debug text of a `GOAWAY` (at least 8 bytes).
    pub fn parse_goaway(&self) -> Result<(u32, Reason, Bytes), FrameError> {
        if self.payload.len() < 8 {
            return Err(FrameError::BadControlPayload {
                ty: self.ty,
                len: self.payload.len(),
            });
        }
        let p = &self.payload;
        let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
        let reason = Reason(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
        Ok((last, reason, p.slice(8..)))
    }
}

/// Bytes of the per-thread buffer small control payloads are cut from.
const SMALL_PAYLOADS: usize = 4096;

/// `bytes` as a `Bytes` cut from a per-thread buffer: no allocation once
/// warm. The buffer is shared with the payloads cut from it; when it runs
/// out, `reserve` takes it back in place if they are all gone (the usual
/// case: a control frame is written soon after it is made), and allocates
/// a new one only if one is still held.
fn small_payload(bytes: &[u8]) -> Bytes {
    thread_local! {
        static SMALL: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
    }
    SMALL.with_borrow_mut(|buf| {
        if buf.capacity() < bytes.len() {
            buf.reserve(SMALL_PAYLOADS);
        }
        buf.extend_from_slice(bytes);
        buf.split().freeze()
    })
}
