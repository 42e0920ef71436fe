//! Closed and open loops.
//!
//! A closed loop (each worker starts its next call when the last returns)
//! measures what the server does at a fixed concurrency, but it slows down
//! with the server: while a call is stuck no new calls start, so the stall
//! is recorded once instead of for every caller that would have waited
//! behind it (coordinated omission). An open loop starts calls on a fixed
//! schedule, call `i` at `start + i / rate`, and measures each call's
//! latency from that intended start, as wrk2 does: time a call spent
//! waiting for a free worker counts.

use std::time::Duration;

use tokio::time::Instant;

/// Later than any run ends.
const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);

/// How calls are started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Pace {
    /// Each worker starts its next call as soon as its last one returns.
    Closed,
    /// Calls start on a fixed schedule, `per_second` of them each second.
    Open {
        /// Calls per second (positive, finite).
        per_second: f64,
    },
}

impl Pace {
    /// Open loop at `per_second` calls per second.
    pub(crate) fn rate(per_second: f64) -> Pace {
        Pace::Open { per_second }
    }

    /// The calls per second of an open loop.
    pub(crate) fn per_second(self) -> Option<f64> {
        match self {
            Pace::Closed => None,
            Pace::Open { per_second } => Some(per_second),
        }
    }

    /// When call `i` of a phase that began at `start` is meant to start:
    /// now for a closed loop, its slot on the schedule for an open one.
    pub(crate) fn intended(self, start: Instant, i: u64) -> Instant {
        match self {
            Pace::Closed => Instant::now(),
            Pace::Open { per_second } => {
                // Past any run's end when out of range (a tiny rate).
                Duration::try_from_secs_f64(i as f64 / per_second)
                    .ok()
                    .and_then(|d| start.checked_add(d))
                    .unwrap_or_else(|| start + FAR)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_open_loop_follows_its_schedule() {
        let start = Instant::now();
        let p = Pace::rate(1000.0);
        assert_eq!(p.intended(start, 0), start);
        assert_eq!(p.intended(start, 1500), start + Duration::from_millis(1500));
        assert!((p.per_second().unwrap() - 1000.0).abs() < 1e-6);
        tokio::time::advance(Duration::from_secs(3)).await;
        // The schedule does not move with the clock; a closed loop does.
        assert_eq!(p.intended(start, 10), start + Duration::from_millis(10));
        assert_eq!(Pace::Closed.intended(start, 10), Instant::now());
        assert_eq!(Pace::Closed.per_second(), None);
    }
}
