//! The [`Channel`] as a [`Caller`]: each call is intercepted and given its
//! deadline once, then attempted on a live connection's [`Client`](weft_rpc::Client) (see
//! `Channel::run`) until it succeeds or may not be retried. What
//! `#[weft::service]` clients and the channel's own raw methods call.

use std::future::Future;

use weft_rpc::{CallOptions, Caller, Codec, OpenCall, Outgoing, Response, Status};

use super::Channel;

impl Caller for Channel {
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
        let fixed = self.fix(method, opts);
        async move {
            let (deadline, opts) = fixed?;
            let (opts, request) = (&*opts, &request);
            let attempt = |c: weft_rpc::Client| async move {
                c.unary_codec(method, codec, request, opts).await
            };
            self.run(method, deadline, attempt).await
        }
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
        let fixed = self.fix(method, opts);
        async move {
            let (deadline, opts) = fixed?;
            let (opts, request) = (&*opts, &request);
            let attempt = |c: weft_rpc::Client| async move {
                c.unary_codec_response(method, codec, request, opts).await
            };
            self.run(method, deadline, attempt).await
        }
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
        let fixed = self.fix(method, opts);
        async move {
            let (deadline, opts) = fixed?;
            let opts = &*opts;
            let attempt = |c: weft_rpc::Client| async move {
                c.open_call(method, codec, request, opts).await
            };
            self.run(method, deadline, attempt).await
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
