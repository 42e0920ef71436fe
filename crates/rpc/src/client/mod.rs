//! The calling side: [`Client`] and the handles of streaming calls.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures_util::TryFutureExt;
use tokio::time::Instant;
use weft_frame::Metadata;
use weft_mux::{Connection, Stream};

use crate::client::response::Response;
use crate::codec::typed::{Codec, Raw};
use crate::codec::typed::{response_error, wire_codec};
use crate::codec::wire::{self, Ends, Only, Reader};
use crate::codec::{self, DEFAULT_MAX_MESSAGE, Framed};
use crate::method;
use crate::observe;
use crate::observe::meter::{ClientMeters, Metrics};
use crate::options::CallOptions;
use crate::status::Status;
use crate::within::within;

mod caller;
mod client_streaming;
mod handles;
mod intercept;
mod key;
mod plain;
pub(crate) mod response;
mod settings;
pub(crate) mod split;
mod timer;
#[cfg(feature = "tower")]
pub(crate) mod tower;
#[cfg(feature = "tower")]
mod tower_caller;
mod unary;

use plain::PlainCache;
use unary::{Phase, Unary, read_rest, read_unary};

pub use caller::{Caller, OpenCall};
pub use client_streaming::ClientStreamingCall;
pub use handles::{BidiCall, Streaming};
pub use intercept::{ClientInterceptors, Outgoing};
pub use key::MethodKey;
#[cfg(feature = "tower")]
pub use tower_caller::{OpenRequest, OpenService, TowerCaller};

#[derive(Debug)]
struct Shared {
    max_message: usize,
    default_timeout: Option<Duration>,
    plain: PlainCache,
    meters: ClientMeters,
    /// The server's address, for the calls' spans (`network.peer.address`).
    peer: Option<Arc<str>>,
    #[cfg(feature = "tower")]
    credit: Arc<tokio::sync::Semaphore>,
}

/// Makes calls on one connection. Cheap to clone; clones share the
/// connection. Every call shape is here: [`unary`](Self::unary),
/// [`server_streaming`](Self::server_streaming),
/// [`client_streaming`](Self::client_streaming), [`bidi`](Self::bidi), and
/// `_json` variants.
///
/// ## Cancellation
/// Dropping a call's future (or a streaming handle) resets its stream: the
/// server drops the handler. A deadline ([`CallOptions`]) is sent to the
/// server and enforced on both sides.
#[derive(Debug, Clone)]
pub struct Client {
    conn: Connection,
    shared: Arc<Shared>,
    /// Run on every call before it is prepared ([`Caller::with_interceptor`]).
    intercept: ClientInterceptors,
    #[cfg(feature = "tower")]
    tower: crate::client::tower::TowerSlot,
}

impl Client {
    /// A client on `conn`, 4 MiB message limit, no default timeout.
    pub fn new(conn: Connection) -> Client {
        Client::with_limits(conn, DEFAULT_MAX_MESSAGE, None)
    }

    /// A client with a message limit (bytes, both directions; a larger
    /// request fails locally with `RESOURCE_EXHAUSTED`, a larger response
    /// fails the call) and a timeout for calls that set none. It meters
    /// its calls if a `metrics` recorder is installed now
    /// ([`Metrics::Auto`]; see [`with_metrics`](Self::with_metrics)).
    pub fn with_limits(
        conn: Connection,
        max_message: usize,
        default_timeout: Option<Duration>,
    ) -> Client {
        Client {
            conn,
            shared: Arc::new(Shared {
                max_message,
                default_timeout,
                plain: PlainCache::default(),
                meters: ClientMeters::new(Metrics::Auto),
                peer: None,
                #[cfg(feature = "tower")]
                credit: crate::client::tower::semaphore(crate::client::tower::DEFAULT_IN_FLIGHT),
            }),
            intercept: ClientInterceptors::new(),
            #[cfg(feature = "tower")]
            tower: Default::default(),
        }
    }

    #[cfg(feature = "tower")]
    pub(crate) fn credit(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.shared.credit
    }

    #[cfg(feature = "tower")]
    pub(crate) fn tower_slot(&self) -> &crate::client::tower::TowerSlot {
        &self.tower
    }

    /// The connection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Whether the connection is closed: every call would fail `UNAVAILABLE`.
    pub fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    fn max(&self) -> usize {
        self.shared.max_message
    }

    /// A call's observers (span and meter, with this client's peer) and
    /// its options as they are sent: with the `traceparent`, then as this
    /// client's interceptors leave them (or the status one refused it with).
    /// Inlined into each call shape: it hands back the options by value.
    #[inline(always)]
    fn observed<'a>(
        &self,
        method: &str,
        opts: &'a CallOptions,
    ) -> (
        observe::ClientCall,
        Result<std::borrow::Cow<'a, CallOptions>, Status>,
    ) {
        let (obs, opts) = observe::client_call(
            &self.shared.meters,
            self.shared.peer.as_deref(),
            method,
            opts,
        );
        (obs, self.intercept.apply(method, opts))
    }

    /// The `OPEN` metadata and deadline of a call; a typed call names its
    /// `codec`. Inlined: a plain call (no deadline, no entries) is a branch
    /// and a cache lookup in the caller.
    #[inline(always)]
    fn prepare(
        &self,
        method: &str,
        opts: &CallOptions,
        codec: Option<&'static str>,
    ) -> Result<(Metadata, Option<Instant>), Status> {
        if opts.is_plain() && self.shared.default_timeout.is_none() {
            let key = MethodKey::new(method);
            return Ok((self.shared.plain.metadata(&key, codec)?, None));
        }
        let method = method::canonicalize(method)?;
        let now = Instant::now();
        let deadline = opts.effective_deadline(now, self.shared.default_timeout)?;
        Ok((opts.open_metadata(&method, deadline, now, codec)?, deadline))
    }

    /// Opens a stream with `first` (and `end`, once all of it is sent).
    ///
    /// The mux's open is made here, before the first poll: the returned
    /// future holds it once, where an `async fn` would hold its arguments
    /// and the open built from them side by side.
    fn open(
        &self,
        meta: Metadata,
        first: Framed,
        end: bool,
    ) -> impl Future<Output = Result<Stream, Status>> + use<'_> {
        let (payload, mut rest) = match first {
            Framed::One(b) => (b, None),
            Framed::Two(prefix, body) => (prefix, Some(body)),
        };
        let mut opening = self.conn.open(meta, payload, end && rest.is_none());
        async move {
            // Polled where it lies (it is `Unpin`), not moved into the
            // state machine a second time.
            let mut stream = (&mut opening).await.map_err(|e| wire::from_mux(&e))?;
            if let Some(body) = rest.take() {
                stream
                    .send(body, end)
                    .await
                    .map_err(|e| wire::from_stream(&e))?;
            }
            Ok(stream)
        }
    }

    /// A unary call on raw bytes.
    ///
    /// The request is framed and the call's metadata built here, before the
    /// future is first polled; the future borrows only the client.
    // Inlined into every caller, so that a constant method name's lookup
    // key is worked out at compile time wherever the call is written:
    // left to LLVM, a program calling `unary` from more than one place
    // hashed the name at run time on every call (+37).
    #[inline(always)]
    pub fn unary(
        &self,
        method: &str,
        request: Bytes,
    ) -> impl Future<Output = Result<Bytes, Status>> + use<'_> {
        self.unary_with(method, request, &CallOptions::new())
    }

    /// A unary call with options (deadline, metadata). As with
    /// [`unary`](Self::unary), the call is prepared here: a timeout in
    /// `opts` counts from this call, not from the future's first poll.
    #[inline(always)]
    pub fn unary_with(
        &self,
        method: &str,
        request: Bytes,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Bytes, Status>> + use<'_> {
        let framed = codec::frame(request, self.max());
        let key = MethodKey::new(method);
        self.unary_framed(&key, framed, None, opts, |b, _| Ok(b))
    }

    /// A unary call on raw bytes that also returns the response headers
    /// and trailers the handler set (see [`Response`]). Prepared here, as
    /// [`unary_with`](Self::unary_with).
    pub fn unary_response(
        &self,
        method: &str,
        request: Bytes,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Response<Bytes>, Status>> + use<'_> {
        let framed = codec::frame(request, self.max());
        let key = MethodKey::new(method);
        self.unary_framed(&key, framed, None, opts, |b, r| Ok(Response::read(b, r)))
    }

    /// A unary call on JSON values.
    #[cfg(feature = "json")]
    pub fn unary_json<Req, Resp>(
        &self,
        method: &str,
        request: &Req,
    ) -> impl Future<Output = Result<Resp, Status>> + use<'_, Req, Resp>
    where
        Req: serde::Serialize + ?Sized,
        Resp: serde::de::DeserializeOwned,
    {
        self.unary_json_with(method, request, &CallOptions::new())
    }

    /// A unary call on JSON values, with options: a call of the [`Json`]
    /// codec (it names it to the server) whose request may be unsized.
    ///
    /// [`Json`]: crate::codec::typed::Json
    #[cfg(feature = "json")]
    pub fn unary_json_with<Req, Resp>(
        &self,
        method: &str,
        request: &Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Resp, Status>> + use<'_, Req, Resp>
    where
        Req: serde::Serialize + ?Sized,
        Resp: serde::de::DeserializeOwned,
    {
        let body = crate::codec::message::to_json(request, self.max()).map(Framed::One);
        let codec = Some(<crate::codec::typed::Json as Codec<()>>::NAME);
        self.unary_framed(&MethodKey::new(method), body, codec, opts, |b, _| {
            crate::codec::message::from_json(&b)
        })
    }

    /// A unary call on values carried by `codec` (what `#[weft::service]`
    /// clients call). Prepared here, as [`unary_with`](Self::unary_with).
    #[inline(always)]
    pub fn unary_codec<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        request: &Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Resp, Status>> + use<'_, C, Req, Resp>
    where
        C: Codec<Req> + Codec<Resp>,
    {
        self.unary_codec_keyed(&MethodKey::new(method), codec, request, opts)
    }

    /// [`unary_codec`](Self::unary_codec) by a [`MethodKey`] made once for
    /// many calls (as a `Channel` does for the tries of a call): the key's
    /// work is not done again for each call.
    #[inline(always)]
    pub fn unary_codec_keyed<C, Req, Resp>(
        &self,
        method: &MethodKey<'_>,
        codec: C,
        request: &Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Resp, Status>> + use<'_, C, Req, Resp>
    where
        C: Codec<Req> + Codec<Resp>,
    {
        self.unary_typed(method, codec, request, opts, |b, _| {
            <C as Codec<Resp>>::decode(b)
        })
    }

    /// [`unary_codec`](Self::unary_codec), also returning the response
    /// headers and trailers the handler set (the `_response` methods of a
    /// `#[weft::service]` client).
    #[inline(always)]
    pub fn unary_codec_response<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        request: &Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Response<Resp>, Status>> + use<'_, C, Req, Resp>
    where
        C: Codec<Req> + Codec<Resp>,
    {
        self.unary_codec_response_keyed(&MethodKey::new(method), codec, request, opts)
    }

    /// [`unary_codec_response`](Self::unary_codec_response) by a
    /// [`MethodKey`], as [`unary_codec_keyed`](Self::unary_codec_keyed).
    #[inline(always)]
    pub fn unary_codec_response_keyed<C, Req, Resp>(
        &self,
        method: &MethodKey<'_>,
        codec: C,
        request: &Req,
        opts: &CallOptions,
    ) -> impl Future<Output = Result<Response<Resp>, Status>> + use<'_, C, Req, Resp>
    where
        C: Codec<Req> + Codec<Resp>,
    {
        self.unary_typed(method, codec, request, opts, |b, r| {
            <C as Codec<Resp>>::decode(b).map(|m| Response::read(m, r))
        })
    }

    #[inline(always)]
    fn unary_typed<C, Req, T, F>(
        &self,
        method: &MethodKey<'_>,
        _codec: C,
        request: &Req,
        opts: &CallOptions,
        finish: F,
    ) -> impl Future<Output = Result<T, Status>> + use<'_, C, Req, T, F>
    where
        C: Codec<Req>,
        F: FnOnce(Bytes, Ends<'_>) -> Result<T, Status>,
    {
        let framed = C::encode(request, self.max());
        self.unary_framed(method, framed, wire_codec::<C, Req>(), opts, finish)
    }

    /// Every unary call: observed, intercepted and prepared here (a
    /// request in one piece goes to the mux's
    /// [`call`](Connection::call)); `finish` turns the response into the
    /// caller's value inside the call's one future ([`Unary`]), and its
    /// failure is the server's (`INTERNAL`, naming the method).
    ///
    /// A call that fails twice over fails with the first problem found:
    /// an interceptor's refusal, then a bad name or options, then the
    /// request (too large).
    #[inline(always)]
    fn unary_framed<T, F>(
        &self,
        method: &MethodKey<'_>,
        framed: Result<Framed, Status>,
        codec: Option<&'static str>,
        opts: &CallOptions,
        finish: F,
    ) -> impl Future<Output = Result<T, Status>> + use<'_, T, F>
    where
        F: FnOnce(Bytes, Ends<'_>) -> Result<T, Status>,
    {
        // The usual call (nothing observes it, no interceptor, no deadline,
        // no entries) takes its metadata from the cache here; the general
        // path, out of line, moves the options through the observers and
        // the interceptors as a `Cow` inside a `Result`, which inline
        // would cost every call its copies.
        let (obs, prepared) = if self.is_plain(opts) {
            let meta = self.shared.plain.metadata(method, codec);
            (observe::ClientCall::QUIET, meta.map(|meta| (meta, None)))
        } else {
            self.prepared(method.name(), opts, codec)
        };
        // Nested rather than one match of the pair: the pair was built
        // first, a copy of the framed request on every call.
        let (deadline, phase) = match prepared {
            Ok((meta, deadline)) => match framed {
                Ok(framed) => {
                    obs.sent(&framed);
                    let max = self.max();
                    let phase =
                        match framed {
                            Framed::One(request) => Phase::Calling {
                                call: self.conn.call(meta, request),
                                max,
                                finish,
                            },
                            two => {
                                let received = obs.receiving();
                                let open = self.open(meta, two, true);
                                Phase::Large(Box::pin(open.and_then(move |stream| {
                                    read_unary(stream, max, received, finish)
                                })))
                            }
                        };
                    (deadline, phase)
                }
                Err(e) => (None, Phase::Failed(e)),
            },
            Err(e) => (None, Phase::Failed(e)),
        };
        Unary::new(obs, deadline, phase, read_rest)
    }

    /// Whether a call with `opts` is the usual one: nothing observes it,
    /// no interceptor runs, and it sends the cached metadata of its method
    /// (no deadline of its own or by default, no entries).
    #[inline(always)]
    fn is_plain(&self, opts: &CallOptions) -> bool {
        observe::unobserved(&self.shared.meters)
            && self.intercept.is_empty()
            && opts.is_plain()
            && self.shared.default_timeout.is_none()
    }

    /// A call that is not [`is_plain`](Self::is_plain): its observers, and
    /// its metadata and deadline as its options leave them after the
    /// interceptors (or the status that refuses it).
    #[inline(never)]
    fn prepared(
        &self,
        method: &str,
        opts: &CallOptions,
        codec: Option<&'static str>,
    ) -> (
        observe::ClientCall,
        Result<(Metadata, Option<Instant>), Status>,
    ) {
        let (obs, opts) = self.observed(method, opts);
        (
            obs,
            opts.and_then(|opts| self.prepare(method, &opts, codec)),
        )
    }

    /// A server-streaming call: sends `request`, and returns the response
    /// stream once the server answers (its first message, or its end): a
    /// server that rejects the call fails it here. A server slow to send
    /// its first message delays the return as much (docs/FAQ.md).
    pub async fn server_streaming(
        &self,
        method: &str,
        request: Bytes,
        opts: &CallOptions,
    ) -> Result<Streaming, Status> {
        self.call_server_streaming(method, Raw, &request, opts)
            .await
    }

    /// A server-streaming call on values carried by `codec`.
    pub async fn server_streaming_codec<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        request: &Req,
        opts: &CallOptions,
    ) -> Result<Streaming<Resp, C>, Status>
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Sync + 'static,
    {
        self.call_server_streaming(method, codec, request, opts)
            .await
    }

    /// A client-streaming call on values carried by `codec`.
    pub async fn client_streaming_codec<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        opts: &CallOptions,
    ) -> Result<ClientStreamingCall<Req, Resp, C>, Status>
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Sync + 'static,
    {
        self.call_client_streaming(method, codec, opts).await
    }

    /// A bidirectional call on values carried by `codec`.
    pub async fn bidi_codec<C, Req, Resp>(
        &self,
        method: &str,
        codec: C,
        opts: &CallOptions,
    ) -> Result<BidiCall<Req, Resp, C>, Status>
    where
        C: Codec<Req> + Codec<Resp>,
        Req: Sync + 'static,
    {
        self.call_bidi(method, codec, opts).await
    }

    /// A server-streaming call with a JSON request.
    #[cfg(feature = "json")]
    pub async fn server_streaming_json<Req: serde::Serialize + ?Sized>(
        &self,
        method: &str,
        request: &Req,
        opts: &CallOptions,
    ) -> Result<Streaming, Status> {
        let framed = Framed::One(crate::codec::message::to_json(request, self.max())?);
        let codec = Some(<crate::codec::typed::Json as Codec<()>>::NAME);
        self.start(method, framed, true, opts, codec)
            .await
            .map(Streaming::new)
    }

    /// A client-streaming call: send messages, then
    /// [`finish`](ClientStreamingCall::finish) for the response.
    pub async fn client_streaming(
        &self,
        method: &str,
        opts: &CallOptions,
    ) -> Result<ClientStreamingCall, Status> {
        self.call_client_streaming(method, Raw, opts).await
    }

    /// A bidirectional call.
    pub async fn bidi(&self, method: &str, opts: &CallOptions) -> Result<BidiCall, Status> {
        self.call_bidi(method, Raw, opts).await
    }

    async fn start(
        &self,
        method: &str,
        first: Framed,
        end: bool,
        opts: &CallOptions,
        codec: Option<&'static str>,
    ) -> Result<Call, Status> {
        let (mut obs, opts) = self.observed(method, opts);
        let opened = async {
            let opts = opts?;
            let (meta, deadline) = self.prepare(method, &opts, codec)?;
            Ok((
                within(deadline, self.open(meta, first, end)).await?,
                deadline,
            ))
        };
        let (stream, deadline) = obs.opened(opened.await)?;
        let mut call = Call {
            obs,
            stream,
            reader: Reader::new(self.max()),
            max: self.max(),
            deadline,
            send_ended: end,
            outcome: None,
            timer: None,
        };
        if end {
            // The request side is complete (server streaming), so waiting
            // for the server cannot deadlock: a server that rejects the
            // call fails it here, not on the first `message()`. A call
            // whose client sends next (client streaming, bidi) returns at
            // once; a rejection is then its first send's or read's error.
            call.answered().await?;
        }
        Ok(call)
    }
}

/// Reads a one-message response and its status (a function returning an
/// `async` block, which holds its two references once).
#[allow(clippy::manual_async_fn)] // reason: an `async fn` would hold its arguments twice
fn read_response<'a>(
    reader: &'a mut Reader,
    stream: &'a mut Stream,
) -> impl Future<Output = Result<Bytes, Status>> + 'a {
    async move {
        let only = reader.only(stream).await?;
        response_of(only, reader, stream)
    }
}

/// A one-message response read by [`Reader::only`], and its status.
fn response_of(only: Only, reader: &Reader, stream: &Stream) -> Result<Bytes, Status> {
    let first = match only {
        Only::One(msg) => Some(msg),
        Only::None => None,
        Only::More => {
            // A second message before the end: the method streams (its
            // status is still to come, so it cannot be read here); the
            // caller's drop of the stream resets it.
            return Err(Status::invalid_argument(format!(
                "method {:?} sent a unary call more than one response: it streams its \
                 responses (call it as server-streaming or bidi)",
                stream.metadata().method().unwrap_or("?")
            )));
        }
    };
    wire::status_of(reader.trailers())?;
    first.ok_or_else(|| Status::internal("response ended without a message"))
}

/// The state shared by the streaming handles.
#[derive(Debug)]
struct Call {
    stream: Stream,
    reader: Reader,
    max: usize,
    deadline: Option<Instant>,
    send_ended: bool,
    /// Set once the call has a final outcome: later reads repeat it.
    outcome: Option<Result<(), Status>>,
    /// The call's span and meter.
    obs: observe::ClientCall,
    /// The deadline's timer, for reads through `futures::Stream` (made on
    /// the first such read of a call with a deadline).
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Call {
    /// Waits, within the deadline, for the server's first frame (see
    /// [`Reader::answered`]); a failure is the call's outcome.
    async fn answered(&mut self) -> Result<(), Status> {
        let r = within(self.deadline, self.reader.answered(&mut self.stream)).await;
        if r.is_err() {
            self.obs.ended(&r);
        }
        r
    }

    async fn message(&mut self) -> Result<Option<Bytes>, Status> {
        if let Some(o) = &self.outcome {
            return o.clone().map(|()| None);
        }
        let r = within(self.deadline, self.reader.next(&mut self.stream)).await;
        let r = match r {
            Ok(Some(m)) => return Ok(Some(m)),
            Ok(None) => wire::status_of(self.reader.trailers()),
            Err(e) => Err(e),
        };
        self.obs.ended(&r);
        self.outcome = Some(r.clone());
        r.map(|()| None)
    }

    /// [`message`](Self::message) as a poll, for `futures::Stream`.
    fn poll_message(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<Option<Bytes>, Status>> {
        if let Some(o) = &self.outcome {
            return Poll::Ready(o.clone().map(|()| None));
        }
        if crate::within::poll_deadline(self.deadline, &mut self.timer, cx) {
            let e = Err(Status::deadline_exceeded("deadline exceeded"));
            self.obs.ended(&e);
            self.outcome = Some(e.clone());
            return Poll::Ready(e.map(|()| None));
        }
        let r = match ready!(self.reader.poll_next(&mut self.stream, cx)) {
            Ok(Some(m)) => return Poll::Ready(Ok(Some(m))),
            Ok(None) => wire::status_of(self.reader.trailers()),
            Err(e) => Err(e),
        };
        self.obs.ended(&r);
        self.outcome = Some(r.clone());
        Poll::Ready(r.map(|()| None))
    }

    /// Encodes and sends one value.
    async fn send_value<T, C: Codec<T>>(&mut self, value: &T) -> Result<(), Status> {
        let framed = C::encode(value, self.max)?;
        self.send_framed(framed).await
    }

    fn fmt_as(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(name).field("call", self).finish()
    }

    /// The next response decoded by `C`; a decode failure is the server's.
    async fn next_as<T, C: Codec<T>>(&mut self) -> Result<Option<T>, Status> {
        let m = self.message().await?;
        m.map(|b| self.decode_body::<T, C>(b)).transpose()
    }

    /// [`next_as`](Self::next_as) as a `futures::Stream` poll.
    fn poll_next_as<T, C: Codec<T>>(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<T, Status>>> {
        let m = ready!(self.poll_message(cx));
        Poll::Ready(
            m.and_then(|m| m.map(|b| self.decode_body::<T, C>(b)).transpose())
                .transpose(),
        )
    }

    fn decode_body<T, C: Codec<T>>(&self, b: Bytes) -> Result<T, Status> {
        C::decode(b).map_err(|e| response_error(self.stream.metadata().method(), &e))
    }

    async fn send_framed(&mut self, framed: Framed) -> Result<(), Status> {
        if self.send_ended {
            return Err(Status::new(
                crate::status::Code::FAILED_PRECONDITION,
                "send after close_send",
            ));
        }
        if let Some(Err(e)) = &self.outcome {
            return Err(e.clone());
        }
        match within(self.deadline, wire::send(&mut self.stream, framed, None)).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failure(e).await),
        }
    }

    /// After a failed send: the server may have ended the call with a
    /// status (e.g. `UNIMPLEMENTED`) before resetting it; prefer that.
    async fn failure(&mut self, send_error: Status) -> Status {
        loop {
            match self.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return send_error,
                Err(status) => {
                    // A reset after the trailers reads as the trailers' status.
                    return status;
                }
            }
        }
    }

    #[cfg(feature = "json")]
    async fn send_json<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Status> {
        let b = crate::codec::message::to_json(value, self.max)?;
        self.send_framed(Framed::One(b)).await
    }

    /// Ends the requests and reads the one response (client streaming).
    async fn finish(&mut self) -> Result<Bytes, Status> {
        self.close_send().await?;
        let r = within(
            self.deadline,
            read_response(&mut self.reader, &mut self.stream),
        )
        .await;
        self.obs.ended(&r);
        r
    }

    async fn close_send(&mut self) -> Result<(), Status> {
        if self.send_ended {
            return Ok(());
        }
        self.send_ended = true;
        match within(self.deadline, async {
            self.stream
                .send(Bytes::new(), true)
                .await
                .map_err(|e| wire::from_stream(&e))
        })
        .await
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failure(e).await),
        }
    }
}

#[cfg(feature = "json")]
impl Call {
    fn decode_json<T: serde::de::DeserializeOwned>(
        &self,
        m: Option<Bytes>,
    ) -> Result<Option<T>, Status> {
        m.map(|b| self.decode_json_body(&b)).transpose()
    }

    fn decode_json_body<T: serde::de::DeserializeOwned>(&self, b: &[u8]) -> Result<T, Status> {
        crate::codec::message::from_json(b)
            .map_err(|e| response_error(self.stream.metadata().method(), &e))
    }
}
