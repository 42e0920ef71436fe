//! Credentials: the pre-shared key, public keys as text, and the server's
//! allow-list of client keys (reloadable while connections run).

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use zeroize::{Zeroize, ZeroizeOnDrop};

/// A 32-byte pre-shared key. Zeroed on drop; `Debug` never prints it.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct Psk([u8; 32]);

impl Psk {
    /// The key of these bytes.
    pub fn new(bytes: [u8; 32]) -> Psk {
        Psk(bytes)
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl From<[u8; 32]> for Psk {
    fn from(bytes: [u8; 32]) -> Psk {
        Psk(bytes)
    }
}

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Psk(<redacted>)")
    }
}

/// The one encoding of an X25519 public key: the u-coordinate as X25519
/// reads it (RFC 7748 section 5: bit 255 masked, a value at or above
/// p = 2^255 - 19 reduced modulo p), written back in 32 little-endian bytes.
///
/// X25519 ignores bit 255 and reduces modulo p, so `K` and `K | 1 << 255`
/// (and, for the 19 smallest values, `K + p`) are one key pair: same shared
/// secrets, same handshake. Comparing raw bytes would give its holder two
/// identities, so weft canonicalises every public key it compares, stores
/// or shows (the peer's key, allow-lists, pinned keys, [`KeyHex`]). Keys
/// that X25519 produces are already canonical, so this changes nothing for
/// an honest peer (docs/SECURITY.md, "One key, one encoding").
pub fn canonical_key(mut key: [u8; 32]) -> [u8; 32] {
    key[31] &= 0x7f;
    // p = 2^255 - 19 is ed ff .. ff 7f (little-endian): the only values at
    // or above it are p + k for k < 19, whose canonical form is k.
    if key[31] == 0x7f && key[1..31].iter().all(|&b| b == 0xff) && key[0] >= 0xed {
        let low = key[0] - 0xed;
        key = [0; 32];
        key[0] = low;
    }
    key
}

/// Prints a public key as 64 lower-case hex digits, in its canonical
/// encoding ([`canonical_key`]): one key pair always prints the same.
#[derive(Clone, Copy)]
pub struct KeyHex<'a>(pub &'a [u8; 32]);

impl std::fmt::Display for KeyHex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in canonical_key(*self.0) {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for KeyHex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Parses a 32-byte key written as 64 hex digits (either case), as it is
/// (a private key's bytes are kept whole). A public key is canonicalised
/// wherever weft uses it; [`parse_public_key_hex`] does it at once.
pub fn parse_key_hex(text: &str) -> Result<[u8; 32], KeyParseError> {
    let text = text.trim();
    if text.len() != 64 {
        return Err(KeyParseError::Length(text.len()));
    }
    let mut out = [0u8; 32];
    for (i, pair) in text.as_bytes().chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16).ok_or(KeyParseError::NotHex);
        out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Ok(out)
}

/// Parses a public key written as 64 hex digits, in its canonical encoding
/// ([`canonical_key`]).
pub fn parse_public_key_hex(text: &str) -> Result<[u8; 32], KeyParseError> {
    parse_key_hex(text).map(canonical_key)
}

/// Why a key or an allow-list did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyParseError {
    /// Not 64 characters long (the length found).
    Length(usize),
    /// A character that is not a hex digit.
    NotHex,
    /// An allow-list line that is not a key (1-based line number).
    Line(usize, Box<KeyParseError>),
}

impl std::fmt::Display for KeyParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyParseError::Length(n) => {
                write!(f, "a key is 64 hex digits, this is {n} characters")
            }
            KeyParseError::NotHex => f.write_str("a key is 64 hex digits, found another character"),
            KeyParseError::Line(n, e) => write!(f, "line {n}: {e}"),
        }
    }
}

impl std::error::Error for KeyParseError {}

/// The client public keys a server accepts: shared by every connection of
/// the server, and replaceable at any time ([`replace`](Self::replace)):
/// the next handshake sees the new set, connections already open keep
/// running. Revoking a key therefore stops new connections with it; close
/// open ones separately if needed. An empty list accepts nobody
/// ([`deny_all`](Self::deny_all)). Keys are held and looked up in their
/// canonical encoding ([`canonical_key`]), so a key listed or presented
/// with bit 255 set is the same key.
#[derive(Clone, Default)]
pub struct AllowList {
    keys: Arc<RwLock<HashSet<[u8; 32]>>>,
}

impl std::fmt::Debug for AllowList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllowList")
            .field("keys", &self.len())
            .finish()
    }
}

impl PartialEq for AllowList {
    /// Two handles are equal when they share the same list.
    fn eq(&self, other: &AllowList) -> bool {
        Arc::ptr_eq(&self.keys, &other.keys)
    }
}

impl Eq for AllowList {}

impl AllowList {
    /// A list of these keys.
    pub fn new(keys: impl IntoIterator<Item = [u8; 32]>) -> AllowList {
        AllowList {
            keys: Arc::new(RwLock::new(keys.into_iter().map(canonical_key).collect())),
        }
    }

    /// Parses an allow-list file: one key per line as 64 hex digits,
    /// optionally followed by a name; `#` starts a comment; blank lines are
    /// ignored.
    pub fn parse_keys(text: &str) -> Result<Vec<[u8; 32]>, KeyParseError> {
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some(key) = line.split_whitespace().next() else {
                continue;
            };
            keys.push(parse_key_hex(key).map_err(|e| KeyParseError::Line(i + 1, Box::new(e)))?);
        }
        Ok(keys)
    }

    /// Replaces the whole set (a reload); handshakes from now on use it.
    pub fn replace(&self, keys: impl IntoIterator<Item = [u8; 32]>) {
        let new: HashSet<[u8; 32]> = keys.into_iter().map(canonical_key).collect();
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = new;
    }

    /// Empties the list: from now on every handshake is refused, while
    /// connections already open keep running. What a reload that cannot
    /// read its source must do (fail closed): a list left as it was would
    /// keep a key its administrator meant to revoke.
    pub fn deny_all(&self) {
        self.replace([]);
    }

    /// Whether `key` (in any encoding) is allowed.
    pub fn contains(&self, key: &[u8; 32]) -> bool {
        self.keys
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&canonical_key(*key))
    }

    /// How many keys are allowed.
    pub fn len(&self) -> usize {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no key is allowed (every client is rejected).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
