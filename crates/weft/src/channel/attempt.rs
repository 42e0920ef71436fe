//! [`Attempt`]: one try of a channel call on a leased connection.
//!
//! The retry loop (`Channel::run`) owns the attempt and the leased client
//! and borrows both for each try, so a try is the client's own call future
//! awaited in the loop's state machine: no future of the attempt's own
//! around it, no handle on the client cloned into it, nothing extra moved
//! when it starts. (A closure returning a future could not borrow the
//! loop's locals: its future's type would have to be named for every
//! lifetime at once, and such a future is not `Send`.)

use std::future::Future;
use std::marker::PhantomData;

use weft_rpc::{CallOptions, Caller, Client, Codec, MethodKey, OpenCall, Response, Status};

/// One try of a call: what it sends, started on `client` with the call's
/// fixed `opts`. Tried again, it sends the same request.
pub(super) trait Attempt {
    /// What a successful try gives back.
    type Output;

    /// The method called (held once, here, rather than beside the
    /// attempt in every call future too).
    fn method(&self) -> &str;

    /// Starts one try on `client`.
    fn attempt<'c>(
        &'c self,
        client: &'c Client,
        opts: &'c CallOptions,
    ) -> impl Future<Output = Result<Self::Output, Status>> + 'c;
}

/// A unary call: the reply's message (`Message`) or the whole
/// [`Response`] (`WithMetadata`). It holds its method's [`MethodKey`],
/// made where the caller named the method (a constant name's at compile
/// time), so no try works out the client's cache key again.
pub(super) struct Unary<'m, C, Req, Resp, Shape> {
    pub(super) method: MethodKey<'m>,
    pub(super) codec: C,
    pub(super) request: Req,
    pub(super) _shape: PhantomData<fn() -> (Resp, Shape)>,
}

/// [`Unary`] answering with the reply's message.
pub(super) enum Message {}

/// [`Unary`] answering with the reply's message and metadata.
pub(super) enum WithMetadata {}

impl<'m, C, Req, Resp, Shape> Unary<'m, C, Req, Resp, Shape> {
    pub(super) fn new(method: MethodKey<'m>, codec: C, request: Req) -> Self {
        Unary {
            method,
            codec,
            request,
            _shape: PhantomData,
        }
    }
}

impl<C, Req, Resp> Attempt for Unary<'_, C, Req, Resp, Message>
where
    C: Codec<Req> + Codec<Resp>,
    Req: Send + Sync,
    Resp: Send,
{
    type Output = Resp;

    #[inline]
    fn method(&self) -> &str {
        self.method.name()
    }

    /// Inlined into the call loop (itself inlined into the caller): out
    /// of line, the call's preparation was a function of its own that
    /// handed the client's call future back through memory, to be moved
    /// into the loop's state.
    #[inline(always)]
    fn attempt<'c>(
        &'c self,
        client: &'c Client,
        opts: &'c CallOptions,
    ) -> impl Future<Output = Result<Resp, Status>> + 'c {
        client.unary_codec_keyed(&self.method, self.codec, &self.request, opts)
    }
}

impl<C, Req, Resp> Attempt for Unary<'_, C, Req, Resp, WithMetadata>
where
    C: Codec<Req> + Codec<Resp>,
    Req: Send + Sync,
    Resp: Send,
{
    type Output = Response<Resp>;

    #[inline]
    fn method(&self) -> &str {
        self.method.name()
    }

    /// Inlined, as [`Message`]'s.
    #[inline(always)]
    fn attempt<'c>(
        &'c self,
        client: &'c Client,
        opts: &'c CallOptions,
    ) -> impl Future<Output = Result<Response<Resp>, Status>> + 'c {
        client.unary_codec_response_keyed(&self.method, self.codec, &self.request, opts)
    }
}

/// The start of a streaming call (with its first message, if any).
pub(super) struct Open<'m, 'r, C, Req> {
    pub(super) method: &'m str,
    pub(super) codec: C,
    pub(super) request: Option<&'r Req>,
}

impl<C, Req> Attempt for Open<'_, '_, C, Req>
where
    C: Codec<Req>,
    Req: Sync + 'static,
{
    type Output = OpenCall;

    #[inline]
    fn method(&self) -> &str {
        self.method
    }

    fn attempt<'c>(
        &'c self,
        client: &'c Client,
        opts: &'c CallOptions,
    ) -> impl Future<Output = Result<OpenCall, Status>> + 'c {
        client.open_call(self.method, self.codec, self.request, opts)
    }
}

/// A unary call on JSON values.
#[cfg(feature = "json")]
pub(super) struct Json<'m, 'r, Req: ?Sized, Resp> {
    pub(super) method: &'m str,
    pub(super) request: &'r Req,
    pub(super) _resp: PhantomData<fn() -> Resp>,
}

#[cfg(feature = "json")]
impl<Req, Resp> Attempt for Json<'_, '_, Req, Resp>
where
    Req: serde::Serialize + Sync + ?Sized,
    Resp: serde::de::DeserializeOwned,
{
    type Output = Resp;

    #[inline]
    fn method(&self) -> &str {
        self.method
    }

    fn attempt<'c>(
        &'c self,
        client: &'c Client,
        opts: &'c CallOptions,
    ) -> impl Future<Output = Result<Resp, Status>> + 'c {
        client.unary_json_with(self.method, self.request, opts)
    }
}

/// A call opened through the tower stack (`weft::TowerCaller`): each try
/// sends the request again with the call's fixed options.
#[cfg(feature = "tower")]
pub(super) struct Tower(pub(super) weft_rpc::OpenRequest);

#[cfg(feature = "tower")]
impl Attempt for Tower {
    type Output = OpenCall;

    #[inline]
    fn method(&self) -> &str {
        self.0.method()
    }

    fn attempt<'c>(
        &'c self,
        client: &'c Client,
        opts: &'c CallOptions,
    ) -> impl Future<Output = Result<OpenCall, Status>> + 'c {
        let mut req = self.0.clone();
        *req.options_mut() = opts.clone();
        tower::Service::call(&mut client.open_service(), req)
    }
}
