//! A typed service with `#[weft::service]`: every call shape, a typed
//! client, the handles as `futures` streams and sinks.
//!
//! Run: `cargo run -p weft --example service` (also run by `cargo test -p weft`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use weft::{CallOptions, Config, Context, Requests, Responses, Router, Status};

/// A greeting.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    /// Who is greeted.
    pub name: String,
}

/// The service: its wire names are `demo.Greeter/Greet` and so on.
#[weft::service(package = "demo")]
pub trait Greeter {
    /// Unary.
    async fn greet(&self, ctx: Context, who: Hello) -> Result<String, Status>;
    /// Server streaming: `n` greetings.
    async fn greet_many(&self, ctx: Context, n: u32, out: Responses<String>) -> Result<(), Status>;
    /// Client streaming: greets everyone at once.
    async fn greet_all(&self, ctx: Context, names: Requests<String>) -> Result<String, Status>;
    /// Bidirectional: one greeting per name, as they arrive.
    async fn chat(
        &self,
        ctx: Context,
        names: Requests<String>,
        out: Responses<String>,
    ) -> Result<(), Status>;
}

struct Polite;

impl Greeter for Polite {
    async fn greet(&self, ctx: Context, who: Hello) -> Result<String, Status> {
        // The caller's deadline is visible to the handler.
        println!("greet: {:?} left", ctx.remaining());
        Ok(format!("hello, {}", who.name))
    }

    async fn greet_many(
        &self,
        _ctx: Context,
        n: u32,
        mut out: Responses<String>,
    ) -> Result<(), Status> {
        for i in 1..=n {
            out.send(format!("hello #{i}")).await?;
        }
        Ok(())
    }

    async fn greet_all(
        &self,
        _ctx: Context,
        mut names: Requests<String>,
    ) -> Result<String, Status> {
        let mut all = Vec::new();
        while let Some(n) = names.message().await? {
            all.push(n);
        }
        Ok(format!("hello, {}", all.join(" and ")))
    }

    async fn chat(
        &self,
        _ctx: Context,
        mut names: Requests<String>,
        mut out: Responses<String>,
    ) -> Result<(), Status> {
        while let Some(n) = names.message().await? {
            out.send(format!("hi {n}")).await?;
        }
        Ok(())
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let router = Router::new().add_service(GreeterServer::new(Polite));
    // A Channel (reconnects, retries refused calls) whose connections are
    // in-memory pipes to the router; over TCP, `Channel::new(addr, &config)`.
    let endpoint = weft::Endpoint::from_fn("memory", move || {
        let router = router.clone();
        async move { weft::memory(router, &Config::new()).await }
    });
    let client = GreeterClient::new(weft::Channel::builder().endpoint(endpoint));

    let opts = CallOptions::new().timeout(Duration::from_secs(5));
    let hi = client
        .greet_with(Hello { name: "ada".into() }, &opts)
        .await?;
    assert_eq!(hi, "hello, ada");

    let mut many = client.greet_many(2).await?;
    while let Some(g) = many.message().await? {
        println!("{g}");
    }

    let mut all = client.greet_all().await?;
    all.send("ada".into()).await?;
    all.send("alan".into()).await?;
    assert_eq!(all.finish().await?, "hello, ada and alan");

    let mut chat = client.chat().await?;
    chat.send("grace".into()).await?;
    assert_eq!(chat.message().await?.as_deref(), Some("hi grace"));
    chat.close_send().await?;
    assert_eq!(chat.message().await?, None);
    println!("all four shapes answered");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    run().await
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_example_runs() {
        super::run().await.unwrap();
    }
}
