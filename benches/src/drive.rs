//! Running a call [`Shape`] on one connection's client, in phases, with a
//! mark between them: the loop `weft-peers` times (`cargo xtask bench
//! --peers`) and `weft-instr` counts instructions over (`cargo xtask
//! instr`), so both measure the same calls.
//!
//! A run is a list of phases; in each, every caller makes the phase's
//! number of units: a call (sequential, and each spawned caller) or `k`
//! calls joined in one task (`join_all`). Before each phase, and after the
//! last, [`Marks::mark`] is called once, when every caller has finished the
//! previous phase and none has started the next: a timer reads the clock
//! there, an instruction counter cuts its profile there.

use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use tokio::sync::Barrier;

use crate::Shape;

/// A client whose calls a shape makes: called in turn, joined, or cloned
/// into each spawned caller task.
pub trait Caller: Clone + Send + Sync + 'static {
    /// Makes one call and checks its response.
    fn call(&self) -> impl Future<Output = ()> + Send + '_;
}

/// What happens at the boundaries of a run's phases.
pub trait Marks: Send + 'static {
    /// Phase `phase` is about to start (`phase` equal to the number of
    /// phases: the last one has ended). Called once per boundary, with every
    /// caller stopped between the two phases.
    fn mark(&mut self, phase: usize);
}

/// Runs `shape` on `client`, in the current runtime: each caller makes
/// `phases[i]` units in phase `i`; `marks` is called at every boundary and
/// returned. Panics if a spawned caller panics (a wrong answer).
pub async fn run_phases<C: Caller, M: Marks>(
    client: C,
    shape: Shape,
    phases: &[usize],
    mut marks: M,
) -> M {
    if let Shape::Spawned(callers) = shape {
        return spawned(client, callers, phases, marks).await;
    }
    for (phase, &count) in phases.iter().enumerate() {
        marks.mark(phase);
        for _ in 0..count {
            unit(&client, shape).await;
        }
    }
    marks.mark(phases.len());
    marks
}

/// One unit of a one-caller shape: a call, or `k` calls joined.
async fn unit<C: Caller>(client: &C, shape: Shape) {
    match shape {
        Shape::Joined(k) => {
            join_all((0..k).map(|_| client.call())).await;
        }
        Shape::Sequential | Shape::Spawned(_) => client.call().await,
    }
}

/// `callers` spawned tasks, each with its own clone of `client`, making
/// their calls one after another; a barrier between phases, whose last
/// arrival (the leader) marks, and a second one that holds everyone until
/// it has.
async fn spawned<C: Caller, M: Marks>(client: C, callers: usize, phases: &[usize], marks: M) -> M {
    let phases: Arc<[usize]> = phases.into();
    let marks = Arc::new(Mutex::new(marks));
    let line = Arc::new(Barrier::new(callers));
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (client, phases, marks, line) =
                (client.clone(), phases.clone(), marks.clone(), line.clone());
            tokio::spawn(async move {
                for phase in 0..=phases.len() {
                    if line.wait().await.is_leader() {
                        marks.lock().expect("marks lock").mark(phase);
                    }
                    // A second wait: on a multi-thread runtime the callers
                    // the first one released could otherwise start the next
                    // phase's calls before the leader has marked.
                    line.wait().await;
                    for _ in 0..phases.get(phase).copied().unwrap_or(0) {
                        client.call().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a caller task panicked");
    }
    let marks = Arc::try_unwrap(marks)
        .ok()
        .expect("every caller task has ended");
    marks.into_inner().expect("marks lock")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::Runtime;

    /// Counts its calls; each call yields once, so spawned callers
    /// interleave.
    #[derive(Clone, Default)]
    struct Counting(Arc<AtomicUsize>);

    impl Caller for Counting {
        fn call(&self) -> impl Future<Output = ()> + Send + '_ {
            self.0.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now()
        }
    }

    /// The calls made so far at each mark.
    struct Seen(Counting, Vec<usize>);

    impl Marks for Seen {
        fn mark(&mut self, phase: usize) {
            assert_eq!(phase, self.1.len(), "marks come once each, in order");
            self.1.push(self.0.0.load(Ordering::Relaxed));
        }
    }

    #[test]
    fn every_shape_makes_each_phases_calls_between_its_marks() {
        for runtime in Runtime::ALL {
            for (shape, per_unit) in [
                (Shape::Sequential, 1),
                (Shape::Joined(4), 4),
                (Shape::Spawned(8), 8),
            ] {
                let client = Counting::default();
                let seen = runtime.build().block_on(run_phases(
                    client.clone(),
                    shape,
                    &[2, 0, 3],
                    Seen(client.clone(), Vec::new()),
                ));
                let k = per_unit;
                assert_eq!(seen.1, [0, 2 * k, 2 * k, 5 * k], "{}", shape.name());
            }
        }
    }
}
