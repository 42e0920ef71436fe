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

use weft_mux::{Accepted, Incoming};

use crate::codec::DEFAULT_MAX_MESSAGE;
use crate::deadline;
use crate::deadline::Arrival;
use crate::observe;
use crate::observe::meter::{ConnectionMeter, Meters, Metrics};
use crate::server::call::{BoxFuture, CallGuard, ServerCall, reject};
use crate::server::context::Calls;
use crate::server::context::Context;
use crate::server::middleware::Interceptor;
use crate::server::open::{LastOpen, Routed};
use crate::server::peer::PeerInfo;
use crate::server::router::Router;
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
        loop {
            // A stream accepted without waiting is of the batch before it.
            let mut waited = false;
            // A request whole in its `OPEN` comes with its stream: no
            // receive of its own.
            let mut accept = pin!(incoming.accept_with_request());
            // The call's first poll runs in the poll that accepts it (only
            // a pending call is spawned): the accepted stream is never held
            // across an await, so this future, which every connection keeps
            // for its life, holds no room for it.
            let started = poll_fn(|cx| {
                let Poll::Ready(accepted) = accept.as_mut().poll(cx) else {
                    waited = true;
                    return Poll::Pending;
                };
                let Some(accepted) = accepted else {
                    return Poll::Ready(None);
                };
                if waited {
                    arrival = Arrival::Unread;
                }
                let mut at = Started {
                    peer: &peer,
                    calls: &mut calls,
                    meters: &mut meters,
                    arrival: &mut arrival,
                    last_open: &mut last_open,
                };
                Poll::Ready(Some(catch_unwind(AssertUnwindSafe(|| {
                    self.start(accepted, &mut at, cx)
                }))))
            })
            .await;
            match started {
                None => break,
                Some(Ok(Some(call))) => {
                    tokio::spawn(call);
                }
                Some(Ok(None)) => {}
                Some(Err(_)) => tracing::error!("call task panicked outside its handler"),
            }
        }
    }

    fn start(
        &self,
        accepted: Accepted,
        at: &mut Started<'_>,
        cx: &mut std::task::Context<'_>,
    ) -> Option<BoxFuture> {
        // Nobody listens: no span to make, enter, or wrap the call in.
        let (meta, id) = (accepted.stream.metadata(), accepted.stream.id());
        let Some((span, trace)) = observe::server_span(meta, at.peer, id) else {
            return self.start_in_span(accepted, at, cx, None);
        };
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
        Accepted { stream, request }: Accepted,
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
        let cell = calls.begin();
        let ctx = Context::for_call(
            route.name.clone(),
            deadline,
            peer.clone(),
            meta.clone(),
            cell.clone(),
            trace,
        );
        if let Some(check) = &self.interceptor
            && let Err(status) = check(&ctx)
        {
            cell.end(false);
            return Some(Box::pin(reject(stream, status)));
        }
        let call = ServerCall {
            stream,
            request,
            ctx,
            max: self.max_message,
            guard: CallGuard::new(cell, meters.start(route_id, &route.name)),
            hold: Default::default(),
        };
        #[cfg(feature = "tower")]
        if let Some(layers) = &self.layers {
            let (name, handler) = (route.name.clone(), route.handler.clone());
            return Some(crate::server::middleware::serve(
                layers, call, name, handler, peer,
            ));
        }
        route.handler.start(call, cx)
    }
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
