//! `cargo xtask ci`: exactly what .ci/run runs, in order.

use crate::cmd;

/// Runs the CI steps; stops at the first failure.
pub(crate) fn run(_args: &[String]) -> Result<(), String> {
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
    Ok(())
}
