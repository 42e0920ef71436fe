//! `weft-peers`: runs every registered peer interleaved (A B C D A B C D …)
//! over several rounds and prints one JSON document on stdout; `cargo xtask
//! bench --peers` runs it and renders the table.
//!
//! usage: weft-peers [--rounds R] [--calls N] [--batches B] [--inflight K]
//!                   [--spawned N] [--only NAME[,NAME...]]
//!
//! `--spawned N` (default 0: off) adds a third measurement to each
//! multiplexing peer: `--inflight` spawned caller tasks making N calls each
//! (`run_spawned`), reported as `spawned_call_round_ns`, the per-call wall
//! time of each round.
//!
//! `--only` keeps the named peers (for profiling one stack, e.g. under
//! `strace -c` or callgrind).

use std::time::Duration;

use serde_json::json;

fn main() {
    let mut rounds = 5;
    let mut calls = 5000;
    let mut batches = 200;
    let mut inflight = 64;
    let mut spawned = 0;
    let mut only: Option<Vec<String>> = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        if pair[0] == "--only" {
            only = pair
                .get(1)
                .map(|v| v.split(',').map(str::to_string).collect());
            continue;
        }
        let value = pair.get(1).and_then(|v| v.parse().ok());
        let Some(value) = value else {
            eprintln!("weft-peers: {:?} needs a number", pair[0]);
            std::process::exit(2);
        };
        match pair[0].as_str() {
            "--rounds" => rounds = value,
            "--calls" => calls = value,
            "--batches" => batches = value,
            "--inflight" => inflight = value,
            "--spawned" => spawned = value,
            other => {
                eprintln!("weft-peers: unknown option {other:?}");
                std::process::exit(2);
            }
        }
    }
    let mut peers = weft_peers::peers();
    if let Some(only) = &only {
        peers.retain(|p| only.iter().any(|n| n == p.name));
        if peers.is_empty() {
            eprintln!("weft-peers: --only matches no peer");
            std::process::exit(2);
        }
    }
    // per peer: the median of each round, in nanoseconds
    let mut sequential = vec![Vec::new(); peers.len()];
    let mut concurrent = vec![Vec::new(); peers.len()];
    let mut per_spawned_call = vec![Vec::new(); peers.len()];
    for round in 0..rounds {
        for (i, peer) in peers.iter().enumerate() {
            eprintln!("round {}/{rounds}: {}", round + 1, peer.name);
            sequential[i].push(median_ns((peer.run_sequential)(calls)));
            concurrent[i].push(median_ns((peer.run_concurrent)(batches, inflight)));
            if let Some(run_spawned) = peer.run_spawned.filter(|_| spawned > 0) {
                let total = run_spawned(spawned, inflight).as_nanos();
                let made = (spawned * inflight) as u128;
                per_spawned_call[i].push(u64::try_from(total / made).unwrap_or(u64::MAX));
            }
        }
    }
    let report = json!({
        "rounds": rounds,
        "calls": calls,
        "batches": batches,
        "inflight": inflight,
        "spawned": spawned,
        "peers": peers.iter().enumerate().map(|(i, p)| json!({
            "name": p.name,
            "description": p.description,
            "sequential_round_ns": sequential[i],
            "concurrent_batch_round_ns": concurrent[i],
            "spawned_call_round_ns": per_spawned_call[i],
        })).collect::<Vec<_>>(),
    });
    println!("{report:#}");
}

fn median_ns(mut samples: Vec<Duration>) -> u64 {
    samples.sort_unstable();
    samples
        .get(samples.len() / 2)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
