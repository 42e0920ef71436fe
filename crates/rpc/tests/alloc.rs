//! Allocations per unary call, client and server together, counted by a
//! global allocator. The budget is 4 (design brief, performance budget).
//!
//! The call is the reference one: nil (empty) request, `{"n":1}` JSON
//! response, one connection, sequential, on a current-thread runtime so the
//! count includes everything both sides do.

use std::alloc::System;

use bytes::Bytes;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use weft_mux::{Config, Role, connect};
use weft_rpc::{Client, PeerInfo, Router, Server};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The budget per call, client and server together.
const BUDGET: f64 = 4.0;
const CALLS: usize = 2000;

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
        let region = Region::new(GLOBAL);
        for _ in 0..CALLS {
            let r = client.unary("n", Bytes::new()).await.unwrap();
            assert_eq!(r.len(), 7);
        }
        let stats = region.change();
        (stats.allocations + stats.reallocations) as f64 / CALLS as f64
    });
    println!("allocations per unary call (client + server): {per_call:.2}");
    assert!(
        per_call <= BUDGET,
        "{per_call:.2} allocations per call, budget {BUDGET}"
    );
}
