//! Typed calls: serde types in, serde types out, errors as `Status`.
//!
//! Run: `cargo run -p weft --example json`

use serde::{Deserialize, Serialize};
use weft::{Code, Config, Router, Status};

#[derive(Debug, Serialize, Deserialize)]
struct Divide {
    a: f64,
    b: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Quotient {
    q: f64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let router = Router::new().unary_json("math/divide", |_ctx, r: Divide| async move {
        if r.b == 0.0 {
            return Err(Status::invalid_argument("division by zero"));
        }
        Ok(Quotient { q: r.a / r.b })
    });
    // A Channel over in-memory pipes keeps the example short; over TCP,
    // `weft::Channel::new(addr, &config)`.
    let client = weft::Channel::builder().endpoint(weft::Endpoint::from_fn("memory", move || {
        let router = router.clone();
        async move { weft::memory(router, &Config::new()).await }
    }));

    let q: Quotient = client
        .unary_json("math/divide", &Divide { a: 1.0, b: 8.0 })
        .await?;
    println!("1 / 8 = {}", q.q);

    // Errors come back as a Status with a code and a message.
    let err = client
        .unary_json::<_, Quotient>("math/divide", &Divide { a: 1.0, b: 0.0 })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::INVALID_ARGUMENT);
    println!("1 / 0 -> {err}");

    // Method names are canonicalised: this is the same method.
    let q: Quotient = client
        .unary_json("/Math/Divide", &Divide { a: 9.0, b: 3.0 })
        .await?;
    println!("9 / 3 = {}", q.q);
    Ok(())
}
