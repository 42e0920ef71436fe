//! The server's layers as one shared, type-erased stack ([`Layered`]),
//! its innermost service ([`CallService`]), and the task that serves a
//! layered call: it runs the stack and the handler side by side, and ends
//! the call with the stack's status when the handler never ran or was cut.

use std::any::Any;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use super::hold::{Gate, Hold};
use super::incoming::{CallOutcome, CallState, IncomingCall, Pending};
use crate::codec::wire;
use crate::observe;
use crate::server::call::{BoxFuture, Handler, ServerCall};
use crate::server::context::Context;
use crate::status::Status;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type CallFuture = Pin<Box<dyn Future<Output = Result<CallOutcome, Status>> + Send>>;

/// The innermost service of a server's layers: lets the call's handler
/// run and resolves with its final status, before that status goes out
/// (the layers' futures finish first). Always ready.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallService;

impl Stack for CallService {
    fn run(&self, req: IncomingCall) -> CallFuture {
        Box::pin(async move {
            let state = req.state;
            if !state.go() {
                return Err(Status::internal("the call was already passed inward"));
            }
            let status = poll_fn(|cx| state.gate.poll_status(cx)).await;
            Ok(CallOutcome::new(status, state))
        })
    }
}

// `Service<IncomingCall>` for what runs calls (the innermost service,
// a whole stack): always ready, each call is a `run`.
macro_rules! call_service {
    ($ty:ty) => {
        impl tower_service::Service<IncomingCall> for $ty {
            type Response = CallOutcome;
            type Error = Status;
            type Future = CallFuture;

            fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
                Poll::Ready(Ok(()))
            }

            fn call(&mut self, req: IncomingCall) -> CallFuture {
                self.run(req)
            }
        }
    };
}

call_service!(CallService);
// A stack is itself a service, so that a further layer wraps it.
call_service!(Layered);

/// A status for a layer's error: a `Status` as it is; a timeout (tower's
/// `TimeoutLayer`, `tokio::time::timeout`) `DEADLINE_EXCEEDED` saying the
/// server's layer timed out; anything else `UNAVAILABLE` (overload:
/// transient).
pub(crate) fn status_of(e: impl Into<BoxError>) -> Status {
    let e = e.into();
    let e = match e.downcast::<Status>() {
        Ok(s) => return *s,
        Err(e) => e,
    };
    if e.is::<tower::timeout::error::Elapsed>() || e.is::<tokio::time::error::Elapsed>() {
        return Status::deadline_exceeded(format!("the server's layer timed out the call ({e})"));
    }
    Status::unavailable(e.to_string())
}

trait Stack: Send + Sync {
    fn run(&self, req: IncomingCall) -> CallFuture;
}

struct Shared<S>(Arc<tokio::sync::Mutex<S>>);

impl<S> Stack for Shared<S>
where
    S: tower_service::Service<IncomingCall, Response = CallOutcome> + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    fn run(&self, req: IncomingCall) -> CallFuture {
        let svc = self.0.clone();
        Box::pin(async move {
            let fut = {
                let mut s = svc.lock().await;
                poll_fn(|cx| s.poll_ready(cx)).await.map_err(status_of)?;
                s.call(req)
            };
            fut.await.map_err(status_of)
        })
    }
}

/// A server's layers, type-erased and shared by its connections.
#[derive(Clone)]
pub struct Layered(Arc<dyn Stack>);

impl std::fmt::Debug for Layered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layered").finish_non_exhaustive()
    }
}

impl Layered {
    /// `svc` as a stack (a `Layered` stays itself, not locked twice).
    pub(crate) fn new<S>(svc: S) -> Layered
    where
        S: tower_service::Service<IncomingCall, Response = CallOutcome> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let mut svc = Some(svc);
        if let Some(l) = (&mut svc as &mut dyn Any).downcast_mut::<Option<Layered>>()
            && let Some(l) = l.take()
        {
            return l;
        }
        let svc = svc.expect("taken only when it is a Layered");
        Layered(Arc::new(Shared(Arc::new(tokio::sync::Mutex::new(svc)))))
    }

    pub(crate) fn run(&self, req: IncomingCall) -> CallFuture {
        self.0.run(req)
    }
}

/// Serves one call through `layers`: the stack and, once the innermost
/// service lets it go, the handler run side by side on this task.
pub(crate) fn serve(
    layers: &Layered,
    mut call: ServerCall,
    handler: Arc<dyn Handler>,
) -> BoxFuture {
    let gate = Arc::new(Gate::default());
    call.hold = Hold::new(gate.clone());
    let ctx = Context::for_call(
        call.ctx.deadline(),
        call.ctx.metadata().clone(),
        call.guard.cell.clone(),
    );
    let state = CallState::new(ctx, Pending { call, handler }, gate);
    let stack = layers.run(IncomingCall {
        state: state.clone(),
    });
    Box::pin(drive(stack, state))
}

/// The handler of a layered call, as its serving task sees it.
enum Run {
    /// Not let go yet.
    Waiting,
    Running(BoxFuture),
    Done,
}

impl Run {
    /// Starts the handler once let go, and polls it; `Ready` once it ended.
    fn poll(&mut self, state: &CallState, cx: &mut TaskContext<'_>) -> Poll<()> {
        if let Run::Waiting = self
            && let Poll::Ready(p) = state.poll_go(cx)
        {
            *self = Run::Running(Box::pin(run(p)));
        }
        match self {
            Run::Waiting => Poll::Pending,
            Run::Running(h) => {
                std::task::ready!(h.as_mut().poll(cx));
                *self = Run::Done;
                Poll::Ready(())
            }
            Run::Done => Poll::Ready(()),
        }
    }
}

async fn drive(mut stack: CallFuture, state: Arc<CallState>) {
    let mut handler = Run::Waiting;
    let ended = poll_fn(|cx| {
        let _ = handler.poll(&state, cx);
        stack.as_mut().poll(cx)
    })
    .await;
    drop(stack);
    let status = match ended {
        Ok(outcome) => outcome.into_status(),
        Err(status) => status,
    };
    if let Some(p) = state.take_unstarted() {
        return refuse(p, status).await;
    }
    state.gate.finish(status);
    if let Run::Running(_) = handler {
        poll_fn(|cx| handler.poll(&state, cx)).await;
    }
}

/// Runs a pending call to its end (the handler answers the caller).
async fn run(p: Pending) {
    let Pending { call, handler } = p;
    let mut call = Some(call);
    let rest = poll_fn(|cx| Poll::Ready(call.take().and_then(|c| handler.start(c, cx)))).await;
    if let Some(rest) = rest {
        rest.await;
    }
}

/// Ends a call the layers refused, with the headers and trailers they set.
async fn refuse(p: Pending, status: Status) {
    let ServerCall {
        mut stream,
        mut guard,
        ..
    } = p.call;
    tracing::debug!(id = stream.id(), %status, "call refused by a layer");
    observe::server_finished(&status);
    // Counted with the layer's code (dropped unfinished, it would read as
    // CANCELLED).
    guard.meter.finish(status.code());
    let (mut entries, trailers) = guard.finish().unwrap_or_default();
    entries.extend(trailers);
    let _ = wire::end(&mut stream, wire::trailers_with(&status, &entries)).await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::status::Code;

    #[tokio::test(start_paused = true)]
    async fn layer_errors_become_statuses_that_name_them() {
        let s = status_of(Status::not_found("gone"));
        assert_eq!((s.code(), s.message()), (Code::NOT_FOUND, "gone"));
        let tokio_elapsed = tokio::time::timeout(Duration::ZERO, std::future::pending::<()>())
            .await
            .unwrap_err();
        for e in [
            BoxError::from(tower::timeout::error::Elapsed::new()),
            BoxError::from(tokio_elapsed),
        ] {
            let s = status_of(e);
            assert_eq!(s.code(), Code::DEADLINE_EXCEEDED);
            assert!(
                s.message()
                    .starts_with("the server's layer timed out the call ("),
                "{s}"
            );
        }
        let s = status_of("overloaded");
        assert_eq!((s.code(), s.message()), (Code::UNAVAILABLE, "overloaded"));
    }
}
