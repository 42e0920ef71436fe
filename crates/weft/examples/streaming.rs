//! The three streaming shapes, with a deadline.
//!
//! Run: `cargo run -p weft --example streaming`

use std::time::Duration;

use weft::{Bytes, CallOptions, Caller, Channel, Config, Endpoint, Json, Router, Streaming};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let router = Router::new()
        // Server streaming: one request, many responses.
        .server_streaming_json("count", |_ctx, n: u32, mut sink| async move {
            for i in 1..=n {
                sink.send_json(&i).await?;
            }
            Ok(())
        })
        // Client streaming: many requests, one response.
        .client_streaming_json("sum", |_ctx, mut rx| async move {
            let mut total = 0i64;
            while let Some(v) = rx.message_json::<i64>().await? {
                total += v;
            }
            Ok(total)
        })
        // Bidirectional: answer each message as it arrives.
        .bidi("shout", |ctx, mut s| async move {
            // The caller's deadline is visible to the handler.
            println!("shout: {:?} left", ctx.remaining());
            while let Some(m) = s.message().await? {
                s.send(Bytes::from(m.to_ascii_uppercase())).await?;
            }
            Ok(())
        });
    // A Channel whose connections are in-memory pipes to the router.
    let client = Channel::builder().endpoint(Endpoint::from_fn("memory", move || {
        let router = router.clone();
        async move { weft::memory(router, &Config::new()).await }
    }));
    let opts = CallOptions::new().timeout(Duration::from_secs(5));

    // Any codec through `Caller`: the responses arrive decoded.
    let mut counts: Streaming<u32, Json> = client
        .call_server_streaming("count", Json, &3u32, &opts)
        .await?;
    while let Some(i) = counts.message().await? {
        println!("count: {i}");
    }

    let mut sum = client.client_streaming("sum", &opts).await?;
    for v in [10i64, 20, 12] {
        sum.send_json(&v).await?;
    }
    println!("sum: {}", sum.finish_json::<i64>().await?);

    let mut chat = client.bidi("shout", &opts).await?;
    for word in ["hello", "weft"] {
        chat.send(Bytes::from(word)).await?;
        let reply = chat.message().await?.unwrap_or_default();
        println!("shout: {word} -> {}", String::from_utf8_lossy(&reply));
    }
    chat.close_send().await?;
    // `None` only after the server's explicit end with OK.
    assert!(chat.message().await?.is_none());
    Ok(())
}
