//! `cargo xtask bench --bulk`: the large-message target. Runs the release
//! `weft-bulk` binary three times, each with its rounds interleaved (every
//! cell once per round, medians over rounds): the 64 KiB, 1 MiB and 8 MiB
//! echoes and the count-style stream of 1 MiB items, each in plain and
//! encrypted weft beside the raw tokio codec (and the codec with the same
//! AEAD), 8 calls in flight; then a small call's p50/p99 alone and beside
//! 1 MiB echoes. Prints the tables with the machine, date and load average
//! and writes them to target/bench/bulk.md (docs/BENCHMARKS.md's "Large
//! messages" section quotes them by hand: the prose around the figures is
//! the reading of them).
//!
//! The layout of record is split (`weft-bulk --split`): every server in a
//! process of its own on one core, the client on the other, so two shared
//! cores do not decide the figure. `-- --shared` runs client and server in
//! one process on one multi-thread runtime instead; `-- --runtime
//! multi-thread` gives each split process tokio's multi-thread runtime.

use crate::cmd;

use super::report::Context;

/// The runs, each a `weft-bulk` invocation (after `--rounds N`).
const RUNS: [(&str, &[&str]); 3] = [
    (
        "echo, 8 in flight",
        &["--shapes", "echo", "--sizes", "65536,1048576,8388608"],
    ),
    (
        "server streaming, 8 items of 1 MiB per call, 8 in flight",
        &["--shapes", "stream", "--sizes", "1048576"],
    ),
    ("a small call beside 1 MiB echoes", &["--latency"]),
];

/// The 1-minute load average, as /proc/loadavg gives it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// What goes to every `weft-bulk` run after its own options: `extra`, with
/// `--split` first unless `extra` asks for a layout itself (`--split`, or
/// `--shared` for both ends in one process).
fn layout_args(extra: &[String]) -> Vec<String> {
    let chosen = extra.iter().any(|a| a == "--split" || a == "--shared");
    let split = (!chosen).then(|| "--split".to_string());
    split.into_iter().chain(extra.iter().cloned()).collect()
}

/// Runs the bulk target with `rounds` rounds per run; `extra` goes to each
/// `weft-bulk` run after the run's own options (e.g. `--secs 2`), with
/// `--split` unless it names a layout.
pub(crate) fn run(rounds: usize, extra: &[String]) -> Result<(), String> {
    let context = Context::gather("cargo xtask bench --bulk")?;
    let rounds = rounds.to_string();
    let extra = layout_args(extra);
    let mut report = format!("{}\n", context.line());
    for (title, options) in RUNS {
        let mut args = vec![
            "run",
            "--quiet",
            "--release",
            "-p",
            "weft-benches",
            "--bin",
            "weft-bulk",
            "--",
            "--rounds",
            &rounds,
        ];
        args.extend_from_slice(options);
        args.extend(extra.iter().map(String::as_str));
        let before = load();
        let table = cmd::output("cargo", &args)?;
        let line = format!(
            "\n### {title}\n\n`weft-bulk {}` (load average {before} before, {} after)\n\n{table}",
            args[8..].join(" "),
            load()
        );
        println!("{line}");
        report.push_str(&line);
    }
    cmd::write("target/bench/bulk.md", &report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_split_layout_is_the_default_unless_a_layout_is_named() {
        assert_eq!(layout_args(&[]), args(&["--split"]));
        assert_eq!(
            layout_args(&args(&["--secs", "2"])),
            args(&["--split", "--secs", "2"])
        );
        let named = args(&["--split", "--runtime", "multi-thread"]);
        assert_eq!(layout_args(&named), named);
        assert_eq!(layout_args(&args(&["--shared"])), args(&["--shared"]));
    }
}
