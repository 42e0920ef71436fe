//! The per-second time series of a phase: throughput, p99 and errors.
//!
//! Each worker keeps the second it is in and flushes it into the shared
//! series when a call completes in a later second, so the shared lock is
//! taken about once per worker per second.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies in microseconds, 1 µs to 1 h, 2 significant digits: small
/// enough to keep one per second.
fn small_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("static histogram bounds are valid")
}

/// One second of a phase, as recorded.
#[derive(Debug, Clone)]
pub(crate) struct Second {
    /// Successful calls completed in it.
    ok: u64,
    /// Failed calls completed in it.
    errors: u64,
    /// Latency of its successful calls, µs.
    latency: Histogram<u64>,
}

impl Default for Second {
    fn default() -> Self {
        Second {
            ok: 0,
            errors: 0,
            latency: small_histogram(),
        }
    }
}

impl Second {
    fn add(&mut self, other: &Second) {
        self.ok += other.ok;
        self.errors += other.errors;
        self.latency
            .add(&other.latency)
            .expect("histograms with equal bounds");
    }

    /// The figures of this second, the `index`-th of the phase (`secs`
    /// long when it is the phase's cut-short last second).
    pub(crate) fn row(&self, index: usize, secs: f64) -> SeriesRow {
        SeriesRow {
            second: index as u64 + 1,
            throughput: self.ok as f64 / secs.max(1e-9),
            p99_us: (!self.latency.is_empty()).then(|| self.latency.value_at_quantile(0.99) as f64),
            errors: self.errors,
        }
    }
}

/// One row of the time series as reported.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct SeriesRow {
    /// Which second (1 = the first).
    pub(crate) second: u64,
    /// Successful calls per second.
    pub(crate) throughput: f64,
    /// p99 latency of its successful calls, µs (none when none succeeded).
    pub(crate) p99_us: Option<f64>,
    /// Failed calls.
    pub(crate) errors: u64,
}

/// The rows of a phase's series; `elapsed` trims the last second's rate.
pub(crate) fn rows(series: &[Second], elapsed: Duration) -> Vec<SeriesRow> {
    let total = elapsed.as_secs_f64();
    series
        .iter()
        .enumerate()
        .map(|(i, s)| s.row(i, (total - i as f64).clamp(1e-3, 1.0)))
        .collect()
}

/// The second a worker is recording into.
#[derive(Debug, Default)]
pub(crate) struct SecondTally {
    index: usize,
    second: Second,
}

impl SecondTally {
    /// Records a call completed `at` into the phase; when `at` is in a
    /// later second, the one recorded so far is handed to `flush` first.
    pub(crate) fn record(
        &mut self,
        at: Duration,
        outcome: Result<(), &'static str>,
        latency: Duration,
        flush: impl FnOnce(&SecondTally),
    ) {
        let index = usize::try_from(at.as_secs()).unwrap_or(usize::MAX);
        if index != self.index {
            if self.second.ok + self.second.errors > 0 {
                flush(self);
            }
            self.index = index;
            self.second.ok = 0;
            self.second.errors = 0;
            self.second.latency.reset();
        }
        match outcome {
            Ok(()) => {
                self.second.ok += 1;
                let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
                self.second.latency.saturating_record(us.max(1));
            }
            Err(_) => self.second.errors += 1,
        }
    }

    /// Adds this worker's current second into `series`.
    pub(crate) fn flush_into(&self, series: &mut Vec<Second>) {
        if self.second.ok + self.second.errors == 0 || self.index > 1_000_000 {
            return;
        }
        if series.len() <= self.index {
            series.resize_with(self.index + 1, Second::default);
        }
        series[self.index].add(&self.second);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_kept_apart_and_merged_across_workers() {
        let mut series = Vec::new();
        let ms = Duration::from_millis;
        for _worker in 0..2 {
            let mut t = SecondTally::default();
            t.record(ms(100), Ok(()), ms(1), |s| s.flush_into(&mut series));
            t.record(ms(900), Err("UNAVAILABLE"), ms(1), |s| {
                s.flush_into(&mut series)
            });
            // Second 3 (index 2): second 2 stays empty.
            t.record(ms(2100), Ok(()), ms(5), |s| s.flush_into(&mut series));
            t.flush_into(&mut series);
        }
        let rows = rows(&series, ms(2500));
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].throughput, rows[0].errors), (2.0, 2));
        assert_eq!(rows[1].p99_us, None);
        assert_eq!(rows[1].throughput, 0.0);
        // Second 3 lasted 0.5 s: 2 calls in it are 4 calls/s.
        assert!((rows[2].throughput - 4.0).abs() < 1e-9, "{:?}", rows[2]);
        assert!(
            (rows[2].p99_us.unwrap() - 5000.0).abs() < 50.0,
            "{:?}",
            rows[2]
        );
    }
}
