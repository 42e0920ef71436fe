//! Server middleware as tower layers written with `layer_fn`: token auth
//! for every method, timing that sees each call's final status and adds a
//! trailer, and a rate limit on one method, around a `#[weft::service]`; on
//! the client, a generated client on a `Channel` with an interceptor that
//! adds the token.
//!
//! Run: `cargo run -p weft --features tower --example middleware` (also
//! run by `cargo test -p weft --features tower`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use weft::{
    Ascii, CallOptions, Code, Config, Context, MetadataKey, Router, Server, Status, layer_fn,
};

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

/// The (method, status code) of each call the timing layer saw end.
type Log = Arc<Mutex<Vec<(String, Code)>>>;

const SERVER_TIMING: MetadataKey<Ascii> = MetadataKey::from_static("server-timing");
const BURST: u32 = 3;
const WINDOW: Duration = Duration::from_secs(1);

/// The server: the service, a rate limit on `statement`, timing, and auth
/// outside them all (the last layer added runs first). Each layer is an
/// async closure over the call and the rest of the stack (`next`).
fn server(log: Log) -> Server {
    // At most BURST `statement` calls per WINDOW (fixed windows, shared by
    // every connection), then RESOURCE_EXHAUSTED until the window turns.
    let window = Arc::new(Mutex::new((Instant::now(), 0u32)));
    let limit = layer_fn(move |call, next| {
        let admitted = call.method() != BankMethods::STATEMENT || {
            let mut w = window.lock().unwrap();
            if w.0.elapsed() >= WINDOW {
                *w = (Instant::now(), 0);
            }
            w.1 += 1;
            w.1 <= BURST
        };
        async move {
            match admitted {
                true => Ok(next.run(call).await),
                false => Err(Status::resource_exhausted(format!(
                    "statement is limited to {BURST} calls per {WINDOW:?}"
                ))),
            }
        }
    });
    // Each call's method and final status (the handler's, or the limit's),
    // and its time in a trailer for the caller.
    let timing = layer_fn(move |call, next| {
        let log = log.clone();
        async move {
            let (method, start) = (call.method().to_owned(), Instant::now());
            let outcome = next.run(call).await;
            let took = format!("{}us", start.elapsed().as_micros());
            outcome.set_trailer(&SERVER_TIMING, &took)?;
            log.lock().unwrap().push((method, outcome.status().code()));
            Ok(outcome)
        }
    });
    // Calls without `authorization: Bearer s3cret` end UNAUTHENTICATED.
    let auth = layer_fn(|call, next| async move {
        match call.metadata().get(b"authorization") {
            Some(b"Bearer s3cret") => Ok(next.run(call).await),
            _ => Err(Status::unauthenticated("no valid token")),
        }
    });
    Server::new(Router::new().add_service(BankServer::new(Vault)))
        .layer(limit)
        .layer(timing)
        .layer(auth)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // A Channel whose connection is an in-memory pipe to `server()`.
    let log = Log::default();
    let seen = log.clone();
    let endpoint = weft::Endpoint::from_fn("memory", move || {
        let log = log.clone();
        async move { weft::memory(server(log), &Config::new()).await }
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

    // With it: served, with the timing layer's trailer.
    let r = client
        .balance_response("ada".into(), &CallOptions::new())
        .await?;
    assert_eq!(*r.message(), 42);
    println!("server-timing: {:?}", r.trailer(&SERVER_TIMING));
    assert!(r.trailer(&SERVER_TIMING).is_some());

    // `statement` within its burst, then limited.
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

    // The timing layer (inside auth) saw every call it let through end,
    // the limited one included, with its final status.
    let codes: Vec<Code> = seen.lock().unwrap().iter().map(|(_, c)| *c).collect();
    let limited = [Code::RESOURCE_EXHAUSTED];
    assert_eq!(
        codes,
        [&[Code::OK; 4][..], &limited, &[Code::OK; 2]].concat()
    );
    println!("auth, timing and rate limit behave: {codes:?}");
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
