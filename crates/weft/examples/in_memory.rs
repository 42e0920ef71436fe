//! Any byte stream works: here both ends of a `tokio::io::duplex` pipe,
//! wired by hand with `connect_io` and `accept_io` (what `weft::memory`
//! does for you), with a pre-shared key so both sides authenticate.
//!
//! Run: `cargo run -p weft --example in_memory`

use weft::{Bytes, Config, EncryptionPolicy, Router, Server, Status};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::new()
        .encryption(EncryptionPolicy::Required)
        .psk([7; 32]);
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);

    let router = Router::new().unary("whoami", |ctx, _req: Bytes| async move {
        let p = ctx.peer();
        Ok::<_, Status>(Bytes::from(format!(
            "peer {} (encrypted: {})",
            p.addr.as_deref().unwrap_or("?"),
            p.encrypted
        )))
    });
    let server = Server::new(router);
    let server_config = config.clone();
    let serving = tokio::spawn(async move {
        let (_conn, serve) =
            weft::accept_io(server_io, &server, &server_config, Some("duplex".into())).await?;
        serve.await;
        Ok::<_, weft::Error>(())
    });

    let client = weft::connect_io(client_io, &config).await?;
    let reply = client.unary("whoami", Bytes::new()).await?;
    println!("{}", String::from_utf8_lossy(&reply));
    let n = client.connection().negotiated();
    println!("authenticated by the pre-shared key: {}", n.authenticated);

    client
        .connection()
        .shutdown(std::time::Duration::from_secs(1))
        .await;
    serving.await??;
    Ok(())
}
