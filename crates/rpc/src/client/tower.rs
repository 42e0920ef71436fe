//! The client as a `tower_service::Service` (feature `tower`).
//!
//! `poll_ready` is tied to stream credit: it is ready only while the
//! connection has room under the stream cap the server announced (its
//! `max-streams` setting, see `Connection::poll_open_ready`), and each
//! ready service also holds one permit of the client's own in-flight limit
//! (default [`DEFAULT_IN_FLIGHT`]). Readiness reserves no stream, so
//! clones racing for the last slot can still see a retry-safe
//! `UNAVAILABLE` refusal. A closed connection makes `poll_ready` fail with
//! `UNAVAILABLE`, so balancers drop it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::client::Client;
use crate::options::CallOptions;
use crate::status::Status;

/// Calls a client lets through `poll_ready` at once, by default.
pub const DEFAULT_IN_FLIGHT: usize = 100;

type Acquire = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>;

/// Per-handle tower state: the permit this handle holds, or the wait for one.
/// Each clone of a client starts with none.
#[derive(Default)]
pub(crate) struct TowerSlot {
    state: Mutex<(Option<OwnedSemaphorePermit>, Option<Acquire>)>,
}

impl std::fmt::Debug for TowerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TowerSlot").finish_non_exhaustive()
    }
}

impl Clone for TowerSlot {
    fn clone(&self) -> Self {
        TowerSlot::default()
    }
}

/// A unary call for the tower interface.
#[derive(Debug, Clone)]
pub struct UnaryRequest {
    /// The method name.
    pub method: String,
    /// The request message.
    pub body: Bytes,
    /// Deadline and metadata.
    pub options: CallOptions,
}

impl UnaryRequest {
    /// A request with default options.
    pub fn new(method: impl Into<String>, body: Bytes) -> UnaryRequest {
        UnaryRequest {
            method: method.into(),
            body,
            options: CallOptions::new(),
        }
    }
}

/// Readiness of the tower interface: stream credit, then a permit.
fn poll_credit(client: &Client, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
    match client.connection().poll_open_ready(cx) {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(_)) => {
            return Poll::Ready(Err(Status::unavailable("connection closed")));
        }
        Poll::Pending => return Poll::Pending,
    }
    let sem = client.credit().clone();
    let mut st = client
        .tower_slot()
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (permit, acquiring) = &mut *st;
    if permit.is_some() {
        return Poll::Ready(Ok(()));
    }
    if acquiring.is_none() {
        if let Ok(p) = sem.clone().try_acquire_owned() {
            *permit = Some(p);
            return Poll::Ready(Ok(()));
        }
        *acquiring = Some(Box::pin(async move { sem.acquire_owned().await.ok() }));
    }
    let fut = acquiring.as_mut().expect("set above");
    match fut.as_mut().poll(cx) {
        Poll::Pending => Poll::Pending,
        Poll::Ready(p) => {
            *acquiring = None;
            match p {
                Some(p) => {
                    *permit = Some(p);
                    Poll::Ready(Ok(()))
                }
                None => Poll::Ready(Err(Status::unavailable("client closed"))),
            }
        }
    }
}

/// The permit `poll_ready` reserved for this handle, for the call.
fn take_permit(client: &Client) -> Option<OwnedSemaphorePermit> {
    client
        .tower_slot()
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .0
        .take()
}

/// A typed unary call for the tower interface of a [`TypedService`].
#[derive(Debug, Clone)]
pub struct TypedRequest<Req, Resp> {
    /// The method name.
    pub method: String,
    /// The request value.
    pub request: Req,
    /// Deadline and metadata.
    pub options: CallOptions,
    _resp: std::marker::PhantomData<fn() -> Resp>,
}

impl<Req, Resp> TypedRequest<Req, Resp> {
    /// A request with default options.
    pub fn new(method: impl Into<String>, request: Req) -> Self {
        TypedRequest {
            method: method.into(),
            request,
            options: CallOptions::new(),
            _resp: std::marker::PhantomData,
        }
    }
}

/// A client as a `tower::Service` of typed calls carried by codec `C`
/// ([`Client::typed_service`]); readiness as the raw interface's.
#[derive(Debug, Clone)]
pub struct TypedService<C> {
    client: Client,
    codec: C,
}

impl Client {
    /// This client as a `tower::Service<TypedRequest<Req, Resp>>` over
    /// `codec` (the raw `Service<UnaryRequest>` stays on `Client`).
    pub fn typed_service<C>(&self, codec: C) -> TypedService<C> {
        TypedService {
            client: self.clone(),
            codec,
        }
    }
}

impl<Req, Resp, C> tower_service::Service<TypedRequest<Req, Resp>> for TypedService<C>
where
    C: crate::codec::typed::Codec<Req> + crate::codec::typed::Codec<Resp>,
    Req: Send + 'static,
    Resp: Send + 'static,
{
    type Response = Resp;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Resp, Status>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        poll_credit(&self.client, cx)
    }

    fn call(&mut self, req: TypedRequest<Req, Resp>) -> Self::Future {
        let permit = take_permit(&self.client);
        let client = self.client.clone();
        let codec = self.codec;
        Box::pin(async move {
            let _permit = permit;
            client
                .unary_codec(&req.method, codec, &req.request, &req.options)
                .await
        })
    }
}

pub(crate) fn semaphore(n: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(n.clamp(1, Semaphore::MAX_PERMITS)))
}

impl tower_service::Service<UnaryRequest> for Client {
    type Response = Bytes;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Bytes, Status>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        poll_credit(self, cx)
    }

    fn call(&mut self, req: UnaryRequest) -> Self::Future {
        let permit = take_permit(self);
        let client = self.clone();
        Box::pin(async move {
            let _permit = permit;
            client.unary_with(&req.method, req.body, &req.options).await
        })
    }
}
