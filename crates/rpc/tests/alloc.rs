//! Allocations per unary call, client and server together, counted by a
//! global allocator. The budget is 4 (design brief, performance budget).
//!
//! The call is the reference one: nil (empty) request, `{"n":1}` JSON
//! response, one connection, sequential, on a current-thread runtime so the
//! count includes everything both sides do.
#![cfg(feature = "json")]

use std::alloc::System;

use bytes::Bytes;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use weft_mux::{Config, Role, connect};
use weft_rpc::{Client, PeerInfo, Router, Server};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The budget per call, client and server together.
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

#[test]
fn unary_call_allocations_within_budget() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let per_call = rt.block_on(async {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let (s, c) = tokio::join!(
            connect(b, Role::Server, Config::default()),
            connect(a, Role::Client, Config::default())
        );
        let (_sc, incoming) = s.unwrap();
        let (cc, _ci) = c.unwrap();
        let router =
            Router::new().unary_json("n", |_c, _r: Option<()>| async move { Ok(N { n: 1 }) });
        let server = Server::new(router);
        tokio::spawn(async move { server.serve_connection(incoming, PeerInfo::default()).await });
        let client = Client::new(cc);
        // Warm up: buffers, tables and caches reach their steady size.
        for _ in 0..200 {
            let r = client.unary("n", Bytes::new()).await;
            assert_eq!(r.unwrap(), "{\"n\":1}");
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
    });
    per_call.check("unary");
}
