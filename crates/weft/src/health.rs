//! The standard health service, `weft.health/check`: whether the server
//! (or one named service on it) is serving. See docs/PROTOCOL.md.
//!
//! ```no_run
//! # async fn run() -> Result<(), weft::Error> {
//! use std::time::Duration;
//! use weft::{Config, Health, Listener, Router};
//!
//! let health = Health::new();
//! let router = health.install(Router::new());
//! let listener = Listener::bind("127.0.0.1:7878").await?;
//! // On Ctrl-C: report NOT_SERVING, give balancers 2 s to notice, then
//! // shut down gracefully.
//! let shutdown = health.shutdown_after(
//!     async { let _ = tokio::signal::ctrl_c().await; },
//!     Duration::from_secs(2),
//! );
//! weft::serve(listener, router, Config::new(), shutdown).await
//! # }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use weft_rpc::{CallOptions, Caller, Raw, Router, Status};

/// The method name of the health check.
pub const HEALTH_METHOD: &str = "weft.health/check";

/// A health answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// Calls are welcome.
    Serving,
    /// Send calls elsewhere (shutting down, or unhealthy).
    NotServing,
}

impl Serving {
    /// The response body on the wire: `SERVING` or `NOT_SERVING`.
    pub fn as_str(self) -> &'static str {
        match self {
            Serving::Serving => "SERVING",
            Serving::NotServing => "NOT_SERVING",
        }
    }

    fn parse(body: &[u8]) -> Option<Serving> {
        match body {
            b"SERVING" => Some(Serving::Serving),
            b"NOT_SERVING" => Some(Serving::NotServing),
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    services: HashMap<String, Serving>,
    shutting_down: bool,
}

/// The health of a server and of its named services. Cheap to clone;
/// clones share state. The server as a whole (service name `""`) starts
/// `SERVING`; named services are unknown (`NOT_FOUND`) until set.
#[derive(Debug, Clone)]
pub struct Health {
    state: Arc<Mutex<State>>,
}

impl Default for Health {
    fn default() -> Self {
        Health::new()
    }
}

impl Health {
    /// The server serving, no named services.
    pub fn new() -> Health {
        let mut s = State::default();
        s.services.insert(String::new(), Serving::Serving);
        Health {
            state: Arc::new(Mutex::new(s)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the health of `service` (`""` is the whole server). Ignored
    /// once shutdown started: everything stays `NOT_SERVING`.
    pub fn set(&self, service: &str, serving: Serving) {
        let mut s = self.lock();
        if !s.shutting_down {
            s.services.insert(service.to_owned(), serving);
        }
    }

    /// The health of `service`, `None` when unknown.
    pub fn get(&self, service: &str) -> Option<Serving> {
        let s = self.lock();
        let known = s.services.get(service).copied()?;
        Some(if s.shutting_down {
            Serving::NotServing
        } else {
            known
        })
    }

    /// Marks everything `NOT_SERVING` for good (shutdown started).
    pub fn shutting_down(&self) {
        self.lock().shutting_down = true;
    }

    /// `router` with the `weft.health/check` method added.
    pub fn install(&self, router: Router) -> Router {
        let health = self.clone();
        router.unary(HEALTH_METHOD, move |_ctx, req: Bytes| {
            let answer = answer(&health, &req);
            async move { answer }
        })
    }

    /// A shutdown future for [`serve`](crate::serve): when `signal`
    /// resolves, reports `NOT_SERVING`, waits `grace` (for balancers and
    /// health checkers to move calls away), then resolves (and the server
    /// sends `GOAWAY` and drains).
    pub fn shutdown_after<F: Future<Output = ()>>(
        &self,
        signal: F,
        grace: Duration,
    ) -> impl Future<Output = ()> + use<F> {
        let health = self.clone();
        async move {
            signal.await;
            health.shutting_down();
            tokio::time::sleep(grace).await;
        }
    }
}

fn answer(health: &Health, req: &[u8]) -> Result<Bytes, Status> {
    let service = std::str::from_utf8(req)
        .map_err(|_| Status::invalid_argument("the service name is not UTF-8"))?;
    match health.get(service) {
        Some(s) => Ok(Bytes::from_static(s.as_str().as_bytes())),
        None => Err(Status::not_found(format!("unknown service {service:?}"))),
    }
}

/// Asks the server behind `caller` for the health of `service` (`""`:
/// the whole server). `caller` is any [`Caller`]: a [`Client`] asks its
/// one connection; a [`Channel`](crate::Channel) asks whichever
/// connection it would use for a call, waiting for one (see
/// [`check_with`] to bound that wait).
///
/// A server without the health service answers `UNIMPLEMENTED`: treat it
/// as "no health information", not as unhealthy (PROTOCOL 7.8).
///
/// [`Client`]: weft_rpc::Client
pub async fn check(caller: &impl Caller, service: &str) -> Result<Serving, Status> {
    check_with(caller, service, CallOptions::none()).await
}

/// [`check`] with call options: a deadline (which, on a channel, also
/// bounds the wait for a connection), metadata.
pub async fn check_with(
    caller: &impl Caller,
    service: &str,
    opts: &CallOptions,
) -> Result<Serving, Status> {
    let body = Bytes::copy_from_slice(service.as_bytes());
    let reply: Bytes = caller.call_unary(HEALTH_METHOD, Raw, body, opts).await?;
    Serving::parse(&reply).ok_or_else(|| Status::internal("malformed health answer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_per_service_and_flips_on_shutdown() {
        let health = Health::new();
        health.set("db", Serving::NotServing);
        let client = crate::memory(health.install(Router::new()), &crate::Config::new())
            .await
            .unwrap();
        assert_eq!(check(&client, "").await.unwrap(), Serving::Serving);
        assert_eq!(check(&client, "db").await.unwrap(), Serving::NotServing);
        let e = check(&client, "nope").await.unwrap_err();
        assert_eq!(e.code(), weft_rpc::Code::NOT_FOUND);
        let bad = client
            .unary(HEALTH_METHOD, Bytes::from_static(&[0xff]))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), weft_rpc::Code::INVALID_ARGUMENT);
        tokio::time::pause();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let stop = tokio::spawn(health.shutdown_after(
            async {
                let _ = rx.await;
            },
            Duration::from_secs(5),
        ));
        tx.send(()).unwrap();
        tokio::task::yield_now().await;
        assert_eq!(check(&client, "").await.unwrap(), Serving::NotServing);
        health.set("", Serving::Serving);
        assert_eq!(health.get(""), Some(Serving::NotServing));
        assert!(!stop.is_finished());
        stop.await.unwrap();
    }

    /// The same check through a `Channel` (any `Caller`): it connects
    /// lazily, and a deadline bounds the whole check.
    #[tokio::test(start_paused = true)]
    async fn a_channel_asks_as_a_client_does() {
        let health = Health::new();
        health.set("db", Serving::NotServing);
        let endpoint = crate::Endpoint::from_fn("memory", move || {
            let router = health.install(Router::new());
            async move { crate::memory(router, &crate::Config::new()).await }
        });
        let channel = crate::Channel::builder().endpoint(endpoint);
        assert_eq!(check(&channel, "").await.unwrap(), Serving::Serving);
        assert_eq!(check(&channel, "db").await.unwrap(), Serving::NotServing);
        let e = check(&channel, "nope").await.unwrap_err();
        assert_eq!(e.code(), weft_rpc::Code::NOT_FOUND, "{e}");

        // A server without the service: UNIMPLEMENTED, within the deadline.
        let bare = crate::Endpoint::from_fn("bare", || async {
            crate::memory(Router::new(), &crate::Config::new()).await
        });
        let channel = crate::Channel::builder().endpoint(bare);
        let opts = CallOptions::new().timeout(Duration::from_secs(1));
        let e = check_with(&channel, "", &opts).await.unwrap_err();
        assert_eq!(e.code(), weft_rpc::Code::UNIMPLEMENTED, "{e}");
    }
}
