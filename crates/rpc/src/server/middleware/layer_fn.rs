//! [`layer_fn`]: a server layer from an async closure, the way
//! `axum::middleware::from_fn` makes one, so an auth or timing layer is a
//! few lines instead of a `Layer` and a `Service`.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use super::incoming::{CallOutcome, IncomingCall};
use super::stack::Layered;
use crate::status::Status;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A server layer that runs `f` on each call with the rest of the stack
/// as [`Next`]: `f` may refuse the call (`Err(status)`, the handler never
/// runs), or pass it on with `next.run(call).await` and see its final
/// status — the handler's `NOT_FOUND`, a `DEADLINE_EXCEEDED`, a caller's
/// `CANCELLED` — before it goes out, adding headers or trailers.
///
/// ```
/// use std::time::Instant;
/// use weft_rpc::middleware::layer_fn;
/// use weft_rpc::{Router, Server, Status};
///
/// let server = Server::new(Router::new())
///     // Timing: every call's method, code and duration.
///     .layer(layer_fn(|call, next| async move {
///         let (method, start) = (call.method().to_owned(), Instant::now());
///         let outcome = next.run(call).await;
///         tracing::info!(method, code = %outcome.status().code(), took = ?start.elapsed());
///         Ok(outcome)
///     }))
///     // Auth: runs first (the last layer added is the outermost).
///     .layer(layer_fn(|call, next| async move {
///         match call.metadata().get(b"authorization") {
///             Some(b"Bearer s3cret") => Ok(next.run(call).await),
///             _ => Err(Status::unauthenticated("no valid token")),
///         }
///     }));
/// # let _ = server;
/// ```
pub fn layer_fn<F, Fut>(f: F) -> LayerFn<F>
where
    F: Fn(IncomingCall, Next) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CallOutcome, Status>> + Send + 'static,
{
    LayerFn(Arc::new(f))
}

/// A layer made by [`layer_fn`].
pub struct LayerFn<F>(Arc<F>);

impl<F> Clone for LayerFn<F> {
    fn clone(&self) -> Self {
        LayerFn(self.0.clone())
    }
}

impl<F> std::fmt::Debug for LayerFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayerFn").finish_non_exhaustive()
    }
}

impl<F, S> tower_layer::Layer<S> for LayerFn<F>
where
    S: tower_service::Service<IncomingCall, Response = CallOutcome> + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Service = FnService<F>;

    fn layer(&self, inner: S) -> FnService<F> {
        FnService {
            f: self.0.clone(),
            next: Layered::new(inner),
        }
    }
}

/// The service a [`LayerFn`] makes around the stack inside it.
pub struct FnService<F> {
    f: Arc<F>,
    next: Layered,
}

impl<F> Clone for FnService<F> {
    fn clone(&self) -> Self {
        FnService {
            f: self.f.clone(),
            next: self.next.clone(),
        }
    }
}

impl<F> std::fmt::Debug for FnService<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnService").finish_non_exhaustive()
    }
}

impl<F, Fut> tower_service::Service<IncomingCall> for FnService<F>
where
    F: Fn(IncomingCall, Next) -> Fut,
    Fut: Future<Output = Result<CallOutcome, Status>>,
{
    type Response = CallOutcome;
    type Error = Status;
    type Future = Fut;

    /// Always ready: the stack inside is asked when the call reaches it.
    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: IncomingCall) -> Fut {
        (self.f)(call, Next(self.next.clone()))
    }
}

/// The rest of the stack, for a [`layer_fn`] closure to pass the call to.
#[derive(Debug)]
pub struct Next(Layered);

impl Next {
    /// Runs the call through the rest of the stack and its handler; the
    /// final status, whether the handler's or an inner layer's refusal.
    pub async fn run(self, call: IncomingCall) -> CallOutcome {
        let state = call.state.clone();
        match self.0.run(call).await {
            Ok(outcome) => outcome,
            Err(status) => CallOutcome::new(status, state),
        }
    }
}
