//! The two halves of a client's bidirectional call
//! ([`BidiCall::split`](crate::BidiCall::split)), usable from two tasks.
//!
//! They share the call's stream through the same slot the server's
//! streaming handles use: a receive holds it for one poll, a send until
//! its message is queued (a send waiting for flow-control credit makes the
//! receiver wait for it).

use std::fmt;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio::time::{Instant, Sleep};
use weft_frame::Metadata;

use crate::codec::typed::Codec;
use crate::codec::typed::{PendingSend, SendFuture, response_error};
use crate::codec::wire::{self, Reader};
use crate::observe::ClientCall;
use crate::server::streams::{Role, Slot, end_on, send_on};
use crate::status::{Code, Status};

/// The sending half: [`send`](Self::send), then
/// [`close_send`](Self::close_send) (dropping it without closing leaves
/// the server waiting for more, until the deadline).
pub struct BidiSender<Req = Bytes, C = crate::codec::typed::Raw> {
    slot: Slot,
    max: usize,
    closed: bool,
    pending: PendingSend,
    /// The end of the request stream, once `poll_close` started it.
    closing: Option<SendFuture>,
    _t: PhantomData<fn(Req, C)>,
}

impl<Req, C> fmt::Debug for BidiSender<Req, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BidiSender")
            .field("closed", &self.closed)
            .field("sending", &self.pending.is_some())
            .finish_non_exhaustive()
    }
}

impl<Req, C: Codec<Req>> BidiSender<Req, C> {
    /// Sends one message.
    pub async fn send(&mut self, message: Req) -> Result<(), Status> {
        if self.closed {
            return Err(Status::new(
                Code::FAILED_PRECONDITION,
                "send after close_send",
            ));
        }
        self.pending.finish().await?;
        let framed = C::encode(&message, self.max)?;
        send_on(&self.slot, framed).await
    }

    /// Ends this side: the server's `message()` returns `Ok(None)`.
    pub async fn close_send(&mut self) -> Result<(), Status> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.pending.finish().await?;
        end_on(&self.slot).await
    }
}

/// As a `futures::Sink`: one boxed send future per message (`send` boxes
/// none); `poll_close` ends the request stream like `close_send`.
impl<Req, C: Codec<Req>> futures_sink::Sink<Req> for BidiSender<Req, C> {
    type Error = Status;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        self.get_mut().pending.poll(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Req) -> Result<(), Status> {
        let this = self.get_mut();
        if this.closed {
            return Err(Status::new(Code::FAILED_PRECONDITION, "send after close"));
        }
        let framed = C::encode(&item, this.max)?;
        this.pending.start(this.slot.clone(), framed);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        self.get_mut().pending.poll(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        let this = self.get_mut();
        ready!(this.pending.poll(cx))?;
        if !this.closed {
            this.closed = true;
            let slot = this.slot.clone();
            this.closing = Some(Box::pin(async move { end_on(&slot).await }));
        }
        match this.closing.as_mut() {
            Some(f) => {
                let r = ready!(f.as_mut().poll(cx));
                this.closing = None;
                Poll::Ready(r)
            }
            None => Poll::Ready(Ok(())),
        }
    }
}

/// The receiving half: [`message`](Self::message), or a
/// `futures::Stream` of the responses. As [`Streaming`](crate::client::Streaming),
/// `Ok(None)` only after the server's explicit end with `OK`.
pub struct BidiReceiver<Resp = Bytes, C = crate::codec::typed::Raw> {
    slot: Slot,
    reader: Reader,
    /// The `OPEN` metadata, for the method name in decode errors.
    open: Metadata,
    deadline: Option<Instant>,
    timer: Option<Pin<Box<Sleep>>>,
    outcome: Option<Result<(), Status>>,
    /// The call's span and meter: the outcome is the receiver's.
    obs: ClientCall,
    _t: PhantomData<fn(C) -> Resp>,
}

impl<Resp, C> fmt::Debug for BidiReceiver<Resp, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BidiReceiver")
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl<Resp, C: Codec<Resp>> BidiReceiver<Resp, C> {
    /// The next message from the server; `Ok(None)` after its successful end.
    pub async fn message(&mut self) -> Result<Option<Resp>, Status> {
        std::future::poll_fn(|cx| self.poll_message(cx)).await
    }

    /// The response headers, once received (see
    /// [`Streaming::headers`](crate::Streaming::headers)).
    pub fn headers(&self) -> Option<&Metadata> {
        self.reader.headers()
    }

    /// The trailers, once the call ended.
    pub fn trailers(&self) -> Option<&Metadata> {
        self.reader.trailers()
    }

    fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Resp>, Status>> {
        if let Some(o) = &self.outcome {
            return Poll::Ready(o.clone().map(|()| None));
        }
        if crate::within::poll_deadline(self.deadline, &mut self.timer, cx) {
            return self.end(Err(Status::deadline_exceeded("deadline exceeded")));
        }
        let polled = match ready!(self.slot.poll_lease(Role::Receive, cx)) {
            Ok(mut lease) => ready!(self.reader.poll_next(lease.get(), cx)),
            Err(e) => Err(e),
        };
        match polled {
            Ok(Some(b)) => Poll::Ready(
                C::decode(b)
                    .map(Some)
                    .map_err(|e| response_error(self.open.method(), &e)),
            ),
            Ok(None) => {
                let status = wire::status_of(self.reader.trailers());
                self.end(status)
            }
            Err(e) => self.end(Err(e)),
        }
    }

    fn end(&mut self, r: Result<(), Status>) -> Poll<Result<Option<Resp>, Status>> {
        self.obs.ended(&r);
        self.outcome = Some(r.clone());
        Poll::Ready(r.map(|()| None))
    }
}

impl<Resp, C: Codec<Resp>> futures_core::Stream for BidiReceiver<Resp, C> {
    type Item = Result<Resp, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        Poll::Ready(ready!(this.poll_message(cx)).transpose())
    }
}

/// The halves of a call's parts.
pub(crate) fn halves<Req, Resp, C>(
    stream: weft_mux::Stream,
    reader: Reader,
    max: usize,
    deadline: Option<Instant>,
    send_ended: bool,
    obs: ClientCall,
) -> (BidiSender<Req, C>, BidiReceiver<Resp, C>) {
    let open = stream.metadata().clone();
    let slot = Slot::new(stream);
    let tx = BidiSender {
        slot: slot.clone(),
        max,
        closed: send_ended,
        pending: PendingSend::default(),
        closing: None,
        _t: PhantomData,
    };
    let rx = BidiReceiver {
        slot,
        reader,
        open,
        deadline,
        timer: None,
        outcome: None,
        obs,
        _t: PhantomData,
    };
    (tx, rx)
}
