//! Running a call's work until its deadline.
//!
//! [`within`] is a plain function returning [`Within`], not an `async fn`:
//! an `async fn` would hold `work` twice, once as its argument and once as
//! the future it awaits, doubling the size of every call future built on it
//! (and the bytes copied each time one is moved, boxed or spawned).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Timeout};

use crate::status::Status;

/// Runs `work` until `deadline`; past it, `work` is dropped and the result
/// is `DEADLINE_EXCEEDED`. Without a deadline no timer is armed.
///
/// For code that wraps calls (a retrying client, a layer) and wants the
/// same bound without doubling its future's size:
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use weft_rpc::{Code, Status, within};
///
/// let deadline = tokio::time::Instant::now() + Duration::from_millis(5);
/// let late = within(Some(deadline), std::future::pending::<Result<(), Status>>());
/// assert_eq!(late.await.unwrap_err().code(), Code::DEADLINE_EXCEEDED);
/// # }
/// ```
pub fn within<T, F>(deadline: Option<Instant>, work: F) -> Within<F>
where
    F: Future<Output = Result<T, Status>>,
{
    within_as(deadline, work, "deadline exceeded")
}

/// [`within`], with the status message to report when the deadline passes.
pub(crate) fn within_as<T, F>(
    deadline: Option<Instant>,
    work: F,
    message: &'static str,
) -> Within<F>
where
    F: Future<Output = Result<T, Status>>,
{
    match deadline {
        None => Within::Plain { work },
        Some(d) => Within::Timed {
            work: tokio::time::timeout_at(d, work),
            message,
        },
    }
}

/// For poll-based reads (`futures::Stream`): whether `deadline` has
/// passed, arming `timer` on first use so the task is woken when it does.
pub(crate) fn poll_deadline(
    deadline: Option<Instant>,
    timer: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    cx: &mut Context<'_>,
) -> bool {
    let Some(d) = deadline else { return false };
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(d)));
    timer.as_mut().poll(cx).is_ready()
}

pin_project_lite::pin_project! {
    /// A deadline polled beside a call's work by the server's call
    /// runners: its timer is armed only once the work waits, so a call
    /// that completes in its first poll builds none (a timer entry, and
    /// a read of the runtime's handle), and a call without a deadline
    /// pays one branch where a wrapper future around its work was one
    /// more state machine to poll through and move the result out of.
    pub(crate) struct Deadline {
        at: Option<Instant>,
        #[pin]
        timer: Option<tokio::time::Sleep>,
    }
}

impl Deadline {
    /// A deadline at `at`; none when `None`.
    pub(crate) fn new(at: Option<Instant>) -> Deadline {
        Deadline { at, timer: None }
    }

    /// Whether the deadline has passed, arming the timer on first use so
    /// the task is woken when it does. Call it only while the work
    /// waits: a work ready first wins, as with [`within`].
    pub(crate) fn poll_passed(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let Some(at) = *this.at else {
            return Poll::Pending;
        };
        if this.timer.is_none() {
            this.timer.set(Some(tokio::time::sleep_until(at)));
        }
        match this.timer.as_pin_mut() {
            Some(timer) => timer.poll(cx),
            None => Poll::Pending,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`within`]: `work` alone, or `work` under a timer.
    #[project = WithinProj]
    #[allow(missing_docs)] // private variants; the type is opaque to users
    pub enum Within<F> {
        Plain { #[pin] work: F },
        Timed { #[pin] work: Timeout<F>, message: &'static str },
    }
}

impl<T, F> Future for Within<F>
where
    F: Future<Output = Result<T, Status>>,
{
    type Output = Result<T, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            WithinProj::Plain { work } => work.poll(cx),
            WithinProj::Timed { work, message } => work
                .poll(cx)
                .map(|r| r.unwrap_or_else(|_| Err(Status::deadline_exceeded(*message)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_past_its_deadline_is_dropped_with_the_message() {
        let deadline = Instant::now() + Duration::from_millis(10);
        let r: Result<(), Status> =
            within_as(Some(deadline), std::future::pending(), "too late").await;
        let e = r.unwrap_err();
        assert_eq!(e.code(), crate::status::Code::DEADLINE_EXCEEDED);
        assert_eq!(e.message(), "too late");
    }

    #[tokio::test(start_paused = true)]
    async fn work_without_a_deadline_or_in_time_gives_its_own_result() {
        assert_eq!(within(None, async { Ok::<_, Status>(7) }).await.unwrap(), 7);
        let deadline = Instant::now() + Duration::from_secs(1);
        let r = within(Some(deadline), async {
            Err::<(), _>(Status::internal("x"))
        })
        .await;
        assert_eq!(r.unwrap_err().code(), crate::status::Code::INTERNAL);
    }
}
