//! weft itself, through the `weft` facade: `weft::serve` on a TCP loopback
//! listener, `weft::connect`, a raw-bytes unary method returning
//! [`RESPONSE`]. Plain: encryption and compression off. Encrypted:
//! AES-256-GCM required (Noise handshake), compression negotiated on as by
//! default (a 7-byte body is below its minimum size, so it stays raw).

use weft::{Bytes, Client, Config, EncryptionPolicy, Listener, Router, Status};

use crate::drive::{self, Caller};
use crate::{Counts, RESPONSE, Runtime, Shape, Timing};

/// Runs `shape`, plain.
pub fn run_plain(runtime: Runtime, shape: Shape, counts: Counts) -> Timing {
    drive::run(runtime, shape, counts, connect(false))
}

/// Runs `shape`, encrypted.
pub fn run_encrypted(runtime: Runtime, shape: Shape, counts: Counts) -> Timing {
    drive::run(runtime, shape, counts, connect(true))
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
pub(crate) async fn connect(encrypted: bool) -> Client {
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
