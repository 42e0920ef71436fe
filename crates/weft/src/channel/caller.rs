//! The [`Channel`] as a [`Caller`]: each call is intercepted and given its
//! deadline once, then attempted on a live connection's [`Client`](weft_rpc::Client) (see
//! `Channel::run`) until it succeeds or may not be retried. What
//! `#[weft::service]` clients and the channel's own raw methods call.

use std::future::Future;

use weft_rpc::{CallOptions, Caller, Codec, MethodKey, OpenCall, Outgoing, Response, Status};

use super::Channel;
#[cfg(feature = "tower")]
use super::attempt::Tower;
use super::attempt::{Message, Open, Unary, WithMetadata};

impl Caller for Channel {
    #[inline(always)]
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
        // Keyed here, where a constant name is still visible (this is
        // inlined into the caller): the attempt carries the key to every try.
        let attempt = Unary::<_, _, _, Message>::new(MethodKey::new(method), codec, request);
        self.run(self.fix(method, opts), attempt)
    }

    #[inline(always)]
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
        let attempt = Unary::<_, _, _, WithMetadata>::new(MethodKey::new(method), codec, request);
        self.run(self.fix(method, opts), attempt)
    }

    fn open_call<C, Req>(
        &self,
        method: &str,
        codec: C,
        request: Option<&Req>,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<OpenCall, Status>> + Send
    where
        C: Codec<Req>,
        Req: Sync + 'static,
    {
        let attempt = Open {
            method,
            codec,
            request,
        };
        self.run(self.fix(method, opts), attempt)
    }

    fn with_interceptor<F>(mut self, interceptor: F) -> Self
    where
        F: Fn(&mut Outgoing<'_>) -> Result<(), Status> + Send + Sync + 'static,
    {
        self.intercept.push(interceptor);
        self
    }
}

/// The channel as the innermost service of a tower stack of callers
/// (`weft::TowerCaller`, feature `tower`): each call is intercepted and
/// given its deadline once, then opened on a live connection and retried
/// as [`Caller::open_call`] is.
#[cfg(feature = "tower")]
impl tower::Service<weft_rpc::OpenRequest> for Channel {
    type Response = OpenCall;
    type Error = Status;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<OpenCall, Status>> + Send>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Status>> {
        // The channel waits for a connection inside the call.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: weft_rpc::OpenRequest) -> Self::Future {
        let channel = self.clone();
        Box::pin(async move {
            let fixed = channel.fix(req.method(), req.options());
            channel.run(fixed, Tower(req.clone())).await
        })
    }
}
