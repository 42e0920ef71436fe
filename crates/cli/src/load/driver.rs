//! Runs one measured phase: `concurrency` workers keep calls going (back
//! to back, or paced to a rate) until the phase's end, while a sampler
//! thread reads the in-flight counter for the Little's-law check.
//!
//! Before the phase's clock starts, one unmeasured call per worker
//! ([`prime`]) brings up the connections the channel opens lazily, as
//! wrk2 and ghz connect before their first measured request. Without it
//! an open loop charges every call scheduled while the first connection
//! is being made with that wait, from its intended start: tens of
//! milliseconds of backlog at the start of the run, which dominated the
//! open loop's p99 (205–292 ms at half the closed-loop throughput). The
//! workers' tallies are built before the clock starts too (see
//! `Ledger`).
//!
//! What keeps a phase from hanging, whatever the calls do:
//! - at the phase's end (a timer of its own, not a check made between
//!   calls) no new call starts; calls in flight get [`DRAIN`] to finish,
//!   uncounted, then every call still running is dropped (its stream
//!   reset), since each call races the phase's cut signal. Draining first
//!   keeps a sweep's connection healthy: resetting dozens of streams at
//!   once looks like a rapid-reset attack to the server, which closes the
//!   connection (`ENHANCE_YOUR_CALM`);
//! - a worker yields to the runtime through the cooperative budget after
//!   every call, so calls that fail on their first poll (and never wait)
//!   cannot pin the runtime's threads and starve the stop timer;
//! - when an outage (calls failing `UNAVAILABLE`, then none sent since
//!   succeeding: see [`super::outage`]) has lasted [`LOST_AFTER`] (the
//!   server is gone and reconnecting fails), the phase ends with
//!   [`Ended::ConnectionLost`] instead of waiting until its end. A shorter
//!   outage (a server restart) is reported, and the run goes on.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::outage::{Outage, Outages};
use super::pace::{self, Pace};
use super::progress::Progress;
use super::series::{Second, SecondTally};
use crate::report::Tally;
use weft::Code;

/// How long calls in flight at the end of a phase may take to finish
/// before they are cut.
pub(crate) const DRAIN: Duration = Duration::from_secs(1);

/// How long an outage may last before the server counts as gone: long
/// enough for a restart, short enough that a long run against a dead
/// server does not wait out its duration.
pub(crate) const LOST_AFTER: Duration = Duration::from_secs(10);

/// Longest the unmeasured calls that open a phase ([`prime`]) may take;
/// past it (a stopped server) the phase starts anyway.
pub(crate) const PRIME_WITHIN: Duration = Duration::from_millis(500);

/// How often the in-flight counter is sampled (from a dedicated thread).
const SAMPLE_EVERY: Duration = Duration::from_millis(1);

/// One call of the load, as a worker sees it.
pub(crate) trait Caller: Send + Sync + 'static {
    /// Makes one call: `Err` carries the status code name.
    fn call(&self) -> impl Future<Output = Result<(), &'static str>> + Send + '_;

    /// Resolves when a connection the calls run on is lost: an outage
    /// starts even if no call fails (calls the server provably did not
    /// process are resent, and wait for the reconnect). Default: never.
    fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        std::future::pending()
    }
}

/// When a phase ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StopAt {
    /// After this long.
    After(Duration),
    /// Once this many calls were started (and have finished).
    Calls(u64),
}

/// How a phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "ended")]
pub(crate) enum Ended {
    /// It ran its course.
    Completed,
    /// The server went away this many seconds in and stayed away for
    /// [`LOST_AFTER`]: an outage that long ends the phase.
    ConnectionLost {
        /// Seconds into the phase.
        after_s: f64,
    },
}

/// One phase to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Phase {
    /// Workers.
    pub(crate) concurrency: u32,
    /// Closed or open loop.
    pub(crate) pace: Pace,
    /// When it ends.
    pub(crate) stop: StopAt,
}

/// What a phase measured.
#[derive(Debug)]
pub(crate) struct Measured {
    /// Every worker's tally, merged.
    pub(crate) tally: Tally,
    /// One entry per second of the phase.
    pub(crate) series: Vec<Second>,
    /// Wall time from the first call to the end.
    pub(crate) elapsed: Duration,
    /// Time-weighted mean of the sampled in-flight counter.
    pub(crate) mean_in_flight: f64,
    /// How it ended.
    pub(crate) ended: Ended,
    /// Open loop: the latest the pacer released a slot.
    pub(crate) pacer_late: Option<Duration>,
    /// The stretches when the server could not be reached.
    pub(crate) outages: Vec<Outage>,
}

/// State the workers of one phase share.
#[derive(Debug)]
struct Shared {
    in_flight: AtomicU64,
    issued: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    /// No new calls.
    stop: CancellationToken,
    /// Calls in flight are dropped.
    cut: CancellationToken,
    /// Open loop: one permit per call slot that is due (see `pace::pacer`).
    slots: Option<Arc<Semaphore>>,
    start: Instant,
    /// Per-second figures, flushed by each worker when its second changes.
    series: Mutex<Vec<Second>>,
    outages: Mutex<Outages>,
    /// Mirrors `outages.is_down()`, so that a success outside an outage
    /// takes no lock.
    down: AtomicBool,
}

impl Shared {
    fn flush(&self, s: &SecondTally) {
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        s.flush_into(&mut series);
    }

    /// Follows outages: a call sent at `sent` ended at `done` with
    /// `outcome`.
    fn watch(&self, sent: Instant, done: Instant, outcome: Result<(), &'static str>) {
        let unavailable = outcome == Err(Code::UNAVAILABLE.name());
        if !unavailable && !self.down.load(Ordering::Relaxed) {
            return;
        }
        let mut o = self.outages.lock().unwrap_or_else(|e| e.into_inner());
        let at = done - self.start;
        match outcome {
            Ok(()) => o.succeeded(sent.saturating_duration_since(self.start), at),
            Err(_) => o.failed(at, unavailable),
        }
        self.down.store(o.is_down(), Ordering::Relaxed);
    }

    /// The connection was lost at `at`.
    fn lost(&self, at: Instant) {
        let mut o = self.outages.lock().unwrap_or_else(|e| e.into_inner());
        o.lost(at.saturating_duration_since(self.start));
        self.down.store(o.is_down(), Ordering::Relaxed);
    }

    /// When the outage under way started, if one is.
    fn down_since(&self) -> Option<Duration> {
        if !self.down.load(Ordering::Relaxed) {
            return None;
        }
        let o = self.outages.lock().unwrap_or_else(|e| e.into_inner());
        o.down_since()
    }
}

/// What a worker records into, made before the phase's clock starts: a
/// tally's histograms are about half a megabyte, and 64 workers zeroing
/// theirs at their first poll held up the first calls by tens of
/// milliseconds.
struct Ledger {
    tally: Tally,
    second: SecondTally,
}

async fn worker<C: Caller>(
    caller: Arc<C>,
    sh: Arc<Shared>,
    pace: Pace,
    stop: StopAt,
    ledger: Ledger,
) -> Tally {
    let Ledger {
        mut tally,
        mut second,
    } = ledger;
    let limit = match stop {
        StopAt::Calls(n) => Some(n),
        StopAt::After(_) => None,
    };
    let end = match stop {
        StopAt::After(d) => Some(sh.start + d),
        StopAt::Calls(_) => None,
    };
    loop {
        if sh.stop.is_cancelled() {
            break;
        }
        if let Some(slots) = &sh.slots {
            // Open loop: wait until the pacer has released a slot.
            tokio::select! {
                biased;
                _ = sh.stop.cancelled() => break,
                p = slots.acquire() => match p {
                    Ok(p) => p.forget(),
                    Err(_) => break,
                },
            }
        }
        let i = sh.issued.fetch_add(1, Ordering::Relaxed);
        if limit.is_some_and(|n| i >= n) {
            break;
        }
        let intended = pace.intended(sh.start, i);
        if end.is_some_and(|e| intended >= e) {
            break;
        }
        let sent = Instant::now();
        sh.in_flight.fetch_add(1, Ordering::Relaxed);
        let outcome = tokio::select! {
            biased;
            _ = sh.cut.cancelled() => None,
            r = caller.call() => Some(r),
        };
        sh.in_flight.fetch_sub(1, Ordering::Relaxed);
        // A call cut short by the end of the phase is not counted, nor one
        // that completed after it (the window is the phase's duration).
        let Some(outcome) = outcome else { break };
        let done = Instant::now();
        if end.is_some_and(|e| done >= e) {
            break;
        }
        tally.record(outcome, done - intended, done - sent);
        second.record(done - sh.start, outcome, done - intended, |s| sh.flush(s));
        sh.completed.fetch_add(1, Ordering::Relaxed);
        if outcome.is_err() {
            sh.failed.fetch_add(1, Ordering::Relaxed);
        }
        sh.watch(sent, done, outcome);
        // Calls that complete without waiting (a local failure, a ready
        // response) still give the runtime its turn.
        tokio::task::coop::consume_budget().await;
    }
    sh.flush(&second);
    tally
}

/// Samples the in-flight counter from its own OS thread, so the samples
/// are not biased by the runtime being busy exactly when calls complete.
/// Returns the time-weighted mean once `done` is set.
fn sampler(sh: Arc<Shared>, done: Arc<AtomicBool>) -> std::thread::JoinHandle<f64> {
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let mut last = start;
        let mut weighted = 0.0f64;
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(SAMPLE_EVERY);
            let now = std::time::Instant::now();
            let n = sh.in_flight.load(Ordering::Relaxed);
            weighted += n as f64 * (now - last).as_secs_f64();
            last = now;
        }
        let covered = (last - start).as_secs_f64();
        if covered > 0.0 {
            weighted / covered
        } else {
            0.0
        }
    })
}

/// `Some(when it went away)` once an outage that began at `down_since`
/// has lasted [`LOST_AFTER`] at `at`.
fn gone(down_since: Option<Duration>, at: Duration) -> Option<Duration> {
    down_since.filter(|&since| at.saturating_sub(since) >= LOST_AFTER)
}

/// One unmeasured call per worker, all at once, spread over `callers` as
/// the workers are: the connections are up (and their first calls paid
/// for) before a phase's clock starts. Returns after they all ended or
/// after `within` (calls still running then are dropped).
async fn prime<C: Caller>(callers: &[Arc<C>], concurrency: u32, within: Duration) {
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..concurrency as usize {
        let caller = callers[i % callers.len()].clone();
        calls.spawn(async move {
            let _ = caller.call().await;
        });
    }
    let all = async { while calls.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(within, all).await;
}

/// Runs `phase` with workers spread over `callers`.
pub(crate) async fn drive<C: Caller>(
    phase: &Phase,
    callers: &[Arc<C>],
    progress: &mut Progress,
) -> Measured {
    let within = match phase.stop {
        StopAt::After(d) => PRIME_WITHIN.min(d),
        StopAt::Calls(_) => PRIME_WITHIN,
    };
    prime(callers, phase.concurrency, within).await;
    let ledgers: Vec<Ledger> = (0..phase.concurrency)
        .map(|_| Ledger {
            tally: Tally::default(),
            second: SecondTally::default(),
        })
        .collect();
    let sh = Arc::new(Shared {
        in_flight: AtomicU64::new(0),
        issued: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        stop: CancellationToken::new(),
        cut: CancellationToken::new(),
        slots: phase.pace.per_second().map(|_| Arc::new(Semaphore::new(0))),
        start: Instant::now(),
        series: Mutex::new(Vec::new()),
        outages: Mutex::default(),
        down: AtomicBool::new(false),
    });
    let sampling_done = Arc::new(AtomicBool::new(false));
    let sampling = sampler(sh.clone(), sampling_done.clone());
    let pacing = match (phase.pace, &sh.slots) {
        (Pace::Open { per_second }, Some(slots)) => Some(pace::pacer(
            per_second,
            sh.start,
            phase.stop,
            slots.clone(),
            sh.stop.clone(),
        )),
        _ => None,
    };
    let watcher = {
        let (caller, sh) = (callers[0].clone(), sh.clone());
        tokio::spawn(async move {
            loop {
                caller.lost().await;
                sh.lost(Instant::now());
            }
        })
    };
    let mut workers = tokio::task::JoinSet::new();
    for (i, ledger) in ledgers.into_iter().enumerate() {
        let caller = callers[i % callers.len()].clone();
        workers.spawn(worker(caller, sh.clone(), phase.pace, phase.stop, ledger));
    }
    let end = match phase.stop {
        StopAt::After(d) => sh.start + d,
        // Far enough to never fire; a counted run ends when its workers do.
        StopAt::Calls(_) => sh.start + Duration::from_secs(86_400 * 365),
    };
    let timer = tokio::time::sleep_until(end);
    tokio::pin!(timer);
    let cut = tokio::time::sleep_until(end + DRAIN);
    tokio::pin!(cut);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut merged = Tally::default();
    let mut lost = None;
    loop {
        tokio::select! {
            () = &mut timer, if !sh.stop.is_cancelled() => sh.stop.cancel(),
            () = &mut cut, if !sh.cut.is_cancelled() => sh.cut.cancel(),
            _ = tick.tick() => {
                let at = sh.start.elapsed();
                let gone = gone(sh.down_since(), at);
                if lost.is_none() && gone.is_some() {
                    lost = gone;
                    sh.stop.cancel();
                    sh.cut.cancel();
                }
                progress.update(
                    at,
                    sh.completed.load(Ordering::Relaxed),
                    sh.failed.load(Ordering::Relaxed),
                );
            }
            joined = workers.join_next() => match joined {
                Some(Ok(t)) => merged.merge(&t),
                Some(Err(e)) => eprintln!("weft load: a worker failed: {e}"),
                None => break,
            },
        }
    }
    let elapsed = match phase.stop {
        StopAt::After(d) => sh.start.elapsed().min(d),
        StopAt::Calls(_) => sh.start.elapsed(),
    };
    sampling_done.store(true, Ordering::Relaxed);
    sh.stop.cancel();
    watcher.abort();
    let pacer_late = pacing.and_then(|p| p.join().ok());
    let mean_in_flight = sampling.join().unwrap_or(0.0);
    let series = std::mem::take(&mut *sh.series.lock().unwrap_or_else(|e| e.into_inner()));
    let outages = std::mem::take(&mut *sh.outages.lock().unwrap_or_else(|e| e.into_inner()));
    Measured {
        tally: merged,
        series,
        elapsed: lost.unwrap_or(elapsed).min(elapsed),
        mean_in_flight,
        pacer_late,
        outages: outages.finish(),
        ended: match lost {
            Some(at) => Ended::ConnectionLost {
                after_s: at.as_secs_f64(),
            },
            None => Ended::Completed,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails every call on its first poll, as a local rejection does.
    struct FailsAtOnce;

    impl Caller for FailsAtOnce {
        #[allow(clippy::manual_async_fn)] // reason: the trait's `Send` bound
        fn call(&self) -> impl Future<Output = Result<(), &'static str>> + Send + '_ {
            async { Err("INVALID_ARGUMENT") }
        }
    }

    /// Never answers, like a stopped (SIGSTOP) server.
    struct NeverAnswers;

    impl Caller for NeverAnswers {
        #[allow(clippy::manual_async_fn)] // reason: the trait's `Send` bound
        fn call(&self) -> impl Future<Output = Result<(), &'static str>> + Send + '_ {
            std::future::pending()
        }
    }

    /// How long the first connection of [`ConnectsLazily`] takes.
    const CONNECT: Duration = Duration::from_millis(400);

    /// A lazily connecting channel: every call made before its connection
    /// is up (`CONNECT` after the first call) waits for it.
    #[derive(Default)]
    struct ConnectsLazily {
        connected: tokio::sync::OnceCell<()>,
    }

    impl Caller for ConnectsLazily {
        #[allow(clippy::manual_async_fn)] // reason: the trait's `Send` bound
        fn call(&self) -> impl Future<Output = Result<(), &'static str>> + Send + '_ {
            async {
                self.connected
                    .get_or_init(|| tokio::time::sleep(CONNECT))
                    .await;
                Ok(())
            }
        }
    }

    fn phase(stop: StopAt) -> Phase {
        Phase {
            concurrency: 4,
            pace: Pace::Closed,
            stop,
        }
    }

    /// Runs `f` on a one-thread runtime in its own thread; `None` when it
    /// has not returned within `bound` (the thread is left behind).
    fn bounded<T: Send + 'static>(
        bound: Duration,
        f: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _ = tx.send(rt.block_on(f));
        });
        rx.recv_timeout(bound).ok()
    }

    #[test]
    fn calls_failing_on_their_first_poll_still_let_other_tasks_run() {
        let (m, ticks) = bounded(Duration::from_secs(3), async {
            // A task that needs the (only) runtime thread every 10 ms, as
            // the stop timer and the progress bar do.
            let ticks = Arc::new(AtomicU64::new(0));
            let t = ticks.clone();
            let ticker = tokio::spawn(async move {
                let mut i = tokio::time::interval(Duration::from_millis(10));
                loop {
                    i.tick().await;
                    t.fetch_add(1, Ordering::Relaxed);
                }
            });
            let callers = [Arc::new(FailsAtOnce)];
            let m = drive(
                &phase(StopAt::After(Duration::from_millis(300))),
                &callers,
                &mut Progress::hidden(),
            )
            .await;
            ticker.abort();
            (m, ticks.load(Ordering::Relaxed))
        })
        .expect("the phase ends at its duration");
        assert_eq!(m.tally.latency.len(), 0);
        assert!(m.tally.errors["INVALID_ARGUMENT"] > 0);
        assert_eq!(m.ended, Ended::Completed);
        // About 30 ticks in 300 ms; a worker that never yields allows ~1.
        assert!(ticks >= 10, "{ticks}");
    }

    /// A counted open loop of `calls` at `per_second` over 4 workers on a
    /// [`ConnectsLazily`] caller; `None` when it has not ended in 5 s.
    fn lazy_open_loop(per_second: f64, calls: u64) -> Option<Measured> {
        bounded(Duration::from_secs(5), async move {
            let callers = [Arc::new(ConnectsLazily::default())];
            let phase = Phase {
                concurrency: 4,
                pace: Pace::rate(per_second),
                stop: StopAt::Calls(calls),
            };
            drive(&phase, &callers, &mut Progress::hidden()).await
        })
    }

    #[test]
    fn an_open_loop_does_not_charge_its_calls_with_making_the_connection() {
        let m = lazy_open_loop(1000.0, 200).expect("the phase ends");
        assert_eq!(m.tally.latency.len(), 200);
        // All 200 calls are due within 200 ms. Measured while connecting,
        // they would wait for it: a median of about 300 ms (200 ms at
        // least). Connected first, they take microseconds.
        let p50 = Duration::from_nanos(m.tally.latency.value_at_quantile(0.5));
        assert!(p50 < CONNECT / 4, "{p50:?}");
    }

    #[test]
    fn a_counted_open_loop_ends_after_its_calls() {
        let m = lazy_open_loop(10_000.0, 100).expect("a counted open loop ends");
        assert_eq!(m.tally.latency.len(), 100);
    }

    #[test]
    fn a_server_that_never_answers_ends_at_the_duration() {
        let m = bounded(Duration::from_secs(3), async {
            let callers = [Arc::new(NeverAnswers)];
            drive(
                &phase(StopAt::After(Duration::from_millis(200))),
                &callers,
                &mut Progress::hidden(),
            )
            .await
        })
        .expect("the phase ends at its duration");
        // Calls cut by the end are not counted; all four were in flight.
        assert_eq!(m.tally.latency.len() + m.tally.service.len(), 0);
        assert!(m.mean_in_flight > 2.0, "{}", m.mean_in_flight);
        assert!(m.elapsed <= Duration::from_millis(200));
    }

    #[test]
    fn only_an_outage_of_lost_after_is_a_gone_server() {
        let ms = Duration::from_millis;
        assert_eq!(gone(None, ms(60_000)), None);
        let since = Some(ms(400));
        assert_eq!(gone(since, ms(400) + LOST_AFTER - ms(1)), None);
        assert_eq!(gone(since, ms(400) + LOST_AFTER), Some(ms(400)));
    }

    /// Fails `UNAVAILABLE` on every call from `down` on (a server gone
    /// for good), succeeding before.
    struct GoneAt {
        down: Instant,
    }

    impl Caller for GoneAt {
        #[allow(clippy::manual_async_fn)] // reason: the trait's `Send` bound
        fn call(&self) -> impl Future<Output = Result<(), &'static str>> + Send + '_ {
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                if Instant::now() >= self.down {
                    Err(Code::UNAVAILABLE.name())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Always answers (after 1 ms), but its connection is lost once at
    /// `at` and nothing answers for the next 300 ms, as when the calls in
    /// flight are resent over a new connection.
    struct LosesItsConnection {
        at: Instant,
    }

    const RECONNECT: Duration = Duration::from_millis(300);

    impl Caller for LosesItsConnection {
        #[allow(clippy::manual_async_fn)] // reason: the trait's `Send` bound
        fn call(&self) -> impl Future<Output = Result<(), &'static str>> + Send + '_ {
            async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let now = Instant::now();
                if now >= self.at && now < self.at + RECONNECT {
                    tokio::time::sleep_until(self.at + RECONNECT).await;
                }
                Ok(())
            }
        }

        #[allow(clippy::manual_async_fn)] // reason: the trait's `Send` bound
        fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
            async move {
                if Instant::now() < self.at {
                    tokio::time::sleep_until(self.at).await;
                } else {
                    std::future::pending::<()>().await;
                }
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_connection_is_an_outage_though_no_call_failed() {
        let at = Instant::now() + Duration::from_secs(1);
        let callers = [Arc::new(LosesItsConnection { at })];
        let m = drive(
            &phase(StopAt::After(Duration::from_secs(2))),
            &callers,
            &mut Progress::hidden(),
        )
        .await;
        assert_eq!(m.ended, Ended::Completed);
        assert_eq!(m.outages.len(), 1, "{:?}", m.outages);
        let o = &m.outages[0];
        assert_eq!(o.calls_failed, 0);
        let length = o.length_s.expect("over");
        assert!((0.29..0.32).contains(&length), "{o:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_gone_for_good_ends_the_phase_after_lost_after() {
        let callers = [Arc::new(GoneAt {
            down: Instant::now() + Duration::from_secs(1),
        })];
        let m = drive(
            &phase(StopAt::After(Duration::from_secs(60))),
            &callers,
            &mut Progress::hidden(),
        )
        .await;
        let Ended::ConnectionLost { after_s } = m.ended else {
            panic!("{:?}", m.ended)
        };
        assert!((0.9..1.1).contains(&after_s), "{after_s}");
        assert_eq!(m.outages.len(), 1, "{:?}", m.outages);
        assert_eq!(m.outages[0].length_s, None, "still out at the end");
    }

    #[test]
    fn a_counted_run_of_immediate_failures_ends() {
        let m = bounded(Duration::from_secs(3), async {
            let callers = [Arc::new(FailsAtOnce)];
            drive(
                &phase(StopAt::Calls(1000)),
                &callers,
                &mut Progress::hidden(),
            )
            .await
        })
        .expect("a counted phase ends");
        assert_eq!(m.tally.errors["INVALID_ARGUMENT"], 1000);
    }
}
