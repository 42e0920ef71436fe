//! The latency histogram: log-spaced buckets, as JSON and as text bars.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Each bucket's upper bound is this factor times the previous one.
const GROWTH: f64 = 1.5;
/// Width of the longest bar, in characters.
const BAR_WIDTH: usize = 40;

/// One bucket: calls with a latency up to `upto_us` (and above the
/// previous bucket's bound).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Bucket {
    /// Upper bound, µs.
    pub(crate) upto_us: f64,
    /// Calls in it.
    pub(crate) count: u64,
}

/// The buckets of `h` (ns), from the first non-empty to the last.
pub(crate) fn buckets(h: &Histogram<u64>) -> Vec<Bucket> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<Bucket> = h
        .iter_log(1000, GROWTH)
        .map(|v| Bucket {
            upto_us: v.value_iterated_to() as f64 / 1000.0,
            count: v.count_since_last_iteration(),
        })
        .skip_while(|b| b.count == 0)
        .collect();
    while out.last().is_some_and(|b| b.count == 0) {
        out.pop();
    }
    out
}

/// Text bars, one line per bucket.
pub(crate) fn render(buckets: &[Bucket]) -> String {
    use std::fmt::Write as _;
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let top = buckets.iter().map(|b| b.count).max().unwrap_or(0);
    let mut s = String::new();
    if total == 0 {
        return s;
    }
    let _ = writeln!(s, "histogram   (successful calls)");
    for b in buckets {
        let len = (b.count as f64 / top as f64 * BAR_WIDTH as f64).round() as usize;
        let bar = if len == 0 && b.count > 0 {
            "▏".to_string()
        } else {
            "█".repeat(len)
        };
        let _ = writeln!(
            s,
            "  ≤ {:>10.1} µs  {:<width$}  {} ({:.1} %)",
            b.upto_us,
            bar,
            b.count,
            b.count as f64 / total as f64 * 100.0,
            width = BAR_WIDTH
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::new_histogram;

    #[test]
    fn buckets_cover_every_call_and_bars_scale() {
        let mut h = new_histogram();
        for _ in 0..100 {
            h.record(100_000).unwrap(); // 100 µs
        }
        for _ in 0..10 {
            h.record(1_000_000).unwrap(); // 1 ms
        }
        let b = buckets(&h);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 110);
        assert!(
            b[0].count == 100 && b[0].upto_us >= 100.0 && b[0].upto_us < 150.0,
            "{b:?}"
        );
        assert_eq!(b.last().unwrap().count, 10);
        let text = render(&b);
        let full = "█".repeat(BAR_WIDTH);
        assert!(text.contains(&full), "{text}");
        let tenth = text.lines().find(|l| l.ends_with(" 10 (9.1 %)")).unwrap();
        assert_eq!(tenth.matches('█').count(), BAR_WIDTH / 10, "{text}");
        assert!(buckets(&new_histogram()).is_empty());
        assert_eq!(render(&[]), "");
    }
}
