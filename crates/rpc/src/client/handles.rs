//! The caller's handles on a streaming call in progress: [`Streaming`]
//! (server-streaming responses) and [`BidiCall`] (both ways from one task),
//! each a `futures::Stream` over the parent's `Call`.

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;
use weft_frame::Metadata;

use super::Call;
use crate::codec::typed::{Codec, Raw};
use crate::status::Status;

/// The responses of a server-streaming call, decoded by `C` (raw `Bytes`
/// by default). Also a `futures::Stream` of `Result<T, Status>`.
///
/// [`message`](Self::message) returns `Ok(None)` only after the server's
/// explicit end with status `OK`; a reset, a dead connection or an error
/// status is an `Err`, never a silent end. A response that does not decode
/// is `INTERNAL`, naming the method.
pub struct Streaming<T = Bytes, C = Raw> {
    call: Call,
    _t: PhantomData<fn() -> (T, C)>,
}

impl<T, C> std::fmt::Debug for Streaming<T, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streaming")
            .field("call", &self.call)
            .finish()
    }
}

impl<T, C: Codec<T>> Streaming<T, C> {
    pub(super) fn new(call: Call) -> Self {
        Streaming {
            call,
            _t: PhantomData,
        }
    }

    /// The next message; `Ok(None)` after a successful end.
    pub async fn message(&mut self) -> Result<Option<T>, Status> {
        self.call.next_as::<T, C>().await
    }

    /// The response headers (`Context::set_header`): there as soon as
    /// the call returns, since it waits for the server's first frame,
    /// which carries them. A call that sent no message carries its
    /// headers in its trailers instead (gRPC's "trailers-only" response).
    pub fn headers(&self) -> Option<&Metadata> {
        self.call.reader.headers()
    }

    /// The trailers, once the call ended (custom entries the handler set
    /// with `Context::set_trailer`, next to the status).
    pub fn trailers(&self) -> Option<&Metadata> {
        self.call.reader.trailers()
    }
}

impl Streaming {
    /// The next message as JSON.
    #[cfg(feature = "json")]
    pub async fn message_json<T: serde::de::DeserializeOwned>(
        &mut self,
    ) -> Result<Option<T>, Status> {
        let m = self.call.message().await?;
        self.call.decode_json(m)
    }
}

impl<T, C: Codec<T>> futures_core::Stream for Streaming<T, C> {
    type Item = Result<T, Status>;

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        self.get_mut().call.poll_next_as::<T, C>(cx)
    }
}

/// A bidirectional call in progress: send `Req` and receive `Resp` values
/// (raw `Bytes` by default) from one task, interleaved as the method's
/// protocol requires. Also a `futures::Stream` of the responses.
pub struct BidiCall<Req = Bytes, Resp = Bytes, C = Raw> {
    call: Call,
    _t: PhantomData<fn(Req, C) -> Resp>,
}

impl<Req, Resp, C> std::fmt::Debug for BidiCall<Req, Resp, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.call.fmt_as("BidiCall", f)
    }
}

impl<Req, Resp, C: Codec<Req> + Codec<Resp>> BidiCall<Req, Resp, C> {
    pub(super) fn new(call: Call) -> Self {
        BidiCall {
            call,
            _t: PhantomData,
        }
    }

    /// Sends one message.
    pub async fn send(&mut self, message: Req) -> Result<(), Status> {
        self.call.send_value::<Req, C>(&message).await
    }

    /// Ends this side: the server's `message()` returns `Ok(None)`.
    pub async fn close_send(&mut self) -> Result<(), Status> {
        self.call.close_send().await
    }

    /// The next message from the server; `Ok(None)` after its successful end.
    pub async fn message(&mut self) -> Result<Option<Resp>, Status> {
        self.call.next_as::<Resp, C>().await
    }

    /// The response headers, once received (see [`Streaming::headers`]).
    pub fn headers(&self) -> Option<&Metadata> {
        self.call.reader.headers()
    }

    /// The trailers, once the call ended (see [`Streaming::trailers`]).
    pub fn trailers(&self) -> Option<&Metadata> {
        self.call.reader.trailers()
    }

    /// The sending and the receiving half, usable from two tasks (see
    /// [`BidiSender`](crate::client::split::BidiSender)). Messages already received but
    /// not read stay with the receiving half.
    pub fn split(
        self,
    ) -> (
        crate::client::split::BidiSender<Req, C>,
        crate::client::split::BidiReceiver<Resp, C>,
    ) {
        let Call {
            stream,
            reader,
            max,
            deadline,
            send_ended,
            obs,
            ..
        } = self.call;
        crate::client::split::halves(stream, reader, max, deadline, send_ended, obs)
    }
}

impl<Req, Resp, C: Codec<Req> + Codec<Resp>> futures_core::Stream for BidiCall<Req, Resp, C> {
    type Item = Result<Resp, Status>;

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        self.get_mut().call.poll_next_as::<Resp, C>(cx)
    }
}

impl BidiCall {
    /// Sends one value as JSON.
    #[cfg(feature = "json")]
    pub async fn send_json<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), Status> {
        self.call.send_json(value).await
    }

    /// The next message as JSON.
    #[cfg(feature = "json")]
    pub async fn message_json<T: serde::de::DeserializeOwned>(
        &mut self,
    ) -> Result<Option<T>, Status> {
        let m = self.call.message().await?;
        self.call.decode_json(m)
    }
}
