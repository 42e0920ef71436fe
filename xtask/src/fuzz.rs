//! `cargo xtask fuzz --secs N`: every cargo-fuzz target in fuzz/ for N
//! seconds each (nightly, libFuzzer, AddressSanitizer); fails if any fails.
//!
//! The targets are the `[[bin]]` names of fuzz/Cargo.toml, so a new target
//! runs as soon as it is declared. Installs cargo-fuzz 0.13.2 if `cargo
//! fuzz` is missing. New corpus entries go to fuzz/corpus/NAME/ (git
//! ignores all but the committed `seed-*` files); crashes to fuzz/artifacts/.

use std::process::{Command, Stdio};

use crate::cmd;

const CARGO_FUZZ: &str = "cargo-fuzz@0.13.2";

/// What builds every target: `cargo xtask ci` starts the same command
/// early in the background ([`crate::prebuild`]), when cargo-fuzz is there.
pub(crate) const BUILD: [&str; 5] = ["+nightly", "fuzz", "build", "--fuzz-dir", "fuzz"];

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let secs = crate::secs_option(args, "fuzz")?;
    let targets = bin_names(&cmd::read("fuzz/Cargo.toml")?);
    if targets.is_empty() {
        return Err("fuzz/Cargo.toml declares no [[bin]] targets".into());
    }
    if !cargo_fuzz_present() {
        cmd::run("cargo", &["install", "--locked", CARGO_FUZZ])?;
    }
    // One build for every target, then the targets side by side, one per
    // core: each still gets N seconds of one core, and the step takes
    // N seconds a wave instead of N seconds a target.
    cmd::run("cargo", &BUILD)?;
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let logs = cmd::root().join("target").join("fuzz-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("fuzz: {}: {e}", logs.display()))?;
    let max_time = format!("-max_total_time={secs}");
    for wave in waves(&targets, jobs) {
        let mut running = Vec::new();
        for target in wave {
            let log = logs.join(format!("{target}.log"));
            let out =
                std::fs::File::create(&log).map_err(|e| format!("fuzz: {}: {e}", log.display()))?;
            let err = out.try_clone().map_err(|e| format!("fuzz: {e}"))?;
            println!(
                "$ cargo +nightly fuzz run --fuzz-dir fuzz {target} -- {max_time}  (log: {})",
                log.display()
            );
            let child = Command::new("cargo")
                .args([
                    "+nightly",
                    "fuzz",
                    "run",
                    "--fuzz-dir",
                    "fuzz",
                    target,
                    "--",
                    &max_time,
                ])
                .current_dir(cmd::root())
                .stdout(out)
                .stderr(err)
                .spawn()
                .map_err(|e| format!("fuzz: could not start cargo fuzz: {e}"))?;
            running.push((target, log, child));
        }
        let mut failed = Vec::new();
        for (target, log, mut child) in running {
            let status = child.wait().map_err(|e| format!("fuzz: {target}: {e}"))?;
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text
                .lines()
                .rev()
                .take(if status.success() { 2 } else { 60 })
                .collect();
            println!("fuzz {target}: {status}");
            for line in tail.into_iter().rev() {
                println!("  {line}");
            }
            if !status.success() {
                failed.push(target.clone());
            }
        }
        if !failed.is_empty() {
            return Err(format!(
                "fuzz: {} failed (crash inputs in fuzz/artifacts/)",
                failed.join(", ")
            ));
        }
    }
    println!(
        "fuzz: {} targets, {secs} s each, {jobs} at a time, no failure",
        targets.len()
    );
    Ok(())
}

/// `targets` in waves of at most `jobs`, in order.
fn waves(targets: &[String], jobs: usize) -> std::slice::Chunks<'_, String> {
    targets.chunks(jobs.max(1))
}

/// Whether `cargo fuzz` runs at all (then nothing is installed).
pub(crate) fn cargo_fuzz_present() -> bool {
    Command::new("cargo")
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The `name` of every `[[bin]]` table of a Cargo.toml, in order. A line
/// parser (xtask has no TOML dependency): `name = "..."` counts only
/// between a `[[bin]]` header and the next header.
fn bin_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin
            && let Some(value) = line.strip_prefix("name").map(str::trim_start)
            && let Some(value) = value.strip_prefix('=')
        {
            names.push(value.trim().trim_matches('"').to_string());
            in_bin = false;
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_names_are_read_from_bin_tables_only() {
        let manifest = r#"
[package]
name = "weft-fuzz"

[[bin]]
name = "frame_decode"
path = "fuzz_targets/frame_decode.rs"

[dependencies]
name = "not-a-target"

[[bin]]
path = "fuzz_targets/record.rs"
name  =  "record"
"#;
        assert_eq!(bin_names(manifest), ["frame_decode", "record"]);
    }

    #[test]
    fn targets_run_in_waves_of_the_core_count() {
        let t: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        let w: Vec<&[String]> = waves(&t, 2).collect();
        assert_eq!(w, [&t[0..2], &t[2..4], &t[4..5]]);
        assert_eq!(waves(&t, 0).count(), 5, "no cores reported: one at a time");
        assert_eq!(waves(&t, 8).count(), 1);
    }

    #[test]
    fn the_committed_fuzz_manifest_has_targets() {
        let names = bin_names(&cmd::read("fuzz/Cargo.toml").unwrap());
        assert!(names.contains(&"frame_decode".to_string()), "{names:?}");
    }
}
