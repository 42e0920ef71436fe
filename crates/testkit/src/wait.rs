//! Waits that end when their event happens, not after a fixed sleep:
//! whoever changes a watched figure calls [`Changes::bump`] and a waiter
//! re-checks its condition only then; where nothing can bump (a
//! connection's stats), [`eventually`] re-checks at each tick. Only a hang
//! reaches [`STALL_LIMIT`].

use std::fmt::Display;
use std::time::Duration;

use tokio::sync::Notify;

/// How long a wait may see no change before it panics: not a speed bound
/// (every wait ends the moment its event happens), a hang catcher, so a
/// stuck test fails with a message instead of running for ever.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);

/// Wakes the waiters of [`Changes::until`].
#[derive(Debug, Default)]
pub struct Changes(Notify);

impl Changes {
    /// Something a waiter may be watching changed.
    pub fn bump(&self) {
        self.0.notify_waiters();
    }

    /// Returns `ready()`'s value once it has one, checking after each
    /// [`Changes::bump`].
    ///
    /// # Panics
    /// After [`STALL_LIMIT`] without a value, with `what` (evaluated then).
    pub async fn until<T, D: Display>(
        &self,
        mut ready: impl FnMut() -> Option<T>,
        what: impl FnOnce() -> D,
    ) -> T {
        let wait = async {
            loop {
                // Registered before the check: a bump between the check and
                // the await is not lost.
                let mut notified = std::pin::pin!(self.0.notified());
                notified.as_mut().enable();
                if let Some(v) = ready() {
                    return v;
                }
                notified.await;
            }
        };
        bounded(wait, what).await
    }
}

/// Returns `ready()`'s value once it has one, checking every millisecond
/// (for figures no one can bump, such as a connection's stats).
///
/// # Panics
/// After [`STALL_LIMIT`] without a value, with `what` (evaluated then).
pub async fn eventually<T, D: Display>(
    mut ready: impl FnMut() -> Option<T>,
    what: impl FnOnce() -> D,
) -> T {
    let wait = async {
        loop {
            if let Some(v) = ready() {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    bounded(wait, what).await
}

/// `wait`, or a panic naming `what` after [`STALL_LIMIT`].
async fn bounded<T, D: Display>(wait: impl Future<Output = T>, what: impl FnOnce() -> D) -> T {
    match tokio::time::timeout(STALL_LIMIT, wait).await {
        Ok(v) => v,
        Err(_) => panic!("stalled for {STALL_LIMIT:?}: {}", what()),
    }
}

/// How long (real time) a test holding a [`SpinGuard`] may run.
pub const SPIN_LIMIT: Duration = Duration::from_secs(60);

/// A hang catcher in real time, for tests on a paused clock. There a task
/// that keeps waking itself (a spun core) stops the clock from advancing,
/// so no `tokio::time::timeout` ever fires and the test would run for
/// ever. While the guard lives, a thread watches the wall clock; after
/// [`SPIN_LIMIT`] it prints `what` and exits the test process with a
/// failure. Dropping the guard stops the watch.
///
/// ```
/// let _guard = weft_testkit::SpinGuard::new("the shutdown wakes every waiter");
/// // ... the test's body, on a paused clock ...
/// ```
#[derive(Debug)]
pub struct SpinGuard(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

impl SpinGuard {
    /// Starts the watch; `what` says what the test waits for.
    pub fn new(what: &'static str) -> SpinGuard {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            // Only a timeout means the guard is still alive: a dropped
            // guard disconnects the channel.
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(SPIN_LIMIT)
            {
                eprintln!(
                    "no progress for {SPIN_LIMIT:?} of real time (a task spinning on a \
                     paused clock?): {what}"
                );
                std::process::exit(101);
            }
        });
        SpinGuard(stop)
    }
}
