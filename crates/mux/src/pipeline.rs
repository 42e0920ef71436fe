//! The seam between the mux and the per-frame transform pipeline.
//!
//! The driver needs four things from the layer below: a sans-I/O
//! [`Handshake`] that exchanges bytes until it is complete, and then an
//! [`Outbound`] half that turns a frame into wire bytes and an [`Inbound`]
//! half that turns wire bytes back into frames, plus the [`Negotiated`]
//! result. These have exactly the shape of `weft_transform`'s types, so
//! switching to the real pipeline (deflate + AES-256-GCM + Noise) is a matter
//! of replacing this module's body with
//! `pub use weft_transform::{Handshake, HandshakeConfig, ...}`.
//!
//! Until then this is the plain pipeline: the handshake exchanges and checks
//! the 8-byte preface, and frames are encoded with `weft_frame::FrameCodec`.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;
use weft_frame::preface::{PREFACE, PREFACE_LEN, check_preface_prefix};
use weft_frame::{Frame, FrameCodec, FrameError, Limits, Reason};

/// Which side of the handshake this is (the dialler initiates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeRole {
    /// The side that dialled.
    Initiator,
    /// The side that accepted.
    Responder,
}

/// Handshake settings. The plain pipeline only uses the frame limits.
#[derive(Clone, Debug, Default)]
pub struct HandshakeConfig {
    /// This side's frame limits.
    pub limits: Limits,
}

/// What the handshake agreed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Negotiated {
    /// Whether frames are encrypted (AES-256-GCM).
    pub encrypted: bool,
    /// Whether payloads may be compressed (deflate).
    pub compressed: bool,
    /// The handshake transcript hash, when a key exchange took place.
    pub handshake_hash: Option<[u8; 32]>,
}

/// A handshake failure.
#[derive(Debug)]
pub struct HandshakeError(FrameError);

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "handshake failed: {}", self.0)
    }
}

impl std::error::Error for HandshakeError {}

/// A per-frame pipeline failure.
#[derive(Debug)]
pub struct TransformError(FrameError);

impl TransformError {
    /// Whether the connection must be closed. Always true for the plain
    /// pipeline: a framing error leaves the byte stream out of sync.
    pub fn is_fatal(&self) -> bool {
        true
    }

    /// The stream a per-frame failure concerns (never, for plain frames).
    pub fn stream_id(&self) -> Option<u32> {
        None
    }

    /// The wire reason to report.
    pub fn reason(&self) -> Reason {
        match self.0 {
            FrameError::MetadataTooLarge { .. } | FrameError::PayloadTooLarge { .. } => {
                Reason::FRAME_SIZE_ERROR
            }
            _ => Reason::PROTOCOL_ERROR,
        }
    }
}

impl std::fmt::Display for TransformError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TransformError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// The plain handshake: each side sends the preface and checks the peer's.
#[derive(Debug)]
pub struct Handshake {
    limits: Limits,
    sent: bool,
    received: bool,
}

/// A completed handshake: the two pipeline halves and what was agreed.
#[derive(Debug)]
pub struct Established {
    /// The write half.
    pub outbound: Outbound,
    /// The read half.
    pub inbound: Inbound,
    /// The agreed settings.
    pub negotiated: Negotiated,
}

impl Handshake {
    /// Starts a handshake.
    pub fn new(_role: HandshakeRole, config: HandshakeConfig) -> Result<Handshake, HandshakeError> {
        Ok(Handshake {
            limits: config.limits,
            sent: false,
            received: false,
        })
    }

    /// Appends the bytes to send now.
    pub fn poll_transmit(&mut self, out: &mut BytesMut) {
        if !self.sent {
            out.extend_from_slice(&PREFACE);
            self.sent = true;
        }
    }

    /// Consumes the peer's preface from `src` (only what it uses), failing
    /// within one read on anything that is not weft's preface.
    pub fn handle_input(&mut self, src: &mut BytesMut) -> Result<(), HandshakeError> {
        if self.received {
            return Ok(());
        }
        let n = src.len().min(PREFACE_LEN);
        check_preface_prefix(&src[..n]).map_err(HandshakeError)?;
        if n == PREFACE_LEN {
            src.advance(PREFACE_LEN);
            self.received = true;
        }
        Ok(())
    }

    /// Whether both prefaces have been exchanged.
    pub fn is_complete(&self) -> bool {
        self.sent && self.received
    }

    /// The pipeline halves (plain frames).
    pub fn into_session(self) -> Result<Established, HandshakeError> {
        let (outbound, inbound) = passthrough(self.limits);
        Ok(Established {
            outbound,
            inbound,
            negotiated: Negotiated::default(),
        })
    }
}

/// Write half: encodes one frame's wire bytes.
#[derive(Debug)]
pub struct Outbound(FrameCodec);

impl Outbound {
    /// Appends the wire bytes of `frame` to `dst`.
    pub fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), TransformError> {
        self.0.encode_frame(frame, dst).map_err(TransformError)
    }
}

/// Read half: decodes frames from wire bytes.
#[derive(Debug)]
pub struct Inbound(FrameCodec);

impl Inbound {
    /// The next whole frame in `src`, or `Ok(None)` until one is buffered.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, TransformError> {
        self.0.decode(src).map_err(TransformError)
    }

    /// Like `decode`, at end of input: a partial frame is an error.
    pub fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, TransformError> {
        self.0.decode_eof(src).map_err(TransformError)
    }
}

/// Plain pipeline halves with no handshake.
pub fn passthrough(limits: Limits) -> (Outbound, Inbound) {
    (
        Outbound(FrameCodec::new(limits)),
        Inbound(FrameCodec::new(limits)),
    )
}
