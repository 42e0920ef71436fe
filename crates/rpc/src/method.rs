//! Method names and their canonical form.
//!
//! A method is named as gRPC names it, `package.Service/Method`
//! (`userdir.Users/BulkUpload`), and the name keeps the case it was
//! declared with: that is what travels on the wire and what layers,
//! metrics and logs see. Both the router (at registration) and the server
//! (on every call) canonicalise names, so two spellings of one method can
//! never reach different handlers or slip past a check keyed on the name:
//!
//! - a name is ASCII, at most [`MAX_METHOD_LEN`] bytes, made of segments
//!   separated by `/`; a segment uses only `A-Z a-z 0-9 _ . -` and is not
//!   `.` or `..`;
//! - leading, trailing and repeated `/` are dropped (so gRPC-style
//!   `/pkg.Service/Method` works); letters keep their case.
//!
//! Anything else (empty, whitespace, control bytes, non-ASCII, `..`) is not
//! a method name: the call fails with `INVALID_ARGUMENT`, on that call only.
//!
//! Earlier releases lower-cased names. For one release the router still
//! finds a method called by a spelling that differs only in case (an old
//! client's `userdir.users/bulkupload`), and refuses to register two names
//! that differ only in case, so that fallback can never pick between two
//! methods ([`folded`]).

use std::borrow::Cow;

use crate::status::Status;

/// Longest method name accepted, in bytes, before canonicalisation.
pub const MAX_METHOD_LEN: usize = 256;

fn segment_byte_ok(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Whether `name` is already canonical (the common case: no allocation).
/// One pass over the bytes.
fn is_canonical(name: &str) -> bool {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > MAX_METHOD_LEN {
        return false;
    }
    // Length of the current segment, and whether it is all dots so far.
    let mut seg_len = 0usize;
    let mut all_dots = true;
    for &c in b {
        if c == b'/' {
            // Empty segment (leading or repeated '/'), "." or "..".
            if seg_len == 0 || (all_dots && seg_len <= 2) {
                return false;
            }
            seg_len = 0;
            all_dots = true;
            continue;
        }
        if !segment_byte_ok(c) {
            return false;
        }
        all_dots &= c == b'.';
        seg_len += 1;
    }
    // The last segment: not empty (trailing '/'), not "." or "..".
    seg_len > 0 && !(all_dots && seg_len <= 2)
}

/// Canonicalises a method name (see the module docs). Borrows when the
/// name is already canonical.
pub fn canonicalize(name: &str) -> Result<Cow<'_, str>, Status> {
    if is_canonical(name) {
        return Ok(Cow::Borrowed(name));
    }
    if name.len() > MAX_METHOD_LEN {
        return Err(Status::invalid_argument("method name too long"));
    }
    let mut out = String::with_capacity(name.len());
    for seg in name.split('/').filter(|s| !s.is_empty()) {
        if seg == "." || seg == ".." || !seg.bytes().all(segment_byte_ok) {
            return Err(Status::invalid_argument(format!(
                "malformed method name {:?}",
                name.escape_debug().to_string()
            )));
        }
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(seg);
    }
    if out.is_empty() {
        return Err(Status::invalid_argument("empty method name"));
    }
    Ok(Cow::Owned(out))
}

/// The case-folded form of a canonical name (ASCII lower case): the key
/// under which the router finds a method called with the case of an
/// earlier release (`userdir.users/get` for `userdir.Users/Get`), and
/// under which it refuses a second name differing only in case.
pub fn folded(canonical: &str) -> Cow<'_, str> {
    if canonical.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(canonical.to_ascii_lowercase())
    } else {
        Cow::Borrowed(canonical)
    }
}

/// Checks that `name` is a fully qualified method name,
/// `package.Service/Method` (the package may be absent: `Service/Method`),
/// and returns its canonical form. This is the shape `#[weft::service]`
/// generates and every name the client side keys settings on
/// (`ChannelBuilder::idempotent`) must have: a bare `get` names no
/// service, so it could never match a typed call.
///
/// ```
/// use weft_rpc::method::qualified;
///
/// assert_eq!(qualified("/userdir.Users/Get").unwrap(), "userdir.Users/Get");
/// assert!(qualified("get").is_err());
/// assert!(qualified("a/b/c").is_err());
/// ```
pub fn qualified(name: &str) -> Result<Cow<'_, str>, Status> {
    let canonical = canonicalize(name)?;
    if canonical.bytes().filter(|&b| b == b'/').count() != 1 {
        return Err(Status::invalid_argument(format!(
            "method name {:?} is not `package.Service/Method`",
            name.escape_debug().to_string()
        )));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Code;

    #[test]
    fn canonical_names_are_borrowed() {
        for n in [
            "echo",
            "svc.v1/get_item",
            "a-b/c.d/e_f",
            "x1",
            "...",
            "a/.../b",
            ".a/b.",
        ] {
            assert!(
                matches!(canonicalize(n), Ok(Cow::Borrowed(b)) if b == n),
                "{n}"
            );
        }
    }

    #[test]
    fn fast_check_agrees_with_canonicalisation() {
        // Every string up to 5 bytes over a small alphabet.
        let alphabet = ['a', 'A', '/', '.', '-', ' '];
        let mut names = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> = names
                .iter()
                .filter(|n| n.len() == names.last().map_or(0, String::len))
                .flat_map(|n| alphabet.iter().map(move |c| format!("{n}{c}")))
                .collect();
            names.extend(longer);
        }
        assert!(names.len() > 9000);
        for n in &names {
            match canonicalize(n) {
                Ok(c) => {
                    assert_eq!(is_canonical(n), matches!(c, Cow::Borrowed(_)), "{n:?}");
                    assert!(is_canonical(&c), "{n:?} -> {c:?}");
                }
                Err(_) => assert!(!is_canonical(n), "{n:?}"),
            }
        }
    }

    #[test]
    fn odd_spellings_fold_to_one_name_and_keep_their_case() {
        for n in ["/Echo", "Echo/", "//Echo//"] {
            assert_eq!(canonicalize(n).unwrap(), "Echo", "{n}");
        }
        assert_eq!(
            canonicalize("/pkg.Svc//BulkUpload").unwrap(),
            "pkg.Svc/BulkUpload"
        );
        assert!(matches!(
            canonicalize("userdir.Users/Get"),
            Ok(Cow::Borrowed(_))
        ));
        assert_eq!(folded("pkg.Svc/BulkUpload"), "pkg.svc/bulkupload");
        assert!(matches!(folded("pkg.svc/get"), Cow::Borrowed(_)));
    }

    #[test]
    fn qualified_names_have_a_service_and_a_method() {
        for (n, want) in [
            ("userdir.Users/Get", "userdir.Users/Get"),
            ("/Users/Get", "Users/Get"),
            ("/a.b.C//D/", "a.b.C/D"),
        ] {
            assert_eq!(qualified(n).unwrap(), want, "{n}");
        }
        for n in ["get", "Get", "/get/", "a/b/c", "", "a b/c", "../x"] {
            let e = qualified(n).unwrap_err();
            assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{n:?}");
        }
    }

    #[test]
    fn malformed_names_are_invalid_argument() {
        let long = "a".repeat(MAX_METHOD_LEN + 1);
        for n in [
            "", "/", "///", "a b", "a\0b", "é", "a/../b", "./a", "a/.", "tab\t", &long,
        ] {
            let e = canonicalize(n).unwrap_err();
            assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{n:?}");
        }
        // Exactly at the limit is fine.
        assert!(canonicalize(&"a".repeat(MAX_METHOD_LEN)).is_ok());
    }
}
