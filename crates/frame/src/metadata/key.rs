//! Typed custom keys: an ASCII name, and a kind saying what its values are.
//!
//! On the wire a custom entry's key and value are bytes (PROTOCOL 2.3).
//! Applications keep gRPC's convention on top (PROTOCOL 7.1.1), which a
//! [`Key`] enforces when it is made, and its values when they are set:
//!
//! - a name is 1–255 bytes of `a-z 0-9 - _ .` (lower case, as HTTP/2 and
//!   gRPC require);
//! - a name ending in `-bin` is a [`Binary`] key: its values are any bytes,
//!   carried as they are (no base64: weft's metadata is binary already);
//! - any other name is an [`Ascii`] key: its values are visible ASCII and
//!   space (`0x20`–`0x7e`);
//! - names starting with `weft-` are weft's own (`weft-codec`,
//!   `weft-status-details`), except `weft-propagate-…`, which applications
//!   use for keys that travel to nested calls.
//!
//! Receivers do not enforce any of this: a custom entry from a peer that
//! ignores the convention is still delivered, and [`Metadata::value`](super::Metadata::value)
//! simply finds no text in a value that is not ASCII.
//!
//! ```
//! use weft_frame::metadata::{Ascii, Binary, Key, Metadata};
//!
//! const REQUEST_ID: Key<Ascii> = Key::from_static("x-request-id");
//! const CURSOR: Key<Binary> = Key::from_static("cursor-bin");
//!
//! let block = Metadata::builder()
//!     .typed(&REQUEST_ID, "r-42")?
//!     .typed(&CURSOR, &[0, 0xff][..])?
//!     .finish();
//! assert_eq!(block.value(&REQUEST_ID), Some("r-42"));
//! assert_eq!(block.value(&CURSOR), Some(&[0, 0xff][..]));
//!
//! // Names are checked: upper case, spaces, an empty name are refused.
//! assert!(Key::<Ascii>::new("X-Request-Id").is_err());
//! // A binary key's name ends in `-bin`, an ASCII key's does not.
//! assert!(Key::<Binary>::new("cursor").is_err());
//! assert!(Key::<Ascii>::new("cursor-bin").is_err());
//! // An ASCII key's value is visible ASCII.
//! assert!(Metadata::builder().typed(&REQUEST_ID, "r\n42").is_err());
//! # Ok::<(), weft_frame::metadata::InvalidMetadata>(())
//! ```

use std::borrow::Cow;
use std::marker::PhantomData;

/// What the values of a [`Key`] are: [`Ascii`] text or [`Binary`] bytes.
pub trait Kind: sealed::Sealed + Send + Sync + 'static {
    /// The value type a caller passes and gets back: `str` or `[u8]`.
    type Value: ?Sized;

    /// Whether names of this kind end in `-bin`.
    const BINARY: bool;

    /// The value's bytes, if it is a valid value of this kind.
    fn encode(value: &Self::Value) -> Result<&[u8], InvalidMetadata>;

    /// A received value as this kind, if it is valid.
    fn decode(bytes: &[u8]) -> Option<&Self::Value>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Ascii {}
    impl Sealed for super::Binary {}
}

/// Values are text: visible ASCII and space (`0x20`–`0x7e`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ascii;

/// Values are bytes; the key's name ends in `-bin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binary;

/// The longest value a custom entry can carry (its length is a u16).
pub const MAX_VALUE: usize = u16::MAX as usize;

impl Kind for Ascii {
    type Value = str;
    const BINARY: bool = false;

    fn encode(value: &str) -> Result<&[u8], InvalidMetadata> {
        let b = value.as_bytes();
        if b.len() > MAX_VALUE {
            return Err(InvalidMetadata::ValueLength(b.len()));
        }
        match b.iter().position(|&c| !(0x20..=0x7e).contains(&c)) {
            Some(at) => Err(InvalidMetadata::ValueByte { at, byte: b[at] }),
            None => Ok(b),
        }
    }

    fn decode(bytes: &[u8]) -> Option<&str> {
        if bytes.iter().all(|c| (0x20..=0x7e).contains(c)) {
            // Visible ASCII is UTF-8.
            std::str::from_utf8(bytes).ok()
        } else {
            None
        }
    }
}

impl Kind for Binary {
    type Value = [u8];
    const BINARY: bool = true;

    fn encode(value: &[u8]) -> Result<&[u8], InvalidMetadata> {
        if value.len() > MAX_VALUE {
            return Err(InvalidMetadata::ValueLength(value.len()));
        }
        Ok(value)
    }

    fn decode(bytes: &[u8]) -> Option<&[u8]> {
        Some(bytes)
    }
}

/// A custom metadata key whose name has been checked (see the
/// [module docs](self)). Make the ones a program knows as constants with
/// [`from_static`](Self::from_static): they cost nothing per call.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Key<K: Kind> {
    name: Cow<'static, str>,
    _kind: PhantomData<fn() -> K>,
}

impl<K: Kind> std::fmt::Debug for Key<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Key").field(&self.name).finish()
    }
}

impl<K: Kind> Key<K> {
    /// A key from a name known at compile time.
    ///
    /// # Panics
    /// If the name breaks the rules; in a `const` item, that is a compile
    /// error:
    ///
    /// ```compile_fail
    /// use weft_frame::metadata::{Ascii, Key};
    /// const BAD: Key<Ascii> = Key::from_static("Bad Name");
    /// ```
    pub const fn from_static(name: &'static str) -> Key<K> {
        if check_name(name.as_bytes(), K::BINARY).is_err() {
            panic!("invalid metadata key name (see weft_frame::metadata::key)");
        }
        Key {
            name: Cow::Borrowed(name),
            _kind: PhantomData,
        }
    }

    /// A key from a name known only at run time (allocates the name once).
    pub fn new(name: &str) -> Result<Key<K>, InvalidMetadata> {
        check_name(name.as_bytes(), K::BINARY)?;
        Ok(Key {
            name: Cow::Owned(name.to_owned()),
            _kind: PhantomData,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The name's bytes, as they go on the wire.
    pub fn as_bytes(&self) -> &[u8] {
        self.name.as_bytes()
    }
}

/// Why a metadata key or value was refused (by [`Key::new`],
/// [`Key::from_static`] or a typed setter). Nothing was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidMetadata {
    /// The name is empty or longer than 255 bytes.
    KeyLength(usize),
    /// The name holds a byte other than `a-z 0-9 - _ .`.
    KeyByte {
        /// Its offset in the name.
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// The name starts with `weft-` (weft's own keys) and not `weft-propagate-`.
    Reserved,
    /// A binary key's name does not end in `-bin`, or an ASCII key's does.
    WrongKind {
        /// Whether the key was made as a binary one.
        binary: bool,
    },
    /// An ASCII value holds a byte outside `0x20`–`0x7e`.
    ValueByte {
        /// Its offset in the value.
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// A value is longer than [`MAX_VALUE`] bytes.
    ValueLength(usize),
}

impl std::fmt::Display for InvalidMetadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvalidMetadata::KeyLength(n) => {
                write!(f, "metadata key of {n} bytes (1 to 255 allowed)")
            }
            InvalidMetadata::KeyByte { at, byte } => write!(
                f,
                "metadata key byte {byte:#04x} at {at} (only a-z 0-9 - _ . allowed)"
            ),
            InvalidMetadata::Reserved => {
                f.write_str("metadata keys starting with weft- are reserved (but weft-propagate-)")
            }
            InvalidMetadata::WrongKind { binary: true } => {
                f.write_str("a binary metadata key must end in -bin")
            }
            InvalidMetadata::WrongKind { binary: false } => {
                f.write_str("an ASCII metadata key must not end in -bin")
            }
            InvalidMetadata::ValueByte { at, byte } => write!(
                f,
                "ASCII metadata value byte {byte:#04x} at {at} (only 0x20 to 0x7e allowed; \
                 use a -bin key for bytes)"
            ),
            InvalidMetadata::ValueLength(n) => {
                write!(f, "metadata value of {n} bytes (at most {MAX_VALUE})")
            }
        }
    }
}

impl std::error::Error for InvalidMetadata {}

const fn starts_with(s: &[u8], prefix: &[u8]) -> bool {
    if s.len() < prefix.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if s[i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn ends_with(s: &[u8], suffix: &[u8]) -> bool {
    if s.len() < suffix.len() {
        return false;
    }
    let off = s.len() - suffix.len();
    let mut i = 0;
    while i < suffix.len() {
        if s[off + i] != suffix[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Checks a name against the rules (a `const fn`, for `from_static`).
const fn check_name(name: &[u8], binary: bool) -> Result<(), InvalidMetadata> {
    if name.is_empty() || name.len() > 255 {
        return Err(InvalidMetadata::KeyLength(name.len()));
    }
    let mut at = 0;
    while at < name.len() {
        let byte = name[at];
        if !matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.') {
            return Err(InvalidMetadata::KeyByte { at, byte });
        }
        at += 1;
    }
    if starts_with(name, b"weft-") && !starts_with(name, b"weft-propagate-") {
        return Err(InvalidMetadata::Reserved);
    }
    if ends_with(name, b"-bin") != binary {
        return Err(InvalidMetadata::WrongKind { binary });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metadata;

    #[test]
    fn names_follow_the_rules() {
        for ok in ["a", "x-request-id", "k_1.v", "weft-propagate-tenant"] {
            assert!(Key::<Ascii>::new(ok).is_ok(), "{ok}");
        }
        assert!(Key::<Binary>::new("trace-bin").is_ok());
        let long = "a".repeat(256);
        for (bad, want) in [
            ("", InvalidMetadata::KeyLength(0)),
            (&long[..], InvalidMetadata::KeyLength(256)),
            ("X-id", InvalidMetadata::KeyByte { at: 0, byte: b'X' }),
            ("a b", InvalidMetadata::KeyByte { at: 1, byte: b' ' }),
            ("é", InvalidMetadata::KeyByte { at: 0, byte: 0xc3 }),
            ("weft-codec", InvalidMetadata::Reserved),
            ("weft-status-details", InvalidMetadata::Reserved),
            ("c-bin", InvalidMetadata::WrongKind { binary: false }),
        ] {
            assert_eq!(Key::<Ascii>::new(bad).unwrap_err(), want, "{bad:?}");
        }
        assert_eq!(
            Key::<Binary>::new("cursor").unwrap_err(),
            InvalidMetadata::WrongKind { binary: true }
        );
        assert!(Key::<Ascii>::new(&"a".repeat(255)).is_ok());
        let k: Key<Ascii> = Key::from_static("k");
        assert_eq!((k.as_str(), k.as_bytes()), ("k", &b"k"[..]));
        assert_eq!(format!("{k:?}"), "Key(\"k\")");
    }

    #[test]
    #[should_panic(expected = "invalid metadata key")]
    fn from_static_refuses_a_bad_name_at_run_time_too() {
        let name = String::from("Bad");
        let leaked: &'static str = Box::leak(name.into_boxed_str());
        let _ = Key::<Ascii>::from_static(leaked);
    }

    #[test]
    fn values_are_checked_and_read_back_by_kind() {
        const T: Key<Ascii> = Key::from_static("t");
        const B: Key<Binary> = Key::from_static("b-bin");
        assert_eq!(
            Metadata::builder().typed(&T, "a\x7f").unwrap_err(),
            InvalidMetadata::ValueByte { at: 1, byte: 0x7f }
        );
        let big = vec![0u8; MAX_VALUE + 1];
        assert_eq!(
            Metadata::builder().typed(&B, &big[..]).unwrap_err(),
            InvalidMetadata::ValueLength(MAX_VALUE + 1)
        );
        // The length is checked before the bytes, for text values too.
        let long = "a".repeat(MAX_VALUE + 1);
        assert_eq!(
            Metadata::builder().typed(&T, &long).unwrap_err(),
            InvalidMetadata::ValueLength(MAX_VALUE + 1)
        );
        assert!(Metadata::builder().typed(&T, &long[1..]).is_ok());
        let m = Metadata::builder()
            .typed(&T, " ~ok~ ")
            .unwrap()
            .typed(&B, &[0, 1, 0xff][..])
            .unwrap()
            .custom(b"raw", b"\x00")
            .finish();
        assert_eq!(m.value(&T), Some(" ~ok~ "));
        assert_eq!(m.value(&B), Some(&[0, 1, 0xff][..]));
        // A peer's non-ASCII value under an ASCII key reads as absent.
        let raw: Key<Ascii> = Key::from_static("raw");
        assert_eq!(m.value(&raw), None);
        assert_eq!(m.get(b"raw"), Some(&b"\x00"[..]));
        // Every error says what was wrong.
        for e in [
            InvalidMetadata::KeyLength(0),
            InvalidMetadata::KeyByte { at: 0, byte: b'A' },
            InvalidMetadata::Reserved,
            InvalidMetadata::WrongKind { binary: true },
            InvalidMetadata::WrongKind { binary: false },
            InvalidMetadata::ValueByte { at: 0, byte: 0 },
            InvalidMetadata::ValueLength(70_000),
        ] {
            assert!(e.to_string().contains("metadata"), "{e}");
        }
    }
}
