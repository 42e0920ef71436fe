//! Server middleware as tower layers: token auth for every method, and a
//! rate limit on one method, around a `#[weft::service]`; on the client, a
//! generated client on a `Channel` with an interceptor that adds the token.
//!
//! Run: `cargo run -p weft --features tower --example middleware` (also
//! run by `cargo test -p weft --features tower`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};
use weft::{CallOptions, Code, Config, Context, IncomingCall, Router, Server, Status};

/// The service behind the middleware.
#[weft::service(package = "bank")]
pub trait Bank {
    /// Cheap: not rate limited.
    async fn balance(&self, ctx: Context, account: String) -> Result<u64, Status>;
    /// Expensive: at most `BURST` calls per `WINDOW`, server-wide.
    async fn statement(&self, ctx: Context, account: String) -> Result<Vec<u64>, Status>;
}

struct Vault;

impl Bank for Vault {
    async fn balance(&self, _ctx: Context, _account: String) -> Result<u64, Status> {
        Ok(42)
    }
    async fn statement(&self, _ctx: Context, _account: String) -> Result<Vec<u64>, Status> {
        Ok(vec![40, 2])
    }
}

type CallFuture = Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>;

/// A layer that runs `check` on each call before passing it inward, and
/// ends the call with the check's `Err` status instead (the handler never
/// runs). Auth and the rate limit below are both one.
#[derive(Debug, Clone)]
pub struct Check<F>(F);

impl<S, F: Clone> Layer<S> for Check<F> {
    type Service = Checked<S, F>;
    fn layer(&self, inner: S) -> Checked<S, F> {
        Checked {
            inner,
            check: self.0.clone(),
        }
    }
}

/// [`Check`] around a service.
#[derive(Debug, Clone)]
pub struct Checked<S, F> {
    inner: S,
    check: F,
}

impl<S, F> Service<IncomingCall> for Checked<S, F>
where
    S: Service<IncomingCall, Response = (), Error = Status, Future = CallFuture>,
    F: Fn(&IncomingCall) -> Result<(), Status>,
{
    type Response = ();
    type Error = Status;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: IncomingCall) -> CallFuture {
        match (self.check)(&call) {
            Ok(()) => self.inner.call(call),
            Err(status) => Box::pin(async move { Err(status) }),
        }
    }
}

/// Refuses calls without `authorization: Bearer <token>` (`UNAUTHENTICATED`).
fn auth(token: &'static str) -> Check<impl Fn(&IncomingCall) -> Result<(), Status> + Clone> {
    Check(move |call: &IncomingCall| {
        let ok = call
            .metadata()
            .get(b"authorization")
            .and_then(|v| v.strip_prefix(b"Bearer "))
            .is_some_and(|t| t == token.as_bytes());
        if ok {
            Ok(())
        } else {
            Err(Status::new(Code::UNAUTHENTICATED, "no valid token"))
        }
    })
}

/// At most `burst` calls of `method` per `window` (fixed windows, shared by
/// every connection), then `RESOURCE_EXHAUSTED` until the window turns.
/// Other methods pass.
fn method_limit(
    method: &'static str,
    burst: u32,
    window: Duration,
) -> Check<impl Fn(&IncomingCall) -> Result<(), Status> + Clone> {
    // Start of the current window and the calls in it.
    let state = Arc::new(Mutex::new((Instant::now(), 0u32)));
    Check(move |call: &IncomingCall| {
        if call.method() != method {
            return Ok(());
        }
        let mut s = state.lock().unwrap();
        let now = Instant::now();
        if now.duration_since(s.0) >= window {
            *s = (now, 0);
        }
        s.1 += 1;
        if s.1 <= burst {
            Ok(())
        } else {
            Err(Status::resource_exhausted(format!(
                "{method} is limited to {burst} calls per {window:?}"
            )))
        }
    })
}

const BURST: u32 = 3;
const WINDOW: Duration = Duration::from_secs(1);

/// The server: the service, rate limit inside, auth outside (the last layer
/// added runs first).
fn server() -> Server {
    Server::new(Router::new().add_service(BankServer::new(Vault)))
        .layer(method_limit(BankMethods::STATEMENT, BURST, WINDOW))
        .layer(auth("s3cret"))
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // A Channel whose connection is an in-memory pipe to `server()`.
    let endpoint = weft::Endpoint::from_fn("memory", || async {
        weft::memory(server(), &Config::new()).await
    });
    let channel = weft::Channel::builder().endpoint(endpoint);
    let client = BankClient::new(channel.clone());

    // No token: refused before the handler runs.
    let e = client.balance("ada".into()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAUTHENTICATED);
    let bad = CallOptions::new().metadata(b"authorization", b"Bearer guess");
    assert_eq!(
        client
            .balance_with("ada".into(), &bad)
            .await
            .unwrap_err()
            .code(),
        Code::UNAUTHENTICATED
    );

    // A client interceptor adds the token to every call of this client
    // (tonic's `with_interceptor`); it could also refuse a call.
    let client = BankClient::with_interceptor(channel, |call| {
        call.set_metadata(b"authorization", b"Bearer s3cret");
        Ok(())
    });

    // With it: served; `statement` within its burst, then limited.
    assert_eq!(client.balance("ada".into()).await?, 42);
    for _ in 0..BURST {
        assert_eq!(client.statement("ada".into()).await?, [40, 2]);
    }
    let e = client.statement("ada".into()).await.unwrap_err();
    assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED);
    println!("limited: {e}");
    // The other method is not limited.
    assert_eq!(client.balance("ada".into()).await?, 42);

    // The next window admits calls again.
    tokio::time::sleep(WINDOW).await;
    assert_eq!(client.statement("ada".into()).await?, [40, 2]);
    println!("auth and rate limit behave");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    run().await
}

#[cfg(test)]
mod tests {
    /// End to end, on a paused clock (the window turns without waiting).
    #[tokio::test(start_paused = true)]
    async fn the_example_runs() {
        super::run().await.unwrap();
    }
}
