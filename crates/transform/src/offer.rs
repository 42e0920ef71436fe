//! The offer each side sends inside the handshake, and the selection rule.
//!
//! Wire layout of an offer (20 bytes, network byte order):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | offer format, `01` |
//! | 1 | 1 | encryption: 0 off, 1 preferred, 2 required |
//! | 2 | 1 | compression: 0 no, 1 yes |
//! | 3 | 1 | reserved, `00` |
//! | 4 | 4 | max payload |
//! | 8 | 4 | max metadata |
//! | 12 | 4 | max message (decompressed) |
//! | 16 | 4 | max decompression ratio |
//!
//! Each limit has a range ([`check_limits`]): an offer outside it is
//! malformed, and the responder rejects it in the handshake (`ff 06`,
//! docs/PROTOCOL.md 3.4) instead of failing later on a frame it cannot
//! send within the peer's limits.

use weft_frame::{Limits, MAX_MAX_PAYLOAD, MIN_MAX_PAYLOAD};

use crate::error::{HandshakeError, HandshakeErrorKind};
use crate::{EncryptionPolicy, HandshakeConfig};

/// Encoded length of an offer.
pub(crate) const OFFER_LEN: usize = 20;
/// Smallest max metadata an offer may carry, in bytes: every block the
/// protocol itself sends fits in it (the settings frame's 40 bytes; on a
/// call's `OPEN` the method, up to 259 bytes, the timeout, the codec and a
/// `traceparent`, under 400 bytes together; a status code and a short
/// message). Below it a connection could not even exchange settings.
pub const MIN_MAX_METADATA: u32 = 1024;
/// The offer format this version writes.
const OFFER_FORMAT: u8 = 1;

/// Selection bit: records are encrypted.
pub(crate) const SELECT_ENCRYPTED: u8 = 0x01;
/// Selection bit: compression is on.
pub(crate) const SELECT_COMPRESSED: u8 = 0x02;
/// Selection value: the responder refuses (encryption required against off).
pub(crate) const SELECT_REFUSED: u8 = 0x80;

/// An offer as it travels: the policy plus the effective limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WireOffer {
    pub(crate) encryption: EncryptionPolicy,
    pub(crate) compression: bool,
    pub(crate) limits: Limits,
    pub(crate) max_message: u32,
    pub(crate) max_ratio: u32,
}

fn malformed(what: &'static str) -> HandshakeError {
    HandshakeError::new(HandshakeErrorKind::Malformed(what))
}

impl WireOffer {
    /// Our offer: the policy and the limits our decoder will enforce.
    pub(crate) fn from_config(config: &HandshakeConfig) -> Result<WireOffer, HandshakeError> {
        let max_payload = config.offer.max_payload.min(config.limits.max_payload);
        let config_err = |what| HandshakeError::new(HandshakeErrorKind::Config(what));
        let offer = WireOffer {
            encryption: config.offer.encryption,
            compression: config.offer.compression,
            limits: Limits {
                max_payload,
                max_metadata: config.limits.max_metadata,
            },
            max_message: config.offer.max_message,
            max_ratio: config.max_ratio,
        };
        // A peer would reject an offer out of range: say so before dialling.
        check_limits(&offer).map_err(config_err)?;
        config.rekey.check().map_err(config_err)?;
        Ok(offer)
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.push(OFFER_FORMAT);
        out.push(self.encryption.to_wire());
        out.push(u8::from(self.compression));
        out.push(0);
        out.extend_from_slice(&self.limits.max_payload.to_be_bytes());
        out.extend_from_slice(&self.limits.max_metadata.to_be_bytes());
        out.extend_from_slice(&self.max_message.to_be_bytes());
        out.extend_from_slice(&self.max_ratio.to_be_bytes());
    }

    /// Parses exactly [`OFFER_LEN`] bytes.
    pub(crate) fn decode(raw: &[u8]) -> Result<WireOffer, HandshakeError> {
        let raw: &[u8; OFFER_LEN] = raw.try_into().map_err(|_| malformed("offer length"))?;
        if raw[0] != OFFER_FORMAT || raw[3] != 0 {
            return Err(malformed("offer format"));
        }
        let encryption =
            EncryptionPolicy::from_wire(raw[1]).ok_or(malformed("encryption policy"))?;
        let compression = match raw[2] {
            0 => false,
            1 => true,
            _ => return Err(malformed("compression flag")),
        };
        let word = |at: usize| u32::from_be_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
        let offer = WireOffer {
            encryption,
            compression,
            limits: Limits {
                max_payload: word(4),
                max_metadata: word(8),
            },
            max_message: word(12),
            max_ratio: word(16),
        };
        check_limits(&offer).map_err(malformed)?;
        Ok(offer)
    }
}

/// The range of each limit in an offer (docs/PROTOCOL.md 3.4); `Err`
/// names the first one outside it. Max payload: 16 KiB to 1 MiB; max
/// metadata: at least [`MIN_MAX_METADATA`]; max message and max ratio:
/// at least 1 (no upper bound: a frame's payload is bounded by max
/// payload anyway).
pub(crate) fn check_limits(offer: &WireOffer) -> Result<(), &'static str> {
    if !(MIN_MAX_PAYLOAD..=MAX_MAX_PAYLOAD).contains(&offer.limits.max_payload) {
        return Err("offer max payload outside 16 KiB to 1 MiB");
    }
    if offer.limits.max_metadata < MIN_MAX_METADATA {
        return Err("offer max metadata below 1,024 bytes");
    }
    if offer.max_message == 0 {
        return Err("offer max message of 0");
    }
    if offer.max_ratio == 0 {
        return Err("offer max ratio of 0");
    }
    Ok(())
}

/// The selection rule: encryption on iff neither side is off, compression on
/// iff both offer it. `Err` when one side requires encryption and the other
/// has it off (`by_us` says whether we are the one requiring it).
pub(crate) fn select(ours: &WireOffer, theirs: &WireOffer) -> Result<u8, HandshakeError> {
    use EncryptionPolicy::{Off, Required};
    match (ours.encryption, theirs.encryption) {
        (Required, Off) => {
            return Err(HandshakeError::new(
                HandshakeErrorKind::EncryptionRequired { by_us: true },
            ));
        }
        (Off, Required) => {
            return Err(HandshakeError::new(
                HandshakeErrorKind::EncryptionRequired { by_us: false },
            ));
        }
        _ => {}
    }
    let mut sel = 0;
    if ours.encryption != Off && theirs.encryption != Off {
        sel |= SELECT_ENCRYPTED;
    }
    if ours.compression && theirs.compression {
        sel |= SELECT_COMPRESSED;
    }
    Ok(sel)
}
