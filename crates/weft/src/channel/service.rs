//! The [`Channel`] as a `tower::Service<UnaryRequest>` (feature `tower`),
//! as tonic's `Channel` is a service: a layer stack (timeouts, concurrency
//! limits, a rate limit) can wrap it like it wraps a one-connection
//! `Client`.
//!
//! `poll_ready` is always ready: the channel has no single connection whose
//! credit could say no; a call waits inside for a live connection and for
//! room under the server's stream cap, bounded by its deadline (that is
//! the channel's own queueing, as tonic's `Channel` buffers). Put
//! `tower::limit::ConcurrencyLimitLayer` in front to bound calls in flight.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use weft_rpc::{Status, UnaryRequest};

use super::Channel;

/// A unary call through the channel, with everything the channel does
/// (retries, balancing, reconnecting).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// use std::time::Duration;
/// use tower::{ServiceBuilder, ServiceExt};
/// use weft::{Bytes, Channel, Config, Endpoint, Router, Status, UnaryRequest};
///
/// let router = Router::new().unary("demo.Echo/Say", |_ctx, req: Bytes| async move {
///     Ok::<_, Status>(req)
/// });
/// let endpoint = Endpoint::from_fn("memory", move || {
///     let router = router.clone();
///     async move { weft::memory(router, &Config::new()).await }
/// });
/// let channel = Channel::builder().endpoint(endpoint);
/// let service = ServiceBuilder::new()
///     .timeout(Duration::from_secs(1))
///     .service(channel);
/// let reply = service
///     .oneshot(UnaryRequest::new("demo.Echo/Say", Bytes::from_static(b"hi")))
///     .await?;
/// assert_eq!(&reply[..], b"hi");
/// # Ok(()) }
/// ```
impl tower::Service<UnaryRequest> for Channel {
    type Response = Bytes;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Bytes, Status>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: UnaryRequest) -> Self::Future {
        let channel = self.clone();
        Box::pin(async move {
            channel
                .unary_with(&req.method, req.body, &req.options)
                .await
        })
    }
}
