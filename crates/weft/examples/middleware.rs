//! Server middleware as tower layers: token auth for every method, and a
//! rate limit on one method, around a `#[weft::service]`.
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

/// Refuses calls without `authorization: Bearer <token>` (`UNAUTHENTICATED`).
#[derive(Debug, Clone)]
pub struct Auth {
    token: &'static str,
}

impl<S> Layer<S> for Auth {
    type Service = AuthService<S>;
    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService {
            inner,
            token: self.token,
        }
    }
}

/// [`Auth`] around a service.
#[derive(Debug, Clone)]
pub struct AuthService<S> {
    inner: S,
    token: &'static str,
}

impl<S> Service<IncomingCall> for AuthService<S>
where
    S: Service<IncomingCall, Response = (), Error = Status, Future = CallFuture>,
{
    type Response = ();
    type Error = Status;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: IncomingCall) -> CallFuture {
        let ok = call
            .metadata()
            .get(b"authorization")
            .and_then(|v| v.strip_prefix(b"Bearer "))
            .is_some_and(|t| t == self.token.as_bytes());
        if !ok {
            return Box::pin(async { Err(Status::new(Code::UNAUTHENTICATED, "no valid token")) });
        }
        self.inner.call(call)
    }
}

/// At most `burst` calls of `method` per `window` (fixed windows), then
/// `RESOURCE_EXHAUSTED` until the window turns. Other methods pass.
#[derive(Debug, Clone)]
pub struct MethodLimit {
    method: &'static str,
    burst: u32,
    window: Duration,
    /// Start of the current window and calls in it, shared by clones.
    state: Arc<Mutex<(Instant, u32)>>,
}

impl MethodLimit {
    fn new(method: &'static str, burst: u32, window: Duration) -> MethodLimit {
        let state = Arc::new(Mutex::new((Instant::now(), 0)));
        MethodLimit {
            method,
            burst,
            window,
            state,
        }
    }

    fn admit(&self) -> bool {
        let mut s = self.state.lock().unwrap();
        let now = Instant::now();
        if now.duration_since(s.0) >= self.window {
            *s = (now, 0);
        }
        s.1 += 1;
        s.1 <= self.burst
    }
}

impl<S> Layer<S> for MethodLimit {
    type Service = Limited<S>;
    fn layer(&self, inner: S) -> Limited<S> {
        Limited {
            inner,
            limit: self.clone(),
        }
    }
}

/// [`MethodLimit`] around a service.
#[derive(Debug, Clone)]
pub struct Limited<S> {
    inner: S,
    limit: MethodLimit,
}

impl<S> Service<IncomingCall> for Limited<S>
where
    S: Service<IncomingCall, Response = (), Error = Status, Future = CallFuture>,
{
    type Response = ();
    type Error = Status;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: IncomingCall) -> CallFuture {
        if call.method() == self.limit.method && !self.limit.admit() {
            let msg = format!(
                "{} is limited to {} calls per {:?}",
                self.limit.method, self.limit.burst, self.limit.window
            );
            return Box::pin(async move { Err(Status::resource_exhausted(msg)) });
        }
        self.inner.call(call)
    }
}

const BURST: u32 = 3;
const WINDOW: Duration = Duration::from_secs(1);

/// The server: the service, rate limit inside, auth outside (the last layer
/// added runs first).
fn server() -> Server {
    Server::new(Router::new().add_service(BankServer::new(Vault)))
        .layer(MethodLimit::new("bank.bank/statement", BURST, WINDOW))
        .layer(Auth { token: "s3cret" })
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let client = BankClient::new(weft::memory(server(), &Config::new()).await?);
    let authed = CallOptions::new().metadata(b"authorization", b"Bearer s3cret");

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

    // With it: served; `statement` within its burst, then limited.
    assert_eq!(client.balance_with("ada".into(), &authed).await?, 42);
    for _ in 0..BURST {
        assert_eq!(client.statement_with("ada".into(), &authed).await?, [40, 2]);
    }
    let e = client
        .statement_with("ada".into(), &authed)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED);
    println!("limited: {e}");
    // The other method is not limited.
    assert_eq!(client.balance_with("ada".into(), &authed).await?, 42);

    // The next window admits calls again.
    tokio::time::sleep(WINDOW).await;
    assert_eq!(client.statement_with("ada".into(), &authed).await?, [40, 2]);
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
