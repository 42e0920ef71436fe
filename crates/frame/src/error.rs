//! The typed error for every malformed input the codec can see.

use crate::FrameType;

/// Why a frame, a preface or a control payload was rejected.
///
/// Every variant is caused by the peer (or by the transport, for
/// [`FrameError::Io`]); none is a bug in this crate. After any variant but
/// `Io` the byte stream is out of sync or the peer is misbehaving, so the
/// connection should be closed.
#[derive(Debug)]
#[non_exhaustive]
pub enum FrameError {
    /// The header names a protocol version this crate does not speak.
    UnsupportedVersion(u8),
    /// The connection preface is not weft's.
    BadPreface,
    /// The declared metadata length exceeds the configured maximum.
    MetadataTooLarge {
        /// Declared length.
        len: u32,
        /// Configured maximum.
        max: u32,
    },
    /// The declared payload length exceeds the configured maximum.
    PayloadTooLarge {
        /// Declared length.
        len: u32,
        /// Configured maximum (including record overhead, if any).
        max: u32,
    },
    /// A connection frame on a stream id, or a stream frame on stream 0.
    WrongScope {
        /// The frame type.
        ty: FrameType,
        /// The stream id it carried.
        stream_id: u32,
    },
    /// The metadata block is malformed.
    BadMetadata(MetadataError),
    /// A control frame's payload has the wrong size for its type.
    BadControlPayload {
        /// The frame type.
        ty: FrameType,
        /// The payload length received.
        len: usize,
    },
    /// The stream ended inside a frame (or inside the preface).
    Truncated {
        /// Bytes buffered when the stream ended.
        buffered: usize,
    },
    /// The underlying transport failed.
    Io(std::io::Error),
}

/// What is wrong with a metadata block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataError {
    /// An entry runs past the end of the block.
    Truncated,
    /// A custom entry has an empty key.
    EmptyKey,
    /// A well-known entry's value has the wrong length (e.g. a timeout that is not 8 bytes).
    BadLength,
    /// A text entry (method, message) is not UTF-8.
    NotUtf8,
    /// A well-known entry appears twice.
    Duplicate,
}

impl std::fmt::Display for MetadataError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MetadataError::Truncated => "entry runs past the end of the metadata block",
            MetadataError::EmptyKey => "custom entry with an empty key",
            MetadataError::BadLength => "well-known entry with a value of the wrong length",
            MetadataError::NotUtf8 => "text entry is not UTF-8",
            MetadataError::Duplicate => "well-known entry appears twice",
        })
    }
}

impl std::error::Error for MetadataError {}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::UnsupportedVersion(v) => write!(f, "unsupported protocol version {v}"),
            FrameError::BadPreface => f.write_str("not a weft connection preface"),
            FrameError::MetadataTooLarge { len, max } => {
                write!(f, "metadata length {len} exceeds the limit of {max}")
            }
            FrameError::PayloadTooLarge { len, max } => {
                write!(f, "payload length {len} exceeds the limit of {max}")
            }
            FrameError::WrongScope { ty, stream_id } => {
                write!(
                    f,
                    "{} frame not allowed on stream id {stream_id}",
                    ty.name()
                )
            }
            FrameError::BadMetadata(e) => write!(f, "malformed metadata: {e}"),
            FrameError::BadControlPayload { ty, len } => {
                write!(f, "{} frame with a {len}-byte payload", ty.name())
            }
            FrameError::Truncated { buffered } => {
                write!(
                    f,
                    "connection ended inside a frame ({buffered} bytes buffered)"
                )
            }
            FrameError::Io(e) => write!(f, "transport error: {e}"),
        }
    }
}

impl std::error::Error for FrameError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FrameError::Io(e) => Some(e),
            FrameError::BadMetadata(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for FrameError {
    fn from(e: std::io::Error) -> Self {
        FrameError::Io(e)
    }
}

impl From<MetadataError> for FrameError {
    fn from(e: MetadataError) -> Self {
        FrameError::BadMetadata(e)
    }
}
