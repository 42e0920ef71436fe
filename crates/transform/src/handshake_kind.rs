//! The first byte of a handshake message (which handshake it is), and the
//! rejection message a responder sends instead of failing silently
//! (docs/PROTOCOL.md sections 3.2 and 3.9).

use crate::noise::Pattern;

/// A plain hello: no key agreement, the offer in clear.
pub(crate) const PLAIN: u8 = 0x00;
/// `Noise_NN_25519_AESGCM_SHA256`.
pub(crate) const NN: u8 = 0x01;
/// `Noise_NNpsk0_25519_AESGCM_SHA256`.
pub(crate) const NN_PSK0: u8 = 0x02;
/// `Noise_XX_25519_AESGCM_SHA256`.
pub(crate) const XX: u8 = 0x03;
/// `Noise_XXpsk3_25519_AESGCM_SHA256`.
pub(crate) const XX_PSK3: u8 = 0x04;
/// `Noise_IK_25519_AESGCM_SHA256`.
pub(crate) const IK: u8 = 0x05;
/// `Noise_IKpsk2_25519_AESGCM_SHA256`.
pub(crate) const IK_PSK2: u8 = 0x06;
/// A rejection: one reason byte follows, nothing else.
pub(crate) const REJECT: u8 = 0xff;

/// The Noise pattern of a kind byte; `None` for a plain hello or an
/// unknown kind.
pub(crate) fn pattern(kind: u8) -> Option<Pattern> {
    Some(match kind {
        NN => Pattern::NN,
        NN_PSK0 => Pattern::NNpsk0,
        XX => Pattern::XX,
        XX_PSK3 => Pattern::XXpsk3,
        IK => Pattern::IK,
        IK_PSK2 => Pattern::IKpsk2,
        _ => return None,
    })
}

/// The kind an initiator with these credentials runs.
pub(crate) fn choose(psk: bool, identity: bool, pinned: bool, encryption_off: bool) -> u8 {
    match (identity, pinned, psk) {
        (true, true, false) => IK,
        (true, true, true) => IK_PSK2,
        (true, false, false) => XX,
        (true, false, true) => XX_PSK3,
        (false, _, true) => NN_PSK0,
        (false, _, false) if encryption_off => PLAIN,
        (false, _, false) => NN,
    }
}

/// Why a responder rejected a handshake: the byte after `ff` in its
/// rejection message (docs/PROTOCOL.md section 3.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// `01`: a message did not authenticate: the pre-shared keys differ,
    /// the client pinned another server key (IK), or it was tampered with.
    Authentication,
    /// `02`: the client's static key is not on the server's allow-list.
    KeyNotAllowed,
    /// `03`: the server has a key pair and accepts only peers with one.
    IdentityRequired,
    /// `04`: the client uses a key pair but the server has none.
    NoIdentity,
    /// `05`: one side has a pre-shared key and the other does not.
    PskMismatch,
    /// `06`: the message is malformed or of an unknown kind.
    Malformed,
    /// Any other byte (a newer peer's reason).
    Other(u8),
}

impl RejectReason {
    pub(crate) fn to_wire(self) -> u8 {
        match self {
            RejectReason::Authentication => 1,
            RejectReason::KeyNotAllowed => 2,
            RejectReason::IdentityRequired => 3,
            RejectReason::NoIdentity => 4,
            RejectReason::PskMismatch => 5,
            RejectReason::Malformed => 6,
            RejectReason::Other(b) => b,
        }
    }

    pub(crate) fn from_wire(b: u8) -> RejectReason {
        match b {
            1 => RejectReason::Authentication,
            2 => RejectReason::KeyNotAllowed,
            3 => RejectReason::IdentityRequired,
            4 => RejectReason::NoIdentity,
            5 => RejectReason::PskMismatch,
            6 => RejectReason::Malformed,
            other => RejectReason::Other(other),
        }
    }
}

/// The frame of a rejection: `HANDSHAKE` header, then `ff` and the reason.
pub(crate) fn reject_frame(reason: RejectReason) -> [u8; weft_frame::HEADER_LEN + 2] {
    let header = weft_frame::Header {
        ty: weft_frame::FrameType::HANDSHAKE,
        flags: weft_frame::Flags::NONE,
        stream_id: 0,
        metadata_len: 0,
        payload_len: 2,
    };
    let mut out = [0u8; weft_frame::HEADER_LEN + 2];
    out[..weft_frame::HEADER_LEN].copy_from_slice(&header.to_bytes());
    out[weft_frame::HEADER_LEN] = REJECT;
    out[weft_frame::HEADER_LEN + 1] = reason.to_wire();
    out
}

/// What the first bytes after an XX handshake are.
pub(crate) enum FirstFrame {
    /// Not enough bytes to tell.
    Unknown,
    /// The server's rejection of our key.
    Rejection(RejectReason),
    /// Anything else: decode it as usual.
    Other,
}

/// Looks at the start of `src` for a rejection (a whole `HANDSHAKE` frame
/// `ff <reason>`), without consuming anything.
pub(crate) fn peek_rejection(src: &[u8]) -> FirstFrame {
    const LEN: usize = weft_frame::HEADER_LEN + 2;
    let Some(header) = src.first_chunk::<{ weft_frame::HEADER_LEN }>() else {
        return FirstFrame::Unknown;
    };
    let is_reject_header = header[1] == weft_frame::FrameType::HANDSHAKE.0
        && header[12..] == 2u32.to_be_bytes()
        && header[4..12] == [0; 8];
    if !is_reject_header {
        return FirstFrame::Other;
    }
    match src.get(weft_frame::HEADER_LEN..LEN) {
        None => FirstFrame::Unknown,
        Some(&[REJECT, reason]) => FirstFrame::Rejection(RejectReason::from_wire(reason)),
        Some(_) => FirstFrame::Other,
    }
}
