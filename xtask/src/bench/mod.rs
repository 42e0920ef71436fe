//! `cargo xtask bench`: timings (divan), the allocation gate (the
//! `weft-alloc` harness against benches/alloc-baseline.json), one table, the
//! results as JSON under target/bench/ and the generated sections of
//! docs/BENCHMARKS.md.
//!
//! - `bench`: all of it; fails if an allocation count is above the baseline.
//! - `bench --check` (CI): the allocation gate and one smoke run of every
//!   divan bench (`cargo test --benches -p weft-benches`); no timing.
//! - `bench --bless`: rewrites the baseline with the measured counts first.
//! - `bench --peers`: weft against std::net, tokio's codec, tarpc and tonic.
//! - `bench --bulk`: large messages (64 KiB-8 MiB echoes, a server stream of
//!   1 MiB items, a small call's p99 beside them) against the raw codec,
//!   in the split layout (`-- --shared` for one process); `--rounds N`
//!   (default 3), anything after `--` goes to `weft-bulk`.
//! - `--runs N` (divan runs per figure, default 3), `--rounds N` (peer
//!   rounds, default 5); with `--peers`, anything after `--` goes to the
//!   `weft-peers` binary (`-- --shape spawned-64 --only weft,tarpc`).

mod alloc;
mod bulk;
mod divan;
mod peers;
pub(crate) mod report;
mod svg;

use serde_json::json;

use crate::cmd;
use crate::stats::Summary;
use alloc::{Finding, Measured};
use report::{Context, TargetRow};
use svg::Bar;

#[derive(Debug, Default, PartialEq)]
struct Options {
    check: bool,
    bless: bool,
    peers: bool,
    bulk: bool,
    runs: usize,
    rounds: usize,
    /// `weft-peers` or `weft-bulk` options (after `--`; only with `--peers`
    /// or `--bulk`).
    peer_args: Vec<String>,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        runs: 3,
        rounds: 5,
        ..Options::default()
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => options.check = true,
            "--bless" => options.bless = true,
            "--peers" => options.peers = true,
            "--bulk" => options.bulk = true,
            "--" => options.peer_args = args.by_ref().cloned().collect(),
            "--runs" | "--rounds" => {
                let n = args
                    .next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{arg} needs a positive number"))?;
                if arg == "--runs" {
                    options.runs = n;
                } else {
                    options.rounds = n;
                }
            }
            other => return Err(format!("bench: unknown option {other:?}")),
        }
    }
    if (options.peers || options.bulk) && (options.check || options.bless) {
        return Err("bench: --peers and --bulk run alone (no --check or --bless)".into());
    }
    if options.peers && options.bulk {
        return Err("bench: --peers or --bulk, one at a time".into());
    }
    if !options.peer_args.is_empty() && !options.peers && !options.bulk {
        return Err("bench: options after -- are for --peers or --bulk".into());
    }
    Ok(options)
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let options = parse_options(args)?;
    if options.peers {
        return peers::run(options.rounds, &options.peer_args);
    }
    if options.bulk {
        // Rounds default to 3 here: each bulk round takes over a minute.
        let rounds = if args.iter().any(|a| a == "--rounds") {
            options.rounds
        } else {
            3
        };
        return bulk::run(rounds, &options.peer_args);
    }
    let measured = alloc::measure()?;
    if options.bless {
        let old = alloc::load_baseline(alloc::BASELINE).unwrap_or_default();
        cmd::write(alloc::BASELINE, &alloc::blessed(&measured, &old))?;
    }
    let findings = alloc::compare(&measured, &alloc::load_baseline(alloc::BASELINE)?);
    println!("\nallocation gate ({}):", alloc::BASELINE);
    for f in &findings {
        println!("  {}", f.message);
    }
    if options.check {
        gate(&findings)?;
        return cmd::run("cargo", &["test", "--benches", "-p", "weft-benches"]);
    }
    let context = Context::gather("cargo xtask bench")?;
    let timings = divan::measure(options.runs)?;
    let rows = rows(&measured, &findings, &timings);
    let table = report::targets_table(&rows);
    println!("\n{table}");
    cmd::write(
        "target/bench/results.json",
        &results_json(&context, options.runs, &rows),
    )?;
    report::update_doc(
        report::TARGETS_SECTION,
        &report::targets_section(&context, options.runs, &rows),
    )?;
    cmd::write("docs/benchmarks.svg", &chart(&rows))?;
    gate(&findings)
}

/// Fails if any finding fails, naming them.
fn gate(findings: &[Finding]) -> Result<(), String> {
    let failed: Vec<&str> = findings
        .iter()
        .filter(|f| f.outcome.fails())
        .map(|f| f.message.as_str())
        .collect();
    if failed.is_empty() {
        println!("allocation gate: pass ({} targets)", findings.len());
        Ok(())
    } else {
        Err(format!(
            "allocation gate failed:\n  {}",
            failed.join("\n  ")
        ))
    }
}

/// Joins harness counts and divan timings by target name; divan rows the
/// registry does not know are listed after, without counts.
fn rows(
    measured: &[Measured],
    findings: &[Finding],
    timings: &std::collections::BTreeMap<String, Vec<f64>>,
) -> Vec<TargetRow> {
    let mut rows: Vec<TargetRow> = measured
        .iter()
        .map(|m| TargetRow {
            name: m.name.clone(),
            label: m.label.clone(),
            time: timings.get(&m.name).and_then(|t| Summary::of(t)),
            bytes_processed: m.bytes_processed,
            allocs: Some(m.allocs),
            bytes: Some(m.bytes),
            gate: findings
                .iter()
                .find(|f| f.name == m.name)
                .map(|f| f.outcome),
        })
        .collect();
    for (name, samples) in timings {
        if !measured.iter().any(|m| &m.name == name) {
            rows.push(TargetRow {
                name: name.clone(),
                label: name.clone(),
                time: Summary::of(samples),
                bytes_processed: None,
                allocs: None,
                bytes: None,
                gate: None,
            });
        }
    }
    rows
}

fn results_json(context: &Context, runs: usize, rows: &[TargetRow]) -> String {
    let targets: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "label": r.label,
                "median_ns": r.time.map(|t| t.median),
                "min_ns": r.time.map(|t| t.min),
                "max_ns": r.time.map(|t| t.max),
                "runs": r.time.map(|t| t.samples),
                "throughput_bytes_per_s": r.throughput(),
                "allocs_per_op": r.allocs,
                "bytes_per_op": r.bytes,
                "gate": r.gate.map(|g| format!("{g:?}")),
            })
        })
        .collect();
    let doc = json!({
        "command": context.command,
        "date": context.date,
        "machine": context.machine,
        "divan_runs": runs,
        "targets": targets,
    });
    serde_json::to_string_pretty(&doc).expect("a JSON value serialises") + "\n"
}

fn chart(rows: &[TargetRow]) -> String {
    let bars: Vec<Bar> = rows
        .iter()
        .filter_map(|r| {
            let t = r.time?;
            Some(Bar {
                label: r.label.clone(),
                value: t.median,
                text: crate::stats::format_ns(t.median),
            })
        })
        .collect();
    svg::bars(
        "Time per op (median; logarithmic scale)",
        "cargo xtask bench: divan medians; see BENCHMARKS.md for machine and spread",
        &bars,
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_parse_and_reject_nonsense() {
        let o = parse_options(&args(&["--check"])).unwrap();
        assert!(o.check && !o.bless && !o.peers);
        assert_eq!((o.runs, o.rounds), (3, 5));
        let o = parse_options(&args(&["--peers", "--rounds", "7"])).unwrap();
        assert_eq!((o.peers, o.rounds), (true, 7));
        assert!(parse_options(&args(&["--runs", "0"])).is_err());
        assert!(parse_options(&args(&["--runs"])).is_err());
        assert!(parse_options(&args(&["--fast"])).is_err());
        assert!(parse_options(&args(&["--peers", "--bless"])).is_err());
        let o = parse_options(&args(&[
            "--peers",
            "--",
            "--shape",
            "sequential",
            "--check",
        ]))
        .unwrap();
        assert_eq!(o.peer_args, ["--shape", "sequential", "--check"]);
        assert!(!o.check, "after -- nothing is xtask's");
        assert!(parse_options(&args(&["--", "--shape", "sequential"])).is_err());
        let o = parse_options(&args(&["--bulk", "--", "--secs", "2"])).unwrap();
        assert!(o.bulk && !o.peers);
        assert_eq!(o.peer_args, ["--secs", "2"]);
        assert!(parse_options(&args(&["--bulk", "--peers"])).is_err());
        assert!(parse_options(&args(&["--bulk", "--check"])).is_err());
    }

    #[test]
    fn the_gate_fails_on_any_failing_finding_only() {
        let finding = |outcome| Finding {
            name: "a/b".into(),
            outcome,
            message: format!("a/b {outcome:?}"),
        };
        assert!(
            gate(&[
                finding(alloc::Outcome::Pass),
                finding(alloc::Outcome::Improved)
            ])
            .is_ok()
        );
        let err = gate(&[
            finding(alloc::Outcome::Pass),
            finding(alloc::Outcome::Regressed),
        ])
        .unwrap_err();
        assert!(err.contains("Regressed") && !err.contains("Pass"), "{err}");
    }

    #[test]
    fn rows_join_counts_and_timings_by_name() {
        let measured = vec![Measured {
            name: "frame/decode/64".into(),
            label: "frame decode 64 B".into(),
            allocs: 0.0,
            bytes: 0.0,
            bytes_processed: Some(92),
        }];
        let mut timings = std::collections::BTreeMap::new();
        timings.insert("frame/decode/64".to_string(), vec![30.0, 26.0, 28.0]);
        timings.insert("frame/other".to_string(), vec![5.0]);
        let rows = rows(&measured, &[], &timings);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].time.unwrap().median, 28.0);
        assert_eq!(rows[0].allocs, Some(0.0));
        assert_eq!(
            (rows[1].label.as_str(), rows[1].allocs),
            ("frame/other", None)
        );
    }
}
