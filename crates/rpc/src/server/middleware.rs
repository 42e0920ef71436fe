//! Server middleware: an [`Interceptor`] (a synchronous check of each
//! call's context, free when unused) and, with feature `tower`, tower
//! `Layer`s over whole calls (`Server::layer`, and `layer_fn` for a layer
//! in a few lines; these items are not linked here, since without the
//! feature they do not exist).
//!
//! A layered call is an `IncomingCall` (method, metadata, peer, context);
//! the layered service answers with a `CallOutcome`, the call's final
//! status, *before* that status goes out: a layer sees the handler's
//! `NOT_FOUND`, a `DEADLINE_EXCEEDED` or a caller's `CANCELLED`, and may add
//! response headers (if no message went yet) and trailers.
//!
//! - A layer that answers `Err(status)` without passing the call inward
//!   ends it with that status; its handler never runs.
//! - A layer that answers `Err(status)` after passing it inward (or whose
//!   inner future it dropped, a timeout) ends it with that status: a
//!   handler still running is dropped, one that finished has its status
//!   replaced. The caller sees the status, never a reset.
//! - An error type other than [`Status`] becomes one: a timeout (tower's
//!   `TimeoutLayer`, `tokio::time::timeout`) `DEADLINE_EXCEEDED` "the
//!   server's layer timed out the call", anything else `UNAVAILABLE`
//!   (overload is transient).
//!
//! The layered stack is one shared service: `poll_ready` and `call` run
//! under a lock, one call at a time, as tower's `Buffer` would (so
//! `tower::limit::RateLimit` limits the whole server, not each call). Its
//! price, only when a layer is set: the call is spawned instead of polled
//! inline, and its futures are boxed. A server without layers pays nothing.

use std::sync::Arc;

use crate::server::context::Context;
use crate::status::Status;

pub(crate) mod hold;
#[cfg(feature = "tower")]
pub(crate) mod incoming;
#[cfg(feature = "tower")]
pub(crate) mod layer_fn;
#[cfg(feature = "tower")]
pub(crate) mod stack;

pub(crate) use hold::Hold;
#[cfg(feature = "tower")]
pub use incoming::{CallOutcome, IncomingCall};
#[cfg(feature = "tower")]
pub use layer_fn::{FnService, LayerFn, Next, layer_fn};
#[cfg(feature = "tower")]
pub(crate) use stack::serve;
#[cfg(feature = "tower")]
pub use stack::{CallService, Layered};

/// A check run on every call before its handler, with the call's context
/// (method, metadata, peer, deadline): `Err` ends the call with that
/// status. Set with [`Server::interceptor`](crate::Server::interceptor).
pub type Interceptor = Arc<dyn Fn(&Context) -> Result<(), Status> + Send + Sync>;
