//! The connection preface each side sends first.

use crate::{FrameError, VERSION};

/// Length of the preface.
pub const PREFACE_LEN: usize = 8;

/// The preface: `"WEFT"`, the version, three zero bytes.
pub const PREFACE: [u8; PREFACE_LEN] = [b'W', b'E', b'F', b'T', VERSION, 0, 0, 0];

/// Checks a received preface. A wrong magic is [`FrameError::BadPreface`]
/// (garbage, an HTTP request, a TLS ClientHello...); the right magic with
/// another version is [`FrameError::UnsupportedVersion`]. The three reserved
/// bytes are ignored.
pub fn check_preface(raw: &[u8; PREFACE_LEN]) -> Result<(), FrameError> {
    if raw[..4] != PREFACE[..4] {
        return Err(FrameError::BadPreface);
    }
    if raw[4] != VERSION {
        return Err(FrameError::UnsupportedVersion(raw[4]));
    }
    Ok(())
}

/// Checks a partial preface as soon as its first bytes arrive, so garbage is
/// rejected within one read. `Ok(())` means "consistent so far".
pub fn check_preface_prefix(raw: &[u8]) -> Result<(), FrameError> {
    let n = raw.len().min(4);
    if raw[..n] != PREFACE[..n] {
        return Err(FrameError::BadPreface);
    }
    if raw.len() > 4 && raw[4] != VERSION {
        return Err(FrameError::UnsupportedVersion(raw[4]));
    }
    Ok(())
}
