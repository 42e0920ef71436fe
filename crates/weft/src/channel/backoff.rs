//! Connection backoff: how long to wait after a failed connect, and how
//! long one connect attempt may take.
//!
//! The schedule is gRPC's connection-backoff algorithm
//! (`doc/connection-backoff.md` in grpc/grpc): the first retry waits the
//! base delay, each later one `multiplier` times longer up to the maximum,
//! spread by ±`jitter` so that clients cut off together do not reconnect
//! together. Each attempt may take the longer of the current delay and the
//! minimum connect timeout.

use std::time::Duration;

/// The backoff schedule of reconnect attempts. `Backoff::default()` is
/// gRPC's: base 1 s, multiplier 1.6, jitter 0.2, max 120 s, minimum connect
/// timeout 20 s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    base: Duration,
    multiplier: f64,
    jitter: f64,
    max: Duration,
    min_connect_timeout: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            multiplier: 1.6,
            jitter: 0.2,
            max: Duration::from_secs(120),
            min_connect_timeout: Duration::from_secs(20),
        }
    }
}

impl Backoff {
    /// gRPC's defaults (see the type).
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// The delay after the first failed attempt. Default 1 s.
    #[must_use]
    pub fn base(mut self, d: Duration) -> Backoff {
        self.base = d;
        self
    }

    /// How much longer each further delay is (at least 1). Default 1.6.
    #[must_use]
    pub fn multiplier(mut self, m: f64) -> Backoff {
        self.multiplier = if m.is_finite() { m.max(1.0) } else { 1.0 };
        self
    }

    /// The random spread of each delay after the first, as a fraction of it
    /// (0 to 1). Default 0.2 (±20 %).
    #[must_use]
    pub fn jitter(mut self, j: f64) -> Backoff {
        self.jitter = if j.is_finite() {
            j.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self
    }

    /// The longest delay (before jitter). Default 120 s.
    #[must_use]
    pub fn max(mut self, d: Duration) -> Backoff {
        self.max = d;
        self
    }

    /// The least time one connect attempt (TCP connect and handshake) may
    /// take. Default 20 s.
    #[must_use]
    pub fn min_connect_timeout(mut self, d: Duration) -> Backoff {
        self.min_connect_timeout = d;
        self
    }

    /// The delay before the next attempt after `failures` failed ones in a
    /// row (1 = the first failure), counted from the start of the failed
    /// attempt. `unit` is a random number in `[0, 1)` that picks the jitter.
    pub fn delay(&self, failures: u32, unit: f64) -> Duration {
        let Some(k) = failures.checked_sub(1) else {
            return Duration::ZERO;
        };
        if k == 0 {
            return self.base.min(self.max);
        }
        let grown = self.base.as_secs_f64() * self.multiplier.powi(k.min(1024) as i32);
        let capped = grown.min(self.max.as_secs_f64());
        let spread = capped * self.jitter * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
        Duration::try_from_secs_f64((capped + spread).max(0.0)).unwrap_or(self.max)
    }

    /// How long an attempt that starts after `failures` failed ones may take.
    pub fn connect_timeout(&self, failures: u32) -> Duration {
        // gRPC: max(current deadline, now + MIN_CONNECT_TIMEOUT); the
        // current deadline is the next delay, without its jitter.
        self.min_connect_timeout
            .max(self.delay(failures.saturating_add(1), 0.5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn grpc_schedule_without_jitter() {
        let b = Backoff::new();
        // unit 0.5 is the middle of the jitter range: no spread.
        let got: Vec<f64> = (0..8).map(|n| secs(b.delay(n, 0.5))).collect();
        let want = [0.0, 1.0, 1.6, 2.56, 4.096, 6.5536, 10.48576, 16.777216];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{got:?}");
        }
        // Capped at 120 s from the 12th failure on.
        assert_eq!(b.delay(12, 0.5), Duration::from_secs(120));
        assert_eq!(b.delay(u32::MAX, 0.5), Duration::from_secs(120));
    }

    #[test]
    fn jitter_spreads_by_its_fraction_and_never_the_first_delay() {
        let b = Backoff::new();
        assert_eq!(b.delay(1, 0.0), Duration::from_secs(1));
        assert!((secs(b.delay(2, 0.0)) - 1.6 * 0.8).abs() < 1e-9);
        assert!((secs(b.delay(2, 0.999_999)) - 1.6 * 1.2).abs() < 1e-5);
        let flat = b.jitter(0.0);
        assert_eq!(flat.delay(3, 0.0), flat.delay(3, 0.9));
    }

    #[test]
    fn connect_timeout_is_at_least_the_minimum() {
        let b = Backoff::new();
        assert_eq!(b.connect_timeout(0), Duration::from_secs(20));
        assert_eq!(b.connect_timeout(30), Duration::from_secs(120));
        let short = b.min_connect_timeout(Duration::from_millis(100));
        assert_eq!(short.connect_timeout(0), Duration::from_secs(1));
    }

    #[test]
    fn setters_clamp_nonsense() {
        let b = Backoff::new()
            .multiplier(f64::NAN)
            .jitter(7.0)
            .base(Duration::from_millis(10))
            .max(Duration::from_millis(50));
        assert_eq!(b.delay(1, 0.5), Duration::from_millis(10));
        // multiplier 1: no growth; jitter clamped to 1: between 0 and 2x.
        let d = b.delay(5, 0.0);
        assert_eq!(d, Duration::ZERO);
    }
}
