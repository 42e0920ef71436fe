//! Metadata: compact binary key/value entries with a typed view of the
//! well-known keys, read lazily from a `Bytes` without copying.
//!
//! Encoding of one entry:
//!
//! ```text
//! tag:u8 | (tag == 0: key_len:u8 key[key_len]) | value_len:u16 | value[value_len]
//! ```
//!
//! Tags: 0 custom, 1 method (UTF-8), 2 timeout (u64 microseconds), 3 status
//! (u32), 4 status message (UTF-8). Other tags are skipped by receivers.
//!
//! Custom entries under a typed [`Key`] follow the naming rules of the
//! [`key`] module (ASCII names; `-bin` keys hold bytes, others text). The
//! custom entries weft itself sends (a typed call's codec, a status's
//! details) have constructors and accessors here, so no layer above
//! spells their bytes: [`MetadataBuilder::codec`],
//! [`MetadataBuilder::status_details`], [`Metadata::ok_status`].

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use crate::MetadataError;

pub mod key;
pub mod repeat;

pub use key::{Ascii, Binary, InvalidMetadata, Key, Kind, MAX_VALUE};
pub use repeat::LastValid;

/// The custom key naming a typed call's codec (PROTOCOL 7.3.1).
pub const CODEC_KEY: &[u8] = b"weft-codec";

/// The custom key of a failed call's status details (PROTOCOL 7.5.1).
pub const DETAILS_KEY: &[u8] = b"weft-status-details";

/// The encoded block of an `OK` status alone: the trailers of a
/// successful call whose handler set none (PROTOCOL 7.7).
const OK_STATUS: &[u8] = &[tag::STATUS, 0, 4, 0, 0, 0, 0];

/// Well-known metadata tags.
pub mod tag {
    /// A custom entry: a key follows the tag.
    pub const CUSTOM: u8 = 0;
    /// The method name of a call (UTF-8), on `OPEN`.
    pub const METHOD: u8 = 1;
    /// The caller's remaining time, u64 microseconds, on `OPEN`.
    pub const TIMEOUT: u8 = 2;
    /// The final status code of a call, u32, on the last frame of a response.
    pub const STATUS: u8 = 3;
    /// The status message (UTF-8), beside `STATUS`.
    pub const MESSAGE: u8 = 4;
}

/// One metadata entry, borrowed from the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The tag.
    pub tag: u8,
    /// The key of a custom entry; empty for well-known tags.
    pub key: &'a [u8],
    /// The value bytes.
    pub value: &'a [u8],
}

/// A metadata block: a cheap-to-clone view over its encoded bytes.
///
/// A block that came out of the decoder has been validated once (no
/// allocation); the accessors then walk it lazily.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    raw: Bytes,
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for e in self.iter() {
            list.entry(&e);
        }
        list.finish()
    }
}

impl Metadata {
    /// The empty block.
    pub const fn new() -> Metadata {
        Metadata { raw: Bytes::new() }
    }

    /// The trailers of a successful call with nothing else to say: one
    /// `status = 0` entry (7 bytes). Allocates nothing.
    ///
    /// ```
    /// use weft_frame::Metadata;
    /// assert_eq!(Metadata::ok_status(), Metadata::builder().status(0).finish());
    /// assert_eq!(Metadata::ok_status().status(), Some(0));
    /// ```
    pub const fn ok_status() -> Metadata {
        Metadata {
            raw: Bytes::from_static(OK_STATUS),
        }
    }

    /// Whether this is exactly [`ok_status`](Self::ok_status)'s block: a
    /// successful call's usual trailers, told by a 7-byte compare instead
    /// of a walk of the entries. (Other blocks may also say `status = 0`;
    /// [`status`](Self::status) reads any of them.)
    ///
    /// ```
    /// use weft_frame::Metadata;
    /// assert!(Metadata::ok_status().is_ok_status());
    /// let with_message = Metadata::builder().status(0).message("fine").finish();
    /// assert!(!with_message.is_ok_status());
    /// assert_eq!(with_message.status(), Some(0));
    /// ```
    #[inline]
    pub fn is_ok_status(&self) -> bool {
        self.raw[..] == *OK_STATUS
    }

    /// Wraps and validates an encoded block. Allocates nothing.
    #[inline]
    pub fn from_bytes(raw: Bytes) -> Result<Metadata, MetadataError> {
        if Metadata::needs_walk(&raw) {
            validate(&raw)?;
        }
        Ok(Metadata { raw })
    }

    /// Whether validating `raw` takes a walk of its entries. Most frames
    /// carry no block, and a successful call's trailers are the ok status,
    /// whole (a 7-byte compare): no call into the walk for either.
    #[inline(always)]
    fn needs_walk(raw: &[u8]) -> bool {
        !raw.is_empty() && raw != OK_STATUS
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &Bytes {
        &self.raw
    }

    /// The encoded length.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether the block has no entries.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The entries in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { rest: &self.raw }
    }

    fn well_known(&self, t: u8) -> Option<&[u8]> {
        self.iter().find(|e| e.tag == t).map(|e| e.value)
    }

    /// The method name, if present.
    pub fn method(&self) -> Option<&str> {
        self.well_known(tag::METHOD)
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The caller's remaining time, if present.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_micros().map(Duration::from_micros)
    }

    /// The raw timeout in microseconds, if present (the layer above rejects
    /// absurd values).
    pub fn timeout_micros(&self) -> Option<u64> {
        let v = self.well_known(tag::TIMEOUT)?;
        Some(u64::from_be_bytes(v.try_into().ok()?))
    }

    /// The status code, if present.
    pub fn status(&self) -> Option<u32> {
        let v = self.well_known(tag::STATUS)?;
        Some(u32::from_be_bytes(v.try_into().ok()?))
    }

    /// The status message, if present.
    pub fn message(&self) -> Option<&str> {
        self.well_known(tag::MESSAGE)
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The value of the first custom entry with this key.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.iter()
            .find(|e| e.tag == tag::CUSTOM && e.key == key)
            .map(|e| e.value)
    }

    /// The first value under a typed key, if present and of the key's kind
    /// (an [`Ascii`] key finds no value that is not visible ASCII).
    ///
    /// ```
    /// use weft_frame::metadata::{Ascii, Key, Metadata};
    /// const ID: Key<Ascii> = Key::from_static("x-request-id");
    /// let m = Metadata::builder().typed(&ID, "r-1")?.finish();
    /// assert_eq!(m.value(&ID), Some("r-1"));
    /// # Ok::<(), weft_frame::metadata::InvalidMetadata>(())
    /// ```
    pub fn value<K: Kind>(&self, key: &Key<K>) -> Option<&K::Value> {
        self.get(key.as_bytes()).and_then(K::decode)
    }

    /// The codec a typed call names ([`CODEC_KEY`]), if any.
    pub fn codec(&self) -> Option<&[u8]> {
        self.get(CODEC_KEY)
    }

    /// A failed call's status details ([`DETAILS_KEY`]), if any.
    pub fn status_details(&self) -> Option<&[u8]> {
        self.get(DETAILS_KEY)
    }

    /// A builder that encodes into a fresh buffer.
    pub fn builder() -> MetadataBuilder {
        MetadataBuilder::new(BytesMut::new())
    }
}

/// Iterator over the entries of a [`Metadata`] block.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Iter<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        // Blocks are validated on construction, so a parse failure here can
        // only mean the end; stop rather than panic either way.
        let (entry, rest) = parse_entry(self.rest).ok()??;
        self.rest = rest;
        Some(entry)
    }
}

type Parsed<'a> = Option<(Entry<'a>, &'a [u8])>;

/// Parses one entry off the front of `buf`; `Ok(None)` at the end.
fn parse_entry(buf: &[u8]) -> Result<Parsed<'_>, MetadataError> {
    let Some((&t, mut rest)) = buf.split_first() else {
        return Ok(None);
    };
    let mut key: &[u8] = &[];
    if t == tag::CUSTOM {
        let (&klen, after) = rest.split_first().ok_or(MetadataError::Truncated)?;
        if klen == 0 {
            return Err(MetadataError::EmptyKey);
        }
        (key, rest) = after
            .split_at_checked(klen as usize)
            .ok_or(MetadataError::Truncated)?;
    }
    let (len, after) = rest.split_at_checked(2).ok_or(MetadataError::Truncated)?;
    let vlen = u16::from_be_bytes([len[0], len[1]]) as usize;
    let (value, rest) = after
        .split_at_checked(vlen)
        .ok_or(MetadataError::Truncated)?;
    Ok(Some((Entry { tag: t, key, value }, rest)))
}

/// Checks a whole block: framing, well-known value lengths and UTF-8, no
/// duplicate well-known entries. Allocates nothing.
///
/// Inlined: it runs on every `OPEN` the decoder reads, and as a call it
/// saved and restored registers for a walk of one or two entries.
#[inline(always)]
pub fn validate(mut buf: &[u8]) -> Result<(), MetadataError> {
    let mut seen = 0u8;
    while let Some((e, rest)) = parse_entry(buf)? {
        buf = rest;
        let ok = match e.tag {
            tag::CUSTOM => continue,
            tag::METHOD | tag::MESSAGE => {
                // Method names and messages are ASCII nearly always: a
                // short slice's ASCII test is half of `from_utf8`'s walk
                // (about 35 instructions for a method name, per call).
                if !e.value.is_ascii() {
                    std::str::from_utf8(e.value).map_err(|_| MetadataError::NotUtf8)?;
                }
                true
            }
            tag::TIMEOUT => e.value.len() == 8,
            tag::STATUS => e.value.len() == 4,
            _ => continue,
        };
        if !ok {
            return Err(MetadataError::BadLength);
        }
        let bit = 1u8 << e.tag;
        if seen & bit != 0 {
            return Err(MetadataError::Duplicate);
        }
        seen |= bit;
    }
    Ok(())
}

/// Encodes metadata entries into a caller-supplied buffer, so a caller that
/// reuses the buffer allocates nothing in steady state.
///
/// Values longer than `u16::MAX` and custom keys longer than 255 bytes are
/// truncated to fit; the frame limit (16 KiB by default) is far below both.
#[derive(Debug)]
pub struct MetadataBuilder {
    buf: BytesMut,
}

impl MetadataBuilder {
    /// Starts a block at the end of `buf` (normally an empty, reused buffer).
    pub fn new(buf: BytesMut) -> MetadataBuilder {
        MetadataBuilder { buf }
    }

    fn entry(mut self, t: u8, key: &[u8], value: &[u8]) -> Self {
        self.buf.put_u8(t);
        if t == tag::CUSTOM {
            let key = &key[..key.len().min(255)];
            self.buf.put_u8(key.len() as u8);
            self.buf.put_slice(key);
        }
        let value = &value[..value.len().min(u16::MAX as usize)];
        self.buf.put_u16(value.len() as u16);
        self.buf.put_slice(value);
        self
    }

    /// Adds the method name.
    #[must_use]
    pub fn method(self, name: &str) -> Self {
        self.entry(tag::METHOD, &[], name.as_bytes())
    }

    /// Adds the caller's remaining time (saturating at `u64::MAX` microseconds).
    #[must_use]
    pub fn timeout(self, d: Duration) -> Self {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.entry(tag::TIMEOUT, &[], &micros.to_be_bytes())
    }

    /// Adds a status code.
    #[must_use]
    pub fn status(self, code: u32) -> Self {
        self.entry(tag::STATUS, &[], &code.to_be_bytes())
    }

    /// Adds a status message.
    #[must_use]
    pub fn message(self, text: &str) -> Self {
        self.entry(tag::MESSAGE, &[], text.as_bytes())
    }

    /// Adds a custom entry. An empty key is not encodable and is skipped.
    #[must_use]
    pub fn custom(self, key: &[u8], value: &[u8]) -> Self {
        if key.is_empty() {
            return self;
        }
        self.entry(tag::CUSTOM, key, value)
    }

    /// Adds a custom entry under a typed key, checking the value against
    /// the key's kind (nothing is added on an error).
    ///
    /// ```
    /// use weft_frame::metadata::{Binary, Key, Metadata};
    /// const TOKEN: Key<Binary> = Key::from_static("token-bin");
    /// let m = Metadata::builder().typed(&TOKEN, &[0, 1][..])?.finish();
    /// assert_eq!(m.as_bytes().as_ref(), b"\x00\x09token-bin\x00\x02\x00\x01");
    /// # Ok::<(), weft_frame::metadata::InvalidMetadata>(())
    /// ```
    pub fn typed<K: Kind>(self, key: &Key<K>, value: &K::Value) -> Result<Self, InvalidMetadata> {
        let value = K::encode(value)?;
        Ok(self.entry(tag::CUSTOM, key.as_bytes(), value))
    }

    /// Adds the codec entry of a typed call (PROTOCOL 7.3.1): `name` under
    /// [`CODEC_KEY`].
    ///
    /// ```
    /// use weft_frame::Metadata;
    /// let m = Metadata::builder().codec("json").finish();
    /// assert_eq!(m.as_bytes().as_ref(), b"\x00\x0aweft-codec\x00\x04json");
    /// assert_eq!(m.codec(), Some(&b"json"[..]));
    /// ```
    #[must_use]
    pub fn codec(self, name: &str) -> Self {
        self.entry(tag::CUSTOM, CODEC_KEY, name.as_bytes())
    }

    /// Adds a failed call's status details (PROTOCOL 7.5.1) under
    /// [`DETAILS_KEY`]. (The layer above enforces its 4 KiB limit.)
    ///
    /// ```
    /// use weft_frame::Metadata;
    /// let m = Metadata::builder().status(5).status_details(b"\x01").finish();
    /// assert_eq!(m.status_details(), Some(&b"\x01"[..]));
    /// ```
    #[must_use]
    pub fn status_details(self, details: &[u8]) -> Self {
        self.entry(tag::CUSTOM, DETAILS_KEY, details)
    }

    /// Adds an entry with a raw tag (for tags newer than this crate).
    #[must_use]
    pub fn raw(self, t: u8, key: &[u8], value: &[u8]) -> Self {
        if t == tag::CUSTOM {
            return self.custom(key, value);
        }
        self.entry(t, &[], value)
    }

    /// Finishes the block. The builder's buffer is split, not copied.
    ///
    /// The builder does not deduplicate: a block with a well-known entry
    /// twice is rejected by the receiver with [`MetadataError::Duplicate`].
    pub fn finish(mut self) -> Metadata {
        Metadata {
            raw: self.buf.split().freeze(),
        }
    }

    /// Finishes the block and gives back the buffer it was split from,
    /// with the room left after it, for the next block: a caller that
    /// builds a block per call into one reused buffer allocates only when
    /// that room runs out.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use weft_frame::MetadataBuilder;
    ///
    /// let buf = BytesMut::with_capacity(256);
    /// let (a, buf) = MetadataBuilder::new(buf).method("svc/a").finish_keeping();
    /// let (b, rest) = MetadataBuilder::new(buf).method("svc/b").finish_keeping();
    /// assert_eq!((a.method(), b.method()), (Some("svc/a"), Some("svc/b")));
    /// assert!(rest.is_empty() && rest.capacity() > 0);
    /// ```
    pub fn finish_keeping(mut self) -> (Metadata, BytesMut) {
        let raw = self.buf.split().freeze();
        (Metadata { raw }, self.buf)
    }
}
