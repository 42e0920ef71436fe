//! `weft-peers`: runs every cell (peer × shape × runtime) interleaved over
//! several rounds and prints one JSON document on stdout; `cargo xtask bench
//! --peers` runs it and renders the tables. The options and the order are
//! in `weft_peers::plan`:
//!
//! usage: weft-peers [--rounds R] [--calls N] [--warm-up W]
//!                   [--shape S[,S...]] [--runtime RT[,RT...]]
//!                   [--only PEER[,PEER...]] [--split]
//!        weft-peers --serve PEER --runtime RT   (a split layout's server process)
//!
//! `--calls N` is the number of timed calls of every cell and round, split
//! among its callers, so one command line gives every shape the same work:
//! `--rounds 1 --calls {N} --shape spawned-64 --runtime multi-thread --only
//! weft` under `cargo xtask instr` counts instructions per call directly.

use weft_peers::plan::{Plan, USAGE};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [serve, name, runtime_flag, runtime] = &args[..]
        && serve == "--serve"
        && runtime_flag == "--runtime"
    {
        let peer = weft_peers::peers().into_iter().find(|p| p.name == name);
        let (Some(peer), Some(rt)) = (peer, weft_peers::Runtime::parse(runtime)) else {
            eprintln!("weft-peers: --serve {name} --runtime {runtime}: no such peer or runtime");
            std::process::exit(2);
        };
        weft_peers::split::serve(&peer, rt);
        return;
    }
    let plan = match Plan::parse(&args, weft_peers::peers()) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("weft-peers: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if plan.split
        && let Err(e) = weft_peers::split::pin_client()
    {
        eprintln!("weft-peers: {e}");
        std::process::exit(2);
    }
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
