//! Outages: the stretches of a run when the server could not be reached.
//!
//! An outage starts when the connection is lost, or with a call failing
//! `UNAVAILABLE` (a refusal, or a loss seen by a call first), and ends
//! with the first success of a call sent after it started: a call already
//! answered before the outage may still complete successfully after its
//! start, and must not end it. Every failure in between is the outage's.
//! A lost connection need not fail any call (calls it provably did not
//! process are resent), and the calls that wait for the channel to
//! reconnect are not failures; they complete once it is back, so the
//! length is how long calls could not be served.
//!
//! Pure: times come in as offsets from the start of the phase.

use std::time::Duration;

use serde::Serialize;

/// One outage, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Outage {
    /// Seconds into the run when the first call failed.
    pub(crate) start_s: f64,
    /// Seconds until calls succeeded again; `None`: still out at the end.
    pub(crate) length_s: Option<f64>,
    /// Calls that failed during it (whatever their code).
    pub(crate) calls_failed: u64,
}

/// Where the run stands.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Up,
    Down { since: Duration, failed: u64 },
}

/// Follows a phase's calls and collects its outages.
#[derive(Debug)]
pub(crate) struct Outages {
    state: State,
    past: Vec<Outage>,
}

impl Default for Outages {
    fn default() -> Self {
        Outages {
            state: State::Up,
            past: Vec::new(),
        }
    }
}

impl Outages {
    /// Whether an outage is under way (a worker then reports its
    /// successes; otherwise it need not).
    pub(crate) fn is_down(&self) -> bool {
        matches!(self.state, State::Down { .. })
    }

    /// A call failed at `at`; `unavailable` when its code was `UNAVAILABLE`.
    pub(crate) fn failed(&mut self, at: Duration, unavailable: bool) {
        self.state = match self.state {
            State::Up if unavailable => State::Down {
                since: at,
                failed: 1,
            },
            State::Up => State::Up,
            State::Down { since, failed } => State::Down {
                since,
                failed: failed + 1,
            },
        };
    }

    /// The connection was lost at `at`.
    pub(crate) fn lost(&mut self, at: Duration) {
        if self.state == State::Up {
            self.state = State::Down {
                since: at,
                failed: 0,
            };
        }
    }

    /// A call sent at `sent` succeeded at `at`.
    pub(crate) fn succeeded(&mut self, sent: Duration, at: Duration) {
        if let State::Down { since, failed } = self.state
            && sent >= since
        {
            self.past.push(Outage {
                start_s: since.as_secs_f64(),
                length_s: Some(at.saturating_sub(since).as_secs_f64()),
                calls_failed: failed,
            });
            self.state = State::Up;
        }
    }

    /// When the outage under way started.
    pub(crate) fn down_since(&self) -> Option<Duration> {
        match self.state {
            State::Down { since, .. } => Some(since),
            State::Up => None,
        }
    }

    /// Every outage, the one under way (if any) last with no length.
    pub(crate) fn finish(mut self) -> Vec<Outage> {
        if let State::Down { since, failed } = self.state {
            self.past.push(Outage {
                start_s: since.as_secs_f64(),
                length_s: None,
                calls_failed: failed,
            });
        }
        self.past
    }
}

/// The outages as text lines for the report (nothing when there were none).
pub(crate) fn render(outages: &[Outage]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if outages.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "outages     {:>9} {:>10} {:>13}",
        "start s", "length s", "calls failed"
    );
    for o in outages {
        let length = o
            .length_s
            .map_or_else(|| "to the end".to_owned(), |l| format!("{l:.3}"));
        let _ = writeln!(
            s,
            "            {:>9.3} {:>10} {:>13}",
            o.start_s, length, o.calls_failed
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_outage_runs_from_the_first_unavailable_to_a_success_sent_after_it() {
        let mut o = Outages::default();
        o.succeeded(ms(0), ms(10));
        o.failed(ms(20), false);
        assert!(!o.is_down(), "only UNAVAILABLE starts an outage");
        o.failed(ms(100), true);
        o.failed(ms(101), true);
        // Sent before the outage, answered after its first failure: not
        // the end of it.
        o.succeeded(ms(99), ms(102));
        assert_eq!(o.down_since(), Some(ms(100)));
        o.failed(ms(300), false);
        o.succeeded(ms(150), ms(600));
        assert!(!o.is_down());
        o.failed(ms(2000), true);
        o.succeeded(ms(2000), ms(2500));
        o.failed(ms(3000), true);
        assert_eq!(
            o.finish(),
            [
                Outage {
                    start_s: 0.1,
                    length_s: Some(0.5),
                    calls_failed: 3
                },
                Outage {
                    start_s: 2.0,
                    length_s: Some(0.5),
                    calls_failed: 1
                },
                Outage {
                    start_s: 3.0,
                    length_s: None,
                    calls_failed: 1
                },
            ]
        );
    }

    #[test]
    fn a_lost_connection_starts_an_outage_that_failures_join() {
        let mut o = Outages::default();
        o.lost(ms(1000));
        assert_eq!(o.down_since(), Some(ms(1000)));
        o.failed(ms(1001), true);
        o.lost(ms(1002));
        assert_eq!(o.down_since(), Some(ms(1000)), "one outage");
        o.succeeded(ms(1300), ms(1301));
        o.lost(ms(2000));
        o.succeeded(ms(2400), ms(2401));
        let got = o.finish();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[0].start_s, got[0].calls_failed), (1.0, 1));
        assert_eq!((got[1].start_s, got[1].calls_failed), (2.0, 0));
        assert!((got[1].length_s.unwrap() - 0.401).abs() < 1e-9);
    }

    #[test]
    fn the_text_lists_each_outage_and_one_still_open() {
        assert_eq!(render(&[]), "");
        let t = render(&[
            Outage {
                start_s: 2.0,
                length_s: Some(0.25),
                calls_failed: 64,
            },
            Outage {
                start_s: 5.0,
                length_s: None,
                calls_failed: 3,
            },
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[1].contains("2.000") && lines[1].contains("0.250"));
        assert!(lines[1].trim_end().ends_with("64"), "{t}");
        assert!(lines[2].contains("to the end"), "{t}");
    }
}
