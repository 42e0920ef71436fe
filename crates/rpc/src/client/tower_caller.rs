//! Calls through a tower stack (feature `tower`): a call of any shape is an
//! [`OpenRequest`], a service's answer the [`OpenCall`] it opened, and
//! [`TowerCaller`] makes such a stack a [`Caller`], so that a generated
//! client runs over `ServiceBuilder::new().layer(..).service(channel)`.
//!
//! As in tonic, where a layer's response future ends at the response
//! headers, a layer here wraps the opening of the call: a timeout layer
//! bounds the open, and the call's own deadline (its options) bounds the
//! rest. Every shape passes the stack, the unary one included, so this
//! path allocates (the request's method, a boxed future) where
//! [`Caller::call_unary`] on a `Client` or a `Channel` does not.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tower_service::Service;

use super::Client;
use super::caller::Caller;
use super::caller::OpenCall;
use super::intercept::{ClientInterceptors, Outgoing};
use crate::client::response::Response;
use crate::codec::typed::Codec;
use crate::codec::typed::{response_error, wire_codec};
use crate::codec::{DEFAULT_MAX_MESSAGE, Framed};
use crate::options::CallOptions;
use crate::status::Status;

/// A call to open, as a tower stack of callers sees it: the method, the
/// options (a layer may change them), and the codec and first message the
/// caller prepared.
#[derive(Debug)]
pub struct OpenRequest {
    method: String,
    options: CallOptions,
    codec: Option<&'static str>,
    /// The one request of a unary or server-streaming call (the request
    /// side then ends); `None` for client streaming and bidi.
    first: Option<Framed>,
}

impl OpenRequest {
    /// The method, as the caller spelled it.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The call's options.
    pub fn options(&self) -> &CallOptions {
        &self.options
    }

    /// The call's options, for a layer to change (e.g. add metadata).
    pub fn options_mut(&mut self) -> &mut CallOptions {
        &mut self.options
    }

    /// Whether the request carries its one message (unary, server
    /// streaming) rather than messages sent later.
    pub fn has_message(&self) -> bool {
        self.first.is_some()
    }
}

/// A copy for another attempt: the message's buffers are shared, not copied.
impl Clone for OpenRequest {
    fn clone(&self) -> Self {
        OpenRequest {
            method: self.method.clone(),
            options: self.options.clone(),
            codec: self.codec,
            first: self.first.as_ref().map(|f| match f {
                Framed::One(b) => Framed::One(b.clone()),
                Framed::Two(prefix, body) => Framed::Two(prefix.clone(), body.clone()),
            }),
        }
    }
}

/// A `Client` as the innermost service of a tower stack of callers
/// ([`Client::open_service`]): it opens each call on its connection. (Not
/// a `Service` impl on `Client` itself, whose `Service<UnaryRequest>`
/// callers rely on inference picking the one impl.)
#[derive(Debug, Clone)]
pub struct OpenService {
    client: Client,
}

impl Client {
    /// This client as a `tower::Service<OpenRequest>`, to put under tower
    /// layers and a [`TowerCaller`].
    pub fn open_service(&self) -> OpenService {
        OpenService {
            client: self.clone(),
        }
    }
}

impl Service<OpenRequest> for OpenService {
    type Response = OpenCall;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<OpenCall, Status>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        // The connection's stream credit is waited for inside the open.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: OpenRequest) -> Self::Future {
        let client = self.client.clone();
        Box::pin(async move {
            let (first, end) = match req.first {
                Some(f) => (f, true),
                None => (Framed::One(Bytes::new()), false),
            };
            client
                .start(&req.method, first, end, &req.options, req.codec)
                .await
                .map(OpenCall)
        })
    }
}

/// A tower stack of callers as a [`Caller`]: `S` is a
/// `Service<OpenRequest, Response = OpenCall, Error = Status>` such as a
/// `Client`'s [`open_service`](Client::open_service), the `weft` facade's
/// `Channel`, or layers around either.
/// Messages are encoded here, up to [`max_message`](Self::max_message).
#[derive(Debug, Clone)]
pub struct TowerCaller<S> {
    inner: S,
    max_message: usize,
    intercept: ClientInterceptors,
}

impl<S> TowerCaller<S> {
    /// Calls through `stack`, messages up to 4 MiB.
    pub fn new(stack: S) -> TowerCaller<S> {
        TowerCaller {
            inner: stack,
            max_message: DEFAULT_MAX_MESSAGE,
            intercept: ClientInterceptors::new(),
        }
    }

    /// The largest request message it encodes (bytes); a larger one fails
    /// the call locally with `RESOURCE_EXHAUSTED`. Default 4 MiB.
    #[must_use]
    pub fn max_message(mut self, bytes: usize) -> TowerCaller<S> {
        self.max_message = bytes;
        self
    }

    /// The stack.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S> TowerCaller<S>
where
    S: Service<OpenRequest, Response = OpenCall, Error = Status> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    /// The request of a call of `codec`, intercepted.
    fn request<C: Codec<Req>, Req>(
        &self,
        method: &str,
        request: Option<&Req>,
        opts: &CallOptions,
    ) -> Result<OpenRequest, Status> {
        let options = self.intercept.apply(method, Cow::Borrowed(opts))?;
        let first = request
            .map(|r| C::encode(r, self.max_message))
            .transpose()?;
        Ok(OpenRequest {
            method: method.to_owned(),
            options: options.into_owned(),
            codec: wire_codec::<C, Req>(),
            first,
        })
    }

    /// Opens the call through the stack (readiness, then the call).
    async fn open(&self, req: Result<OpenRequest, Status>) -> Result<OpenCall, Status> {
        let req = req?;
        let mut stack = self.inner.clone();
        std::future::poll_fn(|cx| stack.poll_ready(cx)).await?;
        stack.call(req).await
    }

    /// A unary call: opened through the stack, then its one response read
    /// and decoded by `finish`.
    async fn unary<T>(
        &self,
        req: Result<OpenRequest, Status>,
        finish: impl FnOnce(Bytes, crate::codec::wire::Ends<'_>) -> Result<T, Status>,
    ) -> Result<T, Status> {
        let OpenCall(mut call) = self.open(req).await?;
        let body = call.finish().await?;
        finish(body, call.reader.ends())
            .map_err(|e| response_error(call.stream.metadata().method(), &e))
    }
}

impl<S> Caller for TowerCaller<S>
where
    S: Service<OpenRequest, Response = OpenCall, Error = Status> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    fn call_unary<C, Req, Resp>(
        &self,
        method: &str,
        _codec: C,
        request: Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Resp, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Send + Sync,
        Resp: Send,
    {
        let req = self.request::<C, Req>(method, Some(&request), opts);
        self.unary(req, |b, _| <C as Codec<Resp>>::decode(b))
    }

    fn call_unary_response<C, Req, Resp>(
        &self,
        method: &str,
        _codec: C,
        request: Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Response<Resp>, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Send + Sync,
        Resp: Send,
    {
        let req = self.request::<C, Req>(method, Some(&request), opts);
        self.unary(req, |b, r| {
            <C as Codec<Resp>>::decode(b).map(|m| Response::read(m, r))
        })
    }

    fn open_call<C, Req>(
        &self,
        method: &str,
        _codec: C,
        request: Option<&Req>,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<OpenCall, Status>> + Send
    where
        C: Codec<Req>,
        Req: Sync + 'static,
    {
        let req = self.request::<C, Req>(method, request, opts);
        self.open(req)
    }

    fn with_interceptor<F>(mut self, interceptor: F) -> Self
    where
        F: Fn(&mut Outgoing<'_>) -> Result<(), Status> + Send + Sync + 'static,
    {
        self.intercept.push(interceptor);
        self
    }
}
