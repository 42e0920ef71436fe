//! [`MethodKey`]: a method's name with its key into the client's cache of
//! call metadata (`plain.rs`) worked out once, where the name is known,
//! rather than on every call.

use std::fmt;

use crate::hash::{fx_bytes, tail_word};

/// A method's name and where its lookup in a [`Client`](crate::Client)'s
/// cache of call metadata starts, worked out when the key is made.
///
/// Every plain call (no deadline, no metadata of its own) finds its `OPEN`
/// metadata in that cache by its method's name, which takes a few dozen
/// instructions to read and mix. Written where the name is a constant,
/// [`MethodKey::new`] is worked out by the compiler (in a `const` item,
/// always); a key kept and passed on then costs nothing more per call.
/// That is what a `Channel` does: it makes the key of a call's method once,
/// where the caller names it, and each try of the call (on whichever
/// connection) looks it up by that key. A program calling methods chosen
/// at run time (a gateway) can keep a key per method the same way.
///
/// The `&str` entry points ([`Client::unary`](crate::Client::unary) and
/// the rest) make the key themselves, so calling by name stays as it was;
/// the key only saves work when it is made once for many calls.
///
/// A key does not check its name: a call with a bad name fails with
/// `INVALID_ARGUMENT`, as the same call by `&str` does.
///
/// ```
/// use weft_rpc::MethodKey;
///
/// const ECHO: MethodKey<'static> = MethodKey::new("demo.Echo/Say");
/// assert_eq!(ECHO.name(), "demo.Echo/Say");
/// // A name chosen at run time, keyed once for all its calls.
/// let chosen = String::from("demo.Echo/Shout");
/// let key = MethodKey::new(&chosen);
/// assert_eq!(key.name(), "demo.Echo/Shout");
/// ```
///
/// The key is the name and one word: a `Channel`'s call future carries
/// it, and every byte there is copied by each move of the call. The
/// name's words (the compare) are read from the name at each lookup, a
/// few loads; the probe's start, mixed from all of them, is kept, and so
/// is the one word of a name shorter than a word (assembled from a few
/// byte loads and shifts, it cost a key made at run time, a `Channel`'s,
/// more than the rest of its lookup).
#[derive(Clone, Copy)]
pub struct MethodKey<'a> {
    name: &'a str,
    /// Where the cache's probe for the name starts (the low
    /// [`START_BITS`](Self::START_BITS) bits) and, above them, the word
    /// of a name of 1 to 7 bytes (which fits in the 56 bits left).
    packed: u64,
}

impl<'a> MethodKey<'a> {
    /// The longest name whose words hold it whole.
    pub(crate) const WHOLE: usize = 32;

    /// The bits of a probe's start: the cache has at most `1 << START_BITS`
    /// slots.
    pub(crate) const START_BITS: u32 = 8;

    /// The key of `name`. A `const fn`, inlined into every caller: a
    /// constant name's key costs nothing at run time.
    #[inline(always)]
    pub const fn new(name: &'a str) -> MethodKey<'a> {
        let b = name.as_bytes();
        let w = words(b);
        let start = start(b, &w) as u64 & ((1 << Self::START_BITS) - 1);
        // `words` puts a short name's bytes in its first word, below 2^56.
        let short = if b.len() < 8 { w[0] } else { 0 };
        MethodKey {
            name,
            packed: short << Self::START_BITS | start,
        }
    }

    /// The method's name, as given.
    #[inline(always)]
    pub const fn name(&self) -> &'a str {
        self.name
    }

    /// Where the cache's probe for this method starts.
    #[inline(always)]
    pub(crate) const fn start(&self) -> usize {
        (self.packed & ((1 << Self::START_BITS) - 1)) as usize
    }

    /// The words read from the name (see [`words`]); a name shorter than
    /// a word has its one word kept in the key.
    #[inline(always)]
    pub(crate) const fn words(&self) -> [u64; 4] {
        if self.is_short() {
            [self.packed >> Self::START_BITS, 0, 0, 0]
        } else {
            words(self.name.as_bytes())
        }
    }

    /// The start and, for a name shorter than a word, its word: equal
    /// for two names shorter than a word (of one length) exactly when
    /// the names are.
    #[inline(always)]
    pub(crate) const fn packed(&self) -> u64 {
        self.packed
    }

    /// Whether the name is shorter than a word, so that its
    /// [`packed`](Self::packed) word and length are all of it.
    #[inline(always)]
    pub(crate) const fn is_short(&self) -> bool {
        self.name.len() < 8
    }

    /// Whether the words are all of the name: two such names are equal
    /// exactly when their lengths and words are.
    #[inline(always)]
    pub(crate) const fn is_whole(&self) -> bool {
        self.name.len() <= Self::WHOLE
    }
}

impl fmt::Debug for MethodKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MethodKey").field(&self.name).finish()
    }
}

impl<'a> From<&'a str> for MethodKey<'a> {
    #[inline(always)]
    fn from(name: &'a str) -> MethodKey<'a> {
        MethodKey::new(name)
    }
}

/// Words read from both ends of a name of at most [`MethodKey::WHOLE`]
/// bytes: up to 16 from the start and 16 from the end, overlapping, or
/// zero where a shorter name has no bytes. With the length they are the
/// whole name. Of a longer name they are its ends: unequal words still
/// mean unequal names.
#[inline(always)]
const fn words(b: &[u8]) -> [u64; 4] {
    let n = b.len();
    match n {
        0 => [0; 4],
        1..=7 => [tail_word(b), 0, 0, 0],
        8..=16 => [word(b, 0), word(b, n - 8), 0, 0],
        _ => [word(b, 0), word(b, 8), word(b, n - 16), word(b, n - 8)],
    }
}

/// The little-endian word of the 8 bytes of `b` at `at`.
#[inline(always)]
const fn word(b: &[u8], at: usize) -> u64 {
    match b.split_at(at).1.first_chunk::<8>() {
        Some(w) => u64::from_le_bytes(*w),
        None => panic!("a word past the end of a name"),
    }
}

/// Where a lookup of name `b` (its [`words`] `w`) starts: a mix of the
/// words of a whole name, a hash of every byte of a longer one (whose
/// words, its ends, many names may share, e.g. `a.v1.Users/Get` and
/// `a.v2.Users/Get` past 32 bytes).
#[inline(always)]
const fn start(b: &[u8], w: &[u64; 4]) -> usize {
    if b.len() > MethodKey::WHOLE {
        return fx_bytes(0, b) as usize;
    }
    let [a, b2, c, d] = *w;
    let mixed = a ^ b2.rotate_left(16) ^ c.rotate_left(32) ^ d.rotate_left(48) ^ b.len() as u64;
    // The high bits of the product depend on every bit below them.
    (mixed.wrapping_mul(0x517c_c1b7_2722_0a95) >> 56) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key made in a constant is the key made at run time, for names
    /// of every length around the words' bounds.
    #[test]
    fn a_constant_key_is_the_run_time_key() {
        const SHORT: MethodKey<'static> = MethodKey::new("svc/echo");
        const LONG: MethodKey<'static> = MethodKey::new("a.very.long.package.Service/SomeMethod");
        const TINY: MethodKey<'static> = MethodKey::new("a/b");
        const STARTS: [usize; 3] = [SHORT.start(), LONG.start(), TINY.start()];
        for (k, start) in [SHORT, LONG, TINY].into_iter().zip(STARTS) {
            let name = String::from(k.name());
            let again = MethodKey::new(&name);
            assert_eq!(again.words(), k.words(), "{name}");
            assert_eq!(again.start(), start, "{name}");
        }
        assert!(SHORT.is_whole() && !LONG.is_whole());
    }

    /// The words of a whole name are its bytes: read back, they give it.
    #[test]
    fn the_words_of_a_whole_name_are_its_bytes() {
        for len in 0..=MethodKey::WHOLE {
            let name: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            let k = MethodKey::new(&name);
            let w = k.words();
            // What the key keeps of a short name is what the name gives.
            assert_eq!(w, words(name.as_bytes()), "len {len}");
            assert!(k.start() < 1 << MethodKey::START_BITS);
            let mut back = vec![0u8; len];
            match len {
                0 => {}
                1..=7 => back.copy_from_slice(&w[0].to_le_bytes()[..len]),
                8..=16 => {
                    back[len - 8..].copy_from_slice(&w[1].to_le_bytes());
                    back[..8].copy_from_slice(&w[0].to_le_bytes());
                }
                _ => {
                    back[len - 8..].copy_from_slice(&w[3].to_le_bytes());
                    back[len - 16..len - 8].copy_from_slice(&w[2].to_le_bytes());
                    back[8..16].copy_from_slice(&w[1].to_le_bytes());
                    back[..8].copy_from_slice(&w[0].to_le_bytes());
                }
            }
            assert_eq!(back, name.as_bytes(), "len {len}");
        }
    }

    #[test]
    fn keys_print_their_name() {
        assert_eq!(
            format!("{:?}", MethodKey::from("svc/echo")),
            "MethodKey(\"svc/echo\")"
        );
    }
}
