//! weft itself, through the `weft` facade: `weft::serve` on a TCP loopback
//! listener, `weft::connect`, a raw-bytes unary method returning
//! [`RESPONSE`]. Plain: encryption and compression off. Encrypted:
//! AES-256-GCM required (Noise handshake), compression negotiated on as by
//! default (a 7-byte body is below its minimum size, so it stays raw).

use std::time::Duration;

use futures_util::future::join_all;
use weft::{Bytes, Client, Config, EncryptionPolicy, Listener, Router, Status};

use crate::{Caller, RESPONSE, runtime, time_each, time_spawned};

/// Times `n` sequential round trips, plain.
pub fn run_sequential_plain(n: usize) -> Vec<Duration> {
    sequential(n, false)
}

/// Times `n` batches of `inflight` concurrent calls, plain.
pub fn run_concurrent_plain(n: usize, inflight: usize) -> Vec<Duration> {
    concurrent(n, inflight, false)
}

/// Times `callers` spawned tasks making `n` calls each, plain.
pub fn run_spawned_plain(n: usize, callers: usize) -> Duration {
    runtime().block_on(async { time_spawned(n, callers, connect(false).await).await })
}

/// Times `n` sequential round trips, encrypted.
pub fn run_sequential_encrypted(n: usize) -> Vec<Duration> {
    sequential(n, true)
}

/// Times `n` batches of `inflight` concurrent calls, encrypted.
pub fn run_concurrent_encrypted(n: usize, inflight: usize) -> Vec<Duration> {
    concurrent(n, inflight, true)
}

/// Times `callers` spawned tasks making `n` calls each, encrypted.
pub fn run_spawned_encrypted(n: usize, callers: usize) -> Duration {
    runtime().block_on(async { time_spawned(n, callers, connect(true).await).await })
}

fn sequential(n: usize, encrypted: bool) -> Vec<Duration> {
    runtime().block_on(async {
        let client = connect(encrypted).await;
        time_each(n, async || call(&client).await).await
    })
}

fn concurrent(n: usize, inflight: usize, encrypted: bool) -> Vec<Duration> {
    runtime().block_on(async {
        let client = connect(encrypted).await;
        time_each(n, async || {
            join_all((0..inflight).map(|_| call(&client))).await;
        })
        .await
    })
}

async fn call(client: &Client) {
    let body = client.unary("n", Bytes::new()).await.expect("weft call");
    assert_eq!(body, RESPONSE);
}

impl Caller for Client {
    fn call(&self) -> impl Future<Output = ()> + Send + '_ {
        call(self)
    }
}

/// Serves on a free loopback port (the server task ends with the runtime)
/// and connects one client.
async fn connect(encrypted: bool) -> Client {
    let config = if encrypted {
        Config::new().encryption(EncryptionPolicy::Required)
    } else {
        Config::new()
            .encryption(EncryptionPolicy::Off)
            .compression(false)
    };
    let router = Router::new().unary("n", |_ctx, _req: Bytes| async move {
        Ok::<_, Status>(Bytes::from_static(RESPONSE))
    });
    let listener = Listener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(weft::serve(
        listener,
        router,
        config.clone(),
        std::future::pending(),
    ));
    let client = weft::connect(&addr, &config).await.expect("connect");
    assert_eq!(client.connection().negotiated().encrypted, encrypted);
    client
}
