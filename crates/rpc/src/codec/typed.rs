//! Typed calls: a [`Codec`] turns values into messages, and the handles of
//! typed streaming handlers, [`Requests`] (a `futures::Stream`) and
//! [`Responses`] (a `futures::Sink`), carry values instead of bytes.
//!
//! This is what `#[weft::service]` generates code against; it is usable by
//! hand too:
//!
//! ```
//! use weft_rpc::{Json, Router, Status};
//!
//! let router = Router::new()
//!     .unary_codec("calc/double", Json, |_ctx, n: i64| async move { Ok::<_, Status>(n * 2) });
//! assert!(router.has_method("calc/double"));
//! ```

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll, ready};

use bytes::Bytes;

use crate::codec::message::{Decode, Encode};
use crate::codec::{self, Framed};
use crate::server::streams::{RequestStream, ResponseSink};
use crate::server::streams::{Slot, send_on};
use crate::status::{MAX_DETAILS, Status};

/// How values of type `T` become messages and back.
///
/// A codec is a zero-sized marker passed by value (`Json`, `Raw`) so that
/// the compiler infers it. Decoding malformed input is `INVALID_ARGUMENT`
/// (the peer sent it); the client turns a response it cannot decode into
/// `INTERNAL`, naming the method (the server broke the contract, not the
/// caller).
pub trait Codec<T>: Copy + Send + Sync + fmt::Debug + 'static {
    /// The codec's name, as `weft` would put it on the wire.
    const NAME: &'static str;

    /// Encodes `value` as one framed message (prefix included) of at most
    /// `max` bytes.
    fn encode(value: &T, max: usize) -> Result<Framed, Status>;

    /// Decodes one message body.
    fn decode(body: Bytes) -> Result<T, Status>;
}

/// Raw bytes: the message is the value.
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw;

impl Codec<Bytes> for Raw {
    const NAME: &'static str = "raw";

    /// Framed from the reference ([`codec::frame`] without a clone of a
    /// small message).
    fn encode(value: &Bytes, max: usize) -> Result<Framed, Status> {
        codec::frame_ref(value, max)
    }

    fn decode(body: Bytes) -> Result<Bytes, Status> {
        Ok(body)
    }
}

/// `Codec<T>` for every serde type `T`, through an encode and a decode
/// function (the serde codecs differ only in those).
macro_rules! serde_codec {
    ($feature:literal, $codec:ty, $name:literal, $encode:expr, $decode:expr) => {
        #[cfg(feature = $feature)]
        impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Codec<T>
            for $codec
        {
            const NAME: &'static str = $name;

            fn encode(value: &T, max: usize) -> Result<Framed, Status> {
                $encode(value, max)
            }

            fn decode(body: Bytes) -> Result<T, Status> {
                $decode(body)
            }
        }
    };
}

/// JSON through serde_json (feature `json`): the default codec.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

serde_codec!(
    "json",
    Json,
    "json",
    |value, max| crate::codec::message::to_json(value, max).map(Framed::One),
    |body: Bytes| crate::codec::message::from_json(&body)
);

/// postcard (feature `postcard`): a compact binary serde format (varint
/// integers, no field names). Not self-describing: both ends must agree on
/// the types, which a `#[weft::service]` trait is for.
#[cfg(feature = "postcard")]
#[derive(Debug, Clone, Copy, Default)]
pub struct Postcard;

serde_codec!(
    "postcard",
    Postcard,
    "postcard",
    // Written straight into the framing arena: no allocation in steady state.
    |value, max| {
        codec::frame_written(
            max,
            |buf| postcard::to_io(value, codec::Append(buf)).map(drop),
            cannot_encode_postcard,
            |too_large| too_large,
        )
        .map(Framed::One)
    },
    |body: Bytes| postcard::from_bytes(&body)
        .map_err(|e| Status::invalid_argument(format!("malformed postcard message: {e}")))
);

/// The status of a value postcard could not write. Out of line, as the
/// JSON codec's: the formatting stays out of every message's path.
#[cfg(feature = "postcard")]
#[cold]
#[inline(never)]
fn cannot_encode_postcard(e: postcard::Error) -> Status {
    Status::internal(format!("cannot encode postcard: {e}"))
}

/// The custom `OPEN` metadata key under which a typed call names its codec
/// (docs/PROTOCOL.md, "Codec of a typed call"); weft-frame builds and
/// reads the entry ([`MetadataBuilder::codec`](weft_frame::MetadataBuilder::codec),
/// [`Metadata::codec`](weft_frame::Metadata::codec)).
pub use weft_frame::metadata::CODEC_KEY;

/// The codec a call of `C` names on the wire: none for [`Raw`] (bytes as
/// they are, which any method takes, as the raw API always did), the
/// codec's name for the others.
pub(crate) fn wire_codec<C: Codec<T>, T>() -> Option<&'static str> {
    WireCodec::<C, T>::NAME
}

/// [`wire_codec`] as a constant of each codec, so a call pays nothing
/// for it (a string comparison per call would show in the gate).
struct WireCodec<C, T>(PhantomData<(C, T)>);

impl<C: Codec<T>, T> WireCodec<C, T> {
    const NAME: Option<&'static str> = if same(C::NAME, Raw::NAME) {
        None
    } else {
        Some(C::NAME)
    };
}

/// `a == b`, usable in a constant.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The status of a call whose codec is not the method's.
pub(crate) fn codec_mismatch(method: &str, want: &str, got: &[u8]) -> Status {
    Status::unimplemented(format!(
        "method {method} carries {want} messages, the call sent {:?}",
        String::from_utf8_lossy(got)
    ))
}

/// A value carried by codec `C`, for the router's handler machinery.
pub(crate) struct With<C, T>(pub(crate) T, pub(crate) PhantomData<C>);

impl<C, T> With<C, T> {
    pub(crate) fn new(t: T) -> Self {
        With(t, PhantomData)
    }
}

impl<C: Codec<T>, T: Send + 'static> Decode for With<C, T> {
    fn decode(body: Bytes) -> Result<Self, Status> {
        C::decode(body).map(With::new)
    }
}

impl<C: Codec<T>, T: Send + 'static> Encode for With<C, T> {
    fn encode(self, max: usize) -> Result<Framed, Status> {
        C::encode(&self.0, max)
    }
}

/// One unary method of a typed service `S`, taking `Req` and answering
/// `Resp`: a marker type whose [`call`](Self::call) calls the method on
/// the service. `#[weft::service]` implements it for each unary method
/// and registers it with [`Router::unary_method`](crate::Router::unary_method);
/// by hand it reads:
///
/// ```
/// use std::future::Future;
/// use std::sync::Arc;
/// use weft_rpc::{Context, Json, Router, Status, UnaryMethod};
///
/// struct Calc;
///
/// impl Calc {
///     async fn double(&self, _ctx: Context, n: i64) -> Result<i64, Status> {
///         Ok(n * 2)
///     }
/// }
///
/// struct Double;
///
/// impl UnaryMethod<Calc, i64, i64> for Double {
///     fn call(
///         service: &Calc,
///         ctx: Context,
///         request: i64,
///     ) -> impl Future<Output = Result<i64, Status>> + Send + '_ {
///         service.double(ctx, request)
///     }
/// }
///
/// let router = Router::new().unary_method("calc/double", Json, Arc::new(Calc), Double);
/// assert!(router.has_method("calc/double"));
/// ```
///
/// The method's future borrows the service, which each call holds (one
/// `Arc` clone per call): no closure owning a clone of its own, and no
/// `async` block around the method's future.
pub trait UnaryMethod<S, Req, Resp>: Send + Sync + 'static {
    /// Calls the method on `service`.
    fn call(
        service: &S,
        ctx: crate::Context,
        request: Req,
    ) -> impl Future<Output = Result<Resp, Status>> + Send + '_;
}

pin_project_lite::pin_project! {
    /// A typed unary handler's future, its value wrapped for the codec: a
    /// combinator, not `async move { fut.await }`, which would hold the
    /// handler's future twice (its capture and its awaited copy) and double
    /// what every move of the call copies.
    pub(crate) struct Wrap<F, C> {
        #[pin]
        pub(crate) fut: F,
        pub(crate) _c: PhantomData<fn() -> C>,
    }
}

impl<F, C, T> Future for Wrap<F, C>
where
    F: Future<Output = Result<T, Status>>,
{
    type Output = Result<With<C, T>, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        self.project().fut.poll(cx).map(|r| r.map(With::new))
    }
}

/// Typed status details: with the codecs rather than in `status.rs`, so
/// `Status` stays at the bottom of the crate and imports no codec.
impl Status {
    /// Attaches `value` as details, encoded by `codec` (see
    /// [`with_details`](Status::with_details)).
    pub fn with_details_as<T, C: Codec<T>>(self, _codec: C, value: &T) -> Status {
        match C::encode(value, MAX_DETAILS) {
            Ok(Framed::One(b)) => self.with_details(b.slice(codec::PREFIX_LEN..)),
            Ok(Framed::Two(_, body)) => self.with_details(body),
            Err(e) => {
                tracing::warn!(%e, "status details not encoded");
                self
            }
        }
    }

    /// The details decoded by `codec`: `None` without details.
    pub fn details_as<T, C: Codec<T>>(&self, _codec: C) -> Option<Result<T, Status>> {
        self.details().map(|d| C::decode(d.clone()))
    }
}

/// A response body the client could not decode: the server's fault.
pub(crate) fn response_error(method: Option<&str>, e: &Status) -> Status {
    Status::internal(format!(
        "cannot decode the response of {}: {}",
        method.unwrap_or("?"),
        e.message()
    ))
}

/// The typed messages a caller streams to a handler: a `futures::Stream`
/// of `Result<T, Status>` that ends (`None`) after the caller's explicit
/// end; a caller that went away is an `Err` item, never an end.
pub struct Requests<T, C = Json> {
    inner: RequestStream,
    _t: PhantomData<fn() -> (T, C)>,
}

impl<T, C> fmt::Debug for Requests<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Requests").finish_non_exhaustive()
    }
}

impl<T, C: Codec<T>> Requests<T, C> {
    /// Typed view of a raw request stream.
    pub fn new(inner: RequestStream) -> Self {
        Requests {
            inner,
            _t: PhantomData,
        }
    }

    /// The next value; `Ok(None)` once the caller ended its side.
    pub async fn message(&mut self) -> Result<Option<T>, Status> {
        match self.inner.message().await? {
            Some(b) => C::decode(b).map(Some),
            None => Ok(None),
        }
    }
}

impl<T, C: Codec<T>> futures_core::Stream for Requests<T, C> {
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        Poll::Ready(match ready!(this.inner.poll_message(cx)) {
            Ok(Some(b)) => Some(C::decode(b)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        })
    }
}

pub(crate) type SendFuture = Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>;

/// The message a `Sink` has started sending, if any: the `Sink` side of
/// [`Responses`] and [`BidiSender`](crate::client::split::BidiSender).
#[derive(Default)]
pub(crate) struct PendingSend(Option<SendFuture>);

impl PendingSend {
    pub(crate) fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// Starts sending `framed` on the call in `slot`.
    pub(crate) fn start(&mut self, slot: Slot, framed: Framed) {
        self.0 = Some(Box::pin(async move { send_on(&slot, framed).await }));
    }

    /// Drives the started send to its end.
    pub(crate) fn poll(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        let Some(f) = self.0.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let r = ready!(f.as_mut().poll(cx));
        self.0 = None;
        Poll::Ready(r)
    }

    pub(crate) async fn finish(&mut self) -> Result<(), Status> {
        std::future::poll_fn(|cx| self.poll(cx)).await
    }
}

/// Typed messages from a handler to its caller: [`send`](Self::send), or
/// use it as a `futures::Sink<T>` (each message sent through the `Sink`
/// interface costs one boxed future; `send` costs none). The call ends
/// with the handler's result; closing the sink only flushes.
pub struct Responses<T, C = Json> {
    inner: ResponseSink,
    pending: PendingSend,
    _t: PhantomData<fn(T, C)>,
}

impl<T, C> fmt::Debug for Responses<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responses")
            .field("sending", &self.pending.is_some())
            .finish_non_exhaustive()
    }
}

impl<T, C: Codec<T>> Responses<T, C> {
    /// Typed view of a raw response sink.
    pub fn new(inner: ResponseSink) -> Self {
        Responses {
            inner,
            pending: PendingSend::default(),
            _t: PhantomData,
        }
    }

    /// Sends one value, waiting for flow-control credit.
    pub async fn send(&mut self, value: T) -> Result<(), Status> {
        self.pending.finish().await?;
        let framed = C::encode(&value, self.inner.max_message())?;
        self.inner.send_framed(framed).await
    }
}

impl<T, C: Codec<T>> futures_sink::Sink<T> for Responses<T, C> {
    type Error = Status;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        self.get_mut().pending.poll(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: T) -> Result<(), Status> {
        let this = self.get_mut();
        let framed = C::encode(&item, this.inner.max_message())?;
        this.pending.start(this.inner.slot(), framed);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        self.get_mut().pending.poll(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<(), Status>> {
        self.get_mut().pending.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The raw codec frames from a reference exactly as `codec::frame`
    /// frames the bytes themselves: empty, small, at the copy threshold,
    /// past it (prefix and body apart), and over the limit.
    #[test]
    fn raw_frames_a_reference_as_frame_frames_the_bytes() {
        let at = codec::COPY_THRESHOLD;
        for n in [0, 1, 4, 100, at - 1, at, at + 1, 3 * at] {
            let body = Bytes::from((0..n).map(|i| i as u8).collect::<Vec<u8>>());
            for max in [usize::MAX, n, n.saturating_sub(1)] {
                let got = <Raw as Codec<Bytes>>::encode(&body, max);
                let want = codec::frame(body.clone(), max);
                match (got, want) {
                    (Ok(Framed::One(a)), Ok(Framed::One(b))) => assert_eq!(a, b, "{n}"),
                    (Ok(Framed::Two(a, x)), Ok(Framed::Two(b, y))) => {
                        assert_eq!((a, x), (b, y), "{n}");
                    }
                    (Err(a), Err(b)) => {
                        assert_eq!((a.code(), a.message()), (b.code(), b.message()), "{n}");
                    }
                    (got, want) => panic!("{n} bytes, max {max}: {got:?} against {want:?}"),
                }
            }
        }
    }

    /// A postcard message is framed whole, and each failure is its own
    /// status: a value postcard cannot write is `INTERNAL` naming
    /// postcard, a message over the limit `RESOURCE_EXHAUSTED`; the arena
    /// frames the next message as if neither had been tried.
    #[cfg(feature = "postcard")]
    #[test]
    fn postcard_frames_a_value_and_tells_its_failures_apart() {
        use crate::status::Code;
        struct Refused;
        impl serde::Serialize for Refused {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("refuses"))
            }
        }
        impl<'de> serde::Deserialize<'de> for Refused {
            fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
                Err(serde::de::Error::custom("never read"))
            }
        }
        let e = <Postcard as Codec<Refused>>::encode(&Refused, 64).unwrap_err();
        assert_eq!(e.code(), Code::INTERNAL);
        assert!(e.message().contains("postcard"), "{}", e.message());
        let long = "x".repeat(100);
        let e = <Postcard as Codec<String>>::encode(&long, 10).unwrap_err();
        assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED);
        let Ok(Framed::One(b)) = <Postcard as Codec<(u8, String)>>::encode(&(7, "ab".into()), 64)
        else {
            panic!("a small message is framed in one piece");
        };
        assert_eq!(&b[..], b"\0\0\0\x04\x07\x02ab");
    }
}
