//! Serving calls on one connection.
//!
//! For each stream the peer opens, the server canonicalises the method,
//! checks the deadline, builds the [`Context`] and starts the handler's
//! call future *inline* on the accepting task: a handler that finishes
//! without waiting (the common unary case) completes, response written,
//! without a task spawn or a cross-thread wake-up. Only a call still pending
//! after that first poll is spawned.
//!
//! The price of the inline poll: a handler that computes for a long time
//! before its first `.await` holds up the next call on the same connection
//! for that long. Move heavy work to `tokio::task::spawn_blocking` (or
//! yield first); other connections are unaffected either way.
//!
//! Every call ends with exactly one status: the handler's result,
//! `DEADLINE_EXCEEDED` when its deadline passes (the handler is dropped),
//! `INTERNAL` when it panics, `RESOURCE_EXHAUSTED` for an oversize message,
//! `UNIMPLEMENTED` / `INVALID_ARGUMENT` for a method that does not route.
//! Each affects that call only.

use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::time::Instant;
use weft_mux::{Incoming, Stream};

use crate::codec::{DEFAULT_MAX_MESSAGE, Framed};
use crate::context::Calls;
use crate::message::{Decode, Encode};
use crate::meter::{CallMeter, ConnectionMeter, Meters};
use crate::middleware::Interceptor;
use crate::observe;
use crate::router::BoxFuture;
use crate::streams::Slot;
use crate::wire::{self, Reader};
use crate::within::within_as;
use crate::{
    BidiStream, Code, Context, PeerInfo, RequestStream, ResponseSink, Router, Status, deadline,
};

/// Serves a [`Router`] on connections, optionally through middleware
/// ([`interceptor`](Self::interceptor), [`layer`](Self::layer)).
#[derive(Clone)]
pub struct Server {
    router: Arc<Router>,
    max_message: usize,
    interceptor: Option<Interceptor>,
    #[cfg(feature = "tower")]
    layers: Option<crate::middleware::Layered>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("router", &self.router)
            .field("max_message", &self.max_message)
            .field("interceptor", &self.interceptor.is_some())
            .finish_non_exhaustive()
    }
}

impl From<Router> for Server {
    fn from(router: Router) -> Server {
        Server::new(router)
    }
}

impl Server {
    /// A server for `router`, with the default 4 MiB message limit.
    pub fn new(router: Router) -> Server {
        Server {
            router: Arc::new(router),
            max_message: DEFAULT_MAX_MESSAGE,
            interceptor: None,
            #[cfg(feature = "tower")]
            layers: None,
        }
    }

    /// Runs `check` on every routed call before its handler, with the
    /// call's context: `Err(status)` ends the call with it (e.g.
    /// `UNAUTHENTICATED` for a missing token). Synchronous and allocation
    /// free; a call that fails it never reaches the layers or the handler.
    /// A second interceptor replaces the first.
    #[must_use]
    pub fn interceptor(
        mut self,
        check: impl Fn(&Context) -> Result<(), Status> + Send + Sync + 'static,
    ) -> Server {
        self.interceptor = Some(Arc::new(check));
        self
    }

    /// Wraps every call in a tower `Layer` (feature `tower`): auth,
    /// rate limits, `tower::limit::ConcurrencyLimit`, tracing... over
    /// [`IncomingCall`](crate::IncomingCall)s, see [`crate::middleware`].
    /// Each further `layer` wraps the stack so far (the last added runs
    /// first); a `tower::ServiceBuilder` stack is one layer.
    #[cfg(feature = "tower")]
    #[must_use]
    pub fn layer<L>(mut self, layer: L) -> Server
    where
        L: tower_layer::Layer<crate::middleware::Layered>,
        L::Service: tower_service::Service<crate::IncomingCall, Response = ()> + Send + 'static,
        <L::Service as tower_service::Service<crate::IncomingCall>>::Error:
            Into<Box<dyn std::error::Error + Send + Sync>>,
        <L::Service as tower_service::Service<crate::IncomingCall>>::Future: Send + 'static,
    {
        use crate::middleware::{CallService, Layered};
        let inner = self
            .layers
            .take()
            .unwrap_or_else(|| Layered::new(CallService));
        self.layers = Some(Layered::new(layer.layer(inner)));
        self
    }

    /// Largest message accepted or sent, in bytes (default 4 MiB). A call
    /// whose request is larger fails with `RESOURCE_EXHAUSTED`; memory per
    /// call is bounded by it.
    #[must_use]
    pub fn max_message(mut self, bytes: usize) -> Server {
        self.max_message = bytes;
        self
    }

    /// The router.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Serves every stream of one connection until the peer stops opening
    /// them (connection closed or going away). Calls still running when it
    /// returns finish on their own tasks.
    ///
    /// Each call's first poll runs on this task, so a handler that
    /// completes at once costs no spawn; one that computes for long before
    /// its first `.await` holds up the next call on this connection for
    /// that long (use `tokio::task::spawn_blocking` for heavy work).
    pub async fn serve_connection(&self, incoming: Incoming, peer: PeerInfo) {
        let span = observe::connection_span(&peer);
        tracing::Instrument::instrument(self.serve_streams(incoming, peer), span).await;
    }

    async fn serve_streams(&self, mut incoming: Incoming, peer: PeerInfo) {
        let _open = ConnectionMeter::open();
        let mut meters = Meters::default();
        let peer = Arc::new(peer);
        let calls = Arc::new(Calls::default());
        while let Some(stream) = incoming.accept().await {
            // The call's first poll runs here; only a pending call is spawned.
            let mut stream = Some(stream);
            let pending = poll_fn(|cx| {
                Poll::Ready(catch_unwind(AssertUnwindSafe(|| {
                    stream
                        .take()
                        .and_then(|s| self.start(s, &peer, &calls, &mut meters, cx))
                })))
            })
            .await;
            match pending {
                Ok(Some(call)) => {
                    tokio::spawn(call);
                }
                Ok(None) => {}
                Err(_) => tracing::error!("call task panicked outside its handler"),
            }
        }
    }

    fn start(
        &self,
        stream: Stream,
        peer: &Arc<PeerInfo>,
        calls: &Arc<Calls>,
        meters: &mut Meters,
        cx: &mut std::task::Context<'_>,
    ) -> Option<BoxFuture> {
        let (span, trace) = observe::server_span(stream.metadata(), peer, stream.id());
        let entered = span.enter();
        let started = self.start_in_span(stream, peer, calls, meters, cx, trace);
        drop(entered);
        match started {
            Some(call) if !span.is_disabled() => {
                Some(Box::pin(tracing::Instrument::instrument(call, span)))
            }
            other => other,
        }
    }

    /// [`start`](Self::start) inside the call's span.
    fn start_in_span(
        &self,
        stream: Stream,
        peer: &Arc<PeerInfo>,
        calls: &Arc<Calls>,
        meters: &mut Meters,
        cx: &mut std::task::Context<'_>,
        trace: Option<crate::TraceContext>,
    ) -> Option<BoxFuture> {
        let id = stream.id();
        let meta = stream.metadata();
        let route = match self.router.route(meta.method().unwrap_or("")) {
            Ok(r) => r,
            Err(status) => return Some(Box::pin(reject(stream, status))),
        };
        if let (Some(want), Some(got)) = (route.codec, meta.codec())
            && got != want.as_bytes()
        {
            let status = crate::typed::codec_mismatch(&route.name, want, got);
            return Some(Box::pin(reject(stream, status)));
        }
        // The clock is read only for calls that carry a timeout.
        let now = meta.timeout_micros().map(|_| Instant::now());
        let deadline = match now.map(|now| deadline::incoming(meta, now)).transpose() {
            Ok(d) => d.flatten(),
            Err(status) => return Some(Box::pin(reject(stream, status))),
        };
        if let (Some(d), Some(now)) = (deadline, now)
            && d <= now
        {
            let late = Status::deadline_exceeded("the call arrived after its deadline");
            return Some(Box::pin(reject(stream, late)));
        }
        let ctx = Context::for_call(
            route.name.clone(),
            deadline,
            peer.clone(),
            meta.clone(),
            calls.clone(),
            id,
        )
        .with_trace(trace);
        if let Some(check) = &self.interceptor
            && let Err(status) = check(&ctx)
        {
            return Some(Box::pin(reject(stream, status)));
        }
        calls.begin(id);
        let call = ServerCall {
            stream,
            ctx,
            deadline,
            max: self.max_message,
            guard: CallGuard {
                calls: calls.clone(),
                id,
                clean: false,
                meter: meters.start(&route.name),
            },
        };
        #[cfg(feature = "tower")]
        if let Some(layers) = &self.layers {
            return Some(layered(layers, call, route, peer));
        }
        route.handler.start(call, cx)
    }
}

/// Everything a handler's call task needs.
pub(crate) struct ServerCall {
    stream: Stream,
    ctx: Context,
    deadline: Option<Instant>,
    max: usize,
    guard: CallGuard,
}

/// Ends the call's entry in the connection's table, firing its
/// cancellation signal unless the call completed cleanly.
struct CallGuard {
    calls: Arc<Calls>,
    id: u32,
    clean: bool,
    meter: CallMeter,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.calls.end(self.id, !self.clean);
    }
}

/// A call through the server's layers: ended with the stack's error if
/// it never reached the handler.
#[cfg(feature = "tower")]
fn layered(
    layers: &crate::middleware::Layered,
    call: ServerCall,
    route: &crate::router::Route,
    peer: &Arc<PeerInfo>,
) -> BoxFuture {
    use crate::middleware::{IncomingCall, Pending, take};
    let meta = call.stream.metadata().clone();
    let pending = Arc::new(std::sync::Mutex::new(Some(Pending {
        call,
        handler: route.handler.clone(),
    })));
    let req = IncomingCall::new(route.name.clone(), meta, peer.clone(), pending.clone());
    let run = layers.run(req);
    Box::pin(async move {
        if let Err(status) = run.await
            && let Some(p) = take(&pending)
        {
            reject(p.call.stream, status).await;
        }
    })
}

async fn reject(mut stream: Stream, status: Status) {
    tracing::debug!(id = stream.id(), %status, "call rejected");
    observe::server_finished(&status);
    let _ = wire::finish(&mut stream, &status).await;
}

/// Runs `fut` turning a panic into `INTERNAL`.
async fn catch<T>(fut: impl Future<Output = Result<T, Status>>) -> Result<T, Status> {
    let mut fut = pin!(fut);
    poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(p) => p,
            Err(_) => Poll::Ready(Err(panicked())),
        },
    )
    .await
}

fn panicked() -> Status {
    tracing::error!("handler panicked");
    Status::internal("handler panicked")
}

/// The status message of a call whose deadline passed in its handler.
const IN_HANDLER: &str = "deadline exceeded in the handler";

/// Calls the handler function itself, turning a panic into `INTERNAL`.
fn call_handler<R>(f: impl FnOnce() -> R) -> Result<R, Status> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| panicked())
}

/// Resolves with `CANCELLED` (or `UNAVAILABLE`) once the caller resets the
/// stream or the connection dies; used after the request has been read.
/// The mux wakes it when the reset arrives: no polling.
async fn watch_reset(stream: &mut Stream) -> Status {
    let e = poll_fn(|cx| stream.poll_reset(cx)).await;
    wire::from_stream(&e)
}

/// Like [`watch_reset`], for a streaming call whose stream sits in `slot`.
/// While the handler has it out (sending) the handler sees a reset itself;
/// this task is polled again whenever the handler makes progress, so the
/// watch resumes once the stream is back.
async fn watch_slot(slot: &Slot) -> Status {
    let e = poll_fn(|cx| {
        let Some(mut stream) = slot.take() else {
            return Poll::Pending;
        };
        let polled = stream.poll_reset(cx);
        slot.put(stream);
        polled
    })
    .await;
    wire::from_stream(&e)
}

/// Whether an outcome means the call was cut short (fires the signal).
fn cut_short(status: &Status) -> bool {
    matches!(status.code(), Code::DEADLINE_EXCEEDED | Code::CANCELLED)
}

/// The status of a call that succeeded.
static OK: Status = Status::ok();

/// Sends the call's one response message and its OK trailers, or its
/// error status; records whether the call ended cleanly.
async fn respond(
    stream: &mut Stream,
    result: Result<Option<Framed>, Status>,
    guard: &mut CallGuard,
) {
    let status = match &result {
        Ok(_) => &OK,
        Err(status) => status,
    };
    observe::server_finished(status);
    guard.meter.finish(status.code());
    if let Ok(Some(framed)) = &result {
        guard.meter.sent(framed);
    }
    // The handler's own headers (if they have not gone with a streamed
    // message) and trailers, if it set any (none allocates nothing).
    let (headers, extra) = guard.calls.take_end(guard.id);
    let (sent, cut) = match result {
        Ok(Some(framed)) => {
            let t = wire::trailers_with(&Status::ok(), &extra);
            let h = (!headers.is_empty()).then(|| wire::headers(&headers));
            (wire::send(stream, framed, h, Some(t)).await, false)
        }
        // No message: headers not sent yet join the trailers (gRPC's
        // "trailers-only" response).
        Ok(None) => (
            wire::finish_with(stream, &Status::ok(), &join(headers, extra)).await,
            false,
        ),
        Err(status) => {
            tracing::debug!(id = stream.id(), %status, "call failed");
            let sent = wire::finish_with(stream, &status, &join(headers, extra)).await;
            (sent, cut_short(&status))
        }
    };
    guard.clean = sent.is_ok() && !cut;
}

/// Headers then trailers, for a call whose end carries both.
fn join(
    mut headers: Vec<crate::options::Entry>,
    trailers: Vec<crate::options::Entry>,
) -> Vec<crate::options::Entry> {
    if headers.is_empty() {
        return trailers;
    }
    headers.extend(trailers);
    headers
}

pub(crate) async fn unary<F, Fut, Req, Resp>(call: ServerCall, f: F)
where
    F: FnOnce(Context, Req) -> Fut,
    Fut: Future<Output = Result<Resp, Status>>,
    Req: Decode,
    Resp: Encode,
{
    let ServerCall {
        mut stream,
        ctx,
        deadline,
        max,
        mut guard,
    } = call;
    let work = async {
        let mut reader = Reader::new(max);
        let req = reader.single(&mut stream).await?;
        guard.meter.received(req.len());
        let req = Req::decode(req)?;
        let handler = catch(call_handler(|| f(ctx, req))?);
        tokio::select! {
            biased;
            resp = handler => resp?.encode(max).map(Some),
            gone = watch_reset(&mut stream) => Err(gone),
        }
    };
    let result = within_as(deadline, work, IN_HANDLER).await;
    respond(&mut stream, result, &mut guard).await;
}

/// Ends a streaming call with the handler's result, if the stream is still
/// in its slot (a send cancelled half-way took it out, resetting the call).
async fn end_streaming(slot: Slot, result: Result<Option<Framed>, Status>, guard: &mut CallGuard) {
    match slot.close() {
        Some(mut stream) => respond(&mut stream, result, guard).await,
        None => guard.clean = false,
    }
}

/// Runs a streaming call: its stream goes into a slot the handler's
/// handles share, `work` gets the slot, the context and the message limit,
/// and the call ends with `work`'s result (or `DEADLINE_EXCEEDED`).
async fn streaming<W>(call: ServerCall, work: impl FnOnce(Slot, Context, usize) -> W)
where
    W: Future<Output = Result<Option<Framed>, Status>>,
{
    let ServerCall {
        stream,
        ctx,
        deadline,
        max,
        mut guard,
    } = call;
    let slot = Slot::serving(stream, guard.calls.clone(), guard.id);
    let result = within_as(deadline, work(slot.clone(), ctx, max), IN_HANDLER).await;
    end_streaming(slot, result, &mut guard).await;
}

pub(crate) async fn server_streaming<F, Fut, Req>(call: ServerCall, f: F)
where
    F: FnOnce(Context, Req, ResponseSink) -> Fut,
    Fut: Future<Output = Result<(), Status>>,
    Req: Decode,
{
    streaming(call, |slot, ctx, max| async move {
        let req = Req::decode(RequestStream::new(slot.clone(), max).single().await?)?;
        let sink = ResponseSink::new(slot.clone(), max);
        let handler = catch(call_handler(|| f(ctx, req, sink))?);
        tokio::select! {
            biased;
            r = handler => r.map(|()| None),
            gone = watch_slot(&slot) => Err(gone),
        }
    })
    .await;
}

pub(crate) async fn client_streaming<F, Fut, Resp>(call: ServerCall, f: F)
where
    F: FnOnce(Context, RequestStream) -> Fut,
    Fut: Future<Output = Result<Resp, Status>>,
    Resp: Encode,
{
    streaming(call, |slot, ctx, max| async move {
        let rx = RequestStream::new(slot, max);
        let resp = catch(call_handler(|| f(ctx, rx))?).await?;
        resp.encode(max).map(Some)
    })
    .await;
}

pub(crate) async fn bidi<F, Fut>(call: ServerCall, f: F)
where
    F: FnOnce(Context, BidiStream) -> Fut,
    Fut: Future<Output = Result<(), Status>>,
{
    streaming(call, |slot, ctx, max| async move {
        let s = BidiStream::new(slot, max);
        catch(call_handler(|| f(ctx, s))?).await.map(|()| None)
    })
    .await;
}
