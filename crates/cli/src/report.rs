//! Load-test arithmetic: latency figures (hdrhistogram), throughput,
//! errors by status code, and a Little's-law cross-check.
//!
//! Little's law says the mean number of calls in flight equals the rate
//! at which calls complete times their mean time in flight. The load
//! generator measures both sides independently: each call's time (ok or
//! failed), and the in-flight count by sampling a counter on a timer.
//! Failed calls are in flight too, so the prediction counts *every*
//! completed call, not only the successful ones. When the two sides
//! disagree by more than [`LITTLE_TOLERANCE`], time is being spent outside
//! the measured calls (a stalled generator, a call cut at the end of the
//! run), so the latency figures understate what callers see.
//!
//! In open-loop mode (`--rate`) a call's latency counts from its intended
//! start, so it includes time queued in the generator; the in-flight
//! counter only covers the time on the wire, and the law is checked on
//! the service time instead (see [`Tally::record`]).

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use weft::transform::KeyUpdates;

/// Relative disagreement above which the Little's-law check is flagged.
pub(crate) const LITTLE_TOLERANCE: f64 = 0.15;

/// Latencies recorded in nanoseconds, 1 ns to 10 minutes, 3 significant
/// digits (a fixed ~200 KiB per histogram).
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("static histogram bounds are valid")
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// What one worker (or the whole run, after merging) measured.
#[derive(Debug, Clone)]
pub(crate) struct Tally {
    /// Latency of every successful call, ns (from the intended start).
    pub(crate) latency: Histogram<u64>,
    /// Time on the wire of every completed call, ok or failed, ns: the
    /// service side of Little's law.
    pub(crate) service: Histogram<u64>,
    /// Failed calls by status code name.
    pub(crate) errors: BTreeMap<&'static str, u64>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            latency: new_histogram(),
            service: new_histogram(),
            errors: BTreeMap::new(),
        }
    }
}

impl Tally {
    /// Records one completed call: its outcome, its latency as the caller
    /// sees it (from the intended start) and its time on the wire.
    pub(crate) fn record(
        &mut self,
        outcome: Result<(), &'static str>,
        latency: Duration,
        service: Duration,
    ) {
        self.service.saturating_record(ns(service));
        match outcome {
            Ok(()) => self.latency.saturating_record(ns(latency)),
            Err(code) => *self.errors.entry(code).or_default() += 1,
        }
    }

    /// Records one successful call that spent all of `latency` on the wire.
    #[cfg(test)]
    pub(crate) fn ok(&mut self, latency: Duration) {
        self.record(Ok(()), latency, latency);
    }

    /// Records one failed call under its status code name.
    #[cfg(test)]
    pub(crate) fn error(&mut self, code: &'static str) {
        self.record(Err(code), Duration::ZERO, Duration::from_nanos(1));
    }

    /// Adds another tally into this one.
    pub(crate) fn merge(&mut self, other: &Tally) {
        // All histograms share the same bounds, so adding cannot fail.
        self.latency
            .add(&other.latency)
            .expect("histograms with equal bounds");
        self.service
            .add(&other.service)
            .expect("histograms with equal bounds");
        for (code, n) in &other.errors {
            *self.errors.entry(code).or_default() += n;
        }
    }
}

/// Latency figures of the successful calls, microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Latency {
    /// Smallest.
    pub(crate) min_us: f64,
    /// Mean.
    pub(crate) mean_us: f64,
    /// Standard deviation.
    pub(crate) stddev_us: f64,
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

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl Latency {
    /// The figures of `h`, or `None` when it holds nothing (no call
    /// succeeded: there is no latency to report, not a latency of 0).
    pub(crate) fn of(h: &Histogram<u64>) -> Option<Latency> {
        if h.is_empty() {
            return None;
        }
        let q = |p: f64| us(h.value_at_quantile(p));
        Some(Latency {
            min_us: us(h.min()),
            mean_us: h.mean() / 1000.0,
            stddev_us: h.stdev() / 1000.0,
            p50_us: q(0.50),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: us(h.max()),
        })
    }
}

/// The Little's-law cross-check.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Little {
    /// Mean in-flight calls, sampled.
    pub(crate) sampled_in_flight: f64,
    /// Completed calls (ok and failed) per second × their mean time in flight.
    pub(crate) predicted_in_flight: f64,
    /// |sampled − predicted| / predicted.
    pub(crate) disagreement: f64,
    /// Whether the disagreement is within [`LITTLE_TOLERANCE`].
    pub(crate) ok: bool,
}

impl Little {
    /// The check for `completed` calls of mean time `mean_ns` over `secs`.
    pub(crate) fn check(sampled: f64, completed: u64, mean_ns: f64, secs: f64) -> Little {
        let predicted = completed as f64 / secs.max(f64::MIN_POSITIVE) * mean_ns / 1e9;
        let disagreement = if predicted > 0.0 {
            (sampled - predicted).abs() / predicted
        } else if sampled > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        Little {
            sampled_in_flight: sampled,
            predicted_in_flight: predicted,
            disagreement,
            ok: disagreement <= LITTLE_TOLERANCE,
        }
    }
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
    /// Latency of successful calls; `None` when none succeeded.
    pub(crate) latency: Option<Latency>,
    /// Failed calls by status code name.
    pub(crate) errors_by_code: BTreeMap<&'static str, u64>,
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

impl KeyUpdateCount {
    /// The key updates this process sent and received since `before` was
    /// read from [`weft::transform::key_updates`].
    pub(crate) fn since(before: KeyUpdates) -> KeyUpdateCount {
        let now = weft::transform::key_updates();
        KeyUpdateCount {
            sent: now.sent.saturating_sub(before.sent),
            received: now.received.saturating_sub(before.received),
        }
    }

    /// The report line.
    pub(crate) fn render(&self) -> String {
        format!(
            "key updates {} sent, {} received\n",
            self.sent, self.received
        )
    }
}

impl Report {
    /// Builds the report from the merged tally, the window's length and the
    /// mean of the sampled in-flight counter.
    pub(crate) fn new(tally: &Tally, elapsed: Duration, sampled_in_flight: f64) -> Report {
        let calls = tally.latency.len();
        let errors: u64 = tally.errors.values().sum();
        let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        let s = &tally.service;
        let mean_service = if s.is_empty() { 0.0 } else { s.mean() };
        Report {
            calls,
            errors,
            elapsed_s: elapsed.as_secs_f64(),
            throughput: calls as f64 / secs,
            latency: Latency::of(&tally.latency),
            errors_by_code: tally.errors.clone(),
            little: Little::check(sampled_in_flight, s.len(), mean_service, secs),
            key_updates: KeyUpdateCount::default(),
        }
    }

    /// Failed calls over all completed calls (0 when none completed).
    pub(crate) fn error_rate(&self) -> f64 {
        let all = self.calls + self.errors;
        if all == 0 {
            0.0
        } else {
            self.errors as f64 / all as f64
        }
    }

    /// The human-readable summary.
    pub(crate) fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "calls       {} ok, {} failed in {:.2} s",
            self.calls, self.errors, self.elapsed_s
        );
        let _ = writeln!(s, "throughput  {:.0} calls/s", self.throughput);
        match &self.latency {
            Some(l) => {
                let _ = writeln!(
                    s,
                    "latency     p50 {:.1} µs | p90 {:.1} µs | p99 {:.1} µs | p99.9 {:.1} µs | max {:.1} µs",
                    l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
                );
                let _ = writeln!(
                    s,
                    "            min {:.1} µs | mean {:.1} µs | stddev {:.1} µs",
                    l.min_us, l.mean_us, l.stddev_us
                );
            }
            None => {
                let _ = writeln!(s, "latency     none: no call succeeded");
            }
        }
        if self.errors_by_code.is_empty() {
            let _ = writeln!(s, "errors      none");
        } else {
            let list: Vec<String> = self
                .errors_by_code
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect();
            let _ = writeln!(
                s,
                "errors      {} ({:.1} % of calls)",
                list.join(", "),
                self.error_rate() * 100.0
            );
        }
        s += &self.key_updates.render();
        let lt = &self.little;
        let _ = writeln!(
            s,
            "little      in flight {:.2} sampled vs {:.2} = completed/s × mean time in flight ({:.1} % apart){}",
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
        let l = r.latency.as_ref().unwrap();
        let near = |got: f64, want: f64| (got - want).abs() <= want * 0.002 + 0.001;
        assert!(near(l.min_us, 1.0), "{}", l.min_us);
        assert!(near(l.p50_us, 500.0), "{}", l.p50_us);
        assert!(near(l.p90_us, 900.0), "{}", l.p90_us);
        assert!(near(l.p99_us, 990.0), "{}", l.p99_us);
        assert!(near(l.p999_us, 999.0), "{}", l.p999_us);
        assert!(near(l.max_us, 1000.0), "{}", l.max_us);
        assert!(near(l.mean_us, 500.5), "{}", l.mean_us);
        // The standard deviation of 1..=1000 is ~288.7.
        assert!((l.stddev_us - 288.7).abs() < 1.0, "{}", l.stddev_us);
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
    fn failed_calls_count_in_littles_law() {
        // 2 workers for 1 s: 1000 ok calls of 1 ms and 1000 failed calls of
        // 1 ms. Both kinds were in flight: 2 on average.
        let mut t = Tally::default();
        for _ in 0..1000 {
            t.ok(Duration::from_millis(1));
            t.record(
                Err("UNAVAILABLE"),
                Duration::from_millis(1),
                Duration::from_millis(1),
            );
        }
        let r = Report::new(&t, Duration::from_secs(1), 2.0);
        assert!(r.little.ok, "{:?}", r.little);
        assert!((r.error_rate() - 0.5).abs() < 1e-9);
        assert!(r.render().contains("UNAVAILABLE 1000 (50.0 % of calls)"));
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
    fn a_run_where_every_call_failed_reports_no_latency() {
        let mut t = Tally::default();
        for _ in 0..10 {
            t.error("UNAVAILABLE");
        }
        let r = Report::new(&t, Duration::from_secs(1), 0.0);
        assert!(r.latency.is_none());
        let text = r.render();
        assert!(
            text.contains("latency     none: no call succeeded"),
            "{text}"
        );
        assert!(!text.contains("0.0 µs"), "{text}");
        assert_eq!(
            serde_json::to_value(&r).unwrap()["latency"],
            serde_json::Value::Null
        );
    }

    #[test]
    fn an_empty_run_is_well_defined() {
        let r = Report::new(&Tally::default(), Duration::ZERO, 0.0);
        assert_eq!(r.calls, 0);
        assert!(r.latency.is_none());
        assert!(r.little.ok);
        assert_eq!(r.error_rate(), 0.0);
        assert!(r.render().contains("errors      none"));
        let r = Report::new(&Tally::default(), Duration::from_secs(1), 2.0);
        assert!(!r.little.ok);
    }
}
