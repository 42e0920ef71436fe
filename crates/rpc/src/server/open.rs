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

use crate::server::route::RouteId;
use crate::server::router::{Route, Router};
use crate::status::Status;

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

/// Longest `OPEN` block [`LastOpen`] keeps: a method name of about 40
/// bytes and a codec entry fit.
pub(crate) const REPEAT_MAX: usize = 64;

/// What a connection's previous call opened with, so that a call opening
/// with the same bytes is routed by one comparison.
///
/// A client sends the same block for every call of a method that carries
/// no timeout: the method, and for a typed call its codec. Byte-equal
/// blocks read alike, so such a call has the previous call's route, its
/// codec already checked against the route's, and no timeout: reading
/// the block, resolving the name and comparing the codec again (about
/// 170 instructions for a typed call) becomes one compare of a few dozen
/// bytes. Only a block that routed without error and carried no timeout
/// is kept (a timeout counts down, so its blocks rarely repeat), and
/// only one of at most [`REPEAT_MAX`] bytes: longer blocks carry trace
/// context, which differs per call.
#[derive(Debug, Clone)]
pub(crate) struct LastOpen {
    /// The route the previous call resolved to, kept even when its block
    /// is not (a repeated method name still costs one comparison there).
    route: Option<RouteId>,
    /// The kept block is `block[..n]` when `kept` is `Some(n)`.
    block: [u8; REPEAT_MAX],
    kept: Option<usize>,
}

impl Default for LastOpen {
    fn default() -> Self {
        LastOpen {
            route: None,
            block: [0; REPEAT_MAX],
            kept: None,
        }
    }
}

/// A call's route and the timeout its `OPEN` carried.
pub(crate) struct Routed<'r> {
    /// The route's id.
    pub(crate) id: RouteId,
    /// The route.
    pub(crate) route: &'r Route,
    /// The caller's remaining time in microseconds, unchecked.
    pub(crate) timeout_micros: Option<u64>,
}

impl LastOpen {
    /// Routes a call that opened with `meta`: its route, the codec it
    /// names checked against the route's (`UNIMPLEMENTED` when they
    /// differ), and its timeout.
    pub(crate) fn route<'r>(
        &mut self,
        router: &'r Router,
        meta: &Metadata,
    ) -> Result<Routed<'r>, Status> {
        let raw = meta.as_bytes();
        if self.kept == Some(raw.len())
            && let Some(id) = self.route
            && raw[..] == self.block[..raw.len()]
            && let Some(route) = router.by_id(id)
        {
            return Ok(Routed {
                id,
                route,
                timeout_micros: None,
            });
        }
        // Forgotten before resolving: what is kept must be what `route`
        // resolved last.
        self.kept = None;
        let open = Open::read(meta);
        let (id, route) = router.resolve_after(open.method, &mut self.route)?;
        if let (Some(want), Some(got)) = (route.codec, open.codec)
            && got != want.as_bytes()
        {
            return Err(crate::codec::typed::codec_mismatch(&route.name, want, got));
        }
        if open.timeout_micros.is_none()
            && let Some(kept) = self.block.get_mut(..raw.len())
        {
            kept.copy_from_slice(raw);
            self.kept = Some(raw.len());
        }
        Ok(Routed {
            id,
            route,
            timeout_micros: open.timeout_micros,
        })
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

#[cfg(test)]
mod repeat_tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;
    use crate::codec::typed::Raw;
    use crate::status::Code;

    fn router() -> Router {
        Router::new()
            .unary("svc/a", |_c, b| async move { Ok(b) })
            .unary_codec("svc/typed", Raw, |_c, b: Bytes| async move { Ok(b) })
    }

    fn open(method: &str, codec: Option<&str>) -> Metadata {
        let b = Metadata::builder().method(method);
        match codec {
            Some(c) => b.codec(c).finish(),
            None => b.finish(),
        }
    }

    fn name<'a>(r: &'a Result<Routed<'_>, Status>) -> &'a str {
        &r.as_ref().expect("routes").route.name
    }

    /// A repeated block routes as it did the first time; a different one
    /// (another method, a codec the route does not carry) is read afresh.
    #[test]
    fn a_repeated_open_routes_as_the_first() {
        let router = router();
        let mut last = LastOpen::default();
        let (a, typed) = (open("svc/a", None), open("svc/typed", Some("raw")));
        for meta in [&a, &a, &typed, &typed, &a, &typed] {
            let want = meta.method().unwrap();
            assert_eq!(name(&last.route(&router, meta)), want);
        }
        // Same method, a codec it does not carry: refused every time,
        // right after the same method routed with its own codec.
        let wrong = open("svc/typed", Some("json"));
        for _ in 0..2 {
            let e = last.route(&router, &wrong).err().expect("refused");
            assert_eq!(e.code(), Code::UNIMPLEMENTED);
        }
        assert_eq!(name(&last.route(&router, &typed)), "svc/typed");
        // The same length as a kept block, other bytes: not its route.
        assert_eq!(name(&last.route(&router, &a)), "svc/a");
        let unknown = open("svc/z", None);
        for _ in 0..2 {
            let e = last.route(&router, &unknown).err().expect("refused");
            assert_eq!(e.code(), Code::UNIMPLEMENTED);
        }
        // A call routed elsewhere without being kept (it carries a
        // timeout) does not leave the kept block pointing at its route.
        assert_eq!(name(&last.route(&router, &a)), "svc/a");
        let timed = Metadata::builder()
            .method("svc/typed")
            .timeout(Duration::from_secs(1))
            .finish();
        assert_eq!(name(&last.route(&router, &timed)), "svc/typed");
        // Nothing is kept now, but a route is: an empty block (no
        // method) must not pass for the kept nothing.
        let e = last
            .route(&router, &Metadata::new())
            .err()
            .expect("refused");
        assert_eq!(e.code(), Code::INVALID_ARGUMENT);
        assert_eq!(name(&last.route(&router, &a)), "svc/a");
    }

    /// A block with a timeout keeps its timeout however often it repeats;
    /// a block too long to keep still routes.
    #[test]
    fn timeouts_and_long_blocks_are_read_each_time() {
        let router = router();
        let mut last = LastOpen::default();
        let timed = Metadata::builder()
            .method("svc/a")
            .timeout(Duration::from_micros(7))
            .finish();
        for _ in 0..2 {
            let r = last.route(&router, &timed).expect("routes");
            assert_eq!(r.timeout_micros, Some(7));
        }
        let long = Metadata::builder()
            .method("svc/a")
            .custom(b"k", &[1; REPEAT_MAX])
            .finish();
        for _ in 0..2 {
            assert_eq!(name(&last.route(&router, &long)), "svc/a");
        }
        assert_eq!(name(&last.route(&router, &open("svc/a", None))), "svc/a");
    }
}
