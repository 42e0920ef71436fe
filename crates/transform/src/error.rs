//! The two public errors: [`TransformError`] for frames after the handshake,
//! [`HandshakeError`] for the handshake. Both are opaque structs over a
//! private kind, with predicates.

use weft_frame::{FrameError, FrameType, Reason};

use crate::KeyHex;
use crate::handshake_kind::RejectReason;

/// Why a frame could not be sealed, opened or (de)compressed.
///
/// Either fatal ([`is_fatal`](Self::is_fatal): close the connection) or
/// confined to one frame ([`stream_id`](Self::stream_id) is `Some`: reset
/// that stream with [`reason`](Self::reason) and go on).
#[derive(Debug)]
pub struct TransformError {
    kind: TransformErrorKind,
}

/// What went wrong; private so variants can be added.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum TransformErrorKind {
    /// Framing failed (bad header, over a limit, truncated).
    Frame(FrameError),
    /// A record did not authenticate (tampered, reordered, replayed, wrong key).
    Open,
    /// A record's payload is shorter than the authentication tag.
    ShortRecord,
    /// The nonces of the send direction are used up: no key update is
    /// possible (2^64 - 1 records; never in practice).
    SendLimit,
    /// The peer sent more records or bytes under one key than the hard
    /// per-key limits allow (it did not update its key in time).
    ReceiveLimit,
    /// A `KEY_UPDATE` record that authenticated but is malformed or out of
    /// order, or one handed to the sending half by its caller.
    KeyUpdate(&'static str),
    /// A sealed batch that authenticated but is malformed (a frame cut by
    /// its end, a type that never rides in one, a header with flags), or
    /// one misused by the sending half's caller.
    Batch(&'static str),
    /// The server rejected our static key after the last handshake message
    /// (XX): its rejection arrived as the first frame.
    Rejected {
        reason: RejectReason,
        our_key: Option<[u8; 32]>,
    },
    /// `COMPRESSED` on a connection that did not negotiate compression, or on
    /// a frame type that never carries a compressed payload.
    UnexpectedCompression,
    /// A compressed payload failed to decompress; confined to its frame.
    Decompress {
        /// `OPEN` or `DATA`: an `OPEN` still opens its stream id.
        ty: FrameType,
        stream_id: u32,
        why: DecompressError,
    },
    /// An earlier fatal error left this half unusable.
    Poisoned,
}

/// Why one compressed payload was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecompressError {
    /// Inflating would exceed `limit` bytes (size or ratio limit): a bomb.
    TooLarge { limit: usize },
    /// Not valid deflate data.
    Corrupt,
    /// The deflate stream ends before its final block.
    Truncated,
    /// Bytes follow the end of the deflate stream.
    TrailingData,
}

impl TransformError {
    pub(crate) fn new(kind: TransformErrorKind) -> TransformError {
        TransformError { kind }
    }

    /// Whether the connection must be closed: framing errors, authentication
    /// failures, the record limit, an unexpected compressed flag. After a
    /// fatal error the half that returned it returns errors for good (but
    /// for the one `GOAWAY` the send limit keeps a record for).
    pub fn is_fatal(&self) -> bool {
        !matches!(self.kind, TransformErrorKind::Decompress { .. })
    }

    /// The stream whose frame failed, for errors confined to one frame (a
    /// decompression bomb, corrupt deflate data): reset that stream with
    /// [`Reason::COMPRESSION_ERROR`] and keep the connection.
    pub fn stream_id(&self) -> Option<u32> {
        match self.kind {
            TransformErrorKind::Decompress { stream_id, .. } => Some(stream_id),
            _ => None,
        }
    }

    /// The type of the frame that failed, for errors confined to one frame
    /// (`OPEN` or `DATA`): a receiver treats a failed `OPEN` as opening its
    /// id, then resets it, so later frames on it are late, not unknown.
    pub fn frame_type(&self) -> Option<FrameType> {
        match self.kind {
            TransformErrorKind::Decompress { ty, .. } => Some(ty),
            _ => None,
        }
    }

    /// The wire reason to send (in `RESET` for per-frame errors, `GOAWAY`
    /// for fatal ones).
    pub fn reason(&self) -> Reason {
        match &self.kind {
            TransformErrorKind::Frame(e) => match e {
                FrameError::MetadataTooLarge { .. } | FrameError::PayloadTooLarge { .. } => {
                    Reason::FRAME_SIZE_ERROR
                }
                FrameError::Io(_) => Reason::INTERNAL_ERROR,
                _ => Reason::PROTOCOL_ERROR,
            },
            TransformErrorKind::SendLimit => Reason::NO_ERROR,
            TransformErrorKind::Decompress { .. } => Reason::COMPRESSION_ERROR,
            TransformErrorKind::UnexpectedCompression
            | TransformErrorKind::Open
            | TransformErrorKind::ShortRecord
            | TransformErrorKind::ReceiveLimit
            | TransformErrorKind::KeyUpdate(_)
            | TransformErrorKind::Batch(_)
            | TransformErrorKind::Rejected { .. }
            | TransformErrorKind::Poisoned => Reason::PROTOCOL_ERROR,
        }
    }

    /// Whether a record failed authentication (tampering, reordering, replay,
    /// wrong key). Always fatal.
    pub fn is_authentication(&self) -> bool {
        matches!(self.kind, TransformErrorKind::Open)
    }

    /// Whether a key limit ended the connection: our nonces are used up
    /// so no key update is possible (never in practice), or the peer
    /// exceeded a hard per-key limit without updating its key. Always
    /// fatal. A healthy connection never sees it: keys are updated long
    /// before (see [`RekeyLimits`](crate::RekeyLimits)).
    pub fn is_record_limit(&self) -> bool {
        matches!(
            self.kind,
            TransformErrorKind::SendLimit | TransformErrorKind::ReceiveLimit
        )
    }

    /// Whether a `KEY_UPDATE` record was malformed or out of order (one that
    /// fails to authenticate is [`is_authentication`](Self::is_authentication)).
    /// Always fatal.
    pub fn is_key_update(&self) -> bool {
        matches!(self.kind, TransformErrorKind::KeyUpdate(_))
    }

    /// Whether a sealed batch was malformed (one that fails to
    /// authenticate is [`is_authentication`](Self::is_authentication)).
    /// Always fatal.
    pub fn is_batch(&self) -> bool {
        matches!(self.kind, TransformErrorKind::Batch(_))
    }

    /// Why the server rejected this client after the last handshake
    /// message (Noise XX: a key not on its allow-list, or a pre-shared key
    /// that differs). Always fatal.
    pub fn rejected(&self) -> Option<RejectReason> {
        match self.kind {
            TransformErrorKind::Rejected { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// Whether a compressed payload would exceed the size or ratio limit.
    pub fn is_decompression_limit(&self) -> bool {
        matches!(
            self.kind,
            TransformErrorKind::Decompress {
                why: DecompressError::TooLarge { .. },
                ..
            }
        )
    }

    /// Whether the input ended inside a frame.
    pub fn is_truncated(&self) -> bool {
        matches!(
            self.kind,
            TransformErrorKind::Frame(FrameError::Truncated { .. })
        )
    }

    /// The framing error underneath, if any.
    pub fn frame_error(&self) -> Option<&FrameError> {
        match &self.kind {
            TransformErrorKind::Frame(e) => Some(e),
            _ => None,
        }
    }
}

impl From<FrameError> for TransformError {
    fn from(e: FrameError) -> Self {
        TransformError::new(TransformErrorKind::Frame(e))
    }
}

impl std::fmt::Display for TransformError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            TransformErrorKind::Frame(e) => write!(f, "framing error: {e}"),
            TransformErrorKind::Open => f.write_str("record failed authentication"),
            TransformErrorKind::ShortRecord => {
                f.write_str("record shorter than its authentication tag")
            }
            TransformErrorKind::SendLimit => f.write_str(
                "nonces of this direction used up, no key update possible: open a new connection",
            ),
            TransformErrorKind::ReceiveLimit => {
                f.write_str("peer exceeded the per-key record or byte limit without a key update")
            }
            TransformErrorKind::KeyUpdate(what) => write!(f, "bad key update: {what}"),
            TransformErrorKind::Batch(what) => write!(f, "bad sealed batch: {what}"),
            TransformErrorKind::Rejected { reason, our_key } => {
                f.write_str("handshake failed: ")?;
                rejected_text(f, *reason, our_key.as_ref(), None)
            }
            TransformErrorKind::UnexpectedCompression => {
                f.write_str("compressed frame where compression was not negotiated")
            }
            TransformErrorKind::Decompress { stream_id, why, .. } => {
                write!(f, "stream {stream_id}: ")?;
                match why {
                    DecompressError::TooLarge { limit } => {
                        write!(f, "payload inflates beyond the limit of {limit} bytes")
                    }
                    DecompressError::Corrupt => f.write_str("invalid deflate data"),
                    DecompressError::Truncated => f.write_str("truncated deflate data"),
                    DecompressError::TrailingData => {
                        f.write_str("data after the end of the deflate stream")
                    }
                }
            }
            TransformErrorKind::Poisoned => {
                f.write_str("connection unusable after an earlier fatal error")
            }
        }
    }
}

impl std::error::Error for TransformError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            TransformErrorKind::Frame(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a handshake failed.
///
/// Authentication failures (wrong pre-shared key, a tampered message, a
/// replay that cannot complete) all show the same generic text, so the error
/// never helps anyone guess a key.
#[derive(Debug, Clone)]
pub struct HandshakeError {
    kind: HandshakeErrorKind,
}

/// What went wrong; private so variants can be added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum HandshakeErrorKind {
    /// The peer's first bytes are not weft's preface (garbage, HTTP, TLS).
    BadPreface,
    /// The peer speaks another protocol version.
    UnsupportedVersion(u8),
    /// A handshake frame or message is malformed, empty or oversize.
    Malformed(&'static str),
    /// A message failed to authenticate (wrong pre-shared key, tampering).
    Authentication,
    /// The peer's key share is invalid (all-zero or small-order result).
    InvalidKeyShare,
    /// One side requires encryption, the other has it off.
    EncryptionRequired { by_us: bool },
    /// One side has a pre-shared key and the other does not.
    PskMismatch { ours: bool },
    /// The responder's selection does not follow from the two offers.
    SelectionMismatch,
    /// Our configuration is unusable.
    Config(&'static str),
    /// `into_session` before the handshake completed.
    Incomplete,
    /// The system random number generator failed.
    Rng,
    /// The peer sent a rejection: why, our static key (if any) and the
    /// server key we pinned (if any), so the text can name them.
    Rejected {
        reason: RejectReason,
        our_key: Option<[u8; 32]>,
        pinned: Option<[u8; 32]>,
    },
    /// Responder: the client's static key is not on the allow-list.
    KeyNotAllowed([u8; 32]),
    /// One side has a static key pair and the other does not.
    IdentityMismatch { ours: bool },
    /// IK initiator: the reply did not authenticate, so the server did not
    /// prove it holds the pinned key.
    ServerKeyNotProven { pinned: [u8; 32] },
    /// IK responder: the first message did not decrypt with our static key
    /// (the client pinned another key, its pre-shared key differs, or the
    /// message was tampered with).
    NotForOurKey { ours: [u8; 32] },
    /// The responder refused the connection before the handshake (busy,
    /// connection cap, per-address limit): its `GOAWAY` reason and text.
    Refused { reason: Reason, text: String },
}

/// The text of a peer's rejection, naming the keys involved.
fn rejected_text(
    f: &mut std::fmt::Formatter<'_>,
    reason: RejectReason,
    our_key: Option<&[u8; 32]>,
    pinned: Option<&[u8; 32]>,
) -> std::fmt::Result {
    f.write_str("the peer rejected the handshake: ")?;
    match reason {
        RejectReason::KeyNotAllowed => match our_key {
            Some(k) => write!(f, "our key {} is not on its allow-list", KeyHex(k)),
            None => f.write_str("our key is not on its allow-list"),
        },
        RejectReason::Authentication => match pinned {
            Some(k) => write!(
                f,
                "it could not authenticate us (it does not hold the pinned server key {}, or the pre-shared keys differ)",
                KeyHex(k)
            ),
            None => f.write_str("it could not authenticate us (the pre-shared keys differ)"),
        },
        RejectReason::IdentityRequired => {
            f.write_str("it requires a client key pair and none is configured here")
        }
        RejectReason::NoIdentity => {
            f.write_str("we use a key pair but the peer has none configured")
        }
        RejectReason::PskMismatch => {
            f.write_str("one side has a pre-shared key and the other does not")
        }
        RejectReason::Malformed => f.write_str("it found our handshake malformed"),
        RejectReason::Other(b) => write!(f, "reason {b}"),
    }
}

impl HandshakeError {
    pub(crate) fn new(kind: HandshakeErrorKind) -> HandshakeError {
        HandshakeError { kind }
    }

    /// Whether the peer failed to prove it holds our pre-shared key, or a
    /// handshake message was tampered with. Deliberately not more specific.
    pub fn is_authentication(&self) -> bool {
        matches!(
            self.kind,
            HandshakeErrorKind::Authentication
                | HandshakeErrorKind::InvalidKeyShare
                | HandshakeErrorKind::SelectionMismatch
                | HandshakeErrorKind::ServerKeyNotProven { .. }
                | HandshakeErrorKind::NotForOurKey { .. }
                | HandshakeErrorKind::Rejected {
                    reason: RejectReason::Authentication,
                    ..
                }
        )
    }

    /// The static key that was rejected: on the server, the client's key
    /// that is not on the allow-list; on the client, its own key the
    /// server rejected, or the pinned server key the server did not prove.
    pub fn rejected_key(&self) -> Option<[u8; 32]> {
        match self.kind {
            HandshakeErrorKind::KeyNotAllowed(k) => Some(k),
            HandshakeErrorKind::ServerKeyNotProven { pinned } => Some(pinned),
            HandshakeErrorKind::Rejected {
                reason: RejectReason::KeyNotAllowed,
                our_key,
                ..
            } => our_key,
            HandshakeErrorKind::Rejected {
                reason: RejectReason::Authentication,
                pinned,
                ..
            } => pinned,
            _ => None,
        }
    }

    /// The reason the peer sent with its rejection, if it sent one.
    pub fn peer_rejection(&self) -> Option<RejectReason> {
        match self.kind {
            HandshakeErrorKind::Rejected { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// Whether the two sides' policies are incompatible: encryption required
    /// against off, or a pre-shared key on one side only. Fix the
    /// configuration; retrying will fail the same way.
    pub fn is_policy_conflict(&self) -> bool {
        matches!(
            self.kind,
            HandshakeErrorKind::EncryptionRequired { .. }
                | HandshakeErrorKind::PskMismatch { .. }
                | HandshakeErrorKind::IdentityMismatch { .. }
                | HandshakeErrorKind::Rejected {
                    reason: RejectReason::IdentityRequired
                        | RejectReason::NoIdentity
                        | RejectReason::PskMismatch,
                    ..
                }
        )
    }

    /// Whether the peer is not speaking weft (bad preface, other version,
    /// malformed handshake frames).
    pub fn is_protocol(&self) -> bool {
        matches!(
            self.kind,
            HandshakeErrorKind::BadPreface
                | HandshakeErrorKind::UnsupportedVersion(_)
                | HandshakeErrorKind::Malformed(_)
        )
    }

    /// Whether our own configuration is unusable.
    pub fn is_config(&self) -> bool {
        matches!(self.kind, HandshakeErrorKind::Config(_))
    }

    /// What is wrong with our configuration (and what to add), when
    /// [`is_config`](Self::is_config).
    pub fn config_problem(&self) -> Option<&'static str> {
        match self.kind {
            HandshakeErrorKind::Config(what) => Some(what),
            _ => None,
        }
    }

    /// Whether the responder refused the connection before any handshake
    /// work (its admission limits: busy, connection cap, per-address limit).
    pub fn is_refused(&self) -> bool {
        matches!(self.kind, HandshakeErrorKind::Refused { .. })
    }

    /// Whether the responder said retrying is safe: a refusal with
    /// `REFUSED_STREAM` (nothing was processed; retry after a backoff).
    pub fn is_retry_safe(&self) -> bool {
        matches!(
            self.kind,
            HandshakeErrorKind::Refused {
                reason: Reason::REFUSED_STREAM,
                ..
            }
        )
    }
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("handshake failed: ")?;
        match &self.kind {
            HandshakeErrorKind::BadPreface => f.write_str("peer is not speaking weft"),
            HandshakeErrorKind::UnsupportedVersion(v) => {
                write!(f, "peer speaks protocol version {v}")
            }
            HandshakeErrorKind::Malformed(what) => write!(f, "malformed handshake: {what}"),
            HandshakeErrorKind::Authentication
            | HandshakeErrorKind::InvalidKeyShare
            | HandshakeErrorKind::SelectionMismatch => f.write_str("authentication failed"),
            HandshakeErrorKind::EncryptionRequired { by_us: true } => {
                f.write_str("encryption is required here but the peer has it off")
            }
            HandshakeErrorKind::EncryptionRequired { by_us: false } => {
                f.write_str("the peer requires encryption but it is off here")
            }
            HandshakeErrorKind::PskMismatch { ours: true } => {
                f.write_str("a pre-shared key is configured here but not on the peer")
            }
            HandshakeErrorKind::PskMismatch { ours: false } => {
                f.write_str("the peer uses a pre-shared key but none is configured here")
            }
            HandshakeErrorKind::Config(what) => write!(f, "invalid configuration: {what}"),
            HandshakeErrorKind::Incomplete => f.write_str("handshake not complete"),
            HandshakeErrorKind::Rng => f.write_str("random number generator failed"),
            HandshakeErrorKind::Rejected {
                reason,
                our_key,
                pinned,
            } => rejected_text(f, *reason, our_key.as_ref(), pinned.as_ref()),
            HandshakeErrorKind::KeyNotAllowed(k) => {
                write!(f, "client key {} is not on the allow-list", KeyHex(k))
            }
            HandshakeErrorKind::IdentityMismatch { ours: true } => {
                f.write_str("a key pair is configured here but the peer has none")
            }
            HandshakeErrorKind::IdentityMismatch { ours: false } => {
                f.write_str("the peer uses a key pair but none is configured here")
            }
            HandshakeErrorKind::ServerKeyNotProven { pinned } => write!(
                f,
                "authentication failed: the server did not prove it holds the pinned key {}",
                KeyHex(pinned)
            ),
            HandshakeErrorKind::NotForOurKey { ours } => write!(
                f,
                "authentication failed: the client's message is not for this server's key {} (it pinned another key, or the pre-shared keys differ)",
                KeyHex(ours)
            ),
            HandshakeErrorKind::Refused { reason, text } => {
                write!(f, "the server refused the connection ({reason}")?;
                if !text.is_empty() {
                    write!(f, ": {text}")?;
                }
                if *reason == Reason::REFUSED_STREAM {
                    f.write_str("); safe to retry after a backoff")
                } else {
                    f.write_str(")")
                }
            }
        }
    }
}

impl std::error::Error for HandshakeError {}
