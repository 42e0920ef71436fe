//! Load-test arithmetic: latency percentiles (hdrhistogram), throughput,
//! errors by status code, and a Little's-law cross-check.
//!
//! Little's law says the mean number of calls in flight equals throughput
//! times mean latency. The load generator measures both sides
//! independently: latency per call, and the in-flight count by sampling a
//! counter on a timer. When they disagree by more than
//! [`LITTLE_TOLERANCE`], the report flags it: time is being spent outside
//! the measured latency (a stalled generator, queuing before the timer
//! starts), so the latency figures understate what callers see.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Relative disagreement above which the Little's-law check is flagged.
pub(crate) const LITTLE_TOLERANCE: f64 = 0.15;

/// Latencies recorded in nanoseconds, 1 ns to 10 minutes, 3 significant
/// digits (a fixed ~200 KiB per histogram).
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("static histogram bounds are valid")
}

/// What one worker (or the whole run, after merging) measured.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    /// Latency of every successful call, ns.
    pub(crate) latency: Histogram<u64>,
    /// Failed calls by status code name.
    pub(crate) errors: BTreeMap<String, u64>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            latency: new_histogram(),
            errors: BTreeMap::new(),
        }
    }
}

impl Tally {
    /// Records one successful call.
    pub(crate) fn ok(&mut self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.latency.saturating_record(ns);
    }

    /// Records one failed call under its status code name.
    pub(crate) fn error(&mut self, code: &str) {
        *self.errors.entry(code.to_owned()).or_default() += 1;
    }

    /// Adds another tally into this one.
    pub(crate) fn merge(&mut self, other: &Tally) {
        // Both histograms share the same bounds, so adding cannot fail.
        self.latency
            .add(&other.latency)
            .expect("histograms with equal bounds");
        for (code, n) in &other.errors {
            *self.errors.entry(code.clone()).or_default() += n;
        }
    }
}

/// Latency figures, microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Latency {
    /// Mean.
    pub(crate) mean_us: f64,
    /// Median.
    pub(crate) p50_us: f64,
    /// 90th percentile.
    pub(crate) p90_us: f64,
    /// 99th percentile.
    pub(crate) p99_us: f64,
    /// 99.9th percentile.
    pub(crate) p999_us: f64,
    /// Largest.
    pub(crate) max_us: f64,
}

/// The Little's-law cross-check.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Little {
    /// Mean in-flight calls, sampled.
    pub(crate) sampled_in_flight: f64,
    /// Throughput × mean latency.
    pub(crate) predicted_in_flight: f64,
    /// |sampled − predicted| / predicted.
    pub(crate) disagreement: f64,
    /// Whether the disagreement is within [`LITTLE_TOLERANCE`].
    pub(crate) ok: bool,
}

/// The result of a load run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Report {
    /// Successful calls.
    pub(crate) calls: u64,
    /// Failed calls.
    pub(crate) errors: u64,
    /// Wall time of the measured window, seconds.
    pub(crate) elapsed_s: f64,
    /// Successful calls per second.
    pub(crate) throughput: f64,
    /// Latency of successful calls.
    pub(crate) latency: Latency,
    /// Failed calls by status code name.
    pub(crate) errors_by_code: BTreeMap<String, u64>,
    /// Little's-law check.
    pub(crate) little: Little,
    /// Key updates (`KEY_UPDATE` records) this process sent and received
    /// during the run, over all its connections (both ends when the server
    /// is in-process).
    pub(crate) key_updates: KeyUpdateCount,
}

/// Key updates seen during a run.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub(crate) struct KeyUpdateCount {
    /// `KEY_UPDATE` records sealed.
    pub(crate) sent: u64,
    /// `KEY_UPDATE` records opened.
    pub(crate) received: u64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl Report {
    /// Builds the report from the merged tally, the window's length and the
    /// mean of the sampled in-flight counter.
    pub(crate) fn new(tally: &Tally, elapsed: Duration, sampled_in_flight: f64) -> Report {
        let h = &tally.latency;
        let calls = h.len();
        let errors: u64 = tally.errors.values().sum();
        let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        let throughput = calls as f64 / secs;
        let mean_ns = if calls == 0 { 0.0 } else { h.mean() };
        let predicted = throughput * mean_ns / 1e9;
        let disagreement = if predicted > 0.0 {
            (sampled_in_flight - predicted).abs() / predicted
        } else if sampled_in_flight > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let q = |p: f64| us(h.value_at_quantile(p));
        Report {
            calls,
            errors,
            elapsed_s: elapsed.as_secs_f64(),
            throughput,
            latency: Latency {
                mean_us: mean_ns / 1000.0,
                p50_us: q(0.50),
                p90_us: q(0.90),
                p99_us: q(0.99),
                p999_us: q(0.999),
                max_us: us(h.max()),
            },
            errors_by_code: tally.errors.clone(),
            little: Little {
                sampled_in_flight,
                predicted_in_flight: predicted,
                disagreement,
                ok: disagreement <= LITTLE_TOLERANCE,
            },
            key_updates: KeyUpdateCount::default(),
        }
    }

    /// The human-readable report.
    pub(crate) fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let l = &self.latency;
        let _ = writeln!(
            s,
            "calls       {} ok, {} failed in {:.2} s",
            self.calls, self.errors, self.elapsed_s
        );
        let _ = writeln!(s, "throughput  {:.0} calls/s", self.throughput);
        let _ = writeln!(
            s,
            "latency     p50 {:.1} µs | p90 {:.1} µs | p99 {:.1} µs | p99.9 {:.1} µs | max {:.1} µs (mean {:.1} µs)",
            l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us, l.mean_us
        );
        if self.errors_by_code.is_empty() {
            let _ = writeln!(s, "errors      none");
        } else {
            let list: Vec<String> = self
                .errors_by_code
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect();
            let _ = writeln!(s, "errors      {}", list.join(", "));
        }
        let k = self.key_updates;
        let _ = writeln!(s, "key updates {} sent, {} received", k.sent, k.received);
        let lt = &self.little;
        let _ = writeln!(
            s,
            "little      in flight {:.2} sampled vs {:.2} = throughput × mean latency ({:.1} % apart){}",
            lt.sampled_in_flight,
            lt.predicted_in_flight,
            lt.disagreement * 100.0,
            if lt.ok {
                ": consistent"
            } else {
                ": DISAGREE - time is spent outside the measured calls"
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally_of(latencies_us: &[u64]) -> Tally {
        let mut t = Tally::default();
        for &l in latencies_us {
            t.ok(Duration::from_micros(l));
        }
        t
    }

    #[test]
    fn percentiles_follow_the_distribution() {
        // 1..=1000 µs, one call each.
        let all: Vec<u64> = (1..=1000).collect();
        let r = Report::new(&tally_of(&all), Duration::from_secs(1), 0.5);
        let l = &r.latency;
        let near = |got: f64, want: f64| (got - want).abs() <= want * 0.002 + 0.001;
        assert!(near(l.p50_us, 500.0), "{}", l.p50_us);
        assert!(near(l.p90_us, 900.0), "{}", l.p90_us);
        assert!(near(l.p99_us, 990.0), "{}", l.p99_us);
        assert!(near(l.p999_us, 999.0), "{}", l.p999_us);
        assert!(near(l.max_us, 1000.0), "{}", l.max_us);
        assert!(near(l.mean_us, 500.5), "{}", l.mean_us);
        assert_eq!(r.calls, 1000);
        assert!((r.throughput - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn littles_law_holds_for_a_closed_loop_and_flags_a_stall() {
        // 4 workers, each call 1 ms, 2 s: 8000 calls, mean in flight 4.
        let mut t = Tally::default();
        for _ in 0..8000 {
            t.ok(Duration::from_millis(1));
        }
        let r = Report::new(&t, Duration::from_secs(2), 4.0);
        assert!(
            (r.little.predicted_in_flight - 4.0).abs() < 0.01,
            "{:?}",
            r.little
        );
        assert!(r.little.ok);
        assert!(r.render().contains("consistent"));
        // The sampler saw 4 in flight, but the calls only account for 2:
        // half the time went somewhere the latency does not show.
        let r = Report::new(&t, Duration::from_secs(4), 4.0);
        assert!((r.little.disagreement - 1.0).abs() < 0.01, "{:?}", r.little);
        assert!(!r.little.ok);
        assert!(r.render().contains("DISAGREE"));
    }

    #[test]
    fn errors_are_counted_by_code_and_merged() {
        let mut a = tally_of(&[10, 20]);
        a.error("UNAVAILABLE");
        let mut b = tally_of(&[30]);
        b.error("UNAVAILABLE");
        b.error("DEADLINE_EXCEEDED");
        a.merge(&b);
        let r = Report::new(&a, Duration::from_secs(1), 0.0);
        assert_eq!(r.calls, 3);
        assert_eq!(r.errors, 3);
        assert_eq!(r.errors_by_code["UNAVAILABLE"], 2);
        assert_eq!(r.errors_by_code["DEADLINE_EXCEEDED"], 1);
        let text = r.render();
        assert!(
            text.contains("DEADLINE_EXCEEDED 1, UNAVAILABLE 2"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["errors_by_code"]["UNAVAILABLE"], 2);
        assert_eq!(json["calls"], 3);
    }

    #[test]
    fn an_empty_run_is_well_defined() {
        let r = Report::new(&Tally::default(), Duration::ZERO, 0.0);
        assert_eq!(r.calls, 0);
        assert_eq!(r.latency.mean_us, 0.0);
        assert!(r.little.ok);
        assert!(r.render().contains("errors      none"));
        let r = Report::new(&Tally::default(), Duration::from_secs(1), 2.0);
        assert!(!r.little.ok);
    }
}
