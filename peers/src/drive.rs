//! The measuring loops every async peer shares: a peer gives its `connect`
//! future and a [`Caller`] (one call, response checked); these run it in
//! each shape on the runtime asked for. The shapes themselves are
//! `weft_benches::drive`'s (the instruction gate runs the same loop); here
//! its phase marks read the clock.

use std::time::{Duration, Instant};

use weft_benches::drive::{self as shared, Marks, run_phases};

use crate::{Counts, Runtime, Shape, Timing};

/// A multiplexing peer's client: called in turn, joined, or cloned into
/// each spawned caller task.
pub(crate) trait Caller: Clone + Send + Sync + 'static {
    /// Makes one call and checks its response.
    fn call(&self) -> impl Future<Output = ()> + Send + '_;
}

/// A peer's client as the shared loop's caller.
#[derive(Clone)]
struct Via<C>(C);

impl<C: Caller> shared::Caller for Via<C> {
    fn call(&self) -> impl Future<Output = ()> + Send + '_ {
        self.0.call()
    }
}

/// The clock at every phase boundary.
#[derive(Default)]
struct Clock(Vec<Instant>);

impl Marks for Clock {
    fn mark(&mut self, _phase: usize) {
        self.0.push(Instant::now());
    }
}

/// Runs `shape` on the client `connect` gives, on a fresh `runtime`:
/// `counts.warm_up` untimed units per caller, then `counts.timed` timed
/// ones. Sequential and joined time each unit (a phase of one unit each);
/// spawned times the whole, from the release of the callers to the last
/// one's end.
pub(crate) fn run<C: Caller>(
    runtime: Runtime,
    shape: Shape,
    counts: Counts,
    connect: impl Future<Output = C>,
) -> Timing {
    let phases: Vec<usize> = match shape {
        Shape::Spawned(_) => vec![counts.warm_up, counts.timed],
        Shape::Sequential | Shape::Joined(_) => std::iter::once(counts.warm_up)
            .chain(std::iter::repeat_n(1, counts.timed))
            .collect(),
    };
    let Clock(marks) = runtime.build().block_on(async {
        let client = Via(connect.await);
        run_phases(client, shape, &phases, Clock::default()).await
    });
    // marks[i] starts phase i; phase 0 is the warm-up
    let spans: Vec<Duration> = marks.windows(2).skip(1).map(|w| w[1] - w[0]).collect();
    match shape {
        Shape::Spawned(_) => Timing::Whole(spans.iter().sum()),
        Shape::Sequential | Shape::Joined(_) => Timing::Each(spans),
    }
}

/// Runs `call` `counts.warm_up` times, then `counts.timed` times timing
/// each: the measuring loop of the pipelining async peers (`call` is one
/// call, or one pipelined batch).
pub(crate) async fn time_each(counts: Counts, mut call: impl AsyncFnMut()) -> Vec<Duration> {
    for _ in 0..counts.warm_up {
        call().await;
    }
    let mut samples = Vec::with_capacity(counts.timed);
    for _ in 0..counts.timed {
        let start = Instant::now();
        call().await;
        samples.push(start.elapsed());
    }
    samples
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts its calls; each call sleeps 1 ms.
    #[derive(Clone, Default)]
    struct Counting(Arc<AtomicUsize>);

    impl Caller for Counting {
        fn call(&self) -> impl Future<Output = ()> + Send + '_ {
            self.0.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(1))
        }
    }

    #[test]
    fn every_shape_makes_its_calls_and_times_the_timed_ones() {
        let counts = Counts {
            warm_up: 2,
            timed: 3,
        };
        for runtime in Runtime::ALL {
            let client = Counting::default();
            let made = || client.0.swap(0, Ordering::Relaxed);
            let connect = || async { client.clone() };
            let Timing::Each(samples) = run(runtime, Shape::Sequential, counts, connect()) else {
                panic!("sequential times each call");
            };
            assert_eq!((samples.len(), made()), (3, 5));
            assert!(samples.iter().all(|s| *s >= Duration::from_millis(1)));
            let Timing::Each(samples) = run(runtime, Shape::Joined(4), counts, connect()) else {
                panic!("joined times each batch");
            };
            assert_eq!((samples.len(), made()), (3, 5 * 4));
            assert!(samples.iter().all(|s| *s >= Duration::from_millis(1)));
            let Timing::Whole(wall) = run(runtime, Shape::Spawned(8), counts, connect()) else {
                panic!("spawned times the whole");
            };
            assert_eq!(made(), 5 * 8);
            // each caller makes its 3 timed calls one after another
            let at_least = Duration::from_millis(3);
            assert!(wall >= at_least, "{wall:?} on {}", runtime.name());
        }
    }
}
