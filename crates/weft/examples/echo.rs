//! Echo over TCP: a server and a client in one program.
//!
//! Run: `cargo run -p weft --example echo`

use weft::{Bytes, Config, Listener, Router, Status};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A router with one raw-bytes method.
    let router = Router::new().unary(
        "echo",
        |_ctx, req: Bytes| async move { Ok::<_, Status>(req) },
    );

    // Serve on a free loopback port until `stop` fires.
    let listener = Listener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(weft::serve(listener, router, Config::new(), async {
        let _ = stopped.await;
    }));

    // One connection, on purpose: it shows what the handshake negotiated
    // (encryption and compression are on by default). An application's
    // client is a `weft::Channel`, which reconnects (examples/service.rs).
    let client = weft::connect(&addr, &Config::new()).await?;
    let reply = client
        .unary("echo", Bytes::from_static(b"hello, weft"))
        .await?;
    let n = client.connection().negotiated();
    println!(
        "{addr} answered {:?} (encrypted: {}, compressed: {})",
        String::from_utf8_lossy(&reply),
        n.encrypted,
        n.compressed
    );

    // Graceful shutdown: calls in flight finish, then the server returns.
    stop.send(()).ok();
    server.await??;
    Ok(())
}
