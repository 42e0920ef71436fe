//! The JSON codec's share of a typed unary call, alone: `N` times, the
//! request encoded (the client) and decoded (the server), the reply
//! encoded (the server) and decoded (the client), as `Json` does it on a
//! call. Made to be counted under callgrind, twice with two counts, the
//! difference divided by the difference of the counts:
//!
//! ```text
//! cargo build --release -p weft-rpc --example codec_cost
//! valgrind --tool=callgrind target/release/examples/codec_cost struct 1000
//! valgrind --tool=callgrind target/release/examples/codec_cost struct 6000
//! ```
//!
//! `nil` is the instruction gate's pair (a nil request, a `u32` reply);
//! `struct` an ordinary one (a lookup by key, a record back).

use std::hint::black_box;

use serde::{Deserialize, Serialize};
use weft_rpc::{Codec, Json, Status};

/// An ordinary request: a key and a few options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Lookup {
    key: String,
    version: u32,
    consistent: bool,
}

/// An ordinary reply: a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    id: u64,
    name: String,
    score: i32,
    ttl: Option<u32>,
    tags: Vec<String>,
}

/// One message through the codec: encoded, framed, its body decoded.
fn through<T>(value: &T) -> Result<T, Status>
where
    Json: Codec<T>,
{
    let body = match <Json as Codec<T>>::encode(black_box(value), 1 << 20)? {
        weft_rpc::codec::Framed::One(b) => b.slice(weft_rpc::codec::PREFIX_LEN..),
        weft_rpc::codec::Framed::Two(_, b) => b,
    };
    <Json as Codec<T>>::decode(black_box(body))
}

fn round_trip<Req: PartialEq, Resp: PartialEq>(req: &Req, resp: &Resp, n: usize)
where
    Json: Codec<Req> + Codec<Resp>,
{
    for _ in 0..n {
        assert!(through(req).expect("request") == *req);
        assert!(through(resp).expect("reply") == *resp);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let shape = args.next().unwrap_or_else(|| "struct".into());
    let n: usize = args.next().map_or(1000, |a| a.parse().expect("a count"));
    match shape.as_str() {
        "nil" => round_trip(&(), &1u32, n),
        "struct" => {
            let req = Lookup {
                key: "users/4711".into(),
                version: 3,
                consistent: true,
            };
            let resp = Record {
                id: 4711,
                name: "Ada Lovelace".into(),
                score: -12,
                ttl: Some(3600),
                tags: vec!["admin".into(), "ops".into()],
            };
            round_trip(&req, &resp, n);
        }
        other => panic!("unknown shape {other:?} (nil, struct)"),
    }
}
