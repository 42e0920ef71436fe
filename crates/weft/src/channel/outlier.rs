//! Outlier detection for a balanced channel: an endpoint whose calls keep
//! failing `UNAVAILABLE` (refused streams, lost connections) is ejected
//! from the balancer for a while, then probed back.
//!
//! The rules are Envoy's outlier detection (`consecutive_5xx`,
//! `base_ejection_time`, `max_ejection_percent`) with Finagle's
//! failure-accrual probe:
//!
//! ```text
//!            5 failures in a row
//!  Healthy ──────────────────────▶ Ejected { until }
//!     ▲                               │ until passes
//!     │ a success                     ▼
//!     └────────────────────────── Probation ── a failure ──▶ Ejected (twice as long)
//! ```
//!
//! - ejection lasts `base` (1 s), doubling with each ejection in a row up
//!   to `max` (30 s); the count of ejections in a row is forgotten after
//!   `max` of health;
//! - no more than half the endpoints (rounded down) are ejected at once:
//!   the caller says whether there is room;
//! - every failure also adds to a decaying penalty (half of it gone each
//!   `half_life`, 1 s) that the balancer adds to the endpoint's calls in
//!   flight, so an endpoint that fails fast (and so has few calls in
//!   flight) is not the one power-of-two-choices prefers, ejected or not.
//!
//! Pure: time comes in as `now`, so the tests run on a virtual clock.

use std::time::Duration;

use tokio::time::Instant;

/// The detection and ejection rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Policy {
    /// Failures in a row that eject an endpoint.
    pub(crate) consecutive: u32,
    /// The first ejection's length.
    pub(crate) base: Duration,
    /// The longest ejection; also how long an endpoint stays healthy
    /// before its past ejections are forgotten.
    pub(crate) max: Duration,
    /// How long half of the failure penalty takes to fade.
    pub(crate) half_life: Duration,
    /// What one recent failure adds to the load (in calls in flight).
    pub(crate) failure_weight: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            consecutive: 5,
            base: Duration::from_secs(1),
            max: Duration::from_secs(30),
            half_life: Duration::from_secs(1),
            failure_weight: 4.0,
        }
    }
}

/// How a call on the endpoint ended, as detection sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Answered (whatever the status, unless `Failure`).
    Success,
    /// Failed `UNAVAILABLE`: refused, or the connection was lost.
    Failure,
}

/// Where an endpoint stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// In the balancer; `failures` in a row ended its latest calls.
    /// `strikes` ejections in a row came before, forgotten at `forget`.
    Healthy {
        failures: u32,
        strikes: u32,
        forget: Option<Instant>,
    },
    /// Out of the balancer until `until`; the `strikes`-th in a row.
    Ejected { until: Instant, strikes: u32 },
    /// Back after an ejection: its next outcome decides.
    Probation { strikes: u32 },
}

/// What a step changed, for the caller's count of ejected endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Nothing the caller counts.
    None,
    /// Ejected (the caller's room was taken).
    Ejected,
    /// The ejection ended: the endpoint is on probation.
    Returned,
}

/// One endpoint's detector.
#[derive(Debug, Clone)]
pub(crate) struct Outlier {
    policy: Policy,
    state: State,
    /// Recent failures, decayed to `scored_at`.
    score: f64,
    scored_at: Instant,
}

impl Outlier {
    /// A healthy endpoint at `now`.
    pub(crate) fn new(policy: Policy, now: Instant) -> Outlier {
        Outlier {
            policy,
            state: State::Healthy {
                failures: 0,
                strikes: 0,
                forget: None,
            },
            score: 0.0,
            scored_at: now,
        }
    }

    /// Whether a success at this point changes nothing (the caller may
    /// then skip [`record`](Self::record)).
    pub(crate) fn is_clean(&self) -> bool {
        matches!(
            self.state,
            State::Healthy {
                failures: 0,
                forget: None,
                ..
            }
        )
    }

    /// The end of the current ejection, if ejected at `now` (moving to
    /// probation when it has passed).
    pub(crate) fn ejected_until(&mut self, now: Instant) -> (Option<Instant>, Change) {
        match self.state {
            State::Ejected { until, strikes } if until <= now => {
                self.state = State::Probation { strikes };
                (None, Change::Returned)
            }
            State::Ejected { until, .. } => (Some(until), Change::None),
            _ => (None, Change::None),
        }
    }

    /// Records a call's `outcome` at `now`. `room` is asked only when the
    /// endpoint is due for ejection: whether fewer than the most endpoints
    /// allowed are ejected (taking the place when it says yes).
    pub(crate) fn record(
        &mut self,
        now: Instant,
        outcome: Outcome,
        room: impl FnOnce() -> bool,
    ) -> Change {
        let (_, returned) = self.ejected_until(now);
        if outcome == Outcome::Failure {
            self.score = self.decayed(now) + 1.0;
            self.scored_at = now;
        }
        let change = match (self.state, outcome) {
            // Calls sent before the ejection, ending during it: the
            // ejection already accounts for them.
            (State::Ejected { .. }, _) => Change::None,
            (State::Probation { strikes }, Outcome::Success) => {
                self.state = State::Healthy {
                    failures: 0,
                    strikes,
                    forget: Some(now + self.policy.max),
                };
                Change::None
            }
            (State::Probation { strikes }, Outcome::Failure) => self.eject(now, strikes, room),
            (
                State::Healthy {
                    strikes, forget, ..
                },
                Outcome::Success,
            ) => {
                let (strikes, forget) = match forget {
                    Some(t) if t <= now => (0, None),
                    kept => (strikes, kept),
                };
                self.state = State::Healthy {
                    failures: 0,
                    strikes,
                    forget,
                };
                Change::None
            }
            (
                State::Healthy {
                    failures,
                    strikes,
                    forget,
                },
                Outcome::Failure,
            ) => {
                let failures = failures.saturating_add(1);
                if failures >= self.policy.consecutive {
                    let strikes = match forget {
                        Some(t) if t <= now => 0,
                        _ => strikes,
                    };
                    self.eject(now, strikes, room)
                } else {
                    self.state = State::Healthy {
                        failures,
                        strikes,
                        forget,
                    };
                    Change::None
                }
            }
        };
        match (returned, change) {
            // Back and out again in one step: the place is kept.
            (Change::Returned, Change::Ejected) => Change::None,
            (Change::Returned, _) => Change::Returned,
            (_, c) => c,
        }
    }

    /// Ejects after `strikes` earlier ejections in a row, if there is room;
    /// without room it stays in the balancer, its failures still counted.
    fn eject(&mut self, now: Instant, strikes: u32, room: impl FnOnce() -> bool) -> Change {
        if !room() {
            self.state = match self.state {
                State::Healthy {
                    strikes, forget, ..
                } => State::Healthy {
                    failures: self.policy.consecutive,
                    strikes,
                    forget,
                },
                other => other,
            };
            return Change::None;
        }
        let length = self
            .policy
            .base
            .saturating_mul(1u32 << strikes.min(16))
            .min(self.policy.max);
        self.state = State::Ejected {
            until: now + length,
            strikes: strikes.saturating_add(1),
        };
        Change::Ejected
    }

    /// The failure penalty at `now`, in calls in flight.
    pub(crate) fn penalty(&self, now: Instant) -> f64 {
        self.decayed(now) * self.policy.failure_weight
    }

    fn decayed(&self, now: Instant) -> f64 {
        if self.score == 0.0 {
            return 0.0;
        }
        let age = now.saturating_duration_since(self.scored_at).as_secs_f64();
        let halves = age / self.policy.half_life.as_secs_f64().max(1e-9);
        self.score * 0.5f64.powf(halves)
    }
}

/// The most endpoints of `n` that may be ejected at once: half, rounded
/// down (so one endpoint alone is never ejected).
pub(crate) fn most_ejected(n: usize) -> usize {
    n / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn fail(o: &mut Outlier, now: Instant, times: u32) -> Vec<Change> {
        (0..times)
            .map(|_| o.record(now, Outcome::Failure, || true))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn five_failures_in_a_row_eject_and_a_success_between_resets() {
        let t0 = Instant::now();
        let mut o = Outlier::new(Policy::default(), t0);
        assert!(fail(&mut o, t0, 4).iter().all(|c| *c == Change::None));
        assert_eq!(o.record(t0, Outcome::Success, || true), Change::None);
        assert!(o.is_clean());
        assert!(fail(&mut o, t0, 4).iter().all(|c| *c == Change::None));
        assert_eq!(o.ejected_until(t0).0, None, "four in a row: not yet");
        assert_eq!(o.record(t0, Outcome::Failure, || true), Change::Ejected);
        assert_eq!(o.ejected_until(t0), (Some(t0 + S), Change::None));
        // Calls that were in flight end during the ejection: no change.
        assert_eq!(o.record(t0, Outcome::Failure, || true), Change::None);
        assert_eq!(o.ejected_until(t0 + S / 2).0, Some(t0 + S));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_doubles_the_ejection_up_to_the_max() {
        let t0 = Instant::now();
        let mut o = Outlier::new(Policy::default(), t0);
        fail(&mut o, t0, 5);
        let mut now = t0;
        let mut lengths = Vec::new();
        for _ in 0..8 {
            let (until, _) = o.ejected_until(now);
            let until = until.expect("ejected");
            lengths.push((until - now).as_secs());
            now = until;
            assert_eq!(o.ejected_until(now), (None, Change::Returned));
            // The probe fails: out again at once, twice as long.
            assert_eq!(o.record(now, Outcome::Failure, || true), Change::Ejected);
        }
        assert_eq!(lengths, [1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_good_probe_restores_and_strikes_fade_after_the_max() {
        let t0 = Instant::now();
        let mut o = Outlier::new(Policy::default(), t0);
        fail(&mut o, t0, 5);
        let back = t0 + S;
        // The probe's success both ends the ejection and restores.
        assert_eq!(o.record(back, Outcome::Success, || true), Change::Returned);
        assert_eq!(o.ejected_until(back).0, None);
        // Failing again soon: the second ejection in a row lasts 2 s.
        fail(&mut o, back, 5);
        assert_eq!(o.ejected_until(back).0, Some(back + 2 * S));
        let back = back + 2 * S;
        o.record(back, Outcome::Success, || true);
        // Healthy for 30 s: forgotten, the next ejection is 1 s again.
        let later = back + 31 * S;
        o.record(later, Outcome::Success, || true);
        assert!(o.is_clean());
        fail(&mut o, later, 5);
        assert_eq!(o.ejected_until(later).0, Some(later + S));
    }

    #[tokio::test(start_paused = true)]
    async fn without_room_it_stays_in_and_is_ejected_once_there_is_room() {
        let t0 = Instant::now();
        let mut o = Outlier::new(Policy::default(), t0);
        for _ in 0..10 {
            assert_eq!(o.record(t0, Outcome::Failure, || false), Change::None);
        }
        assert_eq!(o.ejected_until(t0).0, None);
        // Its failures still weigh on its load.
        assert!(o.penalty(t0) >= 10.0 * 4.0 - 1e-9, "{}", o.penalty(t0));
        // The next failure with room ejects it (no new five needed).
        assert_eq!(o.record(t0, Outcome::Failure, || true), Change::Ejected);
        // A failed probe without room: in probation, not ejected.
        let back = t0 + S;
        assert_eq!(o.record(back, Outcome::Failure, || false), Change::Returned);
        assert_eq!(o.ejected_until(back).0, None);
        // With room, the next failure ejects it for 2 s.
        assert_eq!(o.record(back, Outcome::Failure, || true), Change::Ejected);
        assert_eq!(o.ejected_until(back).0, Some(back + 2 * S));
    }

    #[tokio::test(start_paused = true)]
    async fn the_penalty_halves_each_half_life() {
        let t0 = Instant::now();
        let mut o = Outlier::new(Policy::default(), t0);
        assert_eq!(o.penalty(t0), 0.0);
        fail(&mut o, t0, 2);
        assert!((o.penalty(t0) - 8.0).abs() < 1e-9);
        assert!((o.penalty(t0 + S) - 4.0).abs() < 1e-9);
        assert!((o.penalty(t0 + 3 * S) - 1.0).abs() < 1e-9);
        // A success does not erase it: only time does.
        o.record(t0 + 3 * S, Outcome::Success, || true);
        assert!((o.penalty(t0 + 3 * S) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn at_most_half_rounded_down() {
        assert_eq!(
            (0..6).map(most_ejected).collect::<Vec<_>>(),
            [0, 0, 1, 1, 2, 2]
        );
    }
}
