//! The same unary call typed (through `#[weft::service]`) and raw, for
//! counting instructions per call with callgrind (docs/BENCHMARKS.md):
//!
//! ```text
//! cargo build --release -p weft-macros --example cost
//! instr-per-call -- target/release/examples/cost typed-postcard {N}
//! instr-per-call -- target/release/examples/cost raw-postcard {N}
//! ```
//!
//! Modes: `typed-postcard` / `raw-postcard` (the raw call sends the
//! postcard bytes itself and decodes the reply with postcard), and
//! `typed-json` / `raw-json` (the raw call uses `unary_json`).

use serde::{Deserialize, Serialize};
use weft::{Bytes, Config, Context, EncryptionPolicy, Json, Postcard, Router, Status};

/// A small fixed-size message.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// x
    pub x: i32,
    /// y
    pub y: i32,
}

/// Over postcard.
#[weft::service(codec = Postcard)]
pub trait Binary {
    /// Mirrors a point.
    async fn flip(&self, ctx: Context, p: Point) -> Result<Point, Status>;
}

/// Over JSON.
#[weft::service(codec = Json)]
pub trait Text {
    /// Mirrors a point.
    async fn flip(&self, ctx: Context, p: Point) -> Result<Point, Status>;
}

struct Impl;

fn flip(p: Point) -> Point {
    Point { x: p.y, y: p.x }
}

impl Binary for Impl {
    async fn flip(&self, _ctx: Context, p: Point) -> Result<Point, Status> {
        Ok(flip(p))
    }
}

impl Text for Impl {
    async fn flip(&self, _ctx: Context, p: Point) -> Result<Point, Status> {
        Ok(flip(p))
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let router = Router::new()
            .add_service(BinaryServer::new(Impl))
            .add_service(TextServer::new(Impl))
            .unary("raw/flip", |_c, b: Bytes| async move {
                let p: Point =
                    postcard::from_bytes(&b).map_err(|_| Status::invalid_argument("p"))?;
                Ok(Bytes::from(postcard::to_stdvec(&flip(p)).unwrap()))
            })
            .unary_json("json/flip", |_c, p: Point| async move { Ok(flip(p)) });
        let config = Config::new()
            .encryption(EncryptionPolicy::Off)
            .compression(false);
        let client = weft::memory(router, &config).await.unwrap();
        let binary = BinaryClient::new(client.clone());
        let text = TextClient::new(client.clone());
        let p = Point { x: 3, y: -4 };
        for _ in 0..n {
            let back = match mode.as_str() {
                "typed-postcard" => binary.flip(p).await.unwrap(),
                "raw-postcard" => {
                    let body = Bytes::from(postcard::to_stdvec(&p).unwrap());
                    let r = client.unary("raw/flip", body).await.unwrap();
                    postcard::from_bytes(&r).unwrap()
                }
                "typed-json" => text.flip(p).await.unwrap(),
                "raw-json" => client.unary_json("json/flip", &p).await.unwrap(),
                other => panic!("unknown mode {other:?}"),
            };
            assert_eq!(back, flip(p));
        }
    });
}
