//! # weft-rpc: calls over weft streams
//!
//! Unary, server-streaming, client-streaming and bidirectional calls on
//! top of `weft-mux` streams: a [`Router`] from method names to async
//! handlers, a [`Server`] that serves it on a connection, a [`Client`] that
//! calls it, and a [`Status`] with a gRPC-like [`Code`] set on every
//! outcome.
//!
//! ```text
//!  Client::unary ─► OPEN{method, timeout} + request ─► Server: route, deadline,
//!                                                       Context, handler
//!  Ok(response)  ◄─ DATA(response) + END + status  ◄───┘
//! ```
//!
//! ## What a call guarantees
//! - **Deadlines** travel as the remaining duration and are enforced on
//!   both sides: the handler sees [`Context::deadline`], is dropped when it
//!   passes, and the caller gets `DEADLINE_EXCEEDED`. Nested calls inherit
//!   it through [`Context::call_options`]. Negative or absurd timeouts are
//!   refused ([`deadline`]).
//! - **Cancellation**: dropping a client future resets its stream; the
//!   server drops the handler and fires [`Context::cancellation`].
//! - **Explicit ends**: a call succeeds only with the server's explicit end
//!   and an `OK` status; a reset or a dead connection is an error, never a
//!   short success.
//! - **Per-call failures**: a handler panic is `INTERNAL`, an oversize
//!   message `RESOURCE_EXHAUSTED`, an unknown method `UNIMPLEMENTED`, a
//!   malformed name `INVALID_ARGUMENT`: that call only, the connection lives.
//! - **Canonical names**: methods are routed by their canonical form
//!   ([`method`]), so odd spellings cannot reach a different handler.
//!
//! Messages are length-prefixed ([`codec`]) and copied nowhere when they
//! sit in one frame. Typed calls use serde + serde_json (feature `json`, on
//! by default); raw `Bytes` calls are always there. With feature `tower`
//! the client is a `tower::Service`.
//!
//! ## What this crate does not do
//! It knows nothing of bytes on the wire below a stream: it opens no
//! sockets (the `weft` facade does), does not frame, compress or encrypt
//! (`weft-mux` and the layers below do), and does not retry: a retry-safe
//! failure is marked ([`Status::is_retry_safe`]) for the caller to act on.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod client;
pub mod codec;
pub mod deadline;
mod hash;
pub mod method;
mod observe;
mod options;
mod server;
mod status;
mod within;

pub use client::response::Response;
pub use client::split::{BidiReceiver, BidiSender};
#[cfg(feature = "tower")]
pub use client::tower::{DEFAULT_IN_FLIGHT, TypedRequest, TypedService, UnaryRequest};
pub use client::{
    BidiCall, Caller, Client, ClientInterceptors, ClientStreamingCall, MethodKey, OpenCall,
    Outgoing, Streaming,
};
#[cfg(feature = "tower")]
pub use client::{OpenRequest, OpenService, TowerCaller};
#[cfg(feature = "postcard")]
pub use codec::typed::Postcard;
pub use codec::typed::{CODEC_KEY, Codec, Json, Raw, Requests, Responses, UnaryMethod};
pub use observe::meter::Metrics;
pub use observe::{TRACEPARENT, TraceContext};
pub use options::{CallOptions, Idempotency};
pub use server::Server;
pub use server::context::{CancelSignal, Context, propagates};
// The public `middleware` module lives with the server under its old path;
// its items are listed as re-exports of it, as they were before the move.
#[doc(no_inline)]
pub use middleware::Interceptor;
#[cfg(feature = "tower")]
#[doc(no_inline)]
pub use middleware::{CallOutcome, CallService, IncomingCall, Layered, layer_fn};
pub use server::middleware;
pub use server::peer::PeerInfo;
pub use server::route::Shape;
pub use server::router::{IntoRoutes, Router};
pub use server::streams::{BidiStream, RequestStream, ResponseSink};
pub use status::{Code, MAX_DETAILS, Status};
pub use weft_frame::Metadata;
pub use weft_frame::metadata::{Ascii, Binary, InvalidMetadata, Key as MetadataKey};
pub use within::{Within, within};
