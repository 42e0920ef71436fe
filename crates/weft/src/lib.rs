//! # weft: fast, secure multiplexed RPC for Rust
//!
//! The crate a user depends on. It re-exports the call layer
//! ([`Client`], [`Router`], [`Status`], [`Context`]...) and adds what the
//! layers below leave out: sockets and one configuration.
//!
//! ```no_run
//! use bytes::Bytes;
//! use weft::{Config, Listener, Router};
//!
//! # async fn run() -> Result<(), weft::Error> {
//! // Server
//! let router = Router::new().unary("echo", |_ctx, req: Bytes| async move { Ok(req) });
//! let listener = Listener::bind("127.0.0.1:7878").await?;
//! tokio::spawn(weft::serve(listener, router, Config::new(), std::future::pending()));
//!
//! // Client
//! let client = weft::connect("127.0.0.1:7878", &Config::new()).await?;
//! let reply = client.unary("echo", Bytes::from_static(b"hi")).await.unwrap();
//! assert_eq!(reply, "hi");
//! # Ok(()) }
//! ```
//!
//! - [`connect`] / [`serve`] over TCP (`TCP_NODELAY` set) and Unix
//!   sockets (`unix:/path`); [`connect_io`] / [`accept_io`] over any byte
//!   stream; [`memory`] for an in-process pair over `tokio::io::duplex`.
//! - [`Config`]: limits, compression, encryption policy, pre-shared key,
//!   timeouts, in one builder.
//! - Graceful shutdown: when [`serve`]'s shutdown future resolves, every
//!   connection gets `GOAWAY`; calls in flight finish, new ones fail
//!   retry-safe.
//!
//! Features: `json` (default) for typed calls through serde + serde_json;
//! `tower` for the client as a `tower::Service` (`UnaryRequest`).
//!
//! Each layer is also its own crate ([`frame`], [`transform`], [`mux`],
//! [`rpc`]) for users who need only part of the stack.
//!
//! - [`Channel`]: a client that stays up: lazy connect, reconnect with
//!   backoff, several connections per endpoint, balancing over many
//!   endpoints (static list, discovery stream, DNS), retries of retry-safe
//!   refusals under a budget. A bare [`Client`] is one connection for ever.
//! - [`Health`]: the standard `weft.health/check` service.
//!
//! ## What this crate does not do
//! No TLS certificates: peers authenticate by a pre-shared key
//! ([`Config::psk`]); without one, encryption is opportunistic and stops
//! passive eavesdroppers only. No retries of calls that may have run,
//! unless a method is declared idempotent ([`ChannelBuilder::idempotent`]).
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

// `cfg(fuzzing)` swaps weft-transform's AES-256-GCM for a null cipher so a
// fuzzer gets past record authentication. Only the fuzz targets (which use
// the layers below, never this crate) may be built that way: anything that
// dials or serves real peers refuses to compile.
#[cfg(fuzzing)]
compile_error!(
    "weft was built with `--cfg fuzzing`, which replaces record encryption with \
     weft-transform's fuzz-only null cipher; build without it (only fuzz/ sets it)"
);

mod admission;
pub mod channel;
mod config;
mod counters;
mod error;
pub mod health;
mod live;
mod net;

pub use channel::{Backoff, Channel, ChannelBuilder, Endpoint};
pub use config::Config;
pub use counters::handshake_reason;
pub use error::Error;
pub use health::{Health, Serving};
pub use net::{Address, DEFAULT_BACKLOG, Listener, accept_io, connect, connect_io, memory, serve};

pub use bytes::Bytes;
/// serde, as the typed services' messages use it: `#[derive(weft::serde::Serialize)]`
/// works without a direct dependency (add `#[serde(crate = "weft::serde")]`).
#[cfg(feature = "json")]
pub use serde;
pub use weft_frame as frame;
pub use weft_mux as mux;
pub use weft_rpc as rpc;
pub use weft_transform as transform;
pub use weft_transform::EncryptionPolicy;

#[cfg(feature = "postcard")]
pub use weft_rpc::Postcard;
pub use weft_rpc::{
    Ascii, BidiCall, BidiReceiver, BidiSender, BidiStream, Binary, CallOptions, Caller,
    CancelSignal, Client, ClientStreamingCall, Code, Codec, Context, Idempotency, Interceptor,
    IntoRoutes, InvalidMetadata, Json, MAX_DETAILS, Metadata, MetadataKey, MethodKey, Metrics,
    Outgoing, PeerInfo, Raw, RequestStream, Requests, Response, ResponseSink, Responses, Router,
    Server, Shape, Status, Streaming, TRACEPARENT, TraceContext,
};
#[cfg(feature = "tower")]
pub use weft_rpc::{
    CallOutcome, CallService, IncomingCall, OpenRequest, OpenService, TowerCaller, TypedRequest,
    TypedService, UnaryRequest, layer_fn,
};

/// Makes a trait a service: a typed client `FooClient` and a server
/// adapter `FooServer` (see `weft_macros` for the contract).
///
/// ```
/// use weft::{Config, Context, Router, Status};
///
/// #[weft::service(package = "calc")]
/// pub trait Calc {
///     async fn double(&self, ctx: Context, n: i64) -> Result<i64, Status>;
/// }
///
/// struct Impl;
/// impl Calc for Impl {
///     async fn double(&self, _ctx: Context, n: i64) -> Result<i64, Status> {
///         Ok(n * 2)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let router = Router::new().add_service(CalcServer::new(Impl));
/// let client = CalcClient::new(weft::memory(router, &Config::new()).await.unwrap());
/// assert_eq!(client.double(21).await.unwrap(), 42);
/// assert_eq!(CalcServer::<Impl>::METHODS, ["calc.Calc/Double"]);
/// assert_eq!(CalcMethods::DOUBLE, "calc.Calc/Double");
/// # }
/// ```
pub use weft_macros::service;

/// The README's quick start, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}

/// Guide chapter 01, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/01-first-service.md")]
mod guide_01 {}

/// Guide chapter 02, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/02-four-shapes.md")]
mod guide_02 {}

/// Guide chapter 03, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/03-channel-and-retries.md")]
mod guide_03 {}

/// Guide chapter 04, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/04-layers-and-interceptors.md")]
mod guide_04 {}

/// Guide chapter 05, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/05-identities.md")]
mod guide_05 {}

/// Guide chapter 06, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/06-observability.md")]
mod guide_06 {}

/// Guide chapter 07, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/07-many-servers.md")]
mod guide_07 {}

/// Guide chapter 08, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/08-tuning.md")]
mod guide_08 {}

/// Guide chapter 09, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/09-from-tonic.md")]
mod guide_09 {}

/// Guide chapter 10, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide/10-from-tarpc.md")]
mod guide_10 {}
