//! [`RetryBudget`]: the channel's retry budget, tower's `TpsBudget`
//! algorithm with a deposit that reads no clock and takes no lock.
//!
//! Every call deposits, few withdraw (only a failed attempt does), so the
//! deposit is the path that matters. tower's reads the clock and locks a
//! mutex on every deposit to see whether a window ended (about 150
//! instructions a call, a tenth of a `Channel` call's overhead). Here a
//! deposit is one atomic add, and a task rolls the windows when each ends
//! (`roll`): it runs only while the budget holds deposits, so an idle
//! channel has no timer; the next deposit starts it again.
//!
//! What is kept exactly: the amounts (`ratio` of the calls, `min_per_sec`
//! reserve), the ten windows of `ttl / 10` a deposit ages through, and
//! `withdraw`, which still brings the windows up to date itself before it
//! counts (so a late or missing roller never lends more than tower would).
//! What moved: a window now ends on its timer, not at the first deposit
//! after its end (the calls between the two, at most a timer's lateness,
//! count in the window that ended).

use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::lock;

/// Windows a deposit ages through (tower's).
const WINDOWS: u32 = 10;

/// A retry budget shared by a channel's calls: see the module docs.
pub(crate) struct RetryBudget {
    windows: Arc<Windows>,
}

/// The budget's state, shared with its roller task (which holds it
/// weakly: a dropped channel stops it).
struct Windows {
    generation: Mutex<Generation>,
    /// Deposits of the current window (withdrawals subtract).
    writer: AtomicIsize,
    /// The ten last windows' totals.
    slots: Box<[AtomicIsize]>,
    reserve: isize,
    window: Duration,
    deposit_amount: isize,
    withdraw_amount: isize,
    /// Whether a roller task is ending the windows (an atomic, so the
    /// deposit checks it without a lock).
    rolling: AtomicBool,
}

/// The current window: its slot and its start.
#[derive(Debug)]
struct Generation {
    index: usize,
    time: Instant,
}

impl RetryBudget {
    /// Retries may add `retry_percent` of the deposits of the last `ttl`,
    /// plus `min_per_sec` a second. The same arguments and bounds as
    /// tower's `TpsBudget::new` (the builder clamps them).
    pub(crate) fn new(ttl: Duration, min_per_sec: u32, retry_percent: f32) -> RetryBudget {
        debug_assert!((Duration::from_secs(1)..=Duration::from_secs(60)).contains(&ttl));
        debug_assert!((0.0..=1000.0).contains(&retry_percent));
        // The amounts in whole numbers, as tower keeps them: a deposit of
        // 1 and a withdrawal of 1/ratio up to a ratio of 1, above it
        // thousandths.
        let (deposit_amount, withdraw_amount) = if retry_percent == 0.0 {
            (0, 1)
        } else if retry_percent <= 1.0 {
            (1, (1.0 / retry_percent) as isize)
        } else {
            (1000, (1000.0 / retry_percent) as isize)
        };
        let reserve = (min_per_sec as isize)
            .saturating_mul(ttl.as_secs() as isize)
            .saturating_mul(withdraw_amount);
        RetryBudget {
            windows: Arc::new(Windows {
                generation: Mutex::new(Generation {
                    index: 0,
                    time: Instant::now(),
                }),
                writer: AtomicIsize::new(0),
                slots: (0..WINDOWS).map(|_| AtomicIsize::new(0)).collect(),
                reserve,
                window: ttl / WINDOWS,
                deposit_amount,
                withdraw_amount,
                rolling: AtomicBool::new(false),
            }),
        }
    }

    /// Counts one call.
    #[inline]
    pub(crate) fn deposit(&self) {
        let w = &self.windows;
        if !w.rolling.load(Ordering::Relaxed) {
            // First deposit since the budget went idle: bring the windows
            // up to date (as tower's deposit would) before adding to them.
            self.start_rolling();
        }
        w.writer.fetch_add(w.deposit_amount, Ordering::SeqCst);
    }

    /// Takes one retry's worth if the budget has it.
    pub(crate) fn withdraw(&self) -> bool {
        let w = &self.windows;
        w.expire(Instant::now());
        if w.sum() >= w.withdraw_amount {
            w.writer.fetch_sub(w.withdraw_amount, Ordering::SeqCst);
            true
        } else {
            false
        }
    }

    /// Ends stale windows and starts the task that ends the next ones.
    /// Outside a runtime (no task can run) every deposit ends them itself.
    #[cold]
    fn start_rolling(&self) {
        let w = &self.windows;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            w.expire(Instant::now());
            return;
        };
        if w.rolling.swap(true, Ordering::SeqCst) {
            return;
        }
        w.expire(Instant::now());
        runtime.spawn(roll(Arc::downgrade(w)));
    }
}

impl Windows {
    /// Ends the windows that have ended by `now`: the current one's
    /// deposits go to its slot, and the slots of windows passed without a
    /// deposit are emptied. tower's `expire`, step for step.
    fn expire(&self, now: Instant) {
        let mut generation = lock(&self.generation);
        let diff = now.saturating_duration_since(generation.time);
        if diff < self.window {
            return;
        }
        let to_commit = self.writer.swap(0, Ordering::SeqCst);
        self.slots[generation.index].store(to_commit, Ordering::SeqCst);
        let mut diff = diff;
        let mut idx = (generation.index + 1) % self.slots.len();
        while diff > self.window {
            self.slots[idx].store(0, Ordering::SeqCst);
            diff -= self.window;
            idx = (idx + 1) % self.slots.len();
        }
        generation.index = idx;
        generation.time = now;
    }

    /// What may be withdrawn: the windows' deposits, less withdrawals,
    /// plus the reserve.
    fn sum(&self) -> isize {
        let current = self.writer.load(Ordering::SeqCst);
        let windowed = self
            .slots
            .iter()
            .map(|slot| slot.load(Ordering::SeqCst))
            .fold(0, isize::saturating_add);
        current
            .saturating_add(windowed)
            .saturating_add(self.reserve)
    }

    /// Whether no window holds anything (the roller may stop).
    fn is_idle(&self) -> bool {
        self.writer.load(Ordering::SeqCst) == 0
            && self.slots.iter().all(|s| s.load(Ordering::SeqCst) == 0)
    }

    /// When the current window ends.
    fn current_end(&self) -> Instant {
        lock(&self.generation).time + self.window
    }
}

/// Ends each window when it ends, while the budget holds deposits and
/// lives. A deposit that lands as the roller stops waits in the current
/// window until the next deposit starts a roller (which first ages what
/// is stale): at worst a few calls at the end of an idle `ttl` count as
/// older than they are, which lends less, never more.
async fn roll(windows: Weak<Windows>) {
    /// Marks the budget as not rolling however the task ends (its runtime
    /// may drop it), so that the next deposit starts another.
    struct Stopped(Weak<Windows>);
    impl Drop for Stopped {
        fn drop(&mut self) {
            if let Some(w) = self.0.upgrade() {
                w.rolling.store(false, Ordering::SeqCst);
            }
        }
    }
    let _stopped = Stopped(windows.clone());
    loop {
        let Some(end) = windows.upgrade().map(|w| w.current_end()) else {
            return;
        };
        tokio::time::sleep_until(end).await;
        let Some(w) = windows.upgrade() else { return };
        w.expire(Instant::now());
        if w.is_idle() {
            return;
        }
    }
}

impl std::fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = &self.windows;
        f.debug_struct("RetryBudget")
            .field("deposit", &w.deposit_amount)
            .field("withdraw", &w.withdraw_amount)
            .field("balance", &w.sum())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::retry::budget::{Budget, TpsBudget};

    /// Lets the roller run what the clock made due.
    async fn settle() {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }

    async fn advance(ms: u64) {
        tokio::time::advance(Duration::from_millis(ms)).await;
        settle().await;
    }

    // tower's own examples of its budget, unchanged.

    #[tokio::test(start_paused = true)]
    async fn an_empty_budget_lends_nothing() {
        let budget = RetryBudget::new(Duration::from_secs(1), 0, 1.0);
        assert!(!budget.withdraw());
    }

    #[tokio::test(start_paused = true)]
    async fn a_deposit_ages_out_after_its_ttl() {
        let budget = RetryBudget::new(Duration::from_secs(1), 0, 1.0);
        budget.deposit();
        advance(3000).await;
        assert!(!budget.withdraw());
    }

    #[tokio::test(start_paused = true)]
    async fn deposits_count_window_by_window() {
        let budget = RetryBudget::new(Duration::from_secs(1), 0, 0.5);
        budget.deposit();
        budget.deposit();
        advance(901).await;
        assert!(budget.withdraw());
        advance(2001).await;
        budget.deposit();
        advance(301).await;
        budget.deposit();
        advance(801).await;
        budget.deposit();
        assert!(budget.withdraw());
    }

    #[tokio::test(start_paused = true)]
    async fn the_reserve_lends_min_per_sec_for_each_second_of_ttl() {
        let budget = RetryBudget::new(Duration::from_secs(1), 5, 1.0);
        for _ in 0..5 {
            assert!(budget.withdraw());
        }
        assert!(!budget.withdraw());
    }

    /// Deposits, withdrawals and time steps of whole windows, the same
    /// sequence to tower's budget and to this one: every withdrawal must
    /// get the same answer (a deposit reads no clock here, so the windows
    /// end on their timer instead of on the next deposit; on window
    /// boundaries the two agree exactly).
    #[tokio::test(start_paused = true)]
    async fn it_lends_what_towers_budget_lends() {
        for (ttl, min, ratio) in [(1, 0, 0.5), (1, 2, 0.2), (2, 0, 1.0), (1, 0, 5.0)] {
            let ttl = Duration::from_secs(ttl);
            let window = ttl / WINDOWS;
            let ours = RetryBudget::new(ttl, min, ratio);
            let tower = TpsBudget::new(ttl, min, ratio);
            let mut seed = 0x2545_f491_4f6c_dd1d_u64;
            let mut next = |n: u64| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed % n
            };
            for step in 0..400 {
                match next(8) {
                    0..=2 => {
                        for _ in 0..next(6) {
                            ours.deposit();
                            tower.deposit();
                        }
                    }
                    3..=5 => {
                        let (a, b) = (ours.withdraw(), tower.withdraw());
                        assert_eq!(a, b, "step {step} of {ttl:?} {min} {ratio}: {ours:?}");
                    }
                    // Mostly a window, sometimes several (idle: the roller
                    // stops and the next deposit restarts it).
                    6 => {
                        tokio::time::advance(window).await;
                        settle().await;
                    }
                    _ => {
                        tokio::time::advance(window * next(14) as u32).await;
                        settle().await;
                    }
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_roller_stops_when_idle_and_the_next_deposit_restarts_it() {
        let budget = RetryBudget::new(Duration::from_secs(1), 0, 1.0);
        let rolling = |b: &RetryBudget| b.windows.rolling.load(Ordering::SeqCst);
        assert!(!rolling(&budget), "no timer before the first call");
        budget.deposit();
        assert!(rolling(&budget));
        // The deposit ages out over a ttl, window by window; then nothing
        // is left to age and the roller ends.
        advance(500).await;
        assert!(rolling(&budget));
        for _ in 0..12 {
            advance(100).await;
        }
        assert!(!rolling(&budget), "an idle budget keeps no timer");
        assert!(!budget.withdraw(), "the deposit aged out");
        budget.deposit();
        assert!(rolling(&budget));
        advance(150).await;
        assert!(budget.withdraw(), "counted in its window");
    }

    #[test]
    fn outside_a_runtime_each_deposit_ages_the_windows_itself() {
        let budget = RetryBudget::new(Duration::from_secs(1), 0, 1.0);
        budget.deposit();
        assert!(!budget.windows.rolling.load(Ordering::SeqCst));
        assert!(budget.withdraw());
        assert!(!budget.withdraw());
    }
}
