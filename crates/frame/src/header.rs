//! The fixed 16-byte frame header, its frame types and flags.

use crate::{FrameError, Limits};

/// The protocol version this crate speaks, carried in every frame header and
/// in the connection preface.
pub const VERSION: u8 = 1;

/// Length of the fixed frame header in bytes.
pub const HEADER_LEN: usize = 16;

/// The stream id reserved for frames about the whole connection.
pub const CONNECTION_ID: u32 = 0;

/// A frame type: an open newtype, so a type from a newer peer survives
/// decoding and the layer above decides what to do with it (the mux ignores
/// unknown types within a budget).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameType(pub u8);

impl FrameType {
    /// Stream data. Stream frame.
    pub const DATA: FrameType = FrameType(0x00);
    /// Opens a stream; its metadata carries the call's method and deadline. Stream frame.
    pub const OPEN: FrameType = FrameType(0x01);
    /// Abruptly ends a stream; payload is a 4-byte [`Reason`](crate::Reason). Stream frame.
    pub const RESET: FrameType = FrameType(0x02);
    /// Grants flow-control credit; payload is a 4-byte increment. Stream id 0 means the connection.
    pub const WINDOW_UPDATE: FrameType = FrameType(0x03);
    /// Liveness probe with 8 opaque bytes; answered with the `ACK` flag. Connection frame.
    pub const PING: FrameType = FrameType(0x04);
    /// Graceful shutdown: last processed stream id and a reason. Connection frame.
    pub const GOAWAY: FrameType = FrameType(0x05);
    /// A handshake message (before any record protection). Connection frame.
    pub const HANDSHAKE: FrameType = FrameType(0x06);
    /// Reserved for a future in-band key update. Connection frame.
    pub const KEY_UPDATE: FrameType = FrameType(0x07);

    /// Whether this type is one this version of the protocol defines.
    pub fn is_known(self) -> bool {
        self.0 <= Self::KEY_UPDATE.0
    }

    /// Which stream ids this type may carry, or `None` for unknown types.
    #[inline]
    pub fn scope(self) -> Option<Scope> {
        match self {
            Self::DATA | Self::OPEN | Self::RESET => Some(Scope::Stream),
            Self::WINDOW_UPDATE => Some(Scope::Either),
            Self::PING | Self::GOAWAY | Self::HANDSHAKE | Self::KEY_UPDATE => {
                Some(Scope::Connection)
            }
            _ => None,
        }
    }

    /// A short upper-case name for logs, or `"UNKNOWN"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::DATA => "DATA",
            Self::OPEN => "OPEN",
            Self::RESET => "RESET",
            Self::WINDOW_UPDATE => "WINDOW_UPDATE",
            Self::PING => "PING",
            Self::GOAWAY => "GOAWAY",
            Self::HANDSHAKE => "HANDSHAKE",
            Self::KEY_UPDATE => "KEY_UPDATE",
            _ => "UNKNOWN",
        }
    }
}

impl std::fmt::Debug for FrameType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}(0x{:02x})", self.name(), self.0)
    }
}

/// Which stream ids a frame type may be sent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Only stream id 0.
    Connection,
    /// Only a non-zero stream id.
    Stream,
    /// Either.
    Either,
}

/// Frame flags: an open bit set. Unknown bits are preserved and ignored.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    /// No flags.
    pub const NONE: Flags = Flags(0);
    /// The sender will send nothing more on this stream (half-close).
    pub const END_STREAM: Flags = Flags(0x01);
    /// On `PING`: this is the answer.
    pub const ACK: Flags = Flags(0x02);
    /// The payload is deflate-compressed (only valid when negotiated).
    pub const COMPRESSED: Flags = Flags(0x04);
    /// Bits this version defines.
    pub const KNOWN: Flags = Flags(0x07);

    /// Whether every bit of `other` is set in `self`.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// `self` with the bits of `other` set.
    #[must_use]
    pub fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// `self` with the bits of `other` cleared.
    #[must_use]
    pub fn without(self, other: Flags) -> Flags {
        Flags(self.0 & !other.0)
    }

    /// Bits set that this version does not define.
    pub fn unknown_bits(self) -> u8 {
        self.0 & !Self::KNOWN.0
    }
}

impl std::fmt::Debug for Flags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Flags(0x{:02x})", self.0)
    }
}

/// A decoded frame header.
///
/// Wire layout (16 bytes, network byte order):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | version (1) |
/// | 1 | 1 | frame type |
/// | 2 | 1 | flags |
/// | 3 | 1 | reserved: sent as 0, ignored on receipt |
/// | 4 | 4 | stream id |
/// | 8 | 4 | metadata length |
/// | 12 | 4 | payload length |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The frame type.
    pub ty: FrameType,
    /// The flags.
    pub flags: Flags,
    /// The stream id; 0 is the connection.
    pub stream_id: u32,
    /// Length of the metadata block that follows the header.
    pub metadata_len: u32,
    /// Length of the payload that follows the metadata.
    pub payload_len: u32,
}

impl Header {
    /// Writes the header into exactly [`HEADER_LEN`] bytes.
    #[inline]
    pub fn write(&self, out: &mut [u8; HEADER_LEN]) {
        out[0] = VERSION;
        out[1] = self.ty.0;
        out[2] = self.flags.0;
        out[3] = 0;
        out[4..8].copy_from_slice(&self.stream_id.to_be_bytes());
        out[8..12].copy_from_slice(&self.metadata_len.to_be_bytes());
        out[12..16].copy_from_slice(&self.payload_len.to_be_bytes());
    }

    /// The header as its 16 wire bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0; HEADER_LEN];
        self.write(&mut out);
        out
    }

    /// Parses a header without checking it against any limit.
    ///
    /// Fails only on an unknown version.
    #[inline]
    pub fn parse(raw: &[u8; HEADER_LEN]) -> Result<Header, FrameError> {
        if raw[0] != VERSION {
            return Err(FrameError::UnsupportedVersion(raw[0]));
        }
        let word = |at: usize| u32::from_be_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
        Ok(Header {
            ty: FrameType(raw[1]),
            flags: Flags(raw[2]),
            stream_id: word(4),
            metadata_len: word(8),
            payload_len: word(12),
        })
    }

    /// Checks the header alone against `limits` and the stream-id scope of its
    /// type. `overhead` is how many bytes record protection adds to the payload
    /// on the wire (0 for plain frames, 16 for an AES-GCM tag).
    #[inline]
    pub fn check(&self, limits: &Limits, overhead: u32) -> Result<(), FrameError> {
        if self.metadata_len > limits.max_metadata {
            return Err(FrameError::MetadataTooLarge {
                len: self.metadata_len,
                max: limits.max_metadata,
            });
        }
        let max_payload = limits.max_payload.saturating_add(overhead);
        if self.payload_len > max_payload {
            return Err(FrameError::PayloadTooLarge {
                len: self.payload_len,
                max: max_payload,
            });
        }
        // The types' codes rather than `scope()`: its `Option<Scope>`
        // then matched again cost a jump table and a second branch, four
        // headers a call (`a_headers_scope_follows_its_type` pins the two
        // together).
        let scope_ok = match self.ty.0 {
            0x00..=0x02 => self.stream_id != CONNECTION_ID,
            0x04..=0x07 => self.stream_id == CONNECTION_ID,
            _ => true,
        };
        if !scope_ok {
            return Err(FrameError::WrongScope {
                ty: self.ty,
                stream_id: self.stream_id,
            });
        }
        Ok(())
    }

    /// Metadata plus payload length, as `usize`. Cannot overflow: both are
    /// `u32` and `usize` is at least 64 bits on supported targets, and callers
    /// check limits first.
    #[inline]
    pub fn body_len(&self) -> usize {
        self.metadata_len as usize + self.payload_len as usize
    }
}
