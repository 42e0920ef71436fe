//! The tokio runtimes the end-to-end measurements run on: every async peer
//! of `weft-peers` (weft's entries included) and `weft-instr`'s cells, the
//! same for every stack, so the comparison is of stacks, not of runtime
//! settings.

/// Which tokio runtime one measurement builds. Client and server share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// tokio's default multi-thread runtime, one worker per core (what
    /// `#[tokio::main]` gives). The measuring future runs on the calling
    /// thread (`block_on`); spawned tasks (servers, connection tasks,
    /// spawned callers) on the workers.
    MultiThread,
    /// A current-thread runtime: the measuring future, every client and
    /// server task, on one thread. This is the one-worker case, chosen over
    /// `new_multi_thread().worker_threads(1)` because that one still runs
    /// the `block_on` future (the sequential and joined callers) on a
    /// second thread, so only the spawned shapes would differ from the
    /// default runtime; with a current-thread runtime every shape shows
    /// what the stack costs when nothing crosses a core, which is also how
    /// a service runs one runtime per core.
    CurrentThread,
}

impl Runtime {
    /// Every runtime, in the order tables show them.
    pub const ALL: [Runtime; 2] = [Runtime::MultiThread, Runtime::CurrentThread];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::MultiThread => "multi-thread",
            Runtime::CurrentThread => "current-thread",
        }
    }

    /// One line for the report.
    pub fn description(self) -> &'static str {
        match self {
            Runtime::MultiThread => {
                "tokio's default multi-thread runtime (one worker per core); the measuring \
                 future on the calling thread, spawned tasks on the workers"
            }
            Runtime::CurrentThread => {
                "one-worker: a tokio current-thread runtime, the measuring future and every \
                 client and server task on one thread"
            }
        }
    }

    /// The runtime named `name` ([`Runtime::name`]).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Builds it, I/O and timers enabled.
    pub fn build(self) -> tokio::runtime::Runtime {
        let mut builder = match self {
            Runtime::MultiThread => tokio::runtime::Builder::new_multi_thread(),
            Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        };
        builder
            .enable_all()
            .build()
            .expect("a tokio runtime can be built")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_rejected() {
        for runtime in Runtime::ALL {
            assert_eq!(Runtime::parse(runtime.name()), Some(runtime));
        }
        assert_eq!(Runtime::parse("multi"), None);
    }

    #[test]
    fn current_thread_runs_spawned_tasks_on_the_calling_thread() {
        let caller = std::thread::current().id();
        let on = |runtime: Runtime| {
            runtime
                .build()
                .block_on(async { tokio::spawn(async { std::thread::current().id() }).await })
                .unwrap()
        };
        assert_eq!(on(Runtime::CurrentThread), caller);
        assert_ne!(on(Runtime::MultiThread), caller);
    }
}
