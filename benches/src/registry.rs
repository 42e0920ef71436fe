//! The target registry: one line per measured operation.
//!
//! Adding a target: write a type implementing [`Op`] next to its inputs (one
//! module per layer, e.g. `transform.rs`), add a `Target` line below whose
//! name is the divan path of the matching bench, then bless the baseline with
//! `cargo xtask bench --bless`. Targets whose crate is not written yet are not
//! registered (never faked).

use crate::{e2e, frame, transform};

/// One benchmark operation. Its input is prepared by [`Op::prepare`], which is
/// never measured, and consumed by [`Op::run`], which is.
pub trait Op {
    /// Prepares the next [`Op::run`] (not counted). Default: nothing.
    fn prepare(&mut self) {}
    /// Runs the operation once; this is what allocations are counted over.
    fn run(&mut self);
    /// Bytes processed by one run, when a throughput is meaningful.
    fn bytes(&self) -> Option<u64> {
        None
    }
}

/// A registered target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The divan path of the same measurement: `<bench file>/<function>[/<arg>]`.
    pub name: &'static str,
    /// A label for tables, e.g. `frame decode 64 B`.
    pub label: &'static str,
    /// Builds the operation (outside any measurement).
    pub make: fn() -> Box<dyn Op>,
}

/// Every registered target, in report order.
pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "frame/decode/64",
            label: "frame decode 64 B",
            make: || Box::new(frame::Decode::new(64)),
        },
        Target {
            name: "frame/decode/1024",
            label: "frame decode 1 KiB",
            make: || Box::new(frame::Decode::new(1024)),
        },
        Target {
            name: "frame/decode/65536",
            label: "frame decode 64 KiB",
            make: || Box::new(frame::Decode::new(64 * 1024)),
        },
        Target {
            name: "transform/passthrough",
            label: "transform passthrough (out + in)",
            make: || Box::new(transform::Pipeline::new(false, false)),
        },
        Target {
            name: "transform/deflate",
            label: "transform deflate",
            make: || Box::new(transform::Pipeline::new(false, true)),
        },
        Target {
            name: "transform/gcm",
            label: "transform AES-256-GCM",
            make: || Box::new(transform::Pipeline::new(true, false)),
        },
        Target {
            name: "transform/deflate_gcm",
            label: "transform deflate + GCM",
            make: || Box::new(transform::Pipeline::new(true, true)),
        },
        // End to end: the counts span client and server threads, and work
        // the server finishes after replying can land in the next op, so the
        // baseline gives these an `allocs_tolerance` (docs/BENCHMARKS.md).
        Target {
            name: "e2e/unary_plain",
            label: "e2e unary, TCP loopback, plain",
            make: || Box::new(e2e::Unary::new(false)),
        },
        Target {
            name: "e2e/unary_encrypted",
            label: "e2e unary, TCP loopback, encrypted",
            make: || Box::new(e2e::Unary::new(true)),
        },
        Target {
            name: "e2e/unary_deadline",
            label: "e2e unary with a deadline, plain",
            make: || Box::new(e2e::UnaryDeadline::new()),
        },
        Target {
            name: "e2e/unary_concurrent_8",
            label: "e2e 8 concurrent unary calls, plain",
            make: || Box::new(e2e::UnaryJoined::eight()),
        },
        Target {
            name: "e2e/unary_concurrent_64",
            label: "e2e 64 concurrent unary calls, plain",
            make: || Box::new(e2e::UnaryJoined::sixty_four()),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are unique divan paths (`file/function[/arg]`), so xtask can join
    /// allocation counts with divan's timings.
    #[test]
    fn names_are_unique_divan_paths() {
        let targets = targets();
        let mut names: Vec<_> = targets.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), targets.len());
        for t in &targets {
            assert!(t.name.split('/').count() >= 2, "{}", t.name);
        }
    }

    /// Every registered op runs (prepare then run) without panicking.
    #[test]
    fn every_op_runs() {
        for t in targets() {
            let mut op = (t.make)();
            for _ in 0..3 {
                op.prepare();
                op.run();
            }
        }
    }
}
