//! Allocations per unary call through the facade, client and server
//! together, plain and encrypted, counted by a global allocator. Budget: 4.
//!
//! The reference call: nil request, `{"n":1}` JSON response, one
//! connection, sequential, current-thread runtime.
#![cfg(feature = "json")]

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use weft::{Bytes, Config, EncryptionPolicy, Router};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The budget per call: the typical (median) call allocates at most this.
const BUDGET: u64 = 4;
/// Ceiling on the mean: buffers that refill once per many kilobytes of
/// traffic (read buffer, framing arena) add a small fraction per call; a
/// mean above this means something allocates on a regular share of calls.
const MEAN_CEILING: f64 = BUDGET as f64 + 0.1;
const CALLS: usize = 2000;

/// Allocations (and reallocations) of each measured call.
#[derive(Debug)]
struct Counts {
    median: u64,
    mean: f64,
    max: u64,
}

impl Counts {
    fn of(mut per_call: Vec<u64>) -> Counts {
        per_call.sort_unstable();
        let total: u64 = per_call.iter().sum();
        Counts {
            median: per_call[per_call.len() / 2],
            mean: total as f64 / per_call.len() as f64,
            max: *per_call.last().unwrap_or(&0),
        }
    }

    fn check(&self, what: &str) {
        println!(
            "{what}: allocations per unary call, client + server: median {}, mean {:.3}, max {}",
            self.median, self.mean, self.max
        );
        assert!(
            self.median <= BUDGET && self.mean <= MEAN_CEILING,
            "{what}: {self:?} allocations per call; budget {BUDGET} (mean ceiling {MEAN_CEILING})"
        );
    }
}

#[derive(serde::Serialize)]
struct N {
    n: u32,
}

fn per_call(config: Config) -> Counts {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let router =
            Router::new().unary_json("n", |_c, _r: Option<()>| async move { Ok(N { n: 1 }) });
        let client = weft::memory(router, &config).await.unwrap();
        for _ in 0..200 {
            assert_eq!(client.unary("n", Bytes::new()).await.unwrap(), "{\"n\":1}");
        }
        let mut counts = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let region = Region::new(GLOBAL);
            let r = client.unary("n", Bytes::new()).await.unwrap();
            let s = region.change();
            counts.push((s.allocations + s.reallocations) as u64);
            assert_eq!(r.len(), 7);
        }
        Counts::of(counts)
    })
}

#[test]
fn unary_allocations_plain_and_encrypted() {
    let plain = per_call(
        Config::new()
            .encryption(EncryptionPolicy::Off)
            .compression(false),
    );
    let encrypted = per_call(
        Config::new()
            .encryption(EncryptionPolicy::Required)
            .compression(true),
    );
    plain.check("plain");
    encrypted.check("encrypted");
}
