//! `cargo xtask`: project automation, one subcommand per module.
//!
//! Every command it runs is printed first, so a CI log shows exactly what
//! happened. Its one dependency is serde_json (for the JSON it reads and
//! writes), so it builds in seconds on a fresh machine.

mod baseline;
mod bench;
mod ci;
mod cmd;
mod coverage;
mod fuzz;
mod instr;
mod mutants;
mod prebuild;
mod soak;
mod stats;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command> [options]

commands:
  ci [GROUP] what .ci/run runs, in order, by group (no GROUP: all of them):
              lint      fmt check, clippy -D warnings, rustdoc -D warnings,
                        cargo package of each published crate, the GitHub
                        workflow against its schema
              test      the workspace tests with every feature on,
                        loom models of weft-mux and weft-rpc (--cfg loom,
                        target/loom),
                        mutants --in-diff, bench --check, instr --check
                        (the instruction gate; after coverage when every
                        group runs)
              coverage  coverage
              fuzz      fuzz --secs 30, soak --secs 60 (their builds start
                        after the fmt check, at nice 19, in the background)
  bench     divan timings + allocation gate (benches/alloc-baseline.json),
            one table, target/bench/*.json, docs/BENCHMARKS.md
              --check     allocation gate + one smoke run of every bench (CI)
              --bless     rewrite the allocation baseline with the measured counts
              --runs N    divan runs per figure (default 3)
              --peers     end-to-end against std::net, tokio codec, tarpc, tonic
              --rounds N  interleaved peer rounds (default 5)
              -- ARGS     weft-peers options: --calls N, --shape S,..,
                          --runtime RT,.., --only PEER,.. (a filtered run
                          leaves docs/BENCHMARKS.md alone)
  coverage  cargo-llvm-cov over the library crates, gated per crate by
            xtask/coverage-floors.json
  fuzz      every cargo-fuzz target in fuzz/ (its [[bin]] names), nightly;
            installs cargo-fuzz 0.13.2 if missing
              --secs N    libFuzzer time per target (required)
  instr     instructions per call with callgrind (needs valgrind)
              --check     the instruction gate: every weft-instr cell (raw, typed,
                          Channel call; sequential, joined-64, spawned-64, each
                          plain/encrypted) at most +2 % over benches/instr-baseline.json
              --bless     rewrite that baseline (the commit says why)
              --by-layer  the raw call's cost per layer into docs/BENCHMARKS.md
              --n1 N --n2 N (default 1000, 6000) -- COMMAND ARGS...
                          any command, differentially: (Ir(N2) - Ir(N1)) / (N2 - N1);
                          every {N} in the command is the count
  mutants   cargo-mutants 27.1.0 (installed if missing) on weft-frame,
            weft-transform and weft-mux's session; fails on a surviving
            mutant not in xtask/mutants-baseline.txt; per-crate scores
              --in-diff [REV]   only code changed since REV (default HEAD~1)
              --package NAME    one of weft-frame, weft-transform, weft-mux
  soak      many clients, all call shapes, cancellations, deadlines and refused
            streams in every security mode against an in-process server
            (benches/src/soak/, release; the tests run it for 2 s); fails on a
            lost, duplicated or corrupted message, a call run twice, memory
            growth or a leaked stream
              --secs N    run time (required)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("coverage") => coverage::run(&args[1..]),
        Some("fuzz") => fuzz::run(&args[1..]),
        Some("mutants") => mutants::run(&args[1..]),
        Some("instr") => instr::run(&args[1..]),
        Some("soak") => soak::run(&args[1..]),
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

/// `--secs N` (N > 0), the only option of `fuzz` and `soak`.
pub(crate) fn secs_option(args: &[String], command: &str) -> Result<u64, String> {
    match args {
        [flag, n] if flag == "--secs" => n
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{command}: --secs needs a positive number, got {n:?}")),
        _ => Err(format!("usage: cargo xtask {command} --secs N")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secs_must_be_positive() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(secs_option(&args(&["--secs", "30"]), "fuzz"), Ok(30));
        assert!(secs_option(&args(&["--secs", "0"]), "fuzz").is_err());
        assert!(secs_option(&args(&["--secs"]), "fuzz").is_err());
        assert!(secs_option(&args(&[]), "fuzz").is_err());
    }
}
