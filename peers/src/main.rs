//! `weft-peers`: runs every cell (peer × shape × runtime) interleaved over
//! several rounds and prints one JSON document on stdout; `cargo xtask bench
//! --peers` runs it and renders the tables. The options and the order are
//! in `weft_peers::plan`:
//!
//! usage: weft-peers [--rounds R] [--calls N] [--warm-up W]
//!                   [--shape S[,S...]] [--runtime RT[,RT...]]
//!                   [--only PEER[,PEER...]]
//!
//! `--calls N` is the number of timed calls of every cell and round, split
//! among its callers, so one command line gives every shape the same work:
//! `--rounds 1 --calls {N} --shape spawned-64 --runtime multi-thread --only
//! weft` under `cargo xtask instr` counts instructions per call directly.

use weft_peers::plan::{Plan, USAGE};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let plan = match Plan::parse(&args, weft_peers::peers()) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("weft-peers: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let cells = plan.cells().len();
    let mut done = 0;
    let report = plan.run(|round, cell| {
        done += 1;
        eprintln!(
            "round {}/{} ({done}/{}): {} {} on {}",
            round + 1,
            plan.rounds,
            cells * plan.rounds,
            plan.peers[cell.peer].name,
            cell.shape.name(),
            cell.runtime.name(),
        );
    });
    println!("{report:#}");
}
