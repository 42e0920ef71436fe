//! Per-connection budgets against a peer that costs work without making
//! progress: frames per budget window (pings, empty frames, unknown frames,
//! late frames) and resets over the connection's life.

use std::time::{Duration, Instant};

use crate::config::Config;

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
    /// Streams opened when this window's first late frame came (see
    /// [`spend_late`](Self::spend_late)).
    streams_at: Option<u32>,
}

impl Budgets {
    pub(crate) fn new(ping: u32, empty: u32, unknown: u32, late: u32, window: Duration) -> Self {
        Budgets {
            limits: [ping, empty, unknown, late],
            used: [0; 4],
            window,
            started: None,
            streams_at: None,
        }
    }

    /// Spends one unit; `false` means the budget is exhausted.
    pub(crate) fn spend(&mut self, kind: Spend, now: Instant) -> bool {
        self.spend_beyond(kind, now, 0)
    }

    /// Spends one late frame, the budget counting only those beyond one
    /// per stream opened since the window's first late frame (`streams`:
    /// how many the connection has opened so far, both ways). A peer's
    /// `WINDOW_UPDATE` for data it read while the stream's end was on its
    /// way reaches a stream already gone (RFC 9113 6.9 says to expect it),
    /// and a busy transfer makes one for most streams: a peer whose
    /// streams end by the thousand a second is no flood, one that sends
    /// late frames without opening streams still is.
    pub(crate) fn spend_late(&mut self, now: Instant, streams: u32) -> bool {
        self.roll(now);
        let since = streams.saturating_sub(*self.streams_at.get_or_insert(streams));
        self.spend_beyond(Spend::Late, now, since)
    }

    fn spend_beyond(&mut self, kind: Spend, now: Instant, allowance: u32) -> bool {
        self.roll(now);
        let i = kind as usize;
        self.used[i] += 1;
        self.used[i] <= self.limits[i].saturating_add(allowance)
    }

    /// Restarts the counters once the window is over.
    fn roll(&mut self, now: Instant) {
        match self.started {
            Some(t) if now.saturating_duration_since(t) < self.window => {}
            _ => {
                self.started = Some(now);
                self.used = [0; 4];
                self.streams_at = None;
            }
        }
    }
}

/// Every budget of one connection: the per-window frame counters, and the
/// reset counters with their limits.
#[derive(Debug)]
pub(crate) struct Guards {
    pub(crate) rates: Budgets,
    /// Resets we sent because of the peer.
    pub(crate) local_resets: u32,
    local_reset_budget: u32,
    /// Streams the peer reset while they waited in the accept queue.
    pending_accept_resets: usize,
    pending_accept_reset_budget: usize,
}

impl Guards {
    pub(crate) fn new(config: &Config) -> Guards {
        Guards {
            rates: Budgets::new(
                config.ping_budget,
                config.empty_frame_budget,
                config.unknown_frame_budget,
                config.late_frame_budget,
                config.budget_window,
            ),
            local_resets: 0,
            local_reset_budget: config.local_reset_budget,
            pending_accept_resets: 0,
            pending_accept_reset_budget: config.pending_accept_reset_budget,
        }
    }

    /// We reset a stream because of the peer; `false`: too many.
    #[inline]
    pub(crate) fn peer_caused_reset(&mut self) -> bool {
        self.local_resets += 1;
        self.local_resets <= self.local_reset_budget
    }

    /// The peer reset a stream waiting in the accept queue; `false`: too
    /// many are waiting so (rapid reset).
    #[inline]
    pub(crate) fn reset_before_accept(&mut self) -> bool {
        self.pending_accept_resets += 1;
        self.pending_accept_resets <= self.pending_accept_reset_budget
    }

    /// A stream counted by [`reset_before_accept`](Self::reset_before_accept)
    /// was taken from the accept queue.
    #[inline]
    pub(crate) fn taken_after_reset(&mut self) {
        self.pending_accept_resets -= 1;
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
