//! Many endpoints: tower's power-of-two-choices balancer over the pools of
//! a discovery stream, behind a `tower::buffer::Buffer` so every clone of
//! the channel shares one balancer.
//!
//! The balancer does not carry calls: it picks a pool (its "response"),
//! and the call then runs on one of that pool's connections in the
//! caller's task. A pool is ready to the balancer while it has a live
//! connection (and, with health checks, answers `SERVING`); an endpoint
//! whose connects fail is therefore out of the ready set while it backs
//! off, and back once a reconnect succeeds. An endpoint whose calls keep
//! failing `UNAVAILABLE` is ejected for a while (see [`super::outlier`]).
//! Its load is its calls in flight plus a fading penalty per recent
//! failure.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tower::balance::p2c::Balance;
use tower::buffer::Buffer;
use tower::discover::Change;
use tower::util::BoxService;
use tower::{BoxError, Service, ServiceExt};
use weft_rpc::Status;

use super::ejection::{Census, Detector};
use super::endpoint::BoxFuture;
use super::pool::{Lease, Pool};
use super::{Endpoint, Settings, lock};

/// Picks with the balancer before dispatching to a buffer of this many
/// waiting callers; more wait for room.
const PICK_QUEUE: usize = 1024;

type Picks = Buffer<(), BoxFuture<Result<Pool, BoxError>>>;

/// The shared balancer of a channel.
pub(crate) struct Picker {
    picks: Mutex<Picks>,
    /// The balancer's endpoints, for their last connect error.
    census: Arc<Census>,
}

impl std::fmt::Debug for Picker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Picker").finish_non_exhaustive()
    }
}

impl Picker {
    pub(crate) fn new<K, S>(changes: S, settings: Arc<Settings>) -> Picker
    where
        K: std::hash::Hash + Eq + Clone + Send + 'static,
        S: futures_core::Stream<Item = Change<K, Endpoint>> + Send + 'static,
    {
        let census = Arc::<Census>::default();
        let discovered = Discovered {
            changes: Box::pin(changes),
            settings,
            census: census.clone(),
        };
        let balance = BoxService::new(Balance::new(discovered));
        Picker {
            picks: Mutex::new(Buffer::new(balance, PICK_QUEUE)),
            census,
        }
    }

    /// For a call that found no endpoint ready in time: the latest
    /// connect error of any endpoint, if one failed.
    pub(crate) fn connect_error(&self) -> Option<String> {
        let e = self.census.connect_error()?;
        Some(format!(
            "waiting for a ready endpoint; last connect error: {e}"
        ))
    }

    /// A connection on the endpoint the balancer picks.
    pub(crate) async fn lease(&self, hint: usize) -> Result<Lease, Status> {
        loop {
            let mut picks = lock(&self.picks).clone();
            let pool = picks
                .ready()
                .await
                .map_err(balancer_failed)?
                .call(())
                .await
                .map_err(balancer_failed)?;
            if let Some(lease) = pool.try_lease(hint) {
                return Ok(lease);
            }
            // Its connection ended since the pick: pick again, later.
            tokio::task::yield_now().await;
        }
    }
}

fn balancer_failed(e: BoxError) -> Status {
    Status::unavailable(format!("balancer failed: {e}"))
}

/// One endpoint as the balancer sees it.
struct EndpointService {
    pool: Pool,
    waiting: Option<BoxFuture<()>>,
}

impl Service<()> for EndpointService {
    type Response = Pool;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Pool, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        loop {
            if self.pool.is_usable() {
                self.waiting = None;
                return Poll::Ready(Ok(()));
            }
            let pool = &self.pool;
            let waiting = self.waiting.get_or_insert_with(|| {
                let pool = pool.clone();
                Box::pin(async move { pool.ready().await })
            });
            match waiting.as_mut().poll(cx) {
                Poll::Ready(()) => self.waiting = None,
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn call(&mut self, (): ()) -> Self::Future {
        std::future::ready(Ok(self.pool.clone()))
    }
}

impl tower::load::Load for EndpointService {
    type Metric = f64;

    fn load(&self) -> f64 {
        self.pool.load()
    }
}

/// A stream of endpoint changes as a `tower::discover::Discover` of pools.
struct Discovered<S> {
    changes: Pin<Box<S>>,
    settings: Arc<Settings>,
    /// The endpoints and ejections of this balancer.
    census: Arc<Census>,
}

impl<K, S> futures_core::Stream for Discovered<S>
where
    S: futures_core::Stream<Item = Change<K, Endpoint>>,
{
    type Item = Result<Change<K, EndpointService>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let change = match self.changes.as_mut().poll_next(cx) {
            Poll::Ready(Some(c)) => c,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        Poll::Ready(Some(Ok(match change {
            Change::Remove(k) => Change::Remove(k),
            Change::Insert(k, endpoint) => {
                let detector = Detector::new(self.census.clone(), self.settings.outliers);
                let pool = Pool::new(endpoint, self.settings.clone(), Some(detector));
                if let Some(every) = self.settings.health_interval {
                    tokio::spawn(health_checks(Arc::downgrade(pool.shared()), every));
                }
                Change::Insert(
                    k,
                    EndpointService {
                        pool,
                        waiting: None,
                    },
                )
            }
        })))
    }
}

/// Asks the endpoint's `weft.health/check` every `every` while it has a
/// connection; `NOT_SERVING` takes it out of the balancer until `SERVING`.
/// An endpoint without the health service (or a failed check) keeps its
/// state: connection failures already eject it.
async fn health_checks(pool: Weak<super::pool::Inner>, every: std::time::Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(pool) = Pool::upgrade(&pool) else {
            return;
        };
        let Some(lease) = pool.try_lease(0) else {
            continue;
        };
        let check = crate::health::check(lease.client(), "");
        match tokio::time::timeout(every, check).await {
            Ok(Ok(s)) => pool.set_serving(s == crate::Serving::Serving),
            Ok(Err(e)) => {
                tracing::debug!(endpoint = pool.name(), error = %e, "health check failed")
            }
            Err(_) => tracing::debug!(endpoint = pool.name(), "health check timed out"),
        }
    }
}
