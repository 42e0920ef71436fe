//! The `OPEN` metadata of plain calls (no deadline, no custom entries),
//! kept per method so the common call builds none.
//!
//! Read on every call from any thread, written once per method: a table of
//! write-once slots, found by the method's hash with a short linear probe.
//! A hit is an atomic load, a compare of the name and a clone of the
//! metadata; no lock is taken (a mutex's lock and unlock cost more than
//! the rest of the lookup).
//!
//! A name of at most 32 bytes (most method names) is read once as four
//! words ([`Name`]), which give both its hash and its compare: no hashing
//! loop and no `memcmp` call. A longer name is hashed whole and compared
//! with `memcmp`, as every name was before.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use weft_frame::Metadata;

use crate::hash::{FastHash, tail_word};
use crate::method;
use crate::status::Status;

/// Slots in the table (a power of two): the most methods a client keeps.
/// Past it, or past a full probe, calls build their own metadata.
const SLOTS: usize = 256;

/// Slots a lookup looks at, from the method's own onwards.
const PROBES: usize = 8;

/// One cached method: the name as the caller spelled it (a hit skips
/// canonicalisation too) and the codec it names, beside its metadata
/// (comparing two names beats finding the codec entry in the encoded
/// metadata on every call).
#[derive(Debug)]
struct Plain {
    name: Name,
    method: Box<str>,
    codec: Option<&'static str>,
    metadata: Metadata,
}

/// Words read from both ends of a name of at most [`Name::WHOLE`] bytes:
/// up to 16 from the start and 16 from the end, overlapping, or zero where
/// a shorter name has no bytes. With the length they are the whole name,
/// so two such names are equal exactly when their `Name`s are. Of a
/// longer name they are its ends: unequal `Name`s still mean unequal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Name {
    len: usize,
    words: [u64; 4],
}

impl Name {
    /// The longest name a `Name` holds whole.
    const WHOLE: usize = 32;

    #[inline]
    fn of(name: &str) -> Name {
        let b = name.as_bytes();
        let n = b.len();
        let word = |at: usize| {
            let w: [u8; 8] = b[at..at + 8].try_into().expect("8 bytes");
            u64::from_le_bytes(w)
        };
        let words = match n {
            0 => [0; 4],
            1..=7 => [tail_word(b), 0, 0, 0],
            8..=16 => [word(0), word(n - 8), 0, 0],
            _ => [word(0), word(8), word(n - 16), word(n - 8)],
        };
        Name { len: n, words }
    }

    /// Whether the words are all of the name.
    #[inline]
    fn is_whole(&self) -> bool {
        self.len <= Name::WHOLE
    }

    /// Where a lookup of `method` (whose `Name` this is) starts: a hash of
    /// the words of a whole name, of every byte of a longer one (whose
    /// words, its ends, many names may share, e.g. `a.v1.Users/Get` and
    /// `a.v2.Users/Get` past 32 bytes).
    #[inline]
    fn start(&self, method: &str) -> usize {
        if !self.is_whole() {
            return FastHash.hash_one(method) as usize;
        }
        let [a, b, c, d] = self.words;
        let mixed = a ^ b.rotate_left(16) ^ c.rotate_left(32) ^ d.rotate_left(48) ^ self.len as u64;
        // The high bits of the product depend on every bit below them.
        (mixed.wrapping_mul(0x517c_c1b7_2722_0a95) >> 56) as usize
    }

    /// Whether `cached` (its `Name` `self`) is `method` (its `Name` `other`).
    #[inline]
    fn same(&self, other: &Name, cached: &str, method: &str) -> bool {
        *self == *other && (self.is_whole() || cached == method)
    }
}

/// The cache of a client and its clones.
#[derive(Default)]
pub(super) struct PlainCache {
    /// Allocated at the first plain call (16 bytes a slot); an entry at
    /// its method's first call.
    slots: OnceLock<Box<[OnceLock<Box<Plain>>]>>,
}

impl fmt::Debug for PlainCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let methods = self
            .slots
            .get()
            .map_or(0, |s| s.iter().filter(|p| p.get().is_some()).count());
        f.debug_struct("PlainCache")
            .field("methods", &methods)
            .finish()
    }
}

impl PlainCache {
    /// The `OPEN` metadata of a plain call of `method` by `codec`: cached,
    /// or built (and cached if a slot is free).
    ///
    /// The hit inline, the rest out of line: as a function of its own the
    /// lookup paid its entry and exit and handed back its `Result` (with
    /// room for a `Status`) through memory, about a fifth of its cost.
    #[inline(always)]
    pub(super) fn metadata(
        &self,
        method: &str,
        codec: Option<&'static str>,
    ) -> Result<Metadata, Status> {
        let name = Name::of(method);
        match self.cached(&name, method, codec) {
            Some(metadata) => Ok(metadata),
            None => self.miss(name, method, codec),
        }
    }

    /// The metadata cached for `method` (its `Name` `name`) by `codec`, if
    /// its probe finds it before an empty slot (or past every probe).
    #[inline(always)]
    fn cached(&self, name: &Name, method: &str, codec: Option<&'static str>) -> Option<Metadata> {
        let slots = self.slots.get()?;
        let start = name.start(method);
        for i in 0..PROBES {
            let p = slots[start.wrapping_add(i) & (SLOTS - 1)].get()?;
            if same_codec(p.codec, codec) && p.name.same(name, &p.method, method) {
                return Some(p.metadata.clone());
            }
        }
        None
    }

    /// A call [`cached`](Self::cached) did not find: its metadata built,
    /// and kept in the first free slot of its probe if there is one.
    #[cold]
    #[inline(never)]
    fn miss(
        &self,
        name: Name,
        method: &str,
        codec: Option<&'static str>,
    ) -> Result<Metadata, Status> {
        let slots = self
            .slots
            .get_or_init(|| (0..SLOTS).map(|_| OnceLock::new()).collect());
        let start = name.start(method);
        for i in 0..PROBES {
            let slot = &slots[start.wrapping_add(i) & (SLOTS - 1)];
            match slot.get() {
                // Filled by another thread since the lookup.
                Some(p) if same_codec(p.codec, codec) && p.name.same(&name, &p.method, method) => {
                    return Ok(p.metadata.clone());
                }
                Some(_) => {}
                None => {
                    let metadata = build(method, codec)?;
                    // Another thread may fill the slot first: then this
                    // call's metadata is simply not kept, and a later
                    // call probes on.
                    let _ = slot.set(Box::new(Plain {
                        name,
                        method: method.into(),
                        codec,
                        metadata: metadata.clone(),
                    }));
                    return Ok(metadata);
                }
            }
        }
        build(method, codec)
    }
}

/// Whether two calls name the same codec. The names are the codecs'
/// constants, so the one a method was cached with is almost always the
/// very same string: comparing where they point first saves a `memcmp`
/// call per typed call.
fn same_codec(a: Option<&'static str>, b: Option<&'static str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => std::ptr::eq(a, b) || a == b,
        _ => false,
    }
}

/// The metadata of a plain call: the canonical method and, if typed, the
/// codec's name.
fn build(method: &str, codec: Option<&'static str>) -> Result<Metadata, Status> {
    let mut b = Metadata::builder().method(&method::canonicalize(method)?);
    if let Some(c) = codec {
        b = b.codec(c);
    }
    Ok(b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(cache: &PlainCache) -> usize {
        let slots = cache.slots.get().expect("allocated");
        slots.iter().filter(|p| p.get().is_some()).count()
    }

    #[test]
    fn a_method_is_built_once_and_then_shared() {
        let cache = PlainCache::default();
        let first = cache.metadata("svc/echo", None).unwrap();
        let again = cache.metadata("svc/echo", None).unwrap();
        assert_eq!(first, again);
        assert_eq!(first.method(), Some("svc/echo"));
        // The very bytes the cache holds, not a second build.
        assert_eq!(first.as_bytes().as_ptr(), again.as_bytes().as_ptr());
        assert_eq!(cached(&cache), 1);
    }

    /// A miss that finds its method filled since its lookup (by another
    /// thread) takes that entry rather than building and keeping a second.
    #[test]
    fn a_miss_takes_an_entry_filled_since_its_lookup() {
        let cache = PlainCache::default();
        let first = cache.metadata("svc/echo", None).unwrap();
        let again = cache.miss(Name::of("svc/echo"), "svc/echo", None).unwrap();
        assert_eq!(first.as_bytes().as_ptr(), again.as_bytes().as_ptr());
        assert_eq!(cached(&cache), 1);
    }

    #[test]
    fn one_method_by_two_codecs_keeps_two_entries() {
        let cache = PlainCache::default();
        let raw = cache.metadata("svc/echo", None).unwrap();
        let json = cache.metadata("svc/echo", Some("json")).unwrap();
        assert_eq!(raw.codec(), None);
        assert_eq!(json.codec(), Some(&b"json"[..]));
        assert_eq!(cache.metadata("svc/echo", None).unwrap(), raw);
        assert_eq!(cache.metadata("svc/echo", Some("json")).unwrap(), json);
        assert_eq!(cached(&cache), 2);
    }

    /// The same name from two strings is the same codec; another name
    /// is not (the pointer is only a shortcut).
    #[test]
    fn codecs_are_compared_by_name() {
        let json = String::from("json");
        let leaked: &'static str = Box::leak(json.into_boxed_str());
        assert!(same_codec(Some("json"), Some(leaked)));
        assert!(same_codec(Some(leaked), Some(leaked)));
        assert!(!same_codec(Some("json"), Some("jso")));
        assert!(!same_codec(Some("json"), Some("postcard")));
        assert!(!same_codec(Some("json"), None));
        assert!(!same_codec(None, Some("json")));
        assert!(same_codec(None, None));
        let cache = PlainCache::default();
        let json = cache.metadata("svc/echo", Some("json")).unwrap();
        assert_eq!(cache.metadata("svc/echo", Some(leaked)).unwrap(), json);
        assert_eq!(cached(&cache), 1, "one entry for one codec");
    }

    #[test]
    fn past_its_bound_the_cache_builds_without_keeping() {
        let cache = PlainCache::default();
        for i in 0..SLOTS + 100 {
            let name = format!("svc/m{i}");
            let m = cache.metadata(&name, None).unwrap();
            assert_eq!(m.method(), Some(name.as_str()));
        }
        assert!(cached(&cache) <= SLOTS);
        // Every method still answers right, kept or not.
        for i in (0..SLOTS + 100).rev() {
            let name = format!("svc/m{i}");
            assert_eq!(
                cache.metadata(&name, None).unwrap().method(),
                Some(name.as_str())
            );
        }
    }

    /// Names of every length up to past [`Name::WHOLE`] that differ in
    /// one byte, at any position, are told apart; the same name from
    /// another string is found.
    #[test]
    fn names_differing_in_any_one_byte_are_told_apart() {
        for len in 1..=Name::WHOLE + 9 {
            let cache = PlainCache::default();
            let base: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            let first = cache.metadata(&base, None).unwrap();
            for at in 0..len {
                let mut other = base.clone().into_bytes();
                other[at] = b'Z';
                let other = String::from_utf8(other).unwrap();
                let m = cache.metadata(&other, None).unwrap();
                assert_eq!(m.method(), Some(other.as_str()), "len {len}, at {at}");
            }
            let again = cache.metadata(&base.clone(), None).unwrap();
            assert_eq!(
                again.as_bytes().as_ptr(),
                first.as_bytes().as_ptr(),
                "len {len}"
            );
        }
    }

    #[test]
    fn a_bad_name_is_refused_and_not_kept() {
        let cache = PlainCache::default();
        assert!(cache.metadata("", None).is_err());
        assert_eq!(cached(&cache), 0);
    }
}
