//! `--sweep`: steps of rising load, one row each, with the knee marked.
//!
//! Over concurrency (closed loop): 1, 2, 4, … up to `--concurrency`. The
//! knee is the first step that reaches [`NEAR_PEAK`] of the sweep's best
//! throughput, when a later step exists: past it, more calls in flight
//! add little throughput and only queue, so p99 grows. (Comparing each
//! step with the one before alone is fooled by one noisy step.)
//!
//! Over rates (open loop, `--rate R`): R × ¼, ½, ¾, 1, 1¼, 1½. The knee
//! is the last step the server keeps up with: the next one delivers less
//! than [`KEEPS_UP`] of its offered rate or its p99 jumps.
//!
//! Each row carries its Little's-law check: at a closed-loop step the
//! sampled in-flight count should match throughput × latency.

use serde::Serialize;

use super::pace::Pace;
use crate::report::{Little, Report};

/// Fraction of the best throughput at which a concurrency step is the knee.
pub(crate) const NEAR_PEAK: f64 = 0.90;
/// p99 growth that counts as a jump (rate steps).
pub(crate) const P99_JUMP: f64 = 1.5;
/// Fraction of the offered rate a step must deliver to keep up.
pub(crate) const KEEPS_UP: f64 = 0.95;
/// The rate steps, as multiples of `--rate`.
const RATE_STEPS: [f64; 6] = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5];

/// One step of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Step {
    /// Workers.
    pub(crate) concurrency: u32,
    /// Closed loop or the step's rate.
    pub(crate) pace: Pace,
}

/// The steps: doubling concurrency up to `max`, or rising rates around `rate`.
pub(crate) fn steps(max: u32, rate: Option<f64>) -> Vec<Step> {
    match rate {
        Some(r) => RATE_STEPS
            .iter()
            .map(|f| Step {
                concurrency: max,
                pace: Pace::rate(r * f),
            })
            .collect(),
        None => {
            let mut out = Vec::new();
            let mut c = 1u32;
            while c < max {
                out.push(Step {
                    concurrency: c,
                    pace: Pace::Closed,
                });
                c = c.saturating_mul(2);
            }
            out.push(Step {
                concurrency: max,
                pace: Pace::Closed,
            });
            out
        }
    }
}

/// One row of the sweep table.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Row {
    /// Workers.
    pub(crate) concurrency: u32,
    /// Offered calls per second (open loop only).
    pub(crate) rate: Option<f64>,
    /// Successful calls per second.
    pub(crate) throughput: f64,
    /// Median latency, µs.
    pub(crate) p50_us: Option<f64>,
    /// 99th percentile, µs.
    pub(crate) p99_us: Option<f64>,
    /// 99.9th percentile, µs.
    pub(crate) p999_us: Option<f64>,
    /// Failed calls.
    pub(crate) errors: u64,
    /// Little's-law check of the step.
    pub(crate) little: Little,
    /// Whether this step is the knee.
    pub(crate) knee: bool,
}

impl Row {
    /// The row of `step`, which measured `r`.
    pub(crate) fn of(step: &Step, r: &Report) -> Row {
        Row {
            concurrency: step.concurrency,
            rate: step.pace.per_second(),
            throughput: r.throughput,
            p50_us: r.latency.as_ref().map(|l| l.p50_us),
            p99_us: r.latency.as_ref().map(|l| l.p99_us),
            p999_us: r.latency.as_ref().map(|l| l.p999_us),
            errors: r.errors,
            little: r.little.clone(),
            knee: false,
        }
    }
}

/// Whether a rate step `b` after `a` is past the knee: it falls short of
/// its offered rate, or its p99 jumps.
fn past_rate_knee(a: &Row, b: &Row, rate: f64) -> bool {
    let jump = match (a.p99_us, b.p99_us) {
        (Some(x), Some(y)) => y >= x * P99_JUMP,
        (Some(_), None) => true,
        _ => false,
    };
    b.throughput < rate * KEEPS_UP || jump
}

/// Marks the knee and returns its index, or `None` when it was not
/// reached (throughput still rising at the last step: load harder).
pub(crate) fn mark_knee(rows: &mut [Row]) -> Option<usize> {
    let i = if rows.first()?.rate.is_some() {
        (1..rows.len()).find(|&i| {
            let rate = rows[i].rate.unwrap_or(f64::INFINITY);
            past_rate_knee(&rows[i - 1], &rows[i], rate)
        })? - 1
    } else {
        let best = rows.iter().map(|r| r.throughput).fold(0.0, f64::max);
        let i = rows.iter().position(|r| r.throughput >= best * NEAR_PEAK)?;
        if i + 1 == rows.len() {
            return None;
        }
        i
    };
    rows[i].knee = true;
    Some(i)
}

/// The sweep table.
pub(crate) fn render(rows: &[Row], knee: Option<usize>) -> String {
    use std::fmt::Write as _;
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>11} {:>10} {:>12} {:>10} {:>10} {:>10} {:>7}  little (sampled / predicted in flight)",
        "concurrency", "rate/s", "throughput/s", "p50 µs", "p99 µs", "p99.9 µs", "errors"
    );
    for r in rows {
        let little = format!(
            "{:.1} / {:.1}{}",
            r.little.sampled_in_flight,
            r.little.predicted_in_flight,
            if r.little.ok { "" } else { " DISAGREE" }
        );
        let _ = writeln!(
            s,
            "{:>11} {:>10} {:>12.0} {:>10} {:>10} {:>10} {:>7}  {little}{}",
            r.concurrency,
            r.rate
                .map_or_else(|| "closed".to_string(), |v| format!("{v:.0}")),
            r.throughput,
            f(r.p50_us),
            f(r.p99_us),
            f(r.p999_us),
            r.errors,
            if r.knee { "  ◀ knee" } else { "" }
        );
    }
    match knee {
        Some(i) => {
            let _ = writeln!(
                s,
                "knee        at {} in flight{}: past it throughput barely rises and calls queue (p99 grows)",
                rows[i].concurrency,
                rows[i]
                    .rate
                    .map_or_else(String::new, |r| format!(", {r:.0} calls/s"))
            );
        }
        None => {
            let _ = writeln!(
                s,
                "knee        not reached: every step still scaled; sweep further"
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(concurrency: u32, rate: Option<f64>, throughput: f64, p99: f64) -> Row {
        Row {
            concurrency,
            rate,
            throughput,
            p50_us: Some(p99 / 2.0),
            p99_us: Some(p99),
            p999_us: Some(p99 * 1.2),
            errors: 0,
            little: Little::check(0.0, 0, 0.0, 1.0),
            knee: false,
        }
    }

    #[test]
    fn concurrency_steps_double_up_to_the_maximum() {
        let c: Vec<u32> = steps(48, None).iter().map(|s| s.concurrency).collect();
        assert_eq!(c, [1, 2, 4, 8, 16, 32, 48]);
        assert_eq!(steps(1, None).len(), 1);
        let r: Vec<f64> = steps(8, Some(1000.0))
            .iter()
            .map(|s| s.pace.per_second().unwrap())
            .collect();
        assert!(
            (r[0] - 250.0).abs() < 1e-9 && (r[5] - 1500.0).abs() < 1e-9,
            "{r:?}"
        );
    }

    #[test]
    fn the_knee_is_where_throughput_flattens_and_p99_jumps() {
        let mut rows = vec![
            row(1, None, 10_000.0, 100.0),
            row(2, None, 19_000.0, 110.0),
            row(4, None, 35_000.0, 130.0),
            // Flat throughput, p99 doubles: past the knee.
            row(8, None, 36_000.0, 260.0),
            // One noisy step does not move the knee.
            row(16, None, 20_000.0, 900.0),
            row(32, None, 36_500.0, 520.0),
        ];
        assert_eq!(mark_knee(&mut rows), Some(2));
        assert!(rows[2].knee && !rows[3].knee);
        let text = render(&rows, Some(2));
        assert!(text.lines().nth(3).unwrap().ends_with("◀ knee"), "{text}");
        assert!(text.contains("knee        at 4 in flight"), "{text}");
        // Still rising everywhere: no knee.
        let mut rising = vec![row(1, None, 10.0, 100.0), row(2, None, 20.0, 300.0)];
        assert_eq!(mark_knee(&mut rising), None);
        assert!(render(&rising, None).contains("not reached"));
    }

    #[test]
    fn a_rate_sweep_knee_is_the_last_rate_kept_up_with() {
        let mut rows = vec![
            row(64, Some(1000.0), 1000.0, 100.0),
            row(64, Some(2000.0), 1990.0, 110.0),
            row(64, Some(3000.0), 2500.0, 5000.0),
        ];
        assert_eq!(mark_knee(&mut rows), Some(1));
    }
}
