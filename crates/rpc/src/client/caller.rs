//! [`Caller`]: the one seam every client call passes, implemented by
//! [`Client`] (one connection) and by the `weft` facade's `Channel` (a
//! client that stays up), and what `#[weft::service]` clients are generic
//! over.
//!
//! A caller makes two kinds of call: the unary call, the fast case that
//! returns a small future prepared before its first poll, and the general
//! case, [`open_call`](Caller::open_call), that opens a stream whose handle
//! the streaming shapes wrap. Client interceptors run inside both.

use std::future::Future;

use bytes::Bytes;

use super::client_streaming::ClientStreamingCall;
use super::{BidiCall, Call, Client, Streaming};
use crate::client::response::Response;
use crate::codec::Framed;
use crate::codec::typed::Codec;
use crate::codec::typed::wire_codec;
use crate::options::CallOptions;
use crate::status::Status;

use super::intercept::Outgoing;

/// A streaming call just opened, before a handle ([`Streaming`],
/// [`ClientStreamingCall`], [`BidiCall`]) gives it its types. Returned by
/// [`Caller::open_call`]; the provided methods of [`Caller`] wrap it.
#[derive(Debug)]
pub struct OpenCall(pub(super) Call);

/// Something that makes calls: [`Client`] (one connection) or the `weft`
/// facade's `Channel` (reconnecting, balanced, retrying). The typed clients
/// `#[weft::service]` generates hold any `Caller`.
///
/// Implementors provide the unary fast case ([`call_unary`](Self::call_unary),
/// [`call_unary_response`](Self::call_unary_response)), the general case
/// ([`open_call`](Self::open_call)) and client interceptors
/// ([`with_interceptor`](Self::with_interceptor)); the streaming shapes
/// are built on `open_call`.
///
/// Its methods are named `call_*` so that they never shadow the raw
/// methods of `Client` and `Channel` (`unary`, `bidi`, ...).
pub trait Caller: Clone + Send + Sync + 'static {
    /// A unary call on a value carried by `codec`. Prepared (encoded,
    /// intercepted) before the future is first polled; a timeout in `opts`
    /// counts from this call.
    fn call_unary<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        request: Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Resp, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Send + Sync,
        Resp: Send;

    /// [`call_unary`](Self::call_unary), also returning the response
    /// headers and trailers the handler set.
    fn call_unary_response<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        request: Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Response<Resp>, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Send + Sync,
        Resp: Send;

    /// Opens a streaming call of `codec`: with `Some(request)`, its one
    /// request and the end of the request side (server streaming);
    /// with `None`, nothing yet (client streaming, bidi).
    fn open_call<C, Req>(
        &self,
        method: &str,
        codec: C,
        request: Option<&Req>,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<OpenCall, Status>> + Send
    where
        C: Codec<Req>,
        Req: Sync + 'static;

    /// This caller, running `interceptor` on every call it makes (every
    /// shape), after the interceptors it already has. The interceptor sees
    /// the method and the call's options; it can add metadata or refuse
    /// the call with a [`Status`], which the call then returns without
    /// sending anything. Clones share the interceptors; the caller this
    /// was made from keeps only its own.
    #[must_use]
    fn with_interceptor<F>(self, interceptor: F) -> Self
    where
        F: Fn(&mut Outgoing<'_>) -> Result<(), Status> + Send + Sync + 'static;

    /// This caller, adding metadata entry `key: value` to every call that
    /// does not set `key` itself (per-call options win): an interceptor.
    #[must_use]
    fn with_metadata(self, key: &[u8], value: &[u8]) -> Self {
        let (key, value): (Box<[u8]>, Box<[u8]>) = (key.into(), value.into());
        self.with_interceptor(move |call| {
            if call.metadata(&key).is_none() {
                call.set_metadata(&key, &value);
            }
            Ok(())
        })
    }

    /// A server-streaming call on values carried by `codec`.
    fn call_server_streaming<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        request: &Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Streaming<Resp, C>, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Sync + 'static,
    {
        let open = self.open_call(method, codec, Some(request), opts);
        async move { open.await.map(|o| Streaming::new(o.0)) }
    }

    /// A client-streaming call on values carried by `codec`.
    fn call_client_streaming<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<ClientStreamingCall<Req, Resp, C>, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Sync + 'static,
    {
        let open = self.open_call::<C, Req>(method, codec, None, opts);
        async move { open.await.map(|o| ClientStreamingCall::new(o.0)) }
    }

    /// A bidirectional call on values carried by `codec`.
    fn call_bidi<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<BidiCall<Req, Resp, C>, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Sync + 'static,
    {
        let open = self.open_call::<C, Req>(method, codec, None, opts);
        async move { open.await.map(|o| BidiCall::new(o.0)) }
    }
}

impl Caller for Client {
    fn call_unary<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        request: Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Resp, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Send + Sync,
        Resp: Send,
    {
        self.unary_codec(method, codec, &request, opts)
    }

    fn call_unary_response<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        request: Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Response<Resp>, Status>> + Send
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Send + Sync,
        Resp: Send,
    {
        self.unary_codec_response(method, codec, &request, opts)
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
        // Encoded here, so the future holds bytes, not the request.
        let first = match request {
            Some(r) => C::encode(r, self.max()).map(|f| (f, true)),
            None => Ok((Framed::One(Bytes::new()), false)),
        };
        async move {
            let (first, end) = first?;
            let codec = wire_codec::<C, Req>();
            self.start(method, first, end, opts, codec)
                .await
                .map(OpenCall)
        }
    }

    fn with_interceptor<F>(mut self, interceptor: F) -> Self
    where
        F: Fn(&mut Outgoing<'_>) -> Result<(), Status> + Send + Sync + 'static,
    {
        self.intercept.push(interceptor);
        self
    }
}
