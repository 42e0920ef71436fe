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
//! A method that does not route ends its call with `UNIMPLEMENTED` /
//! `INVALID_ARGUMENT` here; a routed call runs in [`crate::server::call`], which
//! gives it exactly one final status.

pub(crate) mod call;
pub(crate) mod context;
pub(crate) mod end;
pub mod middleware;
pub(crate) mod mismatch;
pub(crate) mod open;
pub(crate) mod peer;
pub(crate) mod pool;
pub(crate) mod request;
pub(crate) mod route;
pub(crate) mod router;
pub(crate) mod streams;

use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use tokio::time::Instant;
use weft_mux::{Accepted, Incoming, Stream};

use crate::codec::DEFAULT_MAX_MESSAGE;
use crate::deadline;
use crate::deadline::Arrival;
use crate::observe;
use crate::observe::meter::{ConnectionMeter, Meters, Metrics};
use crate::server::call::{BoxFuture, CallGuard, ServerCall, reject};
use crate::server::context::{CallCell, Calls, Context};
use crate::server::middleware::Interceptor;
use crate::server::open::{LastOpen, Routed};
use crate::server::peer::PeerInfo;
use crate::server::route::RouteId;
use crate::server::router::{Route, Router};
use crate::status::Status;

/// Serves a [`Router`] on connections, optionally through middleware
/// ([`interceptor`](Self::interceptor), and `layer` with feature `tower`).
#[derive(Clone)]
pub struct Server {
    router: Arc<Router>,
    max_message: usize,
    metrics: Metrics,
    interceptor: Option<Interceptor>,
    #[cfg(feature = "tower")]
    layers: Option<crate::server::middleware::Layered>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("router", &self.router)
            .field("max_message", &self.max_message)
            .field("metrics", &self.metrics)
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
            metrics: Metrics::Auto,
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
    /// rate limits, `tower::limit::ConcurrencyLimit`, timing... over
    /// [`IncomingCall`](crate::server::middleware::incoming::IncomingCall)s, answering the call's final
    /// status as a [`CallOutcome`](crate::server::middleware::incoming::CallOutcome); see
    /// [`crate::server::middleware`], and `middleware::layer_fn` for a layer
    /// written as an async closure.
    /// Each further `layer` wraps the stack so far (the last added runs
    /// first); a `tower::ServiceBuilder` stack is one layer.
    #[cfg(feature = "tower")]
    #[must_use]
    pub fn layer<L>(mut self, layer: L) -> Server
    where
        L: tower_layer::Layer<crate::server::middleware::Layered>,
        L::Service: tower_service::Service<crate::server::middleware::incoming::IncomingCall, Response = crate::server::middleware::incoming::CallOutcome>
            + Send
            + 'static,
        <L::Service as tower_service::Service<crate::server::middleware::incoming::IncomingCall>>::Error:
            Into<Box<dyn std::error::Error + Send + Sync>>,
        <L::Service as tower_service::Service<crate::server::middleware::incoming::IncomingCall>>::Future: Send + 'static,
    {
        use crate::server::middleware::{CallService, Layered};
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

    /// Whether connections meter their calls (default [`Metrics::Auto`]:
    /// when a `metrics` recorder is installed as the connection opens).
    #[must_use]
    pub fn metrics(mut self, metrics: Metrics) -> Server {
        self.metrics = metrics;
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
    ///
    /// The future lives as long as the connection, so it is kept small
    /// (every byte of it is paid once per idle connection): `peer` is
    /// moved behind its `Arc` and the span made before it is built, not
    /// held inline at every layer of it.
    pub fn serve_connection(
        &self,
        incoming: Incoming,
        peer: PeerInfo,
    ) -> impl Future<Output = ()> + Send + '_ {
        let span = observe::connection_span(&peer);
        tracing::Instrument::instrument(self.serve_streams(incoming, Arc::new(peer)), span)
    }

    async fn serve_streams(&self, mut incoming: Incoming, peer: Arc<PeerInfo>) {
        let mut meters = Meters::new(self.metrics, self.router.len());
        let _open = matches!(meters, Meters::On(_)).then(ConnectionMeter::open);
        let mut calls = Calls::default();
        let mut arrival = Arrival::Unread;
        let mut last_open = LastOpen::default();
        let mut at = Started {
            peer: &peer,
            calls: &mut calls,
            meters: &mut meters,
            arrival: &mut arrival,
            last_open: &mut last_open,
        };
        // A request whole in its `OPEN` comes with its stream: no receive
        // of its own. One accept future for the connection's life, polled
        // again after each stream it yields (as `accept_with_request`
        // documents it may be).
        let mut accept = pin!(incoming.accept_with_request());
        // One poll function for every call of the connection, not one
        // future per call: each call's first poll runs in the poll that
        // accepted it (only a pending call is spawned), and the next
        // stream is taken in the same poll. A future (and a state of
        // this `async fn`) per call, with the call into `start`, cost
        // about 50 instructions a call. The accepted stream is never
        // held across an await, so this future, which every connection
        // keeps for its life, holds no room for it. It yields exactly
        // where the loop of one future per call did: when no stream is
        // waiting.
        poll_fn(|cx| {
            loop {
                let Poll::Ready(accepted) = accept.as_mut().poll(cx) else {
                    // The next stream is of a new batch: its clock is
                    // read afresh.
                    *at.arrival = Arrival::Unread;
                    return Poll::Pending;
                };
                let Some(accepted) = accepted else {
                    return Poll::Ready(());
                };
                match catch_unwind(AssertUnwindSafe(|| self.start(accepted, &mut at, cx))) {
                    Ok(Some(call)) => drop(tokio::spawn(call)),
                    Ok(None) => {}
                    Err(_) => tracing::error!("call task panicked outside its handler"),
                }
            }
        })
        .await;
    }

    /// Starts the call on `accepted`: its span first, if anybody listens.
    // Inlined into the accept loop: with no subscriber (the check is all
    // that runs) a call of its own, moving the accepted stream once more,
    // cost about 40 instructions per call.
    #[inline(always)]
    fn start(
        &self,
        accepted: Accepted,
        at: &mut Started<'_>,
        cx: &mut std::task::Context<'_>,
    ) -> Option<BoxFuture> {
        let (meta, id) = (accepted.stream.metadata(), accepted.stream.id());
        match observe::server_span(meta, at.peer, id) {
            // Nobody listens: no span to make, enter, or wrap the call in.
            None => self.start_in_span(accepted, at, cx, None),
            Some(spanned) => self.start_spanned(accepted, at, cx, spanned),
        }
    }

    /// [`start`](Self::start) when a subscriber listens: the call started
    /// in its span, and wrapped in it if still pending. Out of line, so
    /// that the usual start holds none of it.
    #[inline(never)]
    fn start_spanned(
        &self,
        accepted: Accepted,
        at: &mut Started<'_>,
        cx: &mut std::task::Context<'_>,
        (span, trace): (tracing::Span, Option<crate::observe::TraceContext>),
    ) -> Option<BoxFuture> {
        let entered = (!span.is_disabled()).then(|| span.enter());
        let started = self.start_in_span(accepted, at, cx, trace);
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
        Accepted {
            mut stream,
            request,
        }: Accepted,
        at: &mut Started<'_>,
        cx: &mut std::task::Context<'_>,
        trace: Option<crate::observe::TraceContext>,
    ) -> Option<BoxFuture> {
        let Started {
            peer,
            calls,
            meters,
            arrival,
            last_open,
        } = at;
        let meta = stream.metadata();
        // The metadata is read once (or not at all when it repeats the
        // previous call's), the name resolved once: the route id finds
        // everything else (handler, metric handles) by index.
        let Routed {
            id: route_id,
            route,
            timeout_micros,
        } = match last_open.route(&self.router, meta) {
            Ok(r) => r,
            Err(status) => return Some(Box::pin(reject(stream, status))),
        };
        // The clock is read only for calls that carry a timeout, once per
        // batch of them (see `Arrival`).
        let now = timeout_micros.map(|_| arrival.now());
        let deadline = match now.map(|now| deadline::from_timeout(timeout_micros, now)) {
            None => None,
            Some(Ok(d)) => d,
            Some(Err(status)) => return Some(Box::pin(reject(stream, status))),
        };
        if let (Some(d), Some(now)) = (deadline, now)
            && d <= now
        {
            let late = Status::deadline_exceeded("the call arrived after its deadline");
            return Some(Box::pin(reject(stream, late)));
        }
        // Registered before the interceptor, so headers it sets are kept.
        let cell = calls.begin(&route.name, peer, trace);
        if let Some(check) = &self.interceptor {
            let routing = Routing {
                stream,
                request,
                deadline,
                cell,
                id: route_id,
                route,
            };
            return self.start_checked(check, routing, meters, cx);
        }
        // Without an interceptor nothing comes between the context and
        // the call it goes in, so the call is built in one piece: built
        // apart before the interceptor's test, the context (and the
        // stream, the meter) were copied twice more on the stack on
        // their way into the call (about 30 instructions a call).
        let meter = meters.start(route_id, &route.name);
        let call = ServerCall {
            // The `OPEN` block moves to the context, which keeps it for
            // the call's life; nothing reads it from the stream after
            // this (a second reference was a `Bytes` clone, and its drop
            // through the vtable as the stream went, every call).
            ctx: Context::for_call(deadline, stream.take_metadata(), cell.clone()),
            stream,
            request,
            max: self.max_message,
            guard: CallGuard::new(cell, meter),
            hold: Default::default(),
        };
        self.run(call, route, cx)
    }

    /// [`start_in_span`](Self::start_in_span) with an interceptor: the
    /// call is started only if `check` lets its context through (and
    /// metered only then). Out of line, so that the usual start holds
    /// none of it.
    #[inline(never)]
    fn start_checked(
        &self,
        check: &Interceptor,
        Routing {
            mut stream,
            request,
            deadline,
            cell,
            id,
            route,
        }: Routing<'_>,
        meters: &mut Meters,
        cx: &mut std::task::Context<'_>,
    ) -> Option<BoxFuture> {
        let ctx = Context::for_call(deadline, stream.take_metadata(), cell.clone());
        if let Err(status) = check(&ctx) {
            cell.end(false);
            return Some(Box::pin(reject(stream, status)));
        }
        let call = ServerCall {
            ctx,
            stream,
            request,
            max: self.max_message,
            guard: CallGuard::new(cell, meters.start(id, &route.name)),
            hold: Default::default(),
        };
        self.run(call, route, cx)
    }

    /// Starts `call` on its `route`: through the server's layers, if it
    /// has some, else its handler's first poll.
    #[inline(always)]
    fn run(
        &self,
        call: ServerCall,
        route: &Route,
        cx: &mut std::task::Context<'_>,
    ) -> Option<BoxFuture> {
        #[cfg(feature = "tower")]
        if let Some(layers) = &self.layers {
            let handler = route.handler.clone();
            return Some(crate::server::middleware::serve(layers, call, handler));
        }
        route.handler.start(call, cx)
    }
}

/// A call routed and registered, not started yet: what an interceptor
/// is asked about.
struct Routing<'r> {
    stream: Stream,
    request: Option<Bytes>,
    deadline: Option<Instant>,
    cell: Arc<CallCell>,
    id: RouteId,
    route: &'r Route,
}

/// What starting a call uses of its connection's state.
struct Started<'a> {
    peer: &'a Arc<PeerInfo>,
    calls: &'a mut Calls,
    meters: &'a mut Meters,
    arrival: &'a mut Arrival,
    /// How the previous call opened, and its route.
    last_open: &'a mut LastOpen,
}

// Not in the `--cfg loom` build, which has no weft-testkit.
#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use tokio::time::Instant;
    use weft_mux::Config;

    use super::*;
    use crate::{CallOptions, Client};

    /// A server on one in-memory connection, and its client.
    async fn serving(router: Router) -> Client {
        let ((client, _), (_server, incoming)) =
            weft_testkit::duplex_pair(1 << 16, Config::default(), Config::default()).await;
        tokio::spawn(async move {
            let server = Server::new(router);
            let peer = PeerInfo::new(Some("memory".into()), false, false);
            server.serve_connection(incoming, peer).await;
        });
        Client::new(client)
    }

    /// The calls accepted one after another share their batch's arrival
    /// instant, but a call accepted after the server waited for it is of
    /// a new batch: its deadline counts from when it came, not from the
    /// previous call's arrival (which would have it expire early).
    #[tokio::test(start_paused = true)]
    async fn a_call_after_a_wait_counts_its_deadline_from_its_own_arrival() {
        let router = Router::new().unary("left", |ctx, _req: Bytes| async move {
            let left = ctx
                .deadline()
                .map(|d| d.saturating_duration_since(Instant::now()));
            Ok(Bytes::from(format!("{left:?}")))
        });
        let client = serving(router).await;
        let opts = CallOptions::new().timeout(Duration::from_secs(10));
        for _ in 0..3 {
            let left = client.unary_with("left", Bytes::new(), &opts).await;
            assert_eq!(left.unwrap(), "Some(10s)");
            // The server waits meanwhile (its accept is pending).
            tokio::time::sleep(Duration::from_secs(20)).await;
        }
    }

    /// Calls keep being accepted after a call that did not finish in its
    /// first poll (spawned), and after a call whose route does not exist.
    #[tokio::test]
    async fn the_accept_loop_goes_on_past_pending_and_rejected_calls() {
        let router = Router::new().unary("echo", |_ctx, req: Bytes| async move {
            if req.is_empty() {
                tokio::task::yield_now().await;
            }
            Ok(req)
        });
        let client = serving(router).await;
        let calls = (0..16).map(|i| {
            let client = &client;
            async move {
                match i % 4 {
                    0 => client
                        .unary("nope", Bytes::new())
                        .await
                        .map(|_| "refused?".into()),
                    1 => client.unary("echo", Bytes::new()).await,
                    _ => client.unary("echo", Bytes::from(format!("{i}"))).await,
                }
            }
        });
        let results = futures_util::future::join_all(calls).await;
        for (i, r) in results.into_iter().enumerate() {
            match i % 4 {
                0 => assert_eq!(r.unwrap_err().code(), crate::Code::UNIMPLEMENTED),
                1 => assert_eq!(r.unwrap(), ""),
                _ => assert_eq!(r.unwrap(), format!("{i}").as_str()),
            }
        }
    }
}
