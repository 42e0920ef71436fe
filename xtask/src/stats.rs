//! Medians, spreads and the units they are printed in.

/// The median and range of several samples of one figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Summary {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) samples: usize,
}

impl Summary {
    /// `None` for no samples. The median of an even count is the mean of the
    /// two middle samples.
    pub(crate) fn of(samples: &[f64]) -> Option<Self> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len().is_multiple_of(2) {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        } else {
            sorted[mid]
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            samples: sorted.len(),
        })
    }

    /// Half the range, as a percentage of the median: `±x %`.
    pub(crate) fn spread_percent(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / 2.0 / self.median * 100.0
        }
    }
}

/// Nanoseconds with three significant digits in the unit that fits:
/// `595 ns`, `1.77 µs`, `33.4 µs`, `1.20 ms`, `2.00 s`.
pub(crate) fn format_ns(ns: f64) -> String {
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    format!("{} {unit}", three_digits(value))
}

/// Bytes per second, decimal units: `2.19 GB/s`.
pub(crate) fn format_rate(bytes_per_second: f64) -> String {
    let (value, unit) = if bytes_per_second < 1e6 {
        (bytes_per_second / 1e3, "KB/s")
    } else if bytes_per_second < 1e9 {
        (bytes_per_second / 1e6, "MB/s")
    } else {
        (bytes_per_second / 1e9, "GB/s")
    };
    format!("{} {unit}", three_digits(value))
}

/// Three significant digits, no exponent (for values from 0.001 to 999 999).
pub(crate) fn three_digits(value: f64) -> String {
    let decimals = if value >= 100.0 || value == 0.0 {
        0
    } else if value >= 10.0 {
        1
    } else if value >= 1.0 {
        2
    } else {
        3
    };
    format!("{value:.decimals$}")
}

/// A count that may be fractional (a mean over iterations): `0`, `6`, `10.5`.
pub(crate) fn format_count(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).unwrap().median, 2.0);
        assert_eq!(Summary::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn spread_is_half_the_range_over_the_median() {
        let s = Summary::of(&[90.0, 100.0, 110.0]).unwrap();
        assert_eq!((s.min, s.max, s.samples), (90.0, 110.0, 3));
        assert!((s.spread_percent() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn durations_use_three_significant_digits() {
        assert_eq!(format_ns(595.0), "595 ns");
        assert_eq!(format_ns(1770.0), "1.77 µs");
        assert_eq!(format_ns(33_400.0), "33.4 µs");
        assert_eq!(format_ns(1_200_000.0), "1.20 ms");
        assert_eq!(format_rate(2_187_000_000.0), "2.19 GB/s");
        assert_eq!(format_count(6.0), "6");
        assert_eq!(format_count(10.5), "10.50");
    }
}
