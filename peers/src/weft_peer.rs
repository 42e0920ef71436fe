//! weft itself, through the `weft` facade: `weft::serve` on a TCP loopback
//! listener, `weft::connect`, a raw-bytes unary method returning
//! [`RESPONSE`]. Plain: encryption and compression off. Encrypted:
//! AES-256-GCM required (Noise handshake), compression negotiated on as by
//! default (a 7-byte body is below its minimum size, so it stays raw).

use std::net::SocketAddr;
use std::pin::Pin;

use weft::{Bytes, Client, Config, EncryptionPolicy, Listener, Router, Status};

use crate::drive::{self, Caller};
use crate::{Counts, Place, RESPONSE, Runtime, Shape, Timing};

/// Runs `shape`, plain, the server at `place`.
pub fn run_plain(runtime: Runtime, shape: Shape, counts: Counts, place: Place) -> Timing {
    drive::run(runtime, shape, counts, connect(false, place))
}

/// Runs `shape`, encrypted, the server at `place`.
pub fn run_encrypted(runtime: Runtime, shape: Shape, counts: Counts, place: Place) -> Timing {
    drive::run(runtime, shape, counts, connect(true, place))
}

/// The plain server alone (split layout).
pub fn server_plain() -> Pin<Box<dyn Future<Output = SocketAddr> + Send>> {
    Box::pin(server(false))
}

/// The encrypted server alone (split layout).
pub fn server_encrypted() -> Pin<Box<dyn Future<Output = SocketAddr> + Send>> {
    Box::pin(server(true))
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

fn config(encrypted: bool) -> Config {
    if encrypted {
        Config::new().encryption(EncryptionPolicy::Required)
    } else {
        Config::new()
            .encryption(EncryptionPolicy::Off)
            .compression(false)
    }
}

/// Starts weft's server on the current runtime; returns its address.
async fn server(encrypted: bool) -> SocketAddr {
    let router = Router::new().unary("n", |_ctx, _req: Bytes| async move {
        Ok::<_, Status>(Bytes::from_static(RESPONSE))
    });
    let listener = Listener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(weft::serve(
        listener,
        router,
        config(encrypted),
        std::future::pending(),
    ));
    addr.parse().expect("a socket address")
}

/// A client of the server at `place` (started here if in process).
pub(crate) async fn connect(encrypted: bool, place: Place) -> Client {
    let addr = place.addr(server(encrypted)).await;
    let client = weft::connect(&addr.to_string(), &config(encrypted))
        .await
        .expect("connect");
    assert_eq!(client.connection().negotiated().encrypted, encrypted);
    client
}
