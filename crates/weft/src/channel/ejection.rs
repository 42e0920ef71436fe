//! The shared side of outlier detection: one [`Detector`] per balanced
//! endpoint, fed by its calls, and one [`Census`] per balancer that keeps
//! ejections to at most half the endpoints. The rules themselves are the
//! pure state machine in [`super::outlier`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::lock;
use super::outlier::{Change, Outcome, Outlier, Policy, most_ejected};

/// How many endpoints a balancer has, and how many are ejected.
#[derive(Debug, Default)]
pub(crate) struct Census {
    endpoints: AtomicUsize,
    ejected: AtomicUsize,
    /// The latest connect error of any endpoint (the endpoint's name, the
    /// error): what a call that found no endpoint ready in time reports.
    /// Cleared when that endpoint connects.
    connect_error: Mutex<Option<(String, String)>>,
}

impl Census {
    /// The latest connect error, naming its endpoint.
    pub(crate) fn connect_error(&self) -> Option<String> {
        let last = lock(&self.connect_error);
        last.as_ref().map(|(name, e)| format!("{name}: {e}"))
    }

    /// The endpoints counted (their detectors alive).
    #[cfg(test)]
    pub(crate) fn endpoints(&self) -> usize {
        self.endpoints.load(Ordering::Acquire)
    }

    /// Takes one ejection place if fewer than the most allowed are taken.
    fn take_room(&self) -> bool {
        let most = most_ejected(self.endpoints.load(Ordering::Acquire));
        self.ejected
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < most).then_some(n + 1)
            })
            .is_ok()
    }

    fn give_back(&self) {
        let _ = self
            .ejected
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

/// One endpoint's detector, shared by its pool and its calls.
#[derive(Debug)]
pub(crate) struct Detector {
    outlier: Mutex<Outlier>,
    census: Arc<Census>,
    /// A success needs no lock (the state is plainly healthy).
    clean: AtomicBool,
    /// Ejected: the balancer must ask when it ends.
    out: AtomicBool,
}

impl Detector {
    /// A detector counted in `census` (until dropped).
    pub(crate) fn new(census: Arc<Census>, policy: Policy) -> Detector {
        census.endpoints.fetch_add(1, Ordering::AcqRel);
        Detector {
            outlier: Mutex::new(Outlier::new(policy, Instant::now())),
            census,
            clean: AtomicBool::new(true),
            out: AtomicBool::new(false),
        }
    }

    /// Records how a connect of endpoint `name` went.
    pub(crate) fn connected(&self, name: &str, outcome: Result<(), &str>) {
        let mut last = lock(&self.census.connect_error);
        match outcome {
            Err(e) => *last = Some((name.to_owned(), e.to_owned())),
            Ok(()) if last.as_ref().is_some_and(|(n, _)| n == name) => *last = None,
            Ok(()) => {}
        }
    }

    /// Records how a call ended.
    pub(crate) fn record(&self, outcome: Outcome) {
        if outcome == Outcome::Success && self.clean.load(Ordering::Relaxed) {
            return;
        }
        let mut o = lock(&self.outlier);
        let change = o.record(Instant::now(), outcome, || self.census.take_room());
        self.apply(&o, change);
    }

    /// The end of the current ejection, if the endpoint is ejected now.
    pub(crate) fn ejected_until(&self) -> Option<Instant> {
        if !self.out.load(Ordering::Relaxed) {
            return None;
        }
        let mut o = lock(&self.outlier);
        let (until, change) = o.ejected_until(Instant::now());
        self.apply(&o, change);
        until
    }

    /// The failure penalty added to the endpoint's load.
    pub(crate) fn penalty(&self) -> f64 {
        if self.clean.load(Ordering::Relaxed) {
            return 0.0;
        }
        lock(&self.outlier).penalty(Instant::now())
    }

    /// Mirrors the state into the lock-free flags and the census; called
    /// with the lock held, so the flags follow the state's order.
    fn apply(&self, o: &Outlier, change: Change) {
        match change {
            Change::Ejected => self.out.store(true, Ordering::Relaxed),
            Change::Returned => {
                self.out.store(false, Ordering::Relaxed);
                self.census.give_back();
            }
            Change::None => {}
        }
        // The penalty fades with time, not with a success: stay on the
        // locked path while any of it is left.
        let clean = o.is_clean() && o.penalty(Instant::now()) < PENALTY_GONE;
        self.clean.store(clean, Ordering::Relaxed);
    }
}

/// A penalty below this (in calls in flight) no longer counts.
const PENALTY_GONE: f64 = 0.01;

impl Drop for Detector {
    fn drop(&mut self) {
        self.census.endpoints.fetch_sub(1, Ordering::AcqRel);
        if self.out.load(Ordering::Relaxed) {
            self.census.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn at_most_half_of_the_endpoints_are_ejected_and_a_dropped_one_frees_its_place() {
        let census = Arc::new(Census::default());
        let d: Vec<Detector> = (0..3)
            .map(|_| Detector::new(census.clone(), Policy::default()))
            .collect();
        let fail = |d: &Detector| (0..5).for_each(|_| d.record(Outcome::Failure));
        fail(&d[0]);
        fail(&d[1]);
        assert!(d[0].ejected_until().is_some());
        assert!(d[1].ejected_until().is_none(), "one of three at most");
        assert!(d[1].penalty() > 0.0, "but its failures weigh");
        let mut d = d;
        drop(d.remove(0));
        // Two endpoints: one may be out; the next failure of d[1] (now
        // d[0]) takes the freed place.
        d[0].record(Outcome::Failure);
        assert!(d[0].ejected_until().is_some());
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        assert!(d[0].ejected_until().is_none(), "back on probation");
        assert_eq!(census.ejected.load(Ordering::Relaxed), 0);
    }
}
