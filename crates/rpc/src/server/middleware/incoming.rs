//! A call as server layers see it: [`IncomingCall`] on the way in,
//! [`CallOutcome`] (the final status) on the way out, and the state they
//! share with the task that serves the call.

use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskContext, Poll, Waker};

use weft_frame::Metadata;
use weft_frame::metadata::{InvalidMetadata, Key, Kind};

use super::hold::Gate;
use crate::server::call::{Handler, ServerCall};
use crate::server::context::Context;
use crate::server::peer::PeerInfo;
use crate::status::Status;

/// The part of a call the server keeps until the innermost service lets
/// it run, or ends it with a layer's status.
pub(crate) struct Pending {
    pub(crate) call: ServerCall,
    pub(crate) handler: Arc<dyn Handler>,
}

/// Whether a layered call's handler may run.
enum Start {
    /// No layer has passed it inward yet.
    Waiting(Pending),
    /// The innermost service let it go; the serving task starts it.
    Go(Pending),
    /// The serving task took it (to run it, or to refuse it).
    Taken,
}

/// What a layered call's layers and its serving task share.
pub(crate) struct CallState {
    /// The call's context (a twin of the handler's: same call, same
    /// response metadata).
    ctx: Context,
    start: Mutex<(Start, Option<Waker>)>,
    pub(crate) gate: Arc<Gate>,
}

impl CallState {
    pub(crate) fn new(ctx: Context, pending: Pending, gate: Arc<Gate>) -> Arc<CallState> {
        Arc::new(CallState {
            ctx,
            start: Mutex::new((Start::Waiting(pending), None)),
            gate,
        })
    }

    fn lock(&self) -> MutexGuard<'_, (Start, Option<Waker>)> {
        self.start.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The innermost service lets the handler run; `false` if it already did.
    pub(crate) fn go(&self) -> bool {
        let mut s = self.lock();
        match std::mem::replace(&mut s.0, Start::Taken) {
            Start::Waiting(p) => {
                s.0 = Start::Go(p);
                if let Some(w) = s.1.take() {
                    w.wake();
                }
                true
            }
            other => {
                s.0 = other;
                false
            }
        }
    }

    /// The serving task's side: the call, once the layers let it run.
    pub(crate) fn poll_go(&self, cx: &mut TaskContext<'_>) -> Poll<Pending> {
        let mut s = self.lock();
        match std::mem::replace(&mut s.0, Start::Taken) {
            Start::Go(p) => Poll::Ready(p),
            other => {
                s.0 = other;
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// The call, if its handler never started (the layers ended it).
    pub(crate) fn take_unstarted(&self) -> Option<Pending> {
        match std::mem::replace(&mut self.lock().0, Start::Taken) {
            Start::Waiting(p) | Start::Go(p) => Some(p),
            Start::Taken => None,
        }
    }
}

/// One incoming call, as server layers see it: its method, metadata, peer
/// and deadline (through [`context`](Self::context)); a layer may add
/// response headers and trailers before passing it inward.
pub struct IncomingCall {
    pub(crate) state: Arc<CallState>,
}

impl std::fmt::Debug for IncomingCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncomingCall")
            .field("method", &self.method())
            .finish_non_exhaustive()
    }
}

impl IncomingCall {
    /// The canonical method name.
    pub fn method(&self) -> &str {
        self.state.ctx.method()
    }

    /// The call's `OPEN` metadata (custom entries with [`Metadata::get`]).
    pub fn metadata(&self) -> &Metadata {
        self.state.ctx.metadata()
    }

    /// The peer.
    pub fn peer(&self) -> &PeerInfo {
        self.state.ctx.peer()
    }

    /// The call's context: deadline, trace context, cancellation, and the
    /// same response headers and trailers its handler writes.
    pub fn context(&self) -> &Context {
        &self.state.ctx
    }

    /// Adds a response header, as [`Context::set_header`].
    pub fn set_header<K: Kind>(
        &self,
        key: &Key<K>,
        value: &K::Value,
    ) -> Result<(), InvalidMetadata> {
        self.state.ctx.set_header(key, value)
    }

    /// Adds a response trailer, as [`Context::set_trailer`].
    pub fn set_trailer<K: Kind>(
        &self,
        key: &Key<K>,
        value: &K::Value,
    ) -> Result<(), InvalidMetadata> {
        self.state.ctx.set_trailer(key, value)
    }
}

/// How a layered call ended: its final status (the handler's, or the one
/// an inner layer ended it with), known before it goes out, so a layer can
/// log it and add trailers.
///
/// Only the server makes one: a layer passes on the outcome it got, or
/// answers `Err(status)` to end the call with another status.
pub struct CallOutcome {
    status: Status,
    state: Arc<CallState>,
}

impl std::fmt::Debug for CallOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOutcome")
            .field("method", &self.state.ctx.method())
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl CallOutcome {
    pub(crate) fn new(status: Status, state: Arc<CallState>) -> CallOutcome {
        CallOutcome { status, state }
    }

    /// The call's final status (`OK` when its handler succeeded).
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The status, out.
    pub fn into_status(self) -> Status {
        self.status
    }

    /// The call's context (see [`IncomingCall::context`]).
    pub fn context(&self) -> &Context {
        &self.state.ctx
    }

    /// Adds a response header, as [`Context::set_header`]: it reaches the
    /// caller if no message has gone yet (a unary call's response goes
    /// after the layers finish; a streaming call's first message took the
    /// headers with it).
    pub fn set_header<K: Kind>(
        &self,
        key: &Key<K>,
        value: &K::Value,
    ) -> Result<(), InvalidMetadata> {
        self.state.ctx.set_header(key, value)
    }

    /// Adds a response trailer, as [`Context::set_trailer`]: the status
    /// goes out after the layers finish, with it.
    pub fn set_trailer<K: Kind>(
        &self,
        key: &Key<K>,
        value: &K::Value,
    ) -> Result<(), InvalidMetadata> {
        self.state.ctx.set_trailer(key, value)
    }
}
