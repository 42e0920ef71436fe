//! The demo service `weft serve` offers and `weft load` calls.

use serde::{Deserialize, Serialize};
use weft::{Bytes, Router, Status};

/// Request of `add`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct AddRequest {
    pub(crate) a: i64,
    pub(crate) b: i64,
}

/// Response of `add`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct AddResponse {
    pub(crate) sum: i64,
}

/// Response of `ping` (the reference benchmark's 7-byte `{"n":1}`).
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Pong {
    pub(crate) n: u32,
}

/// Most messages `count` streams for one call.
pub(crate) const MAX_COUNT: u32 = 100_000;

/// The methods, for the listing `weft serve` prints.
pub(crate) const METHODS: &str =
    "echo (raw), ping (JSON, returns {\"n\":1}), add (JSON {a,b} -> {sum}), count (streams 0..n)";

/// `echo`: returns the request; `ping`: `{"n":1}`; `add`: `{a, b}` →
/// `{sum}`; `count`: `n` → the JSON numbers `0..n`, one message each.
pub(crate) fn router() -> Router {
    Router::new()
        .unary("echo", |_ctx, req: Bytes| async move { Ok(req) })
        .unary_json("ping", |_ctx, _req: serde_json::Value| async move {
            Ok(Pong { n: 1 })
        })
        .unary_json("add", |_ctx, r: AddRequest| async move {
            r.a.checked_add(r.b)
                .map(|sum| AddResponse { sum })
                .ok_or_else(|| Status::new(weft::Code::OUT_OF_RANGE, "sum overflows i64"))
        })
        .server_streaming_json("count", |_ctx, n: u32, mut sink| async move {
            if n > MAX_COUNT {
                return Err(Status::invalid_argument(format!(
                    "count at most {MAX_COUNT}"
                )));
            }
            for i in 0..n {
                sink.send_json(&i).await?;
            }
            Ok(())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft::{CallOptions, Code, Config};

    #[tokio::test]
    async fn every_demo_method_answers() {
        let c = weft::memory(router(), &Config::new()).await.unwrap();
        assert_eq!(
            c.unary("echo", Bytes::from_static(b"x")).await.unwrap(),
            "x"
        );
        assert_eq!(
            c.unary("ping", Bytes::from_static(b"null")).await.unwrap(),
            "{\"n\":1}"
        );
        let r: AddResponse = c
            .unary_json("add", &AddRequest { a: 2, b: 3 })
            .await
            .unwrap();
        assert_eq!(r.sum, 5);
        let e = c
            .unary_json::<_, AddResponse>("add", &AddRequest { a: i64::MAX, b: 1 })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::OUT_OF_RANGE);
        let mut s = c
            .server_streaming_json("count", &3u32, &CallOptions::new())
            .await
            .unwrap();
        let mut got = vec![];
        while let Some(v) = s.message_json::<u32>().await.unwrap() {
            got.push(v);
        }
        assert_eq!(got, [0, 1, 2]);
        let mut s = c
            .server_streaming_json("count", &(MAX_COUNT + 1), &CallOptions::new())
            .await
            .unwrap();
        assert_eq!(
            s.message().await.unwrap_err().code(),
            Code::INVALID_ARGUMENT
        );
    }
}
