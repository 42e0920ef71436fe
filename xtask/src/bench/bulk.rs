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

/// Runs the bulk target with `rounds` rounds per run; `extra` goes to each
/// `weft-bulk` run after the run's own options (e.g. `--secs 2`).
pub(crate) fn run(rounds: usize, extra: &[String]) -> Result<(), String> {
    let context = Context::gather("cargo xtask bench --bulk")?;
    let rounds = rounds.to_string();
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
