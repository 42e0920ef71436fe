//! `#[weft::service]` end to end, in memory: every call shape, the typed
//! handles as `futures` Stream/Sink, bidi halves on two tasks, per-call
//! options, and a response of the wrong type reported as `INTERNAL`.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use weft::{
    Ascii, Binary, CallOptions, Code, Config, Context, MetadataKey, Requests, Responses, Router,
    Status,
};

/// A response header `double` sets.
const SERVED_BY: MetadataKey<Ascii> = MetadataKey::from_static("x-served-by");
/// A trailer `double` sets: its input, as bytes.
const INPUT: MetadataKey<Binary> = MetadataKey::from_static("input-bin");

/// The service under test.
#[weft::service(package = "test.v1")]
pub trait Calc {
    /// Unary.
    async fn double(&self, ctx: Context, n: i64) -> Result<i64, Status>;
    /// Server streaming, answered through the `Sink` interface.
    async fn count_to(&self, ctx: Context, n: u32, out: Responses<u32>) -> Result<(), Status>;
    /// Client streaming, read through the `Stream` interface.
    async fn sum(&self, ctx: Context, numbers: Requests<i64>) -> Result<i64, Status>;
    /// Bidirectional: each request echoed upper-cased, from another task.
    #[weft(name = "test.v1.Calc/Shout")]
    async fn shout(
        &self,
        ctx: Context,
        words: Requests<String>,
        out: Responses<String>,
    ) -> Result<(), Status>;
    /// Waits for its deadline.
    async fn stall(&self, ctx: Context, req: ()) -> Result<(), Status>;
}

struct CalcImpl;

impl Calc for CalcImpl {
    async fn double(&self, ctx: Context, n: i64) -> Result<i64, Status> {
        ctx.set_header(&SERVED_BY, "calc-1")?;
        ctx.set_trailer(&INPUT, &n.to_be_bytes())?;
        n.checked_mul(2).ok_or_else(|| {
            // Machine-readable details: the largest value that works.
            Status::invalid_argument("overflow").with_details_as(weft::Json, &(i64::MAX / 2))
        })
    }

    async fn count_to(&self, _ctx: Context, n: u32, mut out: Responses<u32>) -> Result<(), Status> {
        for i in 1..=n {
            SinkExt::send(&mut out, i).await?;
        }
        Ok(())
    }

    async fn sum(&self, _ctx: Context, mut numbers: Requests<i64>) -> Result<i64, Status> {
        let mut total = 0;
        while let Some(n) = numbers.next().await {
            total += n?;
        }
        Ok(total)
    }

    async fn shout(
        &self,
        _ctx: Context,
        mut words: Requests<String>,
        mut out: Responses<String>,
    ) -> Result<(), Status> {
        // The halves on two tasks: a channel between them.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(4);
        let reader = tokio::spawn(async move {
            while let Some(w) = words.message().await? {
                if tx.send(w.to_uppercase()).await.is_err() {
                    break;
                }
            }
            Ok::<_, Status>(())
        });
        while let Some(w) = rx.recv().await {
            out.send(w).await?;
        }
        reader
            .await
            .map_err(|_| Status::internal("reader panicked"))?
    }

    async fn stall(&self, _ctx: Context, _req: ()) -> Result<(), Status> {
        std::future::pending().await
    }
}

async fn client() -> CalcClient<weft::Client> {
    let router = Router::new().add_service(CalcServer::new(CalcImpl));
    CalcClient::new(weft::memory(router, &Config::new()).await.unwrap())
}

#[test]
fn wire_names_keep_the_declared_case_and_the_constants_are_them() {
    assert_eq!(
        CalcServer::<CalcImpl>::METHODS,
        [
            "test.v1.Calc/Double",
            "test.v1.Calc/CountTo",
            "test.v1.Calc/Sum",
            "test.v1.Calc/Shout",
            "test.v1.Calc/Stall",
        ]
    );
    // One constant per method, and they are what the router serves.
    let consts = [
        CalcMethods::DOUBLE,
        CalcMethods::COUNT_TO,
        CalcMethods::SUM,
        CalcMethods::SHOUT,
        CalcMethods::STALL,
    ];
    assert_eq!(consts, CalcServer::<CalcImpl>::METHODS);
    let r = Router::new().add_service(CalcServer::new(CalcImpl));
    let mut served: Vec<&str> = r.methods().into_iter().map(|(n, _)| n).collect();
    let mut want = consts.to_vec();
    served.sort_unstable();
    want.sort_unstable();
    assert_eq!(served, want);
    assert!(r.has_method("/test.v1.Calc/CountTo"));
    // An earlier release's lower-cased name still reaches the method.
    assert!(r.has_method("test.v1.calc/countto"));
    assert!(format!("{:?}", CalcServer::new(CalcImpl)).contains("test.v1.Calc/Sum"));
}

/// A raw call by a constant reaches the typed method.
#[tokio::test]
async fn a_raw_call_by_the_constant_reaches_the_method() {
    let c = client().await;
    let doubled: i64 = c
        .inner()
        .unary_json(CalcMethods::DOUBLE, &4i64)
        .await
        .unwrap();
    assert_eq!(doubled, 8);
}

#[tokio::test]
async fn every_shape_round_trips() {
    let c = client().await;
    assert_eq!(c.double(21).await.unwrap(), 42);
    let e = c.double(i64::MAX).await.unwrap_err();
    assert_eq!(e.code(), Code::INVALID_ARGUMENT);
    let max: i64 = e.details_as(weft::Json).unwrap().unwrap();
    assert_eq!(max, i64::MAX / 2);
    // A clone shares the connection.
    let c2 = c.clone();
    assert_eq!(c2.double(1).await.unwrap(), 2);

    let got: Vec<u32> = c
        .count_to(4)
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(got, [1, 2, 3, 4]);

    let mut s = c.sum().await.unwrap();
    for n in [1, 2, 39] {
        s.send(n).await.unwrap();
    }
    assert_eq!(s.finish().await.unwrap(), 42);
    // The same through the Sink interface: send_all, then close (which
    // ends the requests), then the response.
    let mut s = c.sum().await.unwrap();
    s.send_all(&mut futures::stream::iter([1, 2, 39].map(Ok)))
        .await
        .unwrap();
    SinkExt::send(&mut s, 100).await.unwrap();
    SinkExt::close(&mut s).await.unwrap();
    assert!(format!("{s:?}").contains("ClientStreamingCall"));
    assert_eq!(s.finish().await.unwrap(), 142);

    let mut b = c.shout().await.unwrap();
    b.send("hi".into()).await.unwrap();
    assert_eq!(b.message().await.unwrap().as_deref(), Some("HI"));
    b.send("there".into()).await.unwrap();
    b.close_send().await.unwrap();
    assert_eq!(b.next().await.unwrap().unwrap(), "THERE");
    assert!(b.next().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn per_call_options_apply() {
    let c = client().await;
    let opts = CallOptions::new().timeout(Duration::from_millis(50));
    let e = c.stall_with((), &opts).await.unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED);
    assert_eq!(c.double_with(4, &opts).await.unwrap(), 8);
}

#[tokio::test]
async fn a_typed_unary_call_reads_the_handlers_headers_and_trailers() {
    let c = client().await;
    let r = c.double_response(21, &CallOptions::new()).await.unwrap();
    assert_eq!(*r.message(), 42);
    assert_eq!(r.header(&SERVED_BY), Some("calc-1"));
    assert_eq!(r.trailer(&INPUT), Some(&21i64.to_be_bytes()[..]));
}

/// The same wire name with another response type: what a client built
/// against a different version of the service sees.
/// An old version of `Calc`.
#[weft::service(package = "test.v1")]
pub trait CalcV0 {
    /// Same name, other type.
    #[weft(name = "test.v1.Calc/Double")]
    async fn double(&self, ctx: Context, n: i64) -> Result<String, Status>;
}

#[tokio::test]
async fn an_undecodable_response_is_internal_and_names_the_method() {
    let c = client().await;
    let old = CalcV0Client::new(c.inner().clone());
    let e = old.double(2).await.unwrap_err();
    assert_eq!(e.code(), Code::INTERNAL, "{e}");
    assert!(e.message().contains("test.v1.Calc/Double"), "{e}");
}

/// `Calc` as a client speaking postcard would call it.
#[weft::service(package = "test.v1", codec = weft::Postcard)]
pub trait CalcBinary {
    /// Same name, same types, other codec.
    #[weft(name = "test.v1.Calc/Double")]
    async fn double(&self, ctx: Context, n: i64) -> Result<i64, Status>;
}

#[tokio::test]
async fn a_codec_mismatch_is_a_clear_error() {
    let c = client().await;
    let binary = CalcBinaryClient::new(c.inner().clone());
    let e = binary.double(2).await.unwrap_err();
    assert_eq!(e.code(), Code::UNIMPLEMENTED, "{e}");
    assert!(
        e.message().contains("json") && e.message().contains("postcard"),
        "{e}"
    );
    // An untyped caller names no codec and is served as before.
    let n: i64 = c.inner().unary_json(CalcMethods::DOUBLE, &5).await.unwrap();
    assert_eq!(n, 10);
}

#[tokio::test]
async fn a_client_bidi_call_splits_into_halves_on_two_tasks() {
    let c = client().await;
    let (mut tx, mut rx) = c.shout().await.unwrap().split();
    let sender = tokio::spawn(async move {
        tx.send("a".to_string()).await.unwrap();
        // The sender is also a futures::Sink; closing it ends the requests.
        SinkExt::send(&mut tx, "b".to_string()).await.unwrap();
        SinkExt::send(&mut tx, "c".to_string()).await.unwrap();
        SinkExt::close(&mut tx).await.unwrap();
        // Closed: a further send is refused, a second close is a no-op.
        assert_eq!(
            tx.send("d".into()).await.unwrap_err().code(),
            Code::FAILED_PRECONDITION
        );
        tx.close_send().await.unwrap();
    });
    let got: Vec<String> = (&mut rx).map(Result::unwrap).collect().await;
    sender.await.unwrap();
    assert_eq!(got, ["A", "B", "C"]);
    assert_eq!(rx.message().await.unwrap(), None);
    assert_eq!(rx.trailers().and_then(|t| t.status()), Some(0));
}
