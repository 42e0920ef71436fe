//! The `weft` binary's allocator, jemalloc, and what it reports.
//!
//! jemalloc (tikv-jemallocator, background purging thread on) instead of
//! the system allocator: after thousands of connections close, glibc's
//! malloc keeps their freed, fragmented heap resident for ever (a server
//! that once held 10,000 connections stayed at 185 MB); jemalloc returns
//! it to the system within its 10 s decay (docs/BENCHMARKS.md, "Memory per
//! connection").
//!
//! With `RUST_LOG=weft::alloc=debug`, `weft serve` logs jemalloc's own
//! figures every second ([`log_every`]): what the program holds
//! (`allocated`), what jemalloc keeps for it (`active`, `metadata`) and
//! what is resident, the figures that tell live memory from allocator
//! overhead. (They showed where a server that once held 10,000
//! connections keeps its extra RSS after they close: in jemalloc's
//! metadata, which grows with the peak and is never returned; see
//! docs/BENCHMARKS.md, "After the connections close".)

use std::time::Duration;

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's statistics at one moment, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Figures {
    /// Held by the program (live allocations).
    pub(crate) allocated: u64,
    /// In pages that hold live allocations (allocated + fragmentation).
    pub(crate) active: u64,
    /// jemalloc's own bookkeeping.
    pub(crate) metadata: u64,
    /// Resident pages jemalloc maps (data, metadata, not yet purged).
    pub(crate) resident: u64,
    /// Mapped and not retained for reuse.
    pub(crate) mapped: u64,
    /// Mapped address space kept for reuse but not resident.
    pub(crate) retained: u64,
}

/// The current figures (`None` where jemalloc is not the allocator).
#[cfg(not(target_env = "msvc"))]
pub(crate) fn figures() -> Option<Figures> {
    use tikv_jemalloc_ctl::{epoch, stats};
    // The statistics are a snapshot refreshed when the epoch advances.
    epoch::advance().ok()?;
    let read = |r: tikv_jemalloc_ctl::Result<usize>| r.ok().map(|v| v as u64);
    Some(Figures {
        allocated: read(stats::allocated::read())?,
        active: read(stats::active::read())?,
        metadata: read(stats::metadata::read())?,
        resident: read(stats::resident::read())?,
        mapped: read(stats::mapped::read())?,
        retained: read(stats::retained::read())?,
    })
}

/// The current figures (`None` where jemalloc is not the allocator).
#[cfg(target_env = "msvc")]
pub(crate) fn figures() -> Option<Figures> {
    None
}

/// Logs [`figures`] at DEBUG (target `weft::alloc`) every `period`, for
/// ever; returns at once if that target is not enabled.
pub(crate) async fn log_every(period: Duration) {
    if !tracing::enabled!(target: "weft::alloc", tracing::Level::DEBUG) {
        return;
    }
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        if let Some(f) = figures() {
            tracing::debug!(
                target: "weft::alloc",
                allocated = f.allocated,
                active = f.active,
                metadata = f.metadata,
                resident = f.resident,
                mapped = f.mapped,
                retained = f.retained,
                "allocator"
            );
        }
    }
}

#[cfg(all(test, not(target_env = "msvc")))]
mod tests {
    use super::*;

    #[test]
    fn figures_count_a_live_allocation() {
        // The figures are the whole process's, and the other tests of this
        // binary allocate and free in parallel (a few MB): one block far
        // larger than that, with that much slack either way, so their
        // traffic cannot hide it (it did once, in CI).
        const BIG: u64 = 256 << 20;
        const NOISE: u64 = 64 << 20;
        let before = figures().expect("jemalloc is the allocator");
        let big = vec![1u8; BIG as usize];
        let during = figures().unwrap();
        assert!(
            during.allocated + NOISE >= before.allocated + BIG,
            "{before:?} {during:?}"
        );
        assert!(during.resident >= during.active && during.active >= during.allocated);
        drop(big);
        let after = figures().unwrap();
        assert!(
            after.allocated + BIG <= during.allocated + NOISE,
            "{during:?} {after:?}"
        );
    }
}
