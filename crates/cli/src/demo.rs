//! The demo service `weft serve` offers and `weft load` calls, defined with
//! `#[weft::service]`. Its wire names are pinned to the short ones the CLI
//! has always used (`echo`, `ping`, `add`, `count`), so older clients and
//! `weft call add '{"a":1,"b":2}'` keep working.

use serde::de::{MapAccess, Visitor, value::MapAccessDeserializer};
use serde::{Deserialize, Deserializer, Serialize};
use weft::{Ascii, Bytes, Context, Json, MetadataKey, Raw, Responses, Router, Status};

/// Request of `add`: exactly a JSON object with the integer members `a`
/// and `b` (docs/PROTOCOL.md 8). Other members are ignored, as a newer
/// client may send more; an array, a missing, repeated or non-integer
/// member is `INVALID_ARGUMENT`.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct AddRequest {
    pub(crate) a: i64,
    pub(crate) b: i64,
}

impl<'de> Deserialize<'de> for AddRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AddRequest, D::Error> {
        /// The members, read from an object only.
        #[derive(Deserialize)]
        struct Members {
            a: i64,
            b: i64,
        }
        /// serde's derived impl also takes a sequence (`[1,2]`) for a
        /// struct; §8 promises an object.
        struct ObjectOnly;
        impl<'de> Visitor<'de> for ObjectOnly {
            type Value = AddRequest;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"an object {"a": integer, "b": integer}"#)
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<AddRequest, M::Error> {
                let Members { a, b } = Members::deserialize(MapAccessDeserializer::new(map))?;
                Ok(AddRequest { a, b })
            }
        }
        d.deserialize_map(ObjectOnly)
    }
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

/// Request and response of `status`: the status to end the call with.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct StatusRequest {
    /// The status code; 0 (`OK`) answers with the request itself.
    pub(crate) code: u32,
    /// The status message (default empty).
    #[serde(default)]
    pub(crate) message: String,
}

/// The response header `status` sends (docs/PROTOCOL.md 7.5.2).
pub(crate) const DEMO_HEADER: MetadataKey<Ascii> = MetadataKey::from_static("x-demo-header");
/// The trailer `status` sends (7.5).
pub(crate) const DEMO_TRAILER: MetadataKey<Ascii> = MetadataKey::from_static("x-demo-trailer");

/// Most messages `count` streams for one call.
pub(crate) const MAX_COUNT: u32 = 100_000;

/// The methods, for the listing `weft serve` prints.
pub(crate) const METHODS: &str = "echo (raw), ping (JSON, returns {\"n\":1}), add (JSON {a,b} -> {sum}), \
     count (streams 0..n), status (JSON {code,message}: ends with that status, \
     a header, a trailer and details)";

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

    /// Ends the call with the requested status, after setting the header
    /// [`DEMO_HEADER`] and the trailer [`DEMO_TRAILER`]; a failure carries
    /// the request, as JSON, in its details (7.5.1).
    #[weft(name = "status")]
    async fn status(&self, ctx: Context, request: StatusRequest) -> Result<StatusRequest, Status>;
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

    async fn status(&self, ctx: Context, request: StatusRequest) -> Result<StatusRequest, Status> {
        DemoImpl::end_with(&ctx, request)
    }
}

impl DemoImpl {
    /// The body of `status` (outside the trait impl so that `?` on the
    /// metadata setters reads plainly).
    fn end_with(ctx: &Context, request: StatusRequest) -> Result<StatusRequest, Status> {
        ctx.set_header(&DEMO_HEADER, "weft")?;
        ctx.set_trailer(&DEMO_TRAILER, "weft")?;
        if request.code == 0 {
            return Ok(request);
        }
        let status = Status::new(weft::Code(request.code), request.message.clone());
        Err(status.with_details_as(Json, &request))
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
        // Refused before its first message: the call itself fails.
        let e = c.count(MAX_COUNT + 1).await.unwrap_err();
        assert_eq!(e.code(), Code::INVALID_ARGUMENT);
    }

    /// The wire is what it was before the macro: raw and JSON calls by the
    /// short names still work.
    #[tokio::test]
    async fn the_wire_names_and_encodings_are_unchanged() {
        assert_eq!(
            DemoServer::<DemoImpl>::METHODS,
            ["echo", "ping", "add", "count", "status"]
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

    /// `add` takes exactly what docs/PROTOCOL.md section 8 says: an object
    /// with integer members `a` and `b`, other members ignored; anything
    /// else is `INVALID_ARGUMENT`.
    #[tokio::test]
    async fn add_accepts_exactly_the_documented_inputs() {
        let c = weft::memory(router(), &Config::new()).await.unwrap();
        let add = |body: &'static str| c.unary("add", Bytes::from_static(body.as_bytes()));
        for ok in [
            r#"{"a":1,"b":2}"#,
            r#"{"b":2,"a":1}"#,
            r#"{"a":1,"b":2,"c":"new"}"#,
        ] {
            assert_eq!(add(ok).await.unwrap(), r#"{"sum":3}"#, "{ok}");
        }
        for bad in [
            "[1,2]",
            r#"{"a":1}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#"{"a":1.5,"b":2}"#,
            r#"{"a":"1","b":2}"#,
            r#"{"a":null,"b":2}"#,
            r#"{"a":9223372036854775808,"b":0}"#,
            "3",
            "null",
            "",
            r#"{"a":1,"b":2} x"#,
        ] {
            let e = add(bad).await.unwrap_err();
            assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{bad}: {e}");
        }
    }

    /// `status` sends a response header, a trailer and, on failure, status
    /// details (docs/PROTOCOL.md 7.5.1, 7.5.2), so a client can check them.
    #[tokio::test]
    async fn status_sends_headers_trailers_and_details() {
        let c = weft::memory(router(), &Config::new()).await.unwrap();
        let r = c
            .unary_response(
                "status",
                Bytes::from_static(br#"{"code":0}"#),
                &CallOptions::new(),
            )
            .await
            .unwrap();
        assert_eq!(r.message(), r#"{"code":0,"message":""}"#);
        assert_eq!(r.header(&DEMO_HEADER), Some("weft"));
        assert_eq!(r.trailer(&DEMO_TRAILER), Some("weft"));
        let request = br#"{"code":5,"message":"gone"}"#;
        let e = c
            .unary("status", Bytes::from_static(request))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NOT_FOUND);
        assert_eq!(e.message(), "gone");
        assert_eq!(e.details().map(|d| &d[..]), Some(&request[..]));
        let typed = DemoClient::new(c);
        let e = typed
            .status(StatusRequest {
                code: 9,
                message: "not yet".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::FAILED_PRECONDITION);
    }
}
