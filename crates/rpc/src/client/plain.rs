//! The `OPEN` metadata of plain calls (no deadline, no custom entries),
//! kept per method so the common call builds none.
//!
//! Read on every call from any thread, written once per method: a table of
//! write-once slots, found by the method's hash with a short linear probe.
//! A hit is an atomic load, a compare of the name and a clone of the
//! metadata; no lock is taken (a mutex's lock and unlock cost more than
//! the rest of the lookup).

use std::fmt;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use weft_frame::Metadata;

use crate::hash::FastHash;
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
    method: Box<str>,
    codec: Option<&'static str>,
    metadata: Metadata,
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
    pub(super) fn metadata(
        &self,
        method: &str,
        codec: Option<&'static str>,
    ) -> Result<Metadata, Status> {
        let slots = self
            .slots
            .get_or_init(|| (0..SLOTS).map(|_| OnceLock::new()).collect());
        let start = FastHash.hash_one(method) as usize;
        for i in 0..PROBES {
            let slot = &slots[start.wrapping_add(i) & (SLOTS - 1)];
            match slot.get() {
                Some(p) if same_codec(p.codec, codec) && *p.method == *method => {
                    return Ok(p.metadata.clone());
                }
                Some(_) => {}
                None => {
                    let metadata = build(method, codec)?;
                    // Another thread may fill the slot first: then this
                    // call's metadata is simply not kept, and a later
                    // call probes on.
                    let _ = slot.set(Box::new(Plain {
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

    #[test]
    fn a_bad_name_is_refused_and_not_kept() {
        let cache = PlainCache::default();
        assert!(cache.metadata("", None).is_err());
        assert_eq!(cached(&cache), 0);
    }
}
