//! `cargo xtask bench --peers`: runs the `weft-peers` binary (every peer
//! interleaved, A B C D A B C D …, over several rounds, release build), then
//! prints medians and ratios and renders the peers section of
//! docs/BENCHMARKS.md.

use std::fmt::Write as _;

use serde_json::Value;

use crate::cmd;
use crate::stats::{Summary, format_ns, three_digits};

use super::report::{self, Context};
use super::svg::{self, Bar};

/// The sequential figures are compared with this peer (the floor).
const SEQUENTIAL_REFERENCE: &str = "std-net";
/// The concurrent throughput is compared with this peer.
const CONCURRENT_REFERENCE: &str = "tarpc";
/// weft's two entries in the peers binary.
const WEFT_PLAIN: &str = "weft";
const WEFT_ENCRYPTED: &str = "weft-encrypted";
/// Issue 5's targets: weft sequential within this factor of std-net's round
/// trip (plain and encrypted).
const MAX_VS_FLOOR: f64 = 1.5;
/// weft's throughput with calls in flight at least this multiple of tarpc's.
const MIN_VS_TARPC: f64 = 4.0;
/// Calls each spawned caller makes per round (`weft-peers --spawned`).
const SPAWNED_CALLS: &str = "300";
/// Encryption costs at most this factor over plain.
const MAX_ENCRYPTED_VS_PLAIN: f64 = 1.1;

/// One peer's figures over the rounds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PeerRow {
    pub(crate) name: String,
    pub(crate) description: String,
    /// Round medians of one sequential round trip, ns.
    pub(crate) sequential: Summary,
    /// Round medians of one batch of `inflight` concurrent calls, ns.
    pub(crate) batch: Summary,
    /// Per-call wall time of each round with `inflight` spawned callers,
    /// ns; `None` for a peer without multiplexing.
    pub(crate) spawned: Option<Summary>,
}

/// What the peers binary measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PeersRun {
    pub(crate) rounds: u64,
    pub(crate) calls: u64,
    pub(crate) batches: u64,
    pub(crate) inflight: u64,
    /// Calls per spawned caller and round (0: not measured).
    pub(crate) spawned_calls: u64,
    pub(crate) peers: Vec<PeerRow>,
}

pub(crate) fn run(rounds: usize) -> Result<(), String> {
    let context = Context::gather("cargo xtask bench --peers")?;
    let rounds = rounds.to_string();
    let json = cmd::output(
        "cargo",
        &[
            "run",
            "--quiet",
            "--release",
            "-p",
            "weft-peers",
            "--",
            "--rounds",
            &rounds,
            "--spawned",
            SPAWNED_CALLS,
        ],
    )?;
    cmd::write("target/bench/peers.json", &json)?;
    let run = parse(&json)?;
    let table = format!("{}\n{}\n{}", table(&run), spawned_table(&run), ratios(&run));
    println!("\n{table}");
    report::update_doc("xtask bench --peers", &section(&context, &run, &table))?;
    cmd::write("docs/benchmarks-peers.svg", &chart(&run))
}

/// Parses the peers binary's JSON.
pub(crate) fn parse(json: &str) -> Result<PeersRun, String> {
    let doc: Value = serde_json::from_str(json).map_err(|e| format!("peers output: {e}"))?;
    let number = |key: &str| doc[key].as_u64().ok_or(format!("peers output: no {key:?}"));
    let summary = |p: &Value, key: &str| {
        let samples: Vec<f64> = p[key]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        Summary::of(&samples).ok_or(format!("peers output: no samples in {key:?}"))
    };
    let peers = doc["peers"]
        .as_array()
        .ok_or("peers output: no \"peers\" array")?
        .iter()
        .map(|p| {
            Ok(PeerRow {
                name: p["name"].as_str().unwrap_or("?").to_string(),
                description: p["description"].as_str().unwrap_or("").to_string(),
                sequential: summary(p, "sequential_round_ns")?,
                batch: summary(p, "concurrent_batch_round_ns")?,
                spawned: summary(p, "spawned_call_round_ns").ok(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(PeersRun {
        rounds: number("rounds")?,
        calls: number("calls")?,
        batches: number("batches")?,
        inflight: number("inflight")?,
        spawned_calls: doc["spawned"].as_u64().unwrap_or(0),
        peers,
    })
}

impl PeersRun {
    /// Calls per second with `inflight` calls in flight, at the median batch.
    fn throughput(&self, row: &PeerRow) -> f64 {
        self.inflight as f64 / (row.batch.median / 1e9)
    }

    /// Calls per second with `inflight` spawned callers, at the median.
    fn spawned_throughput(row: &PeerRow) -> Option<f64> {
        row.spawned.as_ref().map(|s| 1e9 / s.median)
    }

    fn find(&self, name: &str) -> Option<&PeerRow> {
        self.peers.iter().find(|p| p.name == name)
    }
}

/// The comparison table (markdown; also what the terminal shows).
pub(crate) fn table(run: &PeersRun) -> String {
    let seq_ref = run.find(SEQUENTIAL_REFERENCE).map(|r| r.sequential.median);
    let conc_ref = run.find(CONCURRENT_REFERENCE).map(|r| run.throughput(r));
    let ratio = |value: f64, reference: Option<f64>| {
        reference.map_or("—".to_string(), |r| {
            format!("{}×", three_digits(value / r))
        })
    };
    let mut out = format!(
        "| peer | sequential round trip | spread | vs {SEQUENTIAL_REFERENCE} | {} in flight: per call | spread | calls/s | vs {CONCURRENT_REFERENCE} calls/s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        run.inflight
    );
    for p in &run.peers {
        let calls_per_second = run.throughput(p);
        let _ = writeln!(
            out,
            "| {} | {} | ±{:.1} % | {} | {} | ±{:.1} % | {:.0} | {} |",
            p.name,
            format_ns(p.sequential.median),
            p.sequential.spread_percent(),
            ratio(p.sequential.median, seq_ref),
            format_ns(p.batch.median / run.inflight as f64),
            p.batch.spread_percent(),
            calls_per_second,
            ratio(calls_per_second, conc_ref),
        );
    }
    out
}

/// The spawned-callers table: only the peers that have that measurement
/// (markdown; empty when none has).
pub(crate) fn spawned_table(run: &PeersRun) -> String {
    if run.peers.iter().all(|p| p.spawned.is_none()) {
        return String::new();
    }
    let reference = run
        .find(CONCURRENT_REFERENCE)
        .and_then(PeersRun::spawned_throughput);
    let mut out = format!(
        "| peer | {} spawned callers: per call | spread | calls/s | vs {CONCURRENT_REFERENCE} calls/s |\n\
         |---|---:|---:|---:|---:|\n",
        run.inflight
    );
    for p in &run.peers {
        let (Some(s), Some(calls_per_second)) = (&p.spawned, PeersRun::spawned_throughput(p))
        else {
            continue;
        };
        let _ = writeln!(
            out,
            "| {} | {} | ±{:.1} % | {:.0} | {} |",
            p.name,
            format_ns(s.median),
            s.spread_percent(),
            calls_per_second,
            reference.map_or("—".to_string(), |r| format!(
                "{}×",
                three_digits(calls_per_second / r)
            )),
        );
    }
    out
}

/// weft's three target ratios, each with its target and whether this run met
/// it (markdown list; the terminal shows it under the table). Read, never
/// gated: the figures are wall time on a shared machine.
pub(crate) fn ratios(run: &PeersRun) -> String {
    let (Some(plain), Some(encrypted)) = (run.find(WEFT_PLAIN), run.find(WEFT_ENCRYPTED)) else {
        return "weft ratios: the run has no weft entries\n".to_string();
    };
    let mut lines = Vec::new();
    let mut line = |what: String, value: f64, at_most: bool, target: f64| {
        let met = if at_most {
            value <= target
        } else {
            value >= target
        };
        lines.push(format!(
            "- {what}: **{}×** (target {} {}×: {})",
            three_digits(value),
            if at_most { "≤" } else { "≥" },
            target,
            if met { "met" } else { "NOT met" }
        ));
    };
    if let Some(floor) = run.find(SEQUENTIAL_REFERENCE) {
        for p in [plain, encrypted] {
            line(
                format!("{} sequential round trip vs {SEQUENTIAL_REFERENCE}", p.name),
                p.sequential.median / floor.sequential.median,
                true,
                MAX_VS_FLOOR,
            );
        }
    }
    if let Some(reference) = run.find(CONCURRENT_REFERENCE) {
        for p in [plain, encrypted] {
            line(
                format!(
                    "{} calls/s with {} in flight vs {CONCURRENT_REFERENCE}",
                    p.name, run.inflight
                ),
                run.throughput(p) / run.throughput(reference),
                false,
                MIN_VS_TARPC,
            );
        }
        // The same target read for spawned callers ("64 concurrent
        // callers"), when the run has that measurement.
        for p in [plain, encrypted] {
            if let (Some(weft), Some(tarpc)) = (
                PeersRun::spawned_throughput(p),
                PeersRun::spawned_throughput(reference),
            ) {
                line(
                    format!(
                        "{} calls/s with {} spawned callers vs {CONCURRENT_REFERENCE}",
                        p.name, run.inflight
                    ),
                    weft / tarpc,
                    false,
                    MIN_VS_TARPC,
                );
            }
        }
    }
    line(
        "encrypted vs plain, sequential round trip".to_string(),
        encrypted.sequential.median / plain.sequential.median,
        true,
        MAX_ENCRYPTED_VS_PLAIN,
    );
    line(
        format!(
            "encrypted vs plain, per call with {} in flight",
            run.inflight
        ),
        encrypted.batch.median / plain.batch.median,
        true,
        MAX_ENCRYPTED_VS_PLAIN,
    );
    format!("weft's targets (this run):\n\n{}\n", lines.join("\n"))
}

fn section(context: &Context, run: &PeersRun, table: &str) -> String {
    let mut peers = String::new();
    for p in &run.peers {
        let _ = writeln!(peers, "- `{}`: {}", p.name, p.description);
    }
    format!(
        "{}\n\nEach of {} rounds runs every peer in turn (interleaved); a round's figure is \
         the median of {} sequential calls, or of {} batches of {} concurrent calls (one task \
         joining them), after a warm-up; the spawned-callers figure is the wall time per call \
         of {} spawned tasks making {} calls each, one after another, each with a clone of \
         one client. The tables give the median of the round figures and ± half their range. \
         Nil request, 7-byte `{{\"n\":1}}` response, TCP loopback, one connection, client and \
         server in one process.\n\n{}\n{}\n![peers](benchmarks-peers.svg)\n",
        context.line(),
        run.rounds,
        run.calls,
        run.batches,
        run.inflight,
        run.inflight,
        run.spawned_calls,
        peers,
        table
    )
}

fn chart(run: &PeersRun) -> String {
    let mut bars: Vec<Bar> = run
        .peers
        .iter()
        .map(|p| Bar {
            label: format!("{} sequential", p.name),
            value: p.sequential.median,
            text: format_ns(p.sequential.median),
        })
        .collect();
    bars.extend(run.peers.iter().map(|p| {
        let per_call = p.batch.median / run.inflight as f64;
        Bar {
            label: format!("{} {} in flight", p.name, run.inflight),
            value: per_call,
            text: format!("{} per call", format_ns(per_call)),
        }
    }));
    svg::bars(
        "Round trip per call (lower is better)",
        "nil request, 7-byte response, TCP loopback; median of interleaved rounds",
        &bars,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = r#"{"rounds": 3, "calls": 100, "batches": 10, "inflight": 64, "peers": [
        {"name": "std-net", "description": "floor", "sequential_round_ns": [20000, 22000, 21000], "concurrent_batch_round_ns": [64000, 64000, 64000]},
        {"name": "tarpc", "description": "tarpc", "sequential_round_ns": [40000, 44000, 42000], "concurrent_batch_round_ns": [640000, 600000, 680000]}]}"#;

    #[test]
    fn medians_and_ratios_against_the_references() {
        let run = parse(RUN).unwrap();
        assert_eq!(run.peers[1].sequential.median, 42000.0);
        let table = table(&run);
        let tarpc = table.lines().find(|l| l.starts_with("| tarpc")).unwrap();
        // 42 µs vs 21 µs sequential; 100 000 calls/s vs std-net's 1 000 000
        assert_eq!(
            tarpc,
            "| tarpc | 42.0 µs | ±4.8 % | 2.00× | 10.0 µs | ±6.2 % | 100000 | 1.00× |"
        );
        let std = table.lines().find(|l| l.starts_with("| std-net")).unwrap();
        assert!(std.ends_with("| 1000000 | 10.0× |"), "{std}");
    }

    #[test]
    fn weft_ratios_name_their_targets_and_say_whether_met() {
        let weft = r#"{"name": "weft", "description": "w", "sequential_round_ns": [30000], "concurrent_batch_round_ns": [64000]},
        {"name": "weft-encrypted", "description": "e", "sequential_round_ns": [36000], "concurrent_batch_round_ns": [67200]},
        {"name": "std-net""#;
        let run = parse(&RUN.replacen(r#"{"name": "std-net""#, weft, 1)).unwrap();
        let ratios = ratios(&run);
        // 30 µs vs std-net's 21 µs; 1 000 000 calls/s vs tarpc's 100 000
        assert!(
            ratios.contains(
                "- weft sequential round trip vs std-net: **1.43×** (target ≤ 1.5×: met)"
            ),
            "{ratios}"
        );
        assert!(ratios.contains("- weft-encrypted sequential round trip vs std-net: **1.71×** (target ≤ 1.5×: NOT met)"), "{ratios}");
        assert!(
            ratios.contains(
                "- weft calls/s with 64 in flight vs tarpc: **10.0×** (target ≥ 4×: met)"
            ),
            "{ratios}"
        );
        assert!(
            ratios.contains(
                "- encrypted vs plain, sequential round trip: **1.20×** (target ≤ 1.1×: NOT met)"
            ),
            "{ratios}"
        );
        assert!(
            ratios.contains(
                "- encrypted vs plain, per call with 64 in flight: **1.05×** (target ≤ 1.1×: met)"
            ),
            "{ratios}"
        );
        assert!(!ratios.contains("spawned"), "{ratios}");
        let without = parse(RUN).unwrap();
        assert!(super::ratios(&without).contains("no weft entries"));
    }

    #[test]
    fn spawned_callers_get_their_table_and_ratio_when_measured() {
        let run = parse(RUN).unwrap();
        assert_eq!(spawned_table(&run), "", "no peer has the measurement");
        // tarpc 5 µs per call with spawned callers; weft 2 µs: 2.5×
        let json = RUN
            .replacen(r#""inflight": 64,"#, r#""inflight": 64, "spawned": 300,"#, 1)
            .replacen(
                r#""concurrent_batch_round_ns": [640000, 600000, 680000]"#,
                r#""concurrent_batch_round_ns": [640000, 600000, 680000], "spawned_call_round_ns": [5000, 5200, 4800]"#,
                1,
            )
            .replacen(
                r#"{"name": "std-net""#,
                r#"{"name": "weft", "description": "w", "sequential_round_ns": [30000], "concurrent_batch_round_ns": [64000], "spawned_call_round_ns": [2000]},
        {"name": "weft-encrypted", "description": "e", "sequential_round_ns": [36000], "concurrent_batch_round_ns": [67200], "spawned_call_round_ns": [2500]},
        {"name": "std-net""#,
                1,
            );
        let run = parse(&json).unwrap();
        assert_eq!(run.spawned_calls, 300);
        let table = spawned_table(&run);
        assert!(!table.contains("std-net"), "{table}");
        assert!(
            table.contains("| tarpc | 5.00 µs | ±4.0 % | 200000 | 1.00× |"),
            "{table}"
        );
        assert!(
            table.contains("| weft | 2.00 µs | ±0.0 % | 500000 | 2.50× |"),
            "{table}"
        );
        let ratios = ratios(&run);
        assert!(
            ratios.contains(
                "- weft calls/s with 64 spawned callers vs tarpc: **2.50×** (target ≥ 4×: NOT met)"
            ),
            "{ratios}"
        );
        assert!(
            section(
                &Context {
                    command: "test".to_string(),
                    date: "today".to_string(),
                    machine: "here".to_string(),
                },
                &run,
                &table
            )
            .contains("64 spawned tasks making 300 calls each")
        );
    }

    #[test]
    fn a_peer_without_samples_is_an_error() {
        let broken = RUN.replace("[20000, 22000, 21000]", "[]");
        assert!(parse(&broken).is_err());
    }
}
