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

/// Prints a public key as 64 lower-case hex digits.
#[derive(Clone, Copy)]
pub struct KeyHex<'a>(pub &'a [u8; 32]);

impl std::fmt::Display for KeyHex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
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

/// Parses a 32-byte key written as 64 hex digits (either case).
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
/// open ones separately if needed.
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
            keys: Arc::new(RwLock::new(keys.into_iter().collect())),
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
        let new: HashSet<[u8; 32]> = keys.into_iter().collect();
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = new;
    }

    /// Whether `key` is allowed.
    pub fn contains(&self, key: &[u8; 32]) -> bool {
        self.keys
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(key)
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
