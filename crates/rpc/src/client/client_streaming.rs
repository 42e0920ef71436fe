//! The handle of a client-streaming call, [`ClientStreamingCall`]: its
//! `send`s and `finish`, and its `futures::Sink` side, which moves the
//! call into each send it starts and gets it back.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Poll, ready};

use bytes::Bytes;

use super::Call;
use crate::codec::typed::{Codec, Raw};
use crate::status::Status;

/// A client-streaming call in progress: send `Req` values, then
/// [`finish`](Self::finish) for the `Resp` (raw `Bytes` by default).
///
/// Also a `futures::Sink<Req>`, like the other sending halves
/// ([`BidiSender`](crate::client::split::BidiSender), `Responses`): each message sent
/// through the `Sink` interface costs one boxed future (`send` costs
/// none), and `close` ends the request stream as `finish` does before it
/// waits for the response.
///
/// ```
/// # async fn demo(client: weft_rpc::Client) -> Result<(), weft_rpc::Status> {
/// use futures::{SinkExt, stream};
/// use weft_rpc::{CallOptions, ClientStreamingCall, Json};
///
/// let mut call: ClientStreamingCall<i64, i64, Json> = client
///     .client_streaming_codec("calc/sum", Json, &CallOptions::new())
///     .await?;
/// call.send_all(&mut stream::iter([1, 2, 39].map(Ok))).await?;
/// let total = call.finish().await?;
/// # let _ = total; Ok(()) }
/// ```
pub struct ClientStreamingCall<Req = Bytes, Resp = Bytes, C = Raw> {
    held: Held,
    _t: PhantomData<fn(Req, C) -> Resp>,
}

/// A send (or close) started through the `Sink` interface: it owns the
/// call while it runs and hands it back with its result.
type HeldSend = Pin<Box<dyn Future<Output = (Call, Result<(), Status>)> + Send>>;

/// Where a client-streaming call's state is: here, or inside the send (or
/// close) its `Sink` side started, which hands it back when done.
#[allow(
    clippy::large_enum_variant,
    reason = "boxing the call would allocate once per call for every caller, Sink or not"
)]
enum Held {
    Here(Call),
    Sending(HeldSend),
    /// Never seen outside a poll: a send is being started.
    Moving,
}

impl Held {
    /// Waits for a started send; its result, with the call back here.
    fn poll_settle(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Status>> {
        let Held::Sending(f) = self else {
            return Poll::Ready(Ok(()));
        };
        let (call, r) = ready!(f.as_mut().poll(cx));
        *self = Held::Here(call);
        Poll::Ready(r)
    }

    /// The call, once no send holds it.
    async fn call(&mut self) -> Result<&mut Call, Status> {
        std::future::poll_fn(|cx| self.poll_settle(cx)).await?;
        match self {
            Held::Here(call) => Ok(call),
            _ => Err(Status::internal("the call was lost in a cancelled send")),
        }
    }

    /// Hands the call to `work` (a send or the close), polled by the Sink.
    fn start<F>(&mut self, work: impl FnOnce(Call) -> F) -> Result<(), Status>
    where
        F: Future<Output = (Call, Result<(), Status>)> + Send + 'static,
    {
        match std::mem::replace(self, Held::Moving) {
            Held::Here(call) => {
                *self = Held::Sending(Box::pin(work(call)));
                Ok(())
            }
            other => {
                *self = other;
                Err(Status::new(
                    crate::status::Code::FAILED_PRECONDITION,
                    "start_send before poll_ready",
                ))
            }
        }
    }
}

impl<Req, Resp, C> std::fmt::Debug for ClientStreamingCall<Req, Resp, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.held {
            Held::Here(call) => call.fmt_as("ClientStreamingCall", f),
            _ => f
                .debug_struct("ClientStreamingCall")
                .field("sending", &true)
                .finish_non_exhaustive(),
        }
    }
}

impl<Req, Resp, C: Codec<Req> + Codec<Resp>> ClientStreamingCall<Req, Resp, C> {
    pub(super) fn new(call: Call) -> Self {
        ClientStreamingCall {
            held: Held::Here(call),
            _t: PhantomData,
        }
    }

    /// Sends one message (waits for flow-control credit).
    pub async fn send(&mut self, message: Req) -> Result<(), Status> {
        self.held.call().await?.send_value::<Req, C>(&message).await
    }

    /// Ends the request stream (if the `Sink` did not already) and waits
    /// for the response.
    pub async fn finish(mut self) -> Result<Resp, Status> {
        let c = self.held.call().await?;
        let r = c.finish().await;
        c.decode_body::<Resp, C>(r?)
    }
}

impl<Req, Resp, C> futures_sink::Sink<Req> for ClientStreamingCall<Req, Resp, C>
where
    C: Codec<Req> + Codec<Resp>,
{
    type Error = Status;

    fn poll_ready(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<(), Status>> {
        self.get_mut().held.poll_settle(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Req) -> Result<(), Status> {
        let held = &mut self.get_mut().held;
        let Held::Here(call) = held else {
            return Err(Status::new(
                crate::status::Code::FAILED_PRECONDITION,
                "start_send before poll_ready",
            ));
        };
        let framed = C::encode(&item, call.max)?;
        held.start(|mut call| async move {
            let r = call.send_framed(framed).await;
            (call, r)
        })
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<(), Status>> {
        self.get_mut().held.poll_settle(cx)
    }

    fn poll_close(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<(), Status>> {
        let held = &mut self.get_mut().held;
        ready!(held.poll_settle(cx))?;
        if let Held::Here(call) = held
            && !call.send_ended
        {
            held.start(|mut call| async move {
                let r = call.close_send().await;
                (call, r)
            })?;
        }
        held.poll_settle(cx)
    }
}

impl ClientStreamingCall {
    /// Sends one value as JSON.
    #[cfg(feature = "json")]
    pub async fn send_json<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), Status> {
        self.held.call().await?.send_json(value).await
    }

    /// Ends the request stream and decodes the JSON response.
    #[cfg(feature = "json")]
    pub async fn finish_json<T: serde::de::DeserializeOwned>(mut self) -> Result<T, Status> {
        let c = self.held.call().await?;
        let r = c.finish().await;
        c.decode_json_body(&r?)
    }
}
