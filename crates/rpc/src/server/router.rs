//! The [`Router`]: canonical method names to async handlers.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;

#[cfg(feature = "json")]
use crate::codec::typed::Json;
use crate::codec::typed::{Codec, Requests, Responses, UnaryMethod, With, Wrap};
use crate::hash::FastHash;
use crate::method;
use crate::server::call::{
    Handler, ServiceMethod, bidi_handler, client_streaming_handler, server_streaming_handler,
    unary_handler,
};
use crate::server::context::Context;
use crate::server::route::{RouteId, Shape};
use crate::server::streams::{BidiStream, RequestStream, ResponseSink};
use crate::status::Status;

#[derive(Clone)]
pub(crate) struct Route {
    pub(crate) name: Arc<str>,
    pub(crate) shape: Shape,
    pub(crate) handler: Arc<dyn Handler>,
    /// The codec of a typed method (`Codec::NAME`), checked against the
    /// one a call names; `None` for a raw or `_json` registration.
    pub(crate) codec: Option<&'static str>,
}

/// Maps method names to handlers.
///
/// Names are canonicalised at registration and on every call (see
/// [`method`](crate::method)), so `/pkg.Svc/Echo` and `pkg.Svc//Echo/`
/// reach the same handler; names keep their case. For one release a call
/// whose name differs from a method's only in case (`pkg.svc/echo`, as
/// earlier releases lower-cased names) still reaches it, and two names
/// differing only in case cannot both be registered. Handlers are async closures taking a [`Context`]; raw handlers
/// deal in `Bytes`, the `_json` variants in serde types.
///
/// ```
/// use bytes::Bytes;
/// use weft_rpc::{Router, Status};
///
/// let router = Router::new()
///     .unary("demo.Echo/Say", |_ctx, req: Bytes| async move { Ok::<_, Status>(req) });
/// assert!(router.has_method("/demo.Echo/Say"));
/// assert!(router.has_method("demo.echo/say")); // an earlier release's spelling
/// ```
#[derive(Default, Clone)]
pub struct Router {
    /// Routes in registration order; a [`RouteId`] indexes it.
    routes: Vec<Route>,
    /// Canonical names to their routes.
    ids: HashMap<Arc<str>, RouteId, FastHash>,
    /// Each route by its name's case-folded form ([`method::folded`]):
    /// the lookup of a name spelled in another case, kept for one release
    /// after names stopped being lower-cased.
    folded: HashMap<Box<str>, RouteId, FastHash>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for r in &self.routes {
            m.entry(&r.name, &r.shape);
        }
        m.finish()
    }
}

impl Router {
    /// An empty router: every call is `UNIMPLEMENTED`.
    pub fn new() -> Router {
        Router::default()
    }

    fn add(self, name: &str, shape: Shape, handler: Arc<dyn Handler>) -> Router {
        self.add_coded(name, shape, handler, None)
    }

    pub(crate) fn add_coded(
        mut self,
        name: &str,
        shape: Shape,
        handler: Arc<dyn Handler>,
        codec: Option<&'static str>,
    ) -> Router {
        let canonical: Arc<str> = match method::canonicalize(name) {
            Ok(c) => Arc::from(&*c),
            Err(e) => panic!("cannot register method {name:?}: {e}"),
        };
        let id = match u32::try_from(self.routes.len()) {
            Ok(i) => RouteId(i),
            Err(_) => panic!("cannot register method {name:?}: too many methods"),
        };
        if self.ids.insert(canonical.clone(), id).is_some() {
            panic!("method {canonical:?} registered twice");
        }
        let folded: Box<str> = method::folded(&canonical).into();
        if let Some(other) = self.folded.insert(folded, id) {
            let other = &self.routes[other.index()].name;
            panic!("method {canonical:?} differs from registered {other:?} only in case");
        }
        self.routes.push(Route {
            name: canonical,
            shape,
            handler,
            codec,
        });
        self
    }

    /// Registers a unary handler on raw bytes.
    ///
    /// # Panics
    /// If `name` is not a valid method name or is already registered (both
    /// are programming errors, caught at start-up).
    pub fn unary<F, Fut>(self, name: &str, handler: F) -> Router
    where
        F: Fn(Context, Bytes) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Bytes, Status>> + Send + 'static,
    {
        self.add(
            name,
            Shape::Unary,
            Arc::new(unary_handler::<_, Bytes, Bytes>(Arc::new(handler))),
        )
    }

    /// Registers a unary handler on JSON values.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    #[cfg(feature = "json")]
    pub fn unary_json<F, Fut, Req, Resp>(self, name: &str, handler: F) -> Router
    where
        F: Fn(Context, Req) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
        Req: serde::de::DeserializeOwned + Send + 'static,
        Resp: serde::Serialize + Send + 'static,
    {
        use crate::codec::message::Json;
        let h = move |ctx, Json(req): Json<Req>| {
            let fut = handler(ctx, req);
            async move { fut.await.map(Json) }
        };
        self.add(name, Shape::Unary, Arc::new(unary_handler(Arc::new(h))))
    }

    /// Registers a server-streaming handler: one request, then messages sent
    /// through the [`ResponseSink`]; the call ends with the handler's result.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    pub fn server_streaming<F, Fut>(self, name: &str, handler: F) -> Router
    where
        F: Fn(Context, Bytes, ResponseSink) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Status>> + Send + 'static,
    {
        self.add(
            name,
            Shape::ServerStreaming,
            Arc::new(server_streaming_handler::<F, _, Bytes>(handler)),
        )
    }

    /// Registers a server-streaming handler whose request is JSON (send
    /// JSON responses with [`ResponseSink::send_json`]).
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    #[cfg(feature = "json")]
    pub fn server_streaming_json<F, Fut, Req>(self, name: &str, handler: F) -> Router
    where
        F: Fn(Context, Req, ResponseSink) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Status>> + Send + 'static,
        Req: serde::de::DeserializeOwned + Send + 'static,
    {
        use crate::codec::message::Json;
        let h = move |ctx, Json(req): Json<Req>, sink| handler(ctx, req, sink);
        self.add(
            name,
            Shape::ServerStreaming,
            Arc::new(server_streaming_handler(h)),
        )
    }

    /// Registers a client-streaming handler: reads messages from the
    /// [`RequestStream`], returns one response.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    pub fn client_streaming<F, Fut>(self, name: &str, handler: F) -> Router
    where
        F: Fn(Context, RequestStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Bytes, Status>> + Send + 'static,
    {
        self.add(
            name,
            Shape::ClientStreaming,
            Arc::new(client_streaming_handler::<F, _, Bytes>(handler)),
        )
    }

    /// Registers a client-streaming handler returning a JSON response (read
    /// JSON requests with [`RequestStream::message_json`]).
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    #[cfg(feature = "json")]
    pub fn client_streaming_json<F, Fut, Resp>(self, name: &str, handler: F) -> Router
    where
        F: Fn(Context, RequestStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
        Resp: serde::Serialize + Send + 'static,
    {
        use crate::codec::message::Json;
        let h = move |ctx, rx| {
            let fut = handler(ctx, rx);
            async move { fut.await.map(Json) }
        };
        self.add(
            name,
            Shape::ClientStreaming,
            Arc::new(client_streaming_handler(h)),
        )
    }

    /// Registers a bidirectional handler.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    pub fn bidi<F, Fut>(self, name: &str, handler: F) -> Router
    where
        F: Fn(Context, BidiStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Status>> + Send + 'static,
    {
        self.add(name, Shape::Bidi, Arc::new(bidi_handler(handler)))
    }

    /// Whether a method (any spelling) is registered.
    pub fn has_method(&self, name: &str) -> bool {
        self.route(name).is_ok()
    }

    /// The canonical names and shapes of every method, sorted.
    pub fn methods(&self) -> Vec<(&str, Shape)> {
        let mut v: Vec<_> = self.routes.iter().map(|r| (&*r.name, r.shape)).collect();
        v.sort_by_key(|(n, _)| *n);
        v
    }

    /// Finds the route of a called name: `INVALID_ARGUMENT` for a malformed
    /// name, `UNIMPLEMENTED` for an unknown one.
    pub(crate) fn route(&self, name: &str) -> Result<&Route, Status> {
        self.resolve(name).map(|(_, route)| route)
    }

    /// [`route`](Self::route), with the route's id: a call's name is
    /// canonicalised and hashed once, here, as the call opens.
    pub(crate) fn resolve(&self, name: &str) -> Result<(RouteId, &Route), Status> {
        let canonical = method::canonicalize(name)?;
        self.ids
            .get(&*canonical)
            // Only a miss pays for this: an earlier release's spelling.
            .or_else(|| self.folded.get(&*method::folded(&canonical)))
            .and_then(|&id| Some((id, self.routes.get(id.index())?)))
            .ok_or_else(|| Status::unimplemented(format!("no method {:?}", canonical.as_ref())))
    }

    /// [`resolve`](Self::resolve) for the raw bytes of a call's method
    /// entry, trying `last` first: the route this connection's previous
    /// call resolved to. A caller repeating a method in its canonical
    /// spelling (what weft's client sends) costs one comparison, not a
    /// UTF-8 check, canonicalisation and a hash. Equal bytes are the same
    /// route: a canonical name canonicalises to itself.
    pub(crate) fn resolve_after(
        &self,
        name: Option<&[u8]>,
        last: &mut Option<RouteId>,
    ) -> Result<(RouteId, &Route), Status> {
        if let (Some(id), Some(name)) = (*last, name)
            && let Some(route) = self.routes.get(id.index())
            && route.name.as_bytes() == name
        {
            return Ok((id, route));
        }
        let name = name.and_then(|n| std::str::from_utf8(n).ok());
        let (id, route) = self.resolve(name.unwrap_or(""))?;
        *last = Some(id);
        Ok((id, route))
    }

    /// The route with this id.
    pub(crate) fn by_id(&self, id: RouteId) -> Option<&Route> {
        self.routes.get(id.index())
    }

    /// How many routes there are (every [`RouteId`] is below it).
    pub(crate) fn len(&self) -> usize {
        self.routes.len()
    }
}

/// A set of methods that registers itself on a [`Router`]: what
/// `#[weft::service]` generates for an implementation of a service trait.
pub trait IntoRoutes {
    /// Adds every method to `router`.
    fn into_routes(self, router: Router) -> Router;
}

impl Router {
    /// Adds a service's methods (see [`IntoRoutes`]).
    ///
    /// # Panics
    /// If one of its methods is already registered.
    pub fn add_service(self, service: impl IntoRoutes) -> Router {
        service.into_routes(self)
    }

    /// Registers a unary handler on values carried by `codec`.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    pub fn unary_codec<C, F, Fut, Req, Resp>(self, name: &str, _codec: C, handler: F) -> Router
    where
        C: Codec<Req> + Codec<Resp>,
        F: Fn(Context, Req) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
        Req: Send + 'static,
        Resp: Send + 'static,
    {
        let h = move |ctx, With(req, _): With<C, Req>| Wrap::<_, C> {
            fut: handler(ctx, req),
            _c: PhantomData,
        };
        let codec = Some(<C as Codec<Req>>::NAME);
        self.add_coded(
            name,
            Shape::Unary,
            Arc::new(unary_handler(Arc::new(h))),
            codec,
        )
    }

    /// Registers the unary method `M` of a typed service, on values carried
    /// by `codec`: what `#[weft::service]` servers register (see
    /// [`UnaryMethod`]). A call's handler is the service's method itself,
    /// its future borrowing the service, which the call holds once.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    pub fn unary_method<C, S, M, Req, Resp>(
        self,
        name: &str,
        _codec: C,
        service: Arc<S>,
        _method: M,
    ) -> Router
    where
        C: Codec<Req> + Codec<Resp>,
        S: Send + Sync + 'static,
        M: UnaryMethod<S, Req, Resp>,
        Req: Send + 'static,
        Resp: Send + 'static,
    {
        let h = ServiceMethod::<S, M, C>::new(service);
        let handler = unary_handler::<_, With<C, Req>, With<C, Resp>>(h);
        let codec = Some(<C as Codec<Req>>::NAME);
        self.add_coded(name, Shape::Unary, Arc::new(handler), codec)
    }

    /// Registers a server-streaming handler on values carried by `codec`.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    pub fn server_streaming_codec<C, F, Fut, Req, Resp>(
        self,
        name: &str,
        _codec: C,
        handler: F,
    ) -> Router
    where
        C: Codec<Req> + Codec<Resp>,
        F: Fn(Context, Req, Responses<Resp, C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Status>> + Send + 'static,
        Req: Send + 'static,
    {
        let h =
            move |ctx, With(req, _): With<C, Req>, sink| handler(ctx, req, Responses::new(sink));
        let codec = Some(<C as Codec<Req>>::NAME);
        let handler = Arc::new(server_streaming_handler(h));
        self.add_coded(name, Shape::ServerStreaming, handler, codec)
    }

    /// Registers a client-streaming handler on values carried by `codec`.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    pub fn client_streaming_codec<C, F, Fut, Req, Resp>(
        self,
        name: &str,
        _codec: C,
        handler: F,
    ) -> Router
    where
        C: Codec<Req> + Codec<Resp>,
        F: Fn(Context, Requests<Req, C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
        Resp: Send + 'static,
    {
        let h = move |ctx, rx| {
            let fut = handler(ctx, Requests::new(rx));
            async move { fut.await.map(With::<C, Resp>::new) }
        };
        let codec = Some(<C as Codec<Req>>::NAME);
        let handler = Arc::new(client_streaming_handler(h));
        self.add_coded(name, Shape::ClientStreaming, handler, codec)
    }

    /// Registers a bidirectional handler on values carried by `codec`. The
    /// two halves can be moved to two tasks.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    pub fn bidi_codec<C, F, Fut, Req, Resp>(self, name: &str, _codec: C, handler: F) -> Router
    where
        C: Codec<Req> + Codec<Resp>,
        F: Fn(Context, Requests<Req, C>, Responses<Resp, C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Status>> + Send + 'static,
    {
        let h = move |ctx, s: crate::server::streams::BidiStream| {
            let (rx, tx) = s.split();
            handler(ctx, Requests::new(rx), Responses::new(tx))
        };
        let codec = Some(<C as Codec<Req>>::NAME);
        self.add_coded(name, Shape::Bidi, Arc::new(bidi_handler(h)), codec)
    }

    /// Registers a bidirectional handler on JSON values.
    ///
    /// # Panics
    /// As [`unary`](Self::unary).
    #[cfg(feature = "json")]
    pub fn bidi_json<F, Fut, Req, Resp>(self, name: &str, handler: F) -> Router
    where
        Json: Codec<Req> + Codec<Resp>,
        F: Fn(Context, Requests<Req, Json>, Responses<Resp, Json>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Status>> + Send + 'static,
    {
        self.bidi_codec(name, Json, handler)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Code;

    fn router() -> Router {
        Router::new()
            .unary("Echo", |_c, b| async move { Ok(b) })
            .server_streaming("svc/count", |_c, _b, _s| async move { Ok(()) })
            .client_streaming("svc/sum", |_c, _r| async move { Ok(Bytes::new()) })
            .bidi("svc/chat", |_c, _s| async move { Ok(()) })
    }

    #[test]
    fn routes_by_canonical_name() {
        let r = router();
        // The declared case, and an earlier release's lower-cased spelling
        // (any case, as those releases folded every call): one route,
        // named as declared.
        for n in ["Echo", "/Echo", "Echo/", "//Echo", "echo", "/ECHO"] {
            assert!(r.has_method(n), "{n}");
            assert_eq!(&*r.route(n).unwrap().name, "Echo");
        }
        assert_eq!(&*r.route("SVC/Count").unwrap().name, "svc/count");
        assert_eq!(
            r.methods(),
            [
                ("Echo", Shape::Unary),
                ("svc/chat", Shape::Bidi),
                ("svc/count", Shape::ServerStreaming),
                ("svc/sum", Shape::ClientStreaming),
            ]
        );
        assert!(format!("{r:?}").contains("svc/chat"));
    }

    /// Whatever the connection resolved last, a name reaches the route
    /// its canonical form names, or fails as `route` fails it.
    #[test]
    fn resolving_after_a_previous_call_finds_the_same_routes() {
        let r = router();
        let names: [&[u8]; 9] = [
            b"echo",
            b"echo",
            b"/ECHO",
            b"svc/sum",
            b"svc/sum",
            b"svc/chat",
            b"nope",
            b"\xff",
            b"svc/count",
        ];
        let mut last = None;
        for name in names {
            let got = r.resolve_after(Some(name), &mut last);
            let text = std::str::from_utf8(name).unwrap_or("");
            match (got, r.resolve(text)) {
                (Ok((id, a)), Ok((want_id, b))) => {
                    assert_eq!((id, &a.name), (want_id, &b.name), "{text}");
                    assert_eq!(last, Some(id));
                }
                (Err(a), Err(b)) => assert_eq!(a.code(), b.code(), "{text}"),
                (a, b) => panic!("{text}: {:?} vs {:?}", a.is_ok(), b.is_ok()),
            }
        }
        assert_eq!(
            r.resolve_after(None, &mut last).err().map(|e| e.code()),
            Some(Code::INVALID_ARGUMENT)
        );
    }

    #[test]
    fn unknown_and_malformed_names() {
        let r = router();
        let e = r.route("nope").err().unwrap();
        assert_eq!(e.code(), Code::UNIMPLEMENTED);
        assert!(e.message().contains("nope"));
        assert_eq!(
            r.route("../echo").err().unwrap().code(),
            Code::INVALID_ARGUMENT
        );
        assert_eq!(r.route("").err().unwrap().code(), Code::INVALID_ARGUMENT);
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn duplicate_registration_panics() {
        let _ = router().unary("/Echo/", |_c, b| async move { Ok(b) });
    }

    #[test]
    #[should_panic(expected = "differs from registered \"Echo\" only in case")]
    fn names_differing_only_in_case_are_refused() {
        let _ = router().unary("ECHO", |_c, b| async move { Ok(b) });
    }

    #[test]
    #[should_panic(expected = "cannot register")]
    fn malformed_registration_panics() {
        let _ = Router::new().unary("a b", |_c, b| async move { Ok(b) });
    }
}
