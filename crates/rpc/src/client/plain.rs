//! The `OPEN` metadata of plain calls (no deadline, no custom entries),
//! kept per method so the common call builds none.
//!
//! Read on every call from any thread, written once per method: a table of
//! write-once slots, found by the method's hash with a short linear probe.
//! A hit is an atomic load, a compare of the name and a clone of the
//! metadata; no lock is taken (a mutex's lock and unlock cost more than
//! the rest of the lookup).
//!
//! A call finds its method's entry by the method's [`MethodKey`], made by
//! the caller where the name is known (a constant name's at compile
//! time): the probe starts where the key says, mixed from words read from
//! both ends of the name. The compare is those words, read again at the
//! lookup (a few loads): for a name of at most 32 bytes they are the whole
//! name, so no hashing loop and no `memcmp` call; a longer name is hashed
//! whole for its start and compared with `memcmp`.

use std::fmt;
use std::sync::OnceLock;

use weft_frame::Metadata;

use super::key::MethodKey;
use crate::method;
use crate::status::Status;

/// Slots in the table (a power of two): the most methods a client keeps.
/// Past it, or past a full probe, calls build their own metadata.
const SLOTS: usize = 256;

// A key keeps a probe's start in `START_BITS` bits: no more slots than that reaches.
const _: () = assert!(SLOTS <= 1 << MethodKey::START_BITS && SLOTS.is_power_of_two());

/// Slots a lookup looks at, from the method's own onwards.
const PROBES: usize = 8;

/// One cached method: the name as the caller spelled it (a hit skips
/// canonicalisation too) and the words of its key, and the codec it
/// names, beside its metadata (comparing two names beats finding the
/// codec entry in the encoded metadata on every call).
#[derive(Debug)]
struct Plain {
    words: [u64; 4],
    /// The key's start and short word ([`MethodKey::packed`]).
    packed: u64,
    method: Box<str>,
    codec: Option<&'static str>,
    metadata: Metadata,
}

impl Plain {
    /// Whether this entry is `key`'s method: the same words and length,
    /// and for a name longer than its words, the same bytes.
    #[inline(always)]
    fn is(&self, key: &MethodKey<'_>) -> bool {
        // A short name is its key's one word and its length: one compare
        // of what the key holds, no words assembled from it.
        if key.is_short() {
            return self.packed == key.packed() && self.method.len() == key.name().len();
        }
        if self.method.len() != key.name().len() {
            return false;
        }
        let words = key.words();
        // Of one length, up to 16 bytes: the last two words are zero in both.
        if key.name().len() <= 16 {
            return self.words[..2] == words[..2];
        }
        self.words == words && (key.is_whole() || *self.method == *key.name())
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
        key: &MethodKey<'_>,
        codec: Option<&'static str>,
    ) -> Result<Metadata, Status> {
        match self.cached(key, codec) {
            Some(metadata) => Ok(metadata),
            None => self.miss(key, codec),
        }
    }

    /// The metadata cached for `key`'s method by `codec`, if its probe
    /// finds it before an empty slot (or past every probe).
    #[inline(always)]
    fn cached(&self, key: &MethodKey<'_>, codec: Option<&'static str>) -> Option<Metadata> {
        let slots = self.slots.get()?;
        let start = key.start();
        for i in 0..PROBES {
            let p = slots[start.wrapping_add(i) & (SLOTS - 1)].get()?;
            if same_codec(p.codec, codec) && p.is(key) {
                return Some(p.metadata.clone());
            }
        }
        None
    }

    /// A call [`cached`](Self::cached) did not find: its metadata built,
    /// and kept in the first free slot of its probe if there is one.
    #[cold]
    #[inline(never)]
    fn miss(&self, key: &MethodKey<'_>, codec: Option<&'static str>) -> Result<Metadata, Status> {
        let method = key.name();
        let slots = self
            .slots
            .get_or_init(|| (0..SLOTS).map(|_| OnceLock::new()).collect());
        let start = key.start();
        for i in 0..PROBES {
            let slot = &slots[start.wrapping_add(i) & (SLOTS - 1)];
            match slot.get() {
                // Filled by another thread since the lookup.
                Some(p) if same_codec(p.codec, codec) && p.is(key) => {
                    return Ok(p.metadata.clone());
                }
                Some(_) => {}
                None => {
                    let metadata = build(method, codec)?;
                    // Another thread may fill the slot first: then this
                    // call's metadata is simply not kept, and a later
                    // call probes on.
                    let _ = slot.set(Box::new(Plain {
                        words: key.words(),
                        packed: key.packed(),
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
#[inline(always)]
fn same_codec(a: Option<&'static str>, b: Option<&'static str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => std::ptr::eq(a, b) || same_name(a, b),
        _ => false,
    }
}

/// Two codec names at different addresses: compared out of line (rare: a
/// codec's name is its constant).
#[cold]
#[inline(never)]
fn same_name(a: &str, b: &str) -> bool {
    a == b
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
        let first = cache.metadata(&MethodKey::new("svc/echo"), None).unwrap();
        let again = cache.metadata(&MethodKey::new("svc/echo"), None).unwrap();
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
        let first = cache.metadata(&MethodKey::new("svc/echo"), None).unwrap();
        let again = cache.miss(&MethodKey::new("svc/echo"), None).unwrap();
        assert_eq!(first.as_bytes().as_ptr(), again.as_bytes().as_ptr());
        assert_eq!(cached(&cache), 1);
    }

    #[test]
    fn one_method_by_two_codecs_keeps_two_entries() {
        let cache = PlainCache::default();
        let raw = cache.metadata(&MethodKey::new("svc/echo"), None).unwrap();
        let json = cache
            .metadata(&MethodKey::new("svc/echo"), Some("json"))
            .unwrap();
        assert_eq!(raw.codec(), None);
        assert_eq!(json.codec(), Some(&b"json"[..]));
        assert_eq!(
            cache.metadata(&MethodKey::new("svc/echo"), None).unwrap(),
            raw
        );
        assert_eq!(
            cache
                .metadata(&MethodKey::new("svc/echo"), Some("json"))
                .unwrap(),
            json
        );
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
        let json = cache
            .metadata(&MethodKey::new("svc/echo"), Some("json"))
            .unwrap();
        assert_eq!(
            cache
                .metadata(&MethodKey::new("svc/echo"), Some(leaked))
                .unwrap(),
            json
        );
        assert_eq!(cached(&cache), 1, "one entry for one codec");
    }

    #[test]
    fn past_its_bound_the_cache_builds_without_keeping() {
        let cache = PlainCache::default();
        for i in 0..SLOTS + 100 {
            let name = format!("svc/m{i}");
            let m = cache.metadata(&MethodKey::new(&name), None).unwrap();
            assert_eq!(m.method(), Some(name.as_str()));
        }
        assert!(cached(&cache) <= SLOTS);
        // Every method still answers right, kept or not.
        for i in (0..SLOTS + 100).rev() {
            let name = format!("svc/m{i}");
            assert_eq!(
                cache
                    .metadata(&MethodKey::new(&name), None)
                    .unwrap()
                    .method(),
                Some(name.as_str())
            );
        }
    }

    /// Names of every length up to past [`MethodKey::WHOLE`] that differ in
    /// one byte, at any position, are told apart; the same name from
    /// another string is found.
    #[test]
    fn names_differing_in_any_one_byte_are_told_apart() {
        for len in 1..=MethodKey::WHOLE + 9 {
            let cache = PlainCache::default();
            let base: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            let first = cache.metadata(&MethodKey::new(&base), None).unwrap();
            for at in 0..len {
                let mut other = base.clone().into_bytes();
                other[at] = b'Z';
                let other = String::from_utf8(other).unwrap();
                let m = cache.metadata(&MethodKey::new(&other), None).unwrap();
                assert_eq!(m.method(), Some(other.as_str()), "len {len}, at {at}");
            }
            let again = cache
                .metadata(&MethodKey::new(&base.clone()), None)
                .unwrap();
            assert_eq!(
                again.as_bytes().as_ptr(),
                first.as_bytes().as_ptr(),
                "len {len}"
            );
        }
    }

    /// A key made in a constant, a key made at run time from another
    /// string, and the uncached build all give the very same metadata, by
    /// either codec, for names of every length around the key's words
    /// (whole, ends only), whichever of them fills the cache first.
    /// Names shorter than a word are matched by their packed word, names
    /// of up to 16 bytes by two words: two whose probes start in the same
    /// slot are each given their own metadata.
    #[test]
    fn short_names_that_share_a_start_are_told_apart() {
        // Short (one word), two words (their first one shared), four words.
        for prefix in ["s/", "svc/longer_", "pkg.svc/much_longer_"] {
            let names: Vec<String> = (b'a'..=b'z')
                .flat_map(|a| {
                    (b'a'..=b'z').map(move |b| format!("{prefix}{}{}", a as char, b as char))
                })
                .collect();
            let start = |n: &str| MethodKey::new(n).start();
            let first = &names[0];
            let twin = names[1..]
                .iter()
                .find(|n| start(n) == start(first))
                .expect("676 names over 256 starts");
            let cache = PlainCache::default();
            for name in [first, twin, first, twin] {
                let m = cache.metadata(&MethodKey::new(name), None).unwrap();
                assert_eq!(m.method(), Some(name.as_str()));
            }
            assert_eq!(cached(&cache), 2, "{prefix}");
        }
    }

    #[test]
    fn a_key_gives_the_metadata_its_name_gives() {
        const SHORT: MethodKey<'static> = MethodKey::new("svc/echo");
        const EDGE: MethodKey<'static> = MethodKey::new("pkg.Service/Method_of_32_bytes_x");
        const LONG: MethodKey<'static> = MethodKey::new("package.Service.v1.Users/GetEveryoneNow");
        assert_eq!(EDGE.name().len(), MethodKey::WHOLE);
        assert!(LONG.name().len() > MethodKey::WHOLE + 2);
        for codec in [None, Some("json")] {
            for constant_first in [true, false] {
                let cache = PlainCache::default();
                for key in [SHORT, EDGE, LONG] {
                    let name = String::from(key.name());
                    let by_name = MethodKey::new(&name);
                    let want = build(&name, codec).unwrap();
                    let (first, second) = if constant_first {
                        (&key, &by_name)
                    } else {
                        (&by_name, &key)
                    };
                    let a = cache.metadata(first, codec).unwrap();
                    let b = cache.metadata(second, codec).unwrap();
                    assert_eq!(a.as_bytes(), want.as_bytes(), "{name} {codec:?}");
                    assert_eq!(b.as_bytes(), want.as_bytes(), "{name} {codec:?}");
                    // One entry, shared by both keys.
                    assert_eq!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr(), "{name}");
                }
                // A name that shares a long name's words (its ends) but
                // not its middle is not taken for it.
                let twin = "package.Service.v2.Users/GetEveryoneNow";
                assert_eq!(MethodKey::new(twin).words(), LONG.words());
                let m = cache.metadata(&MethodKey::new(twin), codec).unwrap();
                assert_eq!(m.method(), Some(twin));
                assert_eq!(cached(&cache), 4);
            }
        }
    }

    #[test]
    fn a_bad_name_is_refused_and_not_kept() {
        let cache = PlainCache::default();
        assert!(cache.metadata(&MethodKey::new(""), None).is_err());
        assert_eq!(cached(&cache), 0);
    }
}
