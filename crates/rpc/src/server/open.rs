//! What the server reads of a call's `OPEN` metadata, in one pass.
//!
//! Routing a call needs its method, its codec (a typed call names one)
//! and its timeout. Each [`Metadata`] accessor walks the block from the
//! start, so asking for them one by one walked it four times per call;
//! [`Open::read`] walks it once. Each field is what its accessor would
//! return: the first entry of its kind, `None` when that entry is
//! malformed (a timeout that is not 8 bytes); the method stays bytes.

use weft_frame::Metadata;
use weft_frame::metadata::{CODEC_KEY, tag};

/// The entries of a call's `OPEN` metadata that route it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Open<'a> {
    /// The method name as the caller spelled it, unchecked: the router
    /// checks it is UTF-8 only when it is not the previous call's
    /// ([`Metadata::method`] checks first).
    pub(crate) method: Option<&'a [u8]>,
    /// The caller's remaining time in microseconds, unchecked
    /// ([`Metadata::timeout_micros`]).
    pub(crate) timeout_micros: Option<u64>,
    /// The codec a typed call names ([`Metadata::codec`]).
    pub(crate) codec: Option<&'a [u8]>,
}

impl<'a> Open<'a> {
    /// Reads `meta` once.
    pub(crate) fn read(meta: &'a Metadata) -> Open<'a> {
        // Whether each field's first entry has been seen: a later
        // duplicate must not replace it, even when the first was malformed.
        let (mut method, mut timeout, mut codec) = (None, None, None);
        for e in meta.iter() {
            match e.tag {
                tag::METHOD if method.is_none() => method = Some(e.value),
                tag::TIMEOUT if timeout.is_none() => timeout = Some(e.value),
                tag::CUSTOM if codec.is_none() && e.key == CODEC_KEY => codec = Some(e.value),
                _ => {}
            }
        }
        Open {
            method,
            timeout_micros: timeout.and_then(|v| Some(u64::from_be_bytes(v.try_into().ok()?))),
            codec,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Whatever the block holds, one pass reads what the accessors do.
    #[test]
    fn reads_what_the_accessors_read() {
        let blocks = [
            Metadata::new(),
            Metadata::builder()
                .method("svc/m")
                .timeout(Duration::from_millis(5))
                .codec("json")
                .custom(b"k", b"v")
                .finish(),
            // Duplicates: the first of each kind counts.
            Metadata::builder()
                .custom(b"k", b"v")
                .codec("a")
                .method("first")
                .timeout(Duration::from_micros(1))
                .method("second")
                .codec("b")
                .timeout(Duration::from_micros(2))
                .finish(),
            // Malformed first entries hide well-formed later ones.
            Metadata::builder()
                .raw(tag::METHOD, &[], b"\xff")
                .raw(tag::TIMEOUT, &[], b"\x01")
                .method("later")
                .timeout(Duration::from_micros(3))
                .finish(),
        ];
        for meta in &blocks {
            let open = Open::read(meta);
            let method = open.method.and_then(|m| std::str::from_utf8(m).ok());
            assert_eq!(method, meta.method(), "{meta:?}");
            assert_eq!(open.timeout_micros, meta.timeout_micros(), "{meta:?}");
            assert_eq!(open.codec, meta.codec(), "{meta:?}");
        }
        let open = Open::read(&blocks[2]);
        assert_eq!(open.method, Some(&b"first"[..]));
        assert_eq!(open.codec, Some(&b"a"[..]));
        assert_eq!(open.timeout_micros, Some(1));
        let open = Open::read(&blocks[3]);
        assert_eq!(
            (open.method, open.timeout_micros),
            (Some(&b"\xff"[..]), None)
        );
    }
}
