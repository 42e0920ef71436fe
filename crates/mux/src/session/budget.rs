//! Per-connection budgets for frames that cost work but carry no progress.

use std::time::{Duration, Instant};

/// The kinds of frame a peer may only send so many of per budget window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spend {
    /// `PING` without `ACK`.
    Ping,
    /// Empty `DATA` or a tiny stream `WINDOW_UPDATE`.
    Empty,
    /// Unknown frame type or unknown flag bits.
    Unknown,
    /// A frame for a stream that is already closed.
    Late,
}

/// Counters that restart every `window`; each kind has its own limit.
#[derive(Debug)]
pub(crate) struct Budgets {
    limits: [u32; 4],
    used: [u32; 4],
    window: Duration,
    started: Option<Instant>,
}

impl Budgets {
    pub(crate) fn new(ping: u32, empty: u32, unknown: u32, late: u32, window: Duration) -> Self {
        Budgets {
            limits: [ping, empty, unknown, late],
            used: [0; 4],
            window,
            started: None,
        }
    }

    /// Spends one unit; `false` means the budget is exhausted.
    pub(crate) fn spend(&mut self, kind: Spend, now: Instant) -> bool {
        match self.started {
            Some(t) if now.saturating_duration_since(t) < self.window => {}
            _ => {
                self.started = Some(now);
                self.used = [0; 4];
            }
        }
        let i = kind as usize;
        self.used[i] += 1;
        self.used[i] <= self.limits[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_restarts_each_window() {
        let t0 = Instant::now();
        let mut b = Budgets::new(2, 1, 1, 1, Duration::from_secs(1));
        assert!(b.spend(Spend::Ping, t0));
        assert!(b.spend(Spend::Ping, t0));
        assert!(!b.spend(Spend::Ping, t0));
        assert!(b.spend(Spend::Empty, t0), "kinds are independent");
        assert!(b.spend(Spend::Ping, t0 + Duration::from_secs(1)));
    }
}
