//! Between a call's handler and the server's layers (feature `tower`).
//!
//! Layers see the handler's final status *before* it goes out: the
//! handler's task settles its result here and waits while the layers'
//! futures finish (they may add trailers, or replace the status); a layer
//! that ends the call while the handler still runs (a timeout) cuts the
//! handler with its own status, so the caller sees that status instead of
//! a reset.
//!
//! ```text
//!  handler task            Gate                      layers (innermost ← outer)
//!  work ........ cut ◄──── Cut(status) ◄──────────── finish(status): stack ended first
//!  settle(result) ───────► Settled(status) ────────► innermost resolves: CallOutcome
//!   waits ◄─────────────── Released(replacement) ◄── finish(status): stack ended
//!  respond (send)
//! ```
//!
//! Without feature `tower`, [`Hold`] is a zero-size no-op, and with it a
//! call no layer sees carries `None`: one branch, no allocation.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use crate::status::Status;

/// The handler's side of the gate, carried by every served call.
#[derive(Default)]
pub(crate) struct Hold {
    #[cfg(feature = "tower")]
    gate: Option<std::sync::Arc<Gate>>,
}

impl Hold {
    /// A call the layers hold through `gate`.
    #[cfg(feature = "tower")]
    pub(crate) fn new(gate: std::sync::Arc<Gate>) -> Hold {
        Hold { gate: Some(gate) }
    }

    /// Whether layers see this call's end.
    #[inline]
    pub(crate) fn is_held(&self) -> bool {
        #[cfg(feature = "tower")]
        return self.gate.is_some();
        #[cfg(not(feature = "tower"))]
        false
    }

    /// `work`, or the layers' status if they end the call first.
    pub(crate) fn cut<F>(&self, work: F) -> Cut<'_, F> {
        Cut { work, hold: self }
    }

    /// The layers' status, once they end the call while its handler
    /// runs (never without layers).
    #[inline]
    pub(crate) fn poll_cut(&self, _cx: &mut TaskContext<'_>) -> Poll<Status> {
        #[cfg(feature = "tower")]
        if let Some(gate) = &self.gate {
            return gate.poll_cut(_cx);
        }
        Poll::Pending
    }

    /// Shows the handler's result to the layers and waits for them to
    /// finish; the result to send (a layer's status replaces the
    /// handler's). Call only when [`is_held`](Self::is_held).
    pub(crate) async fn settle<T>(&self, result: Result<T, Status>) -> Result<T, Status> {
        #[cfg(feature = "tower")]
        if let Some(gate) = &self.gate {
            let status = match &result {
                Ok(_) => Status::ok(),
                Err(s) => s.clone(),
            };
            gate.settled(status);
            return match std::future::poll_fn(|cx| gate.poll_released(cx)).await {
                Some(replaced) if !replaced.is_ok() => Err(replaced),
                _ => result,
            };
        }
        result
    }
}

#[cfg(feature = "tower")]
impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(gate) = &self.gate {
            gate.dropped();
        }
    }
}

pin_project_lite::pin_project! {
    /// A handler's work, cut short by the layers' status (see [`Hold::cut`]).
    pub(crate) struct Cut<'a, F> {
        #[pin]
        work: F,
        hold: &'a Hold,
    }
}

impl<F, T> Future for Cut<'_, F>
where
    F: Future<Output = Result<T, Status>>,
{
    type Output = Result<T, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(r) = this.work.poll(cx) {
            return Poll::Ready(r);
        }
        this.hold.poll_cut(cx).map(Err)
    }
}

#[cfg(feature = "tower")]
pub(crate) use gate::Gate;

#[cfg(feature = "tower")]
mod gate {
    use std::sync::{Mutex, MutexGuard};
    use std::task::{Context as TaskContext, Poll, Waker};

    use crate::status::Status;

    /// Where a layered call's handler and its layers meet.
    #[derive(Default)]
    pub(crate) struct Gate {
        state: Mutex<State>,
    }

    #[derive(Default)]
    struct State {
        step: Step,
        /// The handler's task, waiting for a cut or the release.
        handler: Option<Waker>,
        /// The innermost service, waiting for the handler's status.
        layers: Option<Waker>,
    }

    /// Where the call stands between its handler and its layers.
    #[derive(Default)]
    enum Step {
        /// The handler runs.
        #[default]
        Running,
        /// The layers ended the call while the handler ran: it ends with
        /// this status.
        Cut(Status),
        /// The handler's status, shown to the layers; the handler waits.
        Settled(Status),
        /// The layers finished, replacing the handler's status or not.
        Released(Option<Status>),
        /// The handler ended without a status (its stream was reset).
        Reset,
    }

    fn wake(w: &mut Option<Waker>) {
        if let Some(w) = w.take() {
            w.wake();
        }
    }

    impl Gate {
        fn lock(&self) -> MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(|e| e.into_inner())
        }

        /// The handler's side: the status the layers cut it with.
        pub(super) fn poll_cut(&self, cx: &mut TaskContext<'_>) -> Poll<Status> {
            let mut s = self.lock();
            match std::mem::replace(&mut s.step, Step::Released(None)) {
                Step::Cut(status) => Poll::Ready(status),
                other => {
                    s.step = other;
                    s.handler = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        }

        /// The handler's side: its final status, for the layers to see.
        pub(super) fn settled(&self, status: Status) {
            let mut s = self.lock();
            s.step = match std::mem::take(&mut s.step) {
                Step::Running => Step::Settled(status),
                // The layers ended first: their status stands.
                Step::Cut(theirs) => Step::Released(Some(theirs)),
                done => done,
            };
            wake(&mut s.layers);
        }

        /// The handler's side: the layers' replacement status once they
        /// finished.
        pub(super) fn poll_released(&self, cx: &mut TaskContext<'_>) -> Poll<Option<Status>> {
            let mut s = self.lock();
            match &mut s.step {
                Step::Released(replaced) => Poll::Ready(replaced.take()),
                _ => {
                    s.handler = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        }

        /// The handler's side: it ended; without a status if it never
        /// settled.
        pub(super) fn dropped(&self) {
            let mut s = self.lock();
            if matches!(s.step, Step::Running | Step::Cut(_)) {
                s.step = Step::Reset;
                wake(&mut s.layers);
            }
        }

        /// The innermost service's side: the handler's final status.
        pub(crate) fn poll_status(&self, cx: &mut TaskContext<'_>) -> Poll<Status> {
            let mut s = self.lock();
            match &s.step {
                Step::Settled(status) => Poll::Ready(status.clone()),
                Step::Reset | Step::Released(_) => Poll::Ready(Status::cancelled(
                    "the call's stream was reset before its status went out",
                )),
                Step::Running | Step::Cut(_) => {
                    s.layers = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        }

        /// The layers finished with `status`: a handler still running is
        /// cut with it, one waiting sends it if it differs from its own.
        pub(crate) fn finish(&self, status: Status) {
            let mut s = self.lock();
            s.step = match std::mem::take(&mut s.step) {
                Step::Running => Step::Cut(status),
                Step::Settled(own) => Step::Released((own != status).then_some(status)),
                done => done,
            };
            wake(&mut s.handler);
        }
    }
}
