//! The demo service `weft serve` offers and `weft load` calls, defined with
//! `#[weft::service]`. Its wire names are pinned to the short ones the CLI
//! has always used (`echo`, `ping`, `add`, `count`), so older clients and
//! `weft call add '{"a":1,"b":2}'` keep working.

use serde::{Deserialize, Serialize};
use weft::{Bytes, Context, Raw, Responses, Router, Status};

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

/// The demo service.
#[weft::service]
pub(crate) trait Demo {
    /// Returns the request as it is.
    #[weft(name = "echo", codec = Raw)]
    async fn echo(&self, ctx: Context, request: Bytes) -> Result<Bytes, Status>;

    /// `{"n":1}`, whatever the request.
    #[weft(name = "ping")]
    async fn ping(&self, ctx: Context, request: serde_json::Value) -> Result<Pong, Status>;

    /// `{a, b}` → `{sum}`; `OUT_OF_RANGE` if the sum overflows.
    #[weft(name = "add")]
    async fn add(&self, ctx: Context, request: AddRequest) -> Result<AddResponse, Status>;

    /// `n` → the numbers `0..n`, one message each (`n` ≤ [`MAX_COUNT`]).
    #[weft(name = "count")]
    async fn count(&self, ctx: Context, n: u32, out: Responses<u32>) -> Result<(), Status>;
}

/// The implementation: no state.
struct DemoImpl;

impl Demo for DemoImpl {
    async fn echo(&self, _ctx: Context, request: Bytes) -> Result<Bytes, Status> {
        Ok(request)
    }

    async fn ping(&self, _ctx: Context, _request: serde_json::Value) -> Result<Pong, Status> {
        Ok(Pong { n: 1 })
    }

    async fn add(&self, _ctx: Context, r: AddRequest) -> Result<AddResponse, Status> {
        r.a.checked_add(r.b)
            .map(|sum| AddResponse { sum })
            .ok_or_else(|| Status::new(weft::Code::OUT_OF_RANGE, "sum overflows i64"))
    }

    async fn count(&self, _ctx: Context, n: u32, mut out: Responses<u32>) -> Result<(), Status> {
        if n > MAX_COUNT {
            return Err(Status::invalid_argument(format!(
                "count at most {MAX_COUNT}"
            )));
        }
        for i in 0..n {
            out.send(i).await?;
        }
        Ok(())
    }
}

/// The demo router.
pub(crate) fn router() -> Router {
    Router::new().add_service(DemoServer::new(DemoImpl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft::{CallOptions, Code, Config};

    #[tokio::test]
    async fn every_demo_method_answers_typed() {
        let c = DemoClient::new(weft::memory(router(), &Config::new()).await.unwrap());
        assert_eq!(c.echo(Bytes::from_static(b"x")).await.unwrap(), "x");
        assert_eq!(
            c.ping(serde_json::Value::Null).await.unwrap(),
            Pong { n: 1 }
        );
        let r = c.add(AddRequest { a: 2, b: 3 }).await.unwrap();
        assert_eq!(r.sum, 5);
        let e = c.add(AddRequest { a: i64::MAX, b: 1 }).await.unwrap_err();
        assert_eq!(e.code(), Code::OUT_OF_RANGE);
        let mut s = c.count(3).await.unwrap();
        let mut got = vec![];
        while let Some(v) = s.message().await.unwrap() {
            got.push(v);
        }
        assert_eq!(got, [0, 1, 2]);
        let mut s = c.count(MAX_COUNT + 1).await.unwrap();
        assert_eq!(
            s.message().await.unwrap_err().code(),
            Code::INVALID_ARGUMENT
        );
    }

    /// The wire is what it was before the macro: raw and JSON calls by the
    /// short names still work.
    #[tokio::test]
    async fn the_wire_names_and_encodings_are_unchanged() {
        assert_eq!(
            DemoServer::<DemoImpl>::METHODS,
            ["echo", "ping", "add", "count"]
        );
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
        let mut s = c
            .server_streaming_json("count", &2u32, &CallOptions::new())
            .await
            .unwrap();
        assert_eq!(s.message().await.unwrap().unwrap(), "0");
        assert_eq!(s.message_json::<u32>().await.unwrap(), Some(1));
        assert_eq!(s.message().await.unwrap(), None);
    }
}
