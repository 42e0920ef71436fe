//! The last metadata block a decoder validated, so that a block repeating
//! it byte for byte is not walked again.
//!
//! A client sends the same `OPEN` block for every call of a method that
//! carries no timeout (its method name, and for a typed call its codec),
//! and a unary workload repeats a few such blocks. Whether a block is
//! valid depends on its bytes alone, so a block equal to one that passed
//! passes too: one length test and one compare of a few dozen bytes
//! stand in for the walk of its entries.
//!
//! Bounds: one block of at most [`REPEAT_MAX`] bytes per decoder (its
//! room allocated once, when the first block is kept; nothing per call),
//! so per connection and never shared between peers. Only a block that
//! passed is kept; a block that differs in any byte, or is longer, is
//! validated in full. Worst case per block
//! (a peer alternating blocks): today's walk plus a length test, a
//! compare of at most [`REPEAT_MAX`] bytes when the lengths match, and a
//! copy of at most [`REPEAT_MAX`] bytes when it passes.

use bytes::{Buf, Bytes};

use super::{Metadata, OK_STATUS, validate};
use crate::MetadataError;

/// Longest block a [`LastValid`] keeps: a method name of about 40 bytes
/// and a typed call's codec entry fit. Longer blocks usually carry trace
/// context, which differs per call, so keeping them would buy nothing.
pub const REPEAT_MAX: usize = 64;

/// The last block a decoder validated (see the [module docs](self)).
///
/// One pointer wide: it sits in every connection's decoder, and in the
/// connection state the decoder is part of; the block's room is
/// allocated when the first block that passes is kept (once per
/// connection, never on a decoder that sees no metadata).
#[derive(Clone, Default)]
pub struct LastValid {
    kept: Option<Box<Kept>>,
}

/// A kept block: `block[..len]`.
#[derive(Clone)]
struct Kept {
    len: usize,
    block: [u8; REPEAT_MAX],
}

impl std::fmt::Debug for LastValid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LastValid")
            .field("kept_len", &self.kept_len())
            .finish_non_exhaustive()
    }
}

impl LastValid {
    /// Nothing kept yet.
    pub const fn new() -> LastValid {
        LastValid { kept: None }
    }

    /// Wraps and validates an encoded block, as [`Metadata::from_bytes`]
    /// does (same result, same errors), skipping the walk when `raw`
    /// equals the last block that passed here. Allocates nothing, except
    /// the block's room the first time one is kept.
    #[inline(always)]
    pub fn metadata(&mut self, raw: Bytes) -> Result<Metadata, MetadataError> {
        if Metadata::needs_walk(&raw) && !self.is_kept(&raw) {
            validate(&raw)?;
            self.keep(&raw);
        }
        Ok(Metadata { raw })
    }

    /// Takes the first `len` bytes of `body` (a frame's body, metadata
    /// then payload) as its metadata block, checked as
    /// [`metadata`](Self::metadata) does, leaving the payload in `body`.
    ///
    /// The ok status alone (a successful call's usual trailers, see
    /// [`Metadata::ok_status`]) is answered with the static block and
    /// stepped over, not split off: a split clones the frame's share of
    /// the read buffer (a reference count taken per frame, and given back
    /// when the block is dropped), which for this block is all the
    /// metadata costs. Same result and errors as splitting first.
    ///
    /// # Panics
    /// If `body` is shorter than `len` (the codec splits a frame's body
    /// to its header's lengths, so it never is).
    #[inline(always)]
    pub fn split_from(&mut self, body: &mut Bytes, len: usize) -> Result<Metadata, MetadataError> {
        if len == OK_STATUS.len() && body.starts_with(OK_STATUS) {
            body.advance(len);
            return Ok(Metadata::ok_status());
        }
        self.metadata(body.split_to(len))
    }

    /// The kept block's length, if one is kept.
    fn kept_len(&self) -> Option<usize> {
        self.kept.as_ref().map(|k| k.len)
    }

    /// Whether `raw` is the kept block: lengths first, then every byte.
    #[inline(always)]
    fn is_kept(&self, raw: &[u8]) -> bool {
        self.kept
            .as_ref()
            .is_some_and(|k| k.len == raw.len() && *raw == k.block[..raw.len()])
    }

    /// Keeps a block that passed, if it fits; a longer one leaves the
    /// kept block in place (it is still valid).
    #[inline]
    fn keep(&mut self, raw: &[u8]) {
        if raw.len() > REPEAT_MAX {
            return;
        }
        let kept = self.kept.get_or_insert_with(|| {
            Box::new(Kept {
                len: 0,
                block: [0; REPEAT_MAX],
            })
        });
        kept.block[..raw.len()].copy_from_slice(raw);
        kept.len = raw.len();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::metadata::tag;

    fn check(last: &mut LastValid, raw: &[u8]) -> Result<Metadata, MetadataError> {
        last.metadata(Bytes::copy_from_slice(raw))
    }

    /// A block one byte away from the kept one, the same length, is
    /// validated in full and refused when invalid.
    #[test]
    fn a_one_byte_change_after_a_kept_block_is_still_checked() {
        let good = Metadata::builder().method("svc/a").codec("json").finish();
        let good = good.as_bytes().to_vec();
        let mut last = LastValid::new();
        for _ in 0..2 {
            assert!(check(&mut last, &good).is_ok());
        }
        assert_eq!(last.kept_len(), Some(good.len()));
        // The method entry retagged as a timeout: 5 bytes, not 8.
        let mut bad_len = good.clone();
        bad_len[0] = tag::TIMEOUT;
        // The method's last byte no longer ASCII nor UTF-8.
        let mut not_utf8 = good.clone();
        not_utf8[7] = 0xff;
        // The codec entry's key length now runs past the end.
        let mut truncated = good.clone();
        truncated[9] = 0xff;
        let cases = [
            (bad_len, MetadataError::BadLength),
            (not_utf8, MetadataError::NotUtf8),
            (truncated, MetadataError::Truncated),
        ];
        for (bad, want) in cases {
            assert_eq!(bad.len(), good.len());
            assert_eq!(check(&mut last, &bad).err(), Some(want), "{bad:?}");
            // Refused again, and the good block still passes after it.
            assert_eq!(check(&mut last, &bad).err(), Some(want), "{bad:?}");
            assert!(check(&mut last, &good).is_ok());
        }
    }

    /// Splitting a block off a body gives what splitting first and
    /// checking gives, the payload left behind, for the ok status, other
    /// blocks, no block and a bad block; the ok status shares nothing
    /// with the body (the read buffer it came from is not held by it).
    #[test]
    fn split_from_matches_splitting_first() {
        let payload = b"payload";
        let ok = Metadata::ok_status();
        let other = Metadata::builder().status(0).message("x").finish();
        let seven = Metadata::builder().status(1).finish();
        assert_eq!(seven.len(), ok.len());
        let bad = Bytes::from_static(&[tag::METHOD, 0, 9, b'a']);
        for block in [
            ok.as_bytes(),
            other.as_bytes(),
            seven.as_bytes(),
            &Bytes::new(),
            &bad,
        ] {
            let mut body = [&block[..], payload].concat();
            let mut split = Bytes::from(body.clone());
            let want = LastValid::new().metadata(split.split_to(block.len()));
            let mut whole = Bytes::from(std::mem::take(&mut body));
            let range = whole.as_ptr_range();
            let got = LastValid::new().split_from(&mut whole, block.len());
            assert_eq!(got, want, "{block:?}");
            assert_eq!(&whole[..], payload, "{block:?}");
            if let Ok(m) = got
                && m.is_ok_status()
            {
                assert!(
                    !range.contains(&m.as_bytes().as_ptr()),
                    "the ok status is static"
                );
            }
        }
    }

    /// Its debug view says how much it keeps, not the bytes themselves.
    #[test]
    fn debug_shows_the_kept_length_only() {
        let mut last = LastValid::new();
        assert_eq!(format!("{last:?}"), "LastValid { kept_len: None, .. }");
        let m = Metadata::builder().method("svc/a").finish();
        assert!(last.metadata(m.as_bytes().clone()).is_ok());
        let shown = format!("{last:?}");
        assert_eq!(
            shown,
            format!("LastValid {{ kept_len: Some({}), .. }}", m.len())
        );
        assert!(!shown.contains("svc/a"), "{shown}");
    }

    /// Only blocks that passed and fit are kept; a long block or an
    /// invalid one leaves the kept block as it was.
    #[test]
    fn keeps_only_short_valid_blocks() {
        let mut last = LastValid::new();
        let short = Metadata::builder().method("svc/a").finish();
        assert!(last.metadata(short.as_bytes().clone()).is_ok());
        assert_eq!(last.kept_len(), Some(short.len()));
        let long = Metadata::builder()
            .method("svc/a")
            .custom(b"trace", &[7; REPEAT_MAX])
            .finish();
        for _ in 0..2 {
            assert_eq!(last.metadata(long.as_bytes().clone()), Ok(long.clone()));
        }
        assert_eq!(last.kept_len(), Some(short.len()));
        let dup = Metadata::builder().method("a").method("b").finish();
        let dup = dup.as_bytes().clone();
        assert_eq!(last.metadata(dup).err(), Some(MetadataError::Duplicate));
        assert_eq!(last.kept_len(), Some(short.len()));
        // Empty and ok-status blocks never reach the walk nor the slot.
        assert_eq!(last.metadata(Bytes::new()), Ok(Metadata::new()));
        let ok = Metadata::ok_status();
        assert_eq!(last.metadata(ok.as_bytes().clone()), Ok(ok));
        assert_eq!(last.kept_len(), Some(short.len()));
        let timed = Metadata::builder()
            .method("svc/a")
            .timeout(Duration::from_secs(1))
            .finish();
        assert_eq!(last.metadata(timed.as_bytes().clone()), Ok(timed.clone()));
        assert_eq!(last.kept_len(), Some(timed.len()));
    }
}
