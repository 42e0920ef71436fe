//! The future of a unary call: one state machine holding what the call
//! needs across its awaits — its observers, its deadline's timer, and the
//! phase of its exchange — where wrappers nested around an `async` block
//! (a span wrapper around a timeout around an `Either`) would each add
//! their own tag and padding, and the `async` block would keep its
//! finished mux call and answer beside the boxed rest of a long reply.
//!
//! Its size is what callers pay to move it: `join_all`, `FuturesUnordered`
//! and `tokio::spawn` copy it whole, several times per call (the
//! `unary_call_futures_stay_small` test bounds it).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use pin_project_lite::pin_project;
use tokio::task::coop;
use tokio::time::{Instant, Sleep};
use weft_frame::Metadata;
use weft_mux::{Chunk, Stream, StreamError};

use super::timer::Timer;
use crate::codec::typed::response_error;
use crate::codec::wire::{self, Ends, Reader};
use crate::codec::{self};
use crate::observe::meter::Receiving;
use crate::observe::{self, ClientCall};
use crate::status::Status;

/// The first piece of a reply, as the mux hands it over.
pub(super) type First = Result<Option<Chunk>, StreamError>;

pin_project! {
    /// A unary call's future. `F` makes the caller's value of the reply;
    /// `L` is a large request's boxed exchange; `M` (a function item, no
    /// bytes) starts `R`, the boxed read of a reply not whole in its
    /// first frame.
    pub(super) struct Unary<'a, F, L, M, R> {
        obs: ClientCall,
        // Only a call with a deadline has one (boxed and recycled).
        timer: Timer,
        phase: Phase<'a, F, L, R>,
        rest: M,
    }
}

/// Where a unary call's exchange is.
pub(super) enum Phase<'a, F, L, R> {
    /// The usual request, in one piece: the mux's call (open, send, and
    /// the reply's first frame in one future, polled in place), and what
    /// makes the caller's value of the reply.
    Calling {
        call: weft_mux::Call<'a>,
        max: usize,
        finish: F,
    },
    /// A large request (its prefix and body apart): open, send and read,
    /// boxed (its copy and write cost far more than the box).
    Large(Pin<Box<L>>),
    /// A reply the first frame did not hold whole (cut into frames, with
    /// headers, ended apart, or failed): read by the general reader, boxed.
    Rest(Pin<Box<R>>),
    /// Failed before anything was sent (a bad name or options, a request
    /// too large).
    Failed(Status),
    /// Resolved.
    Done,
}

impl<F, L, R> Phase<'_, F, L, R> {
    /// Moves to [`Phase::Rest`] with `read`, boxed here, out of the usual
    /// path's way (a rare reply).
    #[cold]
    #[inline(never)]
    fn read_rest(&mut self, read: R) -> Pin<&mut R> {
        *self = Phase::Rest(Box::pin(read));
        let Phase::Rest(read) = self else {
            unreachable!("set above");
        };
        read.as_mut()
    }
}

impl<'a, T, F, L, M, R> Unary<'a, F, L, M, R>
where
    F: FnOnce(Bytes, Ends<'_>) -> Result<T, Status>,
    M: Fn(First, Stream, usize, Receiving, F) -> R,
{
    /// The call in `phase`, observed by `obs`, bounded by `deadline`;
    /// `rest` starts the read of a reply not whole in its first frame
    /// (`read_rest`, as a function item).
    pub(super) fn new(
        obs: ClientCall,
        deadline: Option<Instant>,
        phase: Phase<'a, F, L, R>,
        rest: M,
    ) -> Self {
        Unary {
            obs,
            timer: Timer::new(deadline),
            phase,
            rest,
        }
    }
}

impl<T, F, L, M, R> Future for Unary<'_, F, L, M, R>
where
    F: FnOnce(Bytes, Ends<'_>) -> Result<T, Status>,
    L: Future<Output = Result<T, Status>>,
    M: Fn(First, Stream, usize, Receiving, F) -> R,
    R: Future<Output = Result<T, Status>>,
{
    type Output = Result<T, Status>;

    /// Inlined into the caller's future, with [`poll_phase`]: the raw
    /// call's poll was (LLVM's choice), a typed call's, larger by the
    /// reply's decoding, was not, and paid a function's entry and exit
    /// (saved registers, a frame) in every poll, about 36 instructions a
    /// call. Forced here, LLVM kept `poll_phase` out of line instead.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let r = {
            let _entered = this.obs.enter();
            // Only a timed call reads the task's budget (a thread-local).
            let had_budget = this.timer.is_set() && coop::has_budget_remaining();
            match poll_phase(this.phase, this.obs, this.rest, cx) {
                Poll::Ready(r) => r,
                // The work first, then the timer, as `tokio::time::timeout`:
                // a reply and the deadline in the same poll is the reply.
                Poll::Pending => match this
                    .timer
                    .poll_with(cx, |timer, cx| deadline_passed(timer, had_budget, cx))
                {
                    Some(true) => {
                        // Dropped now: the stream is reset (`CANCEL`) and
                        // released at once, not when the caller drops this.
                        *this.phase = Phase::Done;
                        Err(Status::deadline_exceeded("deadline exceeded"))
                    }
                    _ => return Poll::Pending,
                },
            }
        };
        this.obs.ended(&r);
        Poll::Ready(r)
    }
}

/// Whether the deadline has passed (arming `timer` to wake the task when
/// it does). As `tokio::time::timeout` does, a timer is looked at even when
/// the exchange's poll spent the task's last coop budget (`had_budget`
/// before it, none now): a timer is itself budgeted, and a call whose
/// reads always spend the budget would otherwise never see its deadline.
fn deadline_passed(timer: Pin<&mut Sleep>, had_budget: bool, cx: &mut Context<'_>) -> bool {
    if had_budget && !coop::has_budget_remaining() {
        std::pin::pin!(coop::unconstrained(timer))
            .poll(cx)
            .is_ready()
    } else {
        timer.poll(cx).is_ready()
    }
}

/// Polls the exchange; a reply that is not whole in its first frame moves
/// it to [`Phase::Rest`]. Inlined into [`Unary`]'s poll, as that is into
/// the caller's future (see there).
#[inline(always)]
fn poll_phase<T, F, L, M, R>(
    phase: &mut Phase<'_, F, L, R>,
    obs: &ClientCall,
    rest: &M,
    cx: &mut Context<'_>,
) -> Poll<Result<T, Status>>
where
    F: FnOnce(Bytes, Ends<'_>) -> Result<T, Status>,
    L: Future<Output = Result<T, Status>>,
    M: Fn(First, Stream, usize, Receiving, F) -> R,
    R: Future<Output = Result<T, Status>>,
{
    let r = match phase {
        Phase::Calling { call, .. } => {
            let answer = ready!(Pin::new(call).poll(cx));
            let Phase::Calling { max, finish, .. } = std::mem::replace(phase, Phase::Done) else {
                unreachable!("matched above");
            };
            let mut answer = match answer {
                Ok(answer) => answer,
                Err(e) => return Poll::Ready(Err(wire::from_mux(&e))),
            };
            obs.stream(answer.id());
            match answer.take_first() {
                Ok(Some(chunk)) if is_whole(&chunk, max) => {
                    let received = |n| obs.received(n);
                    return Poll::Ready(whole(chunk, answer.metadata(), received, finish));
                }
                first => {
                    let stream = answer.into_stream();
                    let read = rest(first, stream, max, obs.receiving(), finish);
                    ready!(phase.read_rest(read).poll(cx))
                }
            }
        }
        Phase::Large(exchange) => ready!(exchange.as_mut().poll(cx)),
        Phase::Rest(read) => ready!(read.as_mut().poll(cx)),
        Phase::Failed(_) => {
            let Phase::Failed(e) = std::mem::replace(phase, Phase::Done) else {
                unreachable!("matched above");
            };
            return Poll::Ready(Err(e));
        }
        Phase::Done => panic!("a unary call polled after it completed"),
    };
    // Dropped (and its stream released) now the value is made.
    *phase = Phase::Done;
    Poll::Ready(r)
}

/// Whether the first piece of a reply is the usual whole one: one frame,
/// the message whole (of at most `max` bytes), and the end with the
/// status. That takes no [`Reader`] (whose decoder and state would make
/// every unary future larger and every reply a few hundred instructions
/// dearer).
#[inline(always)]
fn is_whole(chunk: &Chunk, max: usize) -> bool {
    chunk.end && wire::is_one_message(&chunk.data, max)
}

/// A whole reply ([`is_whole`]) made the caller's value by `finish` (the
/// message counted by `received` if its status is OK), or its failure.
/// `open` is the call's `OPEN` metadata (its method names a failure).
/// Inlined into the poll (its one caller on the usual path): out of line,
/// its frame and the result passed back through memory cost the call
/// about a fifth of what it does.
#[inline(always)]
fn whole<T, F>(
    mut chunk: Chunk,
    open: &Metadata,
    received: impl FnOnce(usize),
    finish: F,
) -> Result<T, Status>
where
    F: FnOnce(Bytes, Ends<'_>) -> Result<T, Status>,
{
    wire::status_of(Some(&chunk.metadata))?;
    chunk.data.advance(codec::PREFIX_LEN);
    received(chunk.data.len());
    let ends = Ends {
        headers: None,
        trailers: Some(&chunk.metadata),
    };
    finish(chunk.data, ends).map_err(|e| response_error(open.method(), &e))
}

/// A large request's read phase: its one-message response and status,
/// made the caller's value by `finish`. The stream is the future's own
/// (it is dropped, and released, once the value is made).
#[allow(clippy::manual_async_fn)] // reason: an `async fn` would hold its arguments twice
pub(super) fn read_unary<T>(
    mut stream: Stream,
    max: usize,
    received: Receiving,
    finish: impl FnOnce(Bytes, Ends<'_>) -> Result<T, Status>,
) -> impl Future<Output = Result<T, Status>> {
    async move {
        observe::client_stream(stream.id());
        match stream.recv().await {
            Ok(Some(chunk)) if is_whole(&chunk, max) => {
                whole(chunk, stream.metadata(), |n| received.count(n), finish)
            }
            first => read_rest(first, stream, max, received, finish).await,
        }
    }
}

/// A unary reply read by the general reader from its `first` piece on
/// (what [`whole`] did not take). Boxed by its callers: a rare path.
pub(super) async fn read_rest<T>(
    first: First,
    mut stream: Stream,
    max: usize,
    received: Receiving,
    finish: impl FnOnce(Bytes, Ends<'_>) -> Result<T, Status>,
) -> Result<T, Status> {
    let mut reader = Reader::new(max);
    reader.absorb(first)?;
    let b = super::read_response(&mut reader, &mut stream).await?;
    received.count(b.len());
    finish(b, reader.ends()).map_err(|e| response_error(stream.metadata().method(), &e))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::observe::meter::ClientMeters;
    use crate::options::CallOptions;

    /// Work that spends the task's whole coop budget on every poll (as a
    /// call reading a busy socket can) and never finishes.
    async fn budget_eater() -> Result<Bytes, Status> {
        loop {
            tokio::task::coop::consume_budget().await;
        }
    }

    /// The deadline ends a call whose exchange spends the task's budget on
    /// every poll: the timer is looked at unconstrained, as
    /// `tokio::time::timeout` does. Real time: a paused clock would not
    /// advance while the task stays busy.
    #[tokio::test(flavor = "current_thread")]
    async fn the_deadline_ends_a_call_that_spends_the_tasks_budget() {
        let (obs, _) = observe::client_call(&ClientMeters::Off, None, "m", &CallOptions::new());
        let deadline = Instant::now() + Duration::from_millis(20);
        type Finish = fn(Bytes, Ends<'_>) -> Result<Bytes, Status>;
        let phase: Phase<'_, Finish, _, _> = Phase::Large(Box::pin(budget_eater()));
        let call = Unary::new(obs, Some(deadline), phase, read_rest);
        let r = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("the call's own deadline ends it");
        assert_eq!(
            r.unwrap_err().code(),
            crate::status::Code::DEADLINE_EXCEEDED
        );
    }
}
