//! `cargo xtask ci`: exactly what .ci/run runs, in order.

use crate::{bench, cmd, coverage, fuzz, mutants, soak};

/// Runs the CI steps; stops at the first failure.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("ci takes no arguments, got {arg:?}"));
    }
    cmd::run("cargo", &["fmt", "--all", "--", "--check"])?;
    cmd::run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The README's test command, verbatim.
    cmd::run("cargo", &["test", "--workspace"])?;
    // Issue 13: the driver's hand-off protocols, every interleaving (loom).
    cmd::run(
        "cargo",
        &[
            "test",
            "-p",
            "weft-mux",
            "--features",
            "loom",
            "--lib",
            "--",
            "loom",
        ],
    )?;
    // Issue 20: surviving mutants in the last commit's wire-facing code.
    mutants::run(&["--in-diff".to_string()])?;
    bench::run(&["--check".to_string()])?;
    coverage::run(&[])?;
    // Issue 7: every fuzz target for 30 s.
    fuzz::run(&["--secs".to_string(), "30".to_string()])?;
    // Issue 7: one minute of every call shape with cancellations.
    soak::run(&["--secs".to_string(), "60".to_string()])?;
    Ok(())
}
