//! Server middleware: an [`Interceptor`] (a synchronous check of each
//! call's context, free when unused) and, with feature `tower`, tower
//! `Layer`s over whole calls (`Server::layer`; these items are not linked
//! here, since without the feature they do not exist).
//!
//! A layered call is an `IncomingCall`: its method, metadata and peer,
//! and the call itself, which the innermost service (`CallService`) runs
//! to its end. A layer that answers `Err(status)` without calling inward
//! ends the call with that status (its handler never runs); an error type
//! other than [`Status`] ends it `UNAVAILABLE` (tower's overload and
//! timeout errors are transient). A layer that drops the call after passing
//! it inward (a timeout) resets it: the caller sees `CANCELLED`.
//!
//! The layered stack is one shared service: `poll_ready` and `call` run
//! under a lock, one call at a time, as tower's `Buffer` would (so
//! `tower::limit::RateLimit` limits the whole server, not each call). Its
//! price, only when a layer is set: the call is spawned instead of polled
//! inline, and its future is boxed.

use std::sync::Arc;
#[cfg(feature = "tower")]
use std::sync::Mutex;

#[cfg(feature = "tower")]
use weft_frame::Metadata;

#[cfg(feature = "tower")]
use crate::PeerInfo;
#[cfg(feature = "tower")]
#[cfg(feature = "tower")]
use crate::call::{Handler, ServerCall};
use crate::{Context, Status};

/// A check run on every call before its handler, with the call's context
/// (method, metadata, peer, deadline): `Err` ends the call with that
/// status. Set with [`Server::interceptor`](crate::Server::interceptor).
pub type Interceptor = Arc<dyn Fn(&Context) -> Result<(), Status> + Send + Sync>;

#[cfg(feature = "tower")]
/// The part of a call the server keeps until the innermost service runs
/// it, or ends it with a layer's status.
pub(crate) struct Pending {
    pub(crate) call: ServerCall,
    pub(crate) handler: Arc<dyn Handler>,
}

#[cfg(feature = "tower")]
pub(crate) type PendingSlot = Arc<Mutex<Option<Pending>>>;

#[cfg(feature = "tower")]
/// One incoming call, as server layers see it.
pub struct IncomingCall {
    method: Arc<str>,
    metadata: Metadata,
    peer: Arc<PeerInfo>,
    pending: PendingSlot,
}

#[cfg(feature = "tower")]
impl std::fmt::Debug for IncomingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncomingCall")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "tower")]
impl IncomingCall {
    pub(crate) fn new(
        method: Arc<str>,
        metadata: Metadata,
        peer: Arc<PeerInfo>,
        pending: PendingSlot,
    ) -> IncomingCall {
        IncomingCall {
            method,
            metadata,
            peer,
            pending,
        }
    }

    /// The canonical method name.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The call's `OPEN` metadata (custom entries with [`Metadata::get`]).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The peer.
    pub fn peer(&self) -> &PeerInfo {
        &self.peer
    }
}

#[cfg(feature = "tower")]
/// Takes the call out to run it, if no one has.
pub(crate) fn take(slot: &PendingSlot) -> Option<Pending> {
    slot.lock().unwrap_or_else(|e| e.into_inner()).take()
}

#[cfg(feature = "tower")]
/// Runs a pending call to its end (the handler answers the caller).
pub(crate) async fn run(p: Pending) {
    let Pending { call, handler } = p;
    let mut call = Some(call);
    let rest = std::future::poll_fn(|cx| {
        std::task::Poll::Ready(call.take().and_then(|c| handler.start(c, cx)))
    })
    .await;
    if let Some(rest) = rest {
        rest.await;
    }
}

#[cfg(feature = "tower")]
pub use layered::{CallService, Layered};

#[cfg(feature = "tower")]
mod layered {
    use std::future::{Future, poll_fn};
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context as TaskContext, Poll};

    use super::{IncomingCall, run, take};
    use crate::Status;

    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    type CallFuture = Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>;

    /// The innermost service of a server's layers: runs the call's
    /// handler to the call's end. Always ready.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct CallService;

    impl Stack for CallService {
        fn run(&self, req: IncomingCall) -> CallFuture {
            Box::pin(async move {
                match take(&req.pending) {
                    Some(p) => {
                        run(p).await;
                        Ok(())
                    }
                    None => Err(Status::internal("the call was already run")),
                }
            })
        }
    }

    // `Service<IncomingCall>` for what runs calls (the innermost service,
    // a whole stack): always ready, each call is a `run`.
    macro_rules! call_service {
        ($ty:ty) => {
            impl tower_service::Service<IncomingCall> for $ty {
                type Response = ();
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

    /// A status for a layer's error: a `Status` as it is, anything else
    /// `UNAVAILABLE` (overload, timeouts: transient).
    fn status_of(e: impl Into<BoxError>) -> Status {
        let e = e.into();
        match e.downcast::<Status>() {
            Ok(s) => *s,
            Err(e) => Status::unavailable(e.to_string()),
        }
    }

    trait Stack: Send + Sync {
        fn run(&self, req: IncomingCall) -> CallFuture;
    }

    struct Shared<S>(Arc<tokio::sync::Mutex<S>>);

    impl<S> Stack for Shared<S>
    where
        S: tower_service::Service<IncomingCall, Response = ()> + Send + 'static,
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
        pub(crate) fn new<S>(svc: S) -> Layered
        where
            S: tower_service::Service<IncomingCall, Response = ()> + Send + 'static,
            S::Error: Into<BoxError>,
            S::Future: Send + 'static,
        {
            Layered(Arc::new(Shared(Arc::new(tokio::sync::Mutex::new(svc)))))
        }

        pub(crate) fn run(&self, req: IncomingCall) -> CallFuture {
            self.0.run(req)
        }
    }
}
