//! The admission refusal: what a busy responder sends instead of its
//! handshake message (docs/PROTOCOL.md section 3.10), and how the initiator
//! recognises it.
//!
//! The refusal is the responder's preface followed by an unencrypted
//! `GOAWAY(last stream id 0, reason, debug text)`. It is not authenticated
//! (no key exists yet): anyone on the path could forge one, but anyone on
//! the path can also just close the connection, so it tells the initiator
//! nothing it could not already suffer. With reason `REFUSED_STREAM` it
//! means "busy, nothing was processed: retry later".

use bytes::{BufMut, BytesMut};
use weft_frame::preface::PREFACE;
use weft_frame::{Flags, FrameType, HEADER_LEN, Header, Reason};

use crate::error::{HandshakeError, HandshakeErrorKind};

/// Longest debug text a refusal carries; longer text is cut.
pub const MAX_REFUSAL_TEXT: usize = 128;

/// The bytes a responder sends to refuse a connection before the handshake:
/// its preface (unless `preface_sent`) and a `GOAWAY` with `reason` and
/// `text` (cut to [`MAX_REFUSAL_TEXT`] bytes). Use
/// [`Reason::REFUSED_STREAM`] for a refusal that is safe to retry.
pub fn refusal(reason: Reason, text: &str, preface_sent: bool) -> BytesMut {
    let text = &text.as_bytes()[..text.len().min(MAX_REFUSAL_TEXT)];
    let mut out = BytesMut::with_capacity(PREFACE.len() + HEADER_LEN + 8 + text.len());
    if !preface_sent {
        out.put_slice(&PREFACE);
    }
    let header = Header {
        ty: FrameType::GOAWAY,
        flags: Flags::NONE,
        stream_id: 0,
        metadata_len: 0,
        payload_len: (8 + text.len()) as u32,
    };
    out.put_slice(&header.to_bytes());
    out.put_u32(0);
    out.put_u32(reason.0);
    out.put_slice(text);
    out
}

/// Whether `h`, read where the initiator expects the responder's handshake
/// frame, is a well-formed refusal header (connection scope, no metadata,
/// 8 to 8 + [`MAX_REFUSAL_TEXT`] bytes of payload).
pub(crate) fn is_refusal_header(h: &Header) -> bool {
    h.ty == FrameType::GOAWAY
        && h.flags == Flags::NONE
        && h.stream_id == 0
        && h.metadata_len == 0
        && (8..=8 + MAX_REFUSAL_TEXT as u32).contains(&h.payload_len)
}

/// The handshake error a refusal payload (`GOAWAY` body) stands for.
pub(crate) fn refused(payload: &[u8]) -> HandshakeError {
    let reason = payload.get(4..8).map_or(Reason::INTERNAL_ERROR, |b| {
        Reason(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    });
    let text = payload.get(8..).unwrap_or_default();
    let text: String = String::from_utf8_lossy(text)
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    HandshakeError::new(HandshakeErrorKind::Refused { reason, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_parse() {
        let r = refusal(Reason::REFUSED_STREAM, "busy", false);
        assert_eq!(&r[..8], &PREFACE);
        let h = Header::parse(r[8..24].try_into().unwrap()).unwrap();
        assert!(is_refusal_header(&h));
        assert_eq!(h.payload_len, 12);
        let e = refused(&r[24..]);
        assert!(e.is_refused() && e.is_retry_safe());
        assert!(e.to_string().contains("busy"), "{e}");
        assert!(e.to_string().contains("safe to retry"), "{e}");
        let r = refusal(Reason::ENHANCE_YOUR_CALM, &"x".repeat(500), true);
        assert_eq!(r.len(), HEADER_LEN + 8 + MAX_REFUSAL_TEXT);
        let e = refused(&r[HEADER_LEN..]);
        assert!(e.is_refused() && !e.is_retry_safe());
    }

    #[test]
    fn a_refusal_header_carries_8_to_8_plus_max_text_bytes() {
        let header = |payload_len| Header {
            ty: FrameType::GOAWAY,
            flags: Flags::NONE,
            stream_id: 0,
            metadata_len: 0,
            payload_len,
        };
        let max = 8 + MAX_REFUSAL_TEXT as u32;
        for (len, refusal) in [(7, false), (8, true), (max, true), (max + 1, false)] {
            assert_eq!(is_refusal_header(&header(len)), refusal, "{len}");
        }
    }

    #[test]
    fn an_initiator_recognises_a_refusal_after_or_without_a_preface() {
        use crate::{Handshake, HandshakeConfig, Role};
        for preface_sent in [false, true] {
            let mut hs = Handshake::new(Role::Initiator, HandshakeConfig::default()).unwrap();
            let mut out = BytesMut::new();
            hs.poll_transmit(&mut out);
            let mut input = BytesMut::new();
            if preface_sent {
                input.put_slice(&PREFACE);
            }
            input.extend_from_slice(&refusal(Reason::REFUSED_STREAM, "busy", preface_sent));
            let e = hs.handle_input(&mut input).unwrap_err();
            assert!(e.is_retry_safe(), "{e}");
        }
        // A responder never takes a GOAWAY for a handshake message.
        let mut hs = Handshake::new(Role::Responder, HandshakeConfig::default()).unwrap();
        let mut input = refusal(Reason::REFUSED_STREAM, "busy", false);
        let e = hs.handle_input(&mut input).unwrap_err();
        assert!(e.is_protocol() && !e.is_refused(), "{e}");
    }
}
