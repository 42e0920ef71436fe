//! The measuring loops every async peer shares: a peer gives its `connect`
//! future and a [`Caller`] (one call, response checked); these run it in
//! each shape on the runtime asked for.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::sync::Barrier;

use crate::{Counts, Runtime, Shape, Timing};

/// A multiplexing peer's client: called in turn, joined, or cloned into
/// each spawned caller task.
pub(crate) trait Caller: Clone + Send + Sync + 'static {
    /// Makes one call and checks its response.
    fn call(&self) -> impl Future<Output = ()> + Send + '_;
}

/// Runs `shape` on the client `connect` gives, on a fresh `runtime`.
pub(crate) fn run<C: Caller>(
    runtime: Runtime,
    shape: Shape,
    counts: Counts,
    connect: impl Future<Output = C>,
) -> Timing {
    match shape {
        Shape::Sequential => Timing::Each(sequential(runtime, counts, connect)),
        Shape::Joined(k) => Timing::Each(joined(runtime, counts, k, connect)),
        Shape::Spawned(k) => Timing::Whole(spawned(runtime, counts, k, connect)),
    }
}

/// Times each of `counts.timed` sequential calls on the client `connect`
/// gives.
fn sequential<C: Caller>(
    runtime: Runtime,
    counts: Counts,
    connect: impl Future<Output = C>,
) -> Vec<Duration> {
    runtime.build().block_on(async {
        let client = connect.await;
        time_each(counts, async || client.call().await).await
    })
}

/// Times each of `counts.timed` batches of `inflight` calls joined in the
/// measuring task.
fn joined<C: Caller>(
    runtime: Runtime,
    counts: Counts,
    inflight: usize,
    connect: impl Future<Output = C>,
) -> Vec<Duration> {
    runtime.build().block_on(async {
        let client = connect.await;
        time_each(counts, async || {
            join_all((0..inflight).map(|_| client.call())).await;
        })
        .await
    })
}

/// Times `callers` spawned tasks making `counts.timed` calls each.
fn spawned<C: Caller>(
    runtime: Runtime,
    counts: Counts,
    callers: usize,
    connect: impl Future<Output = C>,
) -> Duration {
    runtime
        .build()
        .block_on(async { time_spawned(counts, callers, connect.await).await })
}

/// Runs `call` `counts.warm_up` times, then `counts.timed` times timing
/// each: the measuring loop of the async peers (`call` is one call, or one
/// joined batch).
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

/// Spawns `callers` tasks, each with its own clone of `client`; each makes
/// `counts.warm_up` untimed calls, then (all released together)
/// `counts.timed` timed ones. Returns the wall time from the first caller's
/// first timed call to the last caller's end, as the callers read the clock:
/// the measuring task is woken late by the release (the callers can be
/// halfway through by then on a multi-thread runtime) and by the ends.
async fn time_spawned(counts: Counts, callers: usize, client: impl Caller) -> Duration {
    let start_line = Arc::new(Barrier::new(callers));
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (client, start_line) = (client.clone(), start_line.clone());
            tokio::spawn(async move {
                for _ in 0..counts.warm_up {
                    client.call().await;
                }
                start_line.wait().await;
                let start = Instant::now();
                for _ in 0..counts.timed {
                    client.call().await;
                }
                (start, Instant::now())
            })
        })
        .collect();
    let mut span: Option<(Instant, Instant)> = None;
    for task in tasks {
        let (start, end) = task.await.expect("a caller task panicked");
        span = Some(span.map_or((start, end), |(s, e)| (s.min(start), e.max(end))));
    }
    span.map_or(Duration::ZERO, |(start, end)| end - start)
}

#[cfg(test)]
mod tests {
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
            let at_least = Duration::from_millis(3);
            let samples = sequential(runtime, counts, async { client.clone() });
            assert_eq!((samples.len(), made()), (3, 5));
            assert!(samples.iter().all(|s| *s >= Duration::from_millis(1)));
            let samples = joined(runtime, counts, 4, async { client.clone() });
            assert_eq!((samples.len(), made()), (3, 5 * 4));
            assert!(samples.iter().all(|s| *s >= Duration::from_millis(1)));
            let wall = spawned(runtime, counts, 8, async { client.clone() });
            assert_eq!(made(), 5 * 8);
            // each caller makes its 3 timed calls one after another
            assert!(wall >= at_least, "{wall:?} on {}", runtime.name());
        }
    }
}
