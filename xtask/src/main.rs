//! `cargo xtask`: project automation, one subcommand per module.
//!
//! Every command it runs is printed first, so a CI log shows exactly what
//! happened. Its one dependency is serde_json (for the JSON it reads and
//! writes), so it builds in seconds on a fresh machine.

mod bench;
mod ci;
mod cmd;
mod coverage;
mod stats;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command> [options]

commands:
  ci        what .ci/run runs, in order: fmt check, clippy -D warnings, tests,
            bench --check, coverage
  bench     divan timings + allocation gate (benches/alloc-baseline.json),
            one table, target/bench/*.json, docs/BENCHMARKS.md
              --check     allocation gate + one smoke run of every bench (CI)
              --bless     rewrite the allocation baseline with the measured counts
              --runs N    divan runs per figure (default 3)
              --peers     end-to-end against std::net, tokio codec, tarpc, tonic
              --rounds N  interleaved peer rounds (default 5)
  coverage  cargo-llvm-cov over the library crates, gated per crate by
            xtask/coverage-floors.json";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("coverage") => coverage::run(&args[1..]),
        Some("-h" | "--help" | "help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command {other:?}\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
