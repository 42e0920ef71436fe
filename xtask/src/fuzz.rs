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

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let secs = crate::secs_option(args, "fuzz")?;
    let targets = bin_names(&cmd::read("fuzz/Cargo.toml")?);
    if targets.is_empty() {
        return Err("fuzz/Cargo.toml declares no [[bin]] targets".into());
    }
    if !cargo_fuzz_present() {
        cmd::run("cargo", &["install", "--locked", CARGO_FUZZ])?;
    }
    let max_time = format!("-max_total_time={secs}");
    for target in &targets {
        cmd::run(
            "cargo",
            &[
                "+nightly",
                "fuzz",
                "run",
                "--fuzz-dir",
                "fuzz",
                target,
                "--",
                &max_time,
            ],
        )?;
    }
    println!("fuzz: {} targets, {secs} s each, no failure", targets.len());
    Ok(())
}

/// Whether `cargo fuzz` runs at all (then nothing is installed).
fn cargo_fuzz_present() -> bool {
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
    fn the_committed_fuzz_manifest_has_targets() {
        let names = bin_names(&cmd::read("fuzz/Cargo.toml").unwrap());
        assert!(names.contains(&"frame_decode".to_string()), "{names:?}");
    }
}
