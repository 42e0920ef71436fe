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
//!
//! The schedule is kept by [`pacer`], an OS thread that releases one
//! semaphore permit per slot as it falls due, waking every
//! [`PACER_TICK`]: tokio's timer ticks in whole milliseconds and fires a
//! millisecond's slots at once, which would turn a smooth rate into bursts
//! (and their queueing into latency the server did not cause).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::driver::StopAt;

/// How often the pacer releases the slots that fell due.
pub(crate) const PACER_TICK: Duration = Duration::from_micros(50);

/// Permits released past the last slot: more than there are workers.
const PAST_THE_END: usize = u32::MAX as usize;

/// Releases one permit on `slots` per call slot of an open loop at
/// `per_second` that began at `start`, as each falls due, until `stop`
/// (or the phase's last slot), then [`PAST_THE_END`] more for the workers
/// still waiting (each finds the schedule over). Returns how late, at worst, it released a
/// slot: more than a tick or two means this machine starved the generator
/// of CPU, and open-loop latencies include that.
pub(crate) fn pacer(
    per_second: f64,
    start: Instant,
    end: StopAt,
    slots: Arc<Semaphore>,
    stop: CancellationToken,
) -> std::thread::JoinHandle<Duration> {
    let start = start.into_std();
    std::thread::spawn(move || {
        let total = match end {
            StopAt::Calls(n) => n,
            StopAt::After(d) => (d.as_secs_f64() * per_second).ceil() as u64,
        };
        let mut released = 0u64;
        let mut worst = 0.0f64;
        while released < total && !stop.is_cancelled() {
            let elapsed = start.elapsed().as_secs_f64();
            // Slot i is due at i / rate: slots 0..=floor(elapsed × rate).
            let due = ((elapsed * per_second).floor() as u64 + 1).min(total);
            if due > released {
                // The oldest slot released now was due at released / rate.
                worst = worst.max(elapsed - released as f64 / per_second);
                slots.add_permits(usize::try_from(due - released).unwrap_or(usize::MAX));
                released = due;
            }
            std::thread::sleep(PACER_TICK);
        }
        // Every slot is out (or the phase stopped): let the workers still
        // waiting through, to find no slot left and stop. Without it a
        // counted open loop (`--rate R --calls N`) waited for ever.
        slots.add_permits(PAST_THE_END);
        Duration::from_secs_f64(worst.max(0.0))
    })
}

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

    #[test]
    fn the_pacer_releases_each_slot_once_then_stops() {
        let slots = Arc::new(Semaphore::new(0));
        let stop = CancellationToken::new();
        // 1000 slots at a million a second: due within a millisecond.
        let p = pacer(
            1e6,
            Instant::now(),
            StopAt::Calls(1000),
            slots.clone(),
            stop.clone(),
        );
        p.join().unwrap();
        assert_eq!(slots.available_permits(), 1000 + PAST_THE_END);
        // A stopped pacer releases no more, however many slots remain.
        let slots = Arc::new(Semaphore::new(0));
        stop.cancel();
        let p = pacer(
            1.0,
            Instant::now(),
            StopAt::After(Duration::from_secs(3600)),
            slots.clone(),
            stop,
        );
        p.join().unwrap();
        assert!(slots.available_permits() <= 1 + PAST_THE_END);
    }

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
