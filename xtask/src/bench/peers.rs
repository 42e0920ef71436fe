//! `cargo xtask bench --peers`: runs the `weft-peers` binary (release; every
//! cell, a peer in a shape on a runtime, interleaved over several rounds),
//! then prints one table per runtime and the target ratios, and, when the
//! run was complete (no filter), renders the peers section of
//! docs/BENCHMARKS.md and its chart.

mod targets;

use std::fmt::Write as _;

use serde_json::Value;

use crate::cmd;
use crate::stats::{Summary, format_ns, three_digits};

use super::report::{self, Context};
use super::svg::{self, Bar};

/// The throughput of every cell is compared with this peer's, same shape
/// and runtime.
const THROUGHPUT_REFERENCE: &str = "tarpc";
/// The time per call of every cell is compared with this peer's (the
/// floor), where it has the shape.
const FLOOR: &str = "std-net";
/// The runtime the targets are read on, and the chart shows.
const DEFAULT_RUNTIME: &str = "multi-thread";
/// The `format` of the peers binary's JSON this reader understands.
const FORMAT: u64 = 2;

/// A runtime or shape as the peers binary describes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Named {
    pub(crate) name: String,
    pub(crate) description: String,
}

/// One peer in one shape on one runtime, over the rounds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cell {
    pub(crate) runtime: String,
    pub(crate) shape: String,
    /// Timed calls per round.
    pub(crate) calls: u64,
    /// Per-call wall time of each round, ns.
    pub(crate) per_call: Summary,
}

impl Cell {
    /// Calls per second at the median round.
    pub(crate) fn calls_per_second(&self) -> f64 {
        1e9 / self.per_call.median
    }
}

/// One peer's cells.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PeerRow {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) cells: Vec<Cell>,
}

/// What the peers binary measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PeersRun {
    pub(crate) rounds: u64,
    /// Timed calls per cell and round, as asked (see each cell's own).
    pub(crate) calls: u64,
    pub(crate) warm_up: u64,
    /// No peer, default shape or runtime was filtered out.
    pub(crate) complete: bool,
    pub(crate) runtimes: Vec<Named>,
    pub(crate) shapes: Vec<Named>,
    pub(crate) peers: Vec<PeerRow>,
}

impl PeersRun {
    /// `peer`'s cell in `shape` on `runtime`, if measured.
    pub(crate) fn cell(&self, peer: &str, runtime: &str, shape: &str) -> Option<&Cell> {
        self.peers
            .iter()
            .find(|p| p.name == peer)?
            .cells
            .iter()
            .find(|c| c.runtime == runtime && c.shape == shape)
    }
}

/// Runs the peers binary with `--rounds rounds` and then `peer_args` (its
/// own options, which override), writes target/bench/peers.json and prints
/// the tables; rewrites the docs only for a complete run.
pub(crate) fn run(rounds: usize, peer_args: &[String]) -> Result<(), String> {
    let context = Context::gather("cargo xtask bench --peers")?;
    let rounds = rounds.to_string();
    let mut args = vec![
        "run",
        "--quiet",
        "--release",
        "-p",
        "weft-peers",
        "--",
        "--rounds",
        &rounds,
    ];
    args.extend(peer_args.iter().map(String::as_str));
    let json = cmd::output("cargo", &args)?;
    cmd::write("target/bench/peers.json", &json)?;
    let run = parse(&json)?;
    let tables = tables(&run);
    if json.contains("\"layout\": \"split\"") {
        println!("\nsplit layout: each server in its own process on core 0, the clients on core 1");
    }
    println!("\n{tables}");
    if !run.complete {
        println!("(a filtered run: docs/BENCHMARKS.md left as it was)");
        return Ok(());
    }
    report::update_doc(report::PEERS_SECTION, &section(&context, &run, &tables))?;
    cmd::write("docs/benchmarks-peers.svg", &chart(&run))
}

/// Parses the peers binary's JSON (`format` 2).
pub(crate) fn parse(json: &str) -> Result<PeersRun, String> {
    let doc: Value = serde_json::from_str(json).map_err(|e| format!("peers output: {e}"))?;
    if doc["format"].as_u64() != Some(FORMAT) {
        return Err(format!(
            "peers output: not format {FORMAT} (an older weft-peers? run it again)"
        ));
    }
    let number = |v: &Value, key: &str| v[key].as_u64().ok_or(format!("peers output: no {key:?}"));
    let text = |v: &Value, key: &str| {
        v[key]
            .as_str()
            .map(str::to_string)
            .ok_or(format!("peers output: no {key:?}"))
    };
    let array = |v: &Value, key: &str| {
        v[key]
            .as_array()
            .cloned()
            .ok_or(format!("peers output: no {key:?} array"))
    };
    let named = |key: &str| {
        array(&doc, key)?
            .iter()
            .map(|n| {
                Ok(Named {
                    name: text(n, "name")?,
                    description: text(n, "description")?,
                })
            })
            .collect::<Result<Vec<_>, String>>()
    };
    let cell = |c: &Value| {
        let (runtime, shape) = (text(c, "runtime")?, text(c, "shape")?);
        let samples: Vec<f64> = array(c, "per_call_round_ns")?
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        Ok(Cell {
            per_call: Summary::of(&samples)
                .filter(|s| s.min > 0.0)
                .ok_or(format!("peers output: no samples for {shape} on {runtime}"))?,
            calls: number(c, "calls")?,
            runtime,
            shape,
        })
    };
    let peers = array(&doc, "peers")?
        .iter()
        .map(|p| {
            Ok(PeerRow {
                name: text(p, "name")?,
                description: text(p, "description")?,
                cells: array(p, "cells")?
                    .iter()
                    .map(cell)
                    .collect::<Result<_, String>>()?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(PeersRun {
        rounds: number(&doc, "rounds")?,
        calls: number(&doc, "calls")?,
        warm_up: number(&doc, "warm_up")?,
        complete: doc["complete"].as_bool().unwrap_or(false),
        runtimes: named("runtimes")?,
        shapes: named("shapes")?,
        peers,
    })
}

/// `value / reference` as `2.50×`, or `—` without a reference.
fn times(value: f64, reference: Option<f64>) -> String {
    reference.map_or("—".to_string(), |r| {
        format!("{}×", three_digits(value / r))
    })
}

/// One runtime's table: a row per shape and peer (markdown; also what the
/// terminal shows).
pub(crate) fn runtime_table(run: &PeersRun, runtime: &str) -> String {
    let mut out = format!(
        "| shape | peer | per call | spread | calls/s | vs {THROUGHPUT_REFERENCE} calls/s | vs {FLOOR} per call |\n\
         |---|---|---:|---:|---:|---:|---:|\n"
    );
    for shape in &run.shapes {
        let reference = run
            .cell(THROUGHPUT_REFERENCE, runtime, &shape.name)
            .map(Cell::calls_per_second);
        let floor = run
            .cell(FLOOR, runtime, &shape.name)
            .map(|c| c.per_call.median);
        for peer in &run.peers {
            let Some(cell) = run.cell(&peer.name, runtime, &shape.name) else {
                continue;
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | ±{:.1} % | {:.0} | {} | {} |",
                shape.name,
                peer.name,
                format_ns(cell.per_call.median),
                cell.per_call.spread_percent(),
                cell.calls_per_second(),
                times(cell.calls_per_second(), reference),
                times(cell.per_call.median, floor),
            );
        }
    }
    out
}

/// Every runtime's table under its heading, then the targets.
pub(crate) fn tables(run: &PeersRun) -> String {
    let mut out = String::new();
    for runtime in &run.runtimes {
        let _ = writeln!(
            out,
            "**{}**: {}\n\n{}",
            runtime.name,
            runtime.description,
            runtime_table(run, &runtime.name)
        );
    }
    out + &targets::render(run)
}

fn section(context: &Context, run: &PeersRun, tables: &str) -> String {
    let list = |items: &mut dyn Iterator<Item = (&str, &str)>| {
        items.fold(String::new(), |mut out, (name, description)| {
            let _ = writeln!(out, "- `{name}`: {description}");
            out
        })
    };
    format!(
        "{}\n\nEach of {} rounds runs every cell (a peer in a shape on a runtime) once, shape by \
         shape, each shape on each runtime for every peer that has it; odd rounds in reverse \
         order. A cell's round makes {} timed calls (split among its callers) after {} untimed \
         ones, on a fresh connection and runtime. The tables give the median of the round \
         figures and ± half their range. Nil request, 7-byte `{{\"n\":1}}` response, TCP \
         loopback, one connection, client and server in one process.\n\nShapes:\n\n{}\nPeers:\n\n{}\n{}\n\
         ![peers](benchmarks-peers.svg)\n",
        context.line(),
        run.rounds,
        run.calls,
        run.warm_up,
        list(
            &mut run
                .shapes
                .iter()
                .map(|s| (s.name.as_str(), s.description.as_str()))
        ),
        list(
            &mut run
                .peers
                .iter()
                .map(|p| (p.name.as_str(), p.description.as_str()))
        ),
        tables
    )
}

/// Per-call time of every cell on the default runtime (logarithmic: the
/// cells span from pipelined std-net to sequential tonic).
fn chart(run: &PeersRun) -> String {
    let mut bars = Vec::new();
    for shape in &run.shapes {
        for peer in &run.peers {
            if let Some(cell) = run.cell(&peer.name, DEFAULT_RUNTIME, &shape.name) {
                bars.push(Bar {
                    label: format!("{} {}", peer.name, shape.name),
                    value: cell.per_call.median,
                    text: format_ns(cell.per_call.median),
                });
            }
        }
    }
    svg::bars(
        "Wall time per call, tokio multi-thread runtime (lower is better; log scale)",
        "nil request, 7-byte response, TCP loopback, one connection; median of interleaved rounds",
        &bars,
        true,
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A run in the peers binary's format: `cells` is `(peer, runtime,
    /// shape, per-call round figures)`.
    pub(crate) fn json(complete: bool, cells: &[(&str, &str, &str, &[u64])]) -> String {
        let mut peers: Vec<(&str, Vec<Value>)> = Vec::new();
        for (peer, runtime, shape, rounds) in cells {
            let cell = serde_json::json!({"runtime": runtime, "shape": shape, "callers": 1,
                "calls": 6400, "per_call_round_ns": rounds});
            match peers.iter_mut().find(|(name, _)| name == peer) {
                Some((_, list)) => list.push(cell),
                None => peers.push((peer, vec![cell])),
            }
        }
        let named = |names: &[&str]| {
            names
                .iter()
                .map(|n| serde_json::json!({"name": n, "description": format!("about {n}")}))
                .collect::<Vec<_>>()
        };
        serde_json::json!({
            "format": 2, "rounds": 3, "calls": 6400, "warm_up": 256, "complete": complete,
            "runtimes": named(&["multi-thread", "current-thread"]),
            "shapes": named(&["sequential", "spawned-2", "spawned-4", "spawned-8", "spawned-64", "joined-64"]),
            "peers": peers.iter().map(|(name, cells)| serde_json::json!({
                "name": name, "description": format!("{name} stack"), "cells": cells,
            })).collect::<Vec<_>>(),
        })
        .to_string()
    }

    const MT: &str = "multi-thread";
    const CT: &str = "current-thread";

    fn small() -> PeersRun {
        parse(&json(
            true,
            &[
                ("std-net", MT, "sequential", &[20000, 22000, 21000]),
                ("std-net", MT, "joined-64", &[1000, 1000, 1000]),
                ("tarpc", MT, "sequential", &[40000, 44000, 42000]),
                ("tarpc", MT, "spawned-64", &[5000, 5200, 4800]),
                ("tarpc", MT, "joined-64", &[10000, 9375, 10625]),
                ("tarpc", CT, "sequential", &[30000]),
            ],
        ))
        .unwrap()
    }

    #[test]
    fn cells_are_read_with_their_medians() {
        let run = small();
        assert_eq!((run.rounds, run.calls, run.warm_up), (3, 6400, 256));
        assert!(run.complete);
        assert_eq!(run.runtimes[1].name, CT);
        assert_eq!(run.shapes.len(), 6);
        let cell = run.cell("tarpc", MT, "sequential").unwrap();
        assert_eq!((cell.per_call.median, cell.calls), (42000.0, 6400));
        assert_eq!(
            run.cell("tarpc", CT, "sequential").unwrap().per_call.median,
            30000.0
        );
        assert_eq!(run.cell("std-net", MT, "spawned-64"), None);
        assert_eq!(run.cell("nobody", MT, "sequential"), None);
    }

    #[test]
    fn each_runtime_table_has_a_row_per_measured_cell_with_its_ratios() {
        let run = small();
        let table = runtime_table(&run, MT);
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(
            rows,
            [
                // 42 µs vs std-net's 21 µs: 2.00×; 23 810 calls/s
                "| sequential | std-net | 21.0 µs | ±4.8 % | 47619 | 2.00× | 1.00× |",
                "| sequential | tarpc | 42.0 µs | ±4.8 % | 23810 | 1.00× | 2.00× |",
                // std-net has no spawned shape: no floor
                "| spawned-64 | tarpc | 5.00 µs | ±4.0 % | 200000 | 1.00× | — |",
                "| joined-64 | std-net | 1.00 µs | ±0.0 % | 1000000 | 10.0× | 1.00× |",
                "| joined-64 | tarpc | 10.0 µs | ±6.2 % | 100000 | 1.00× | 10.0× |",
            ]
        );
        // the one-worker table has only its own cell, and no references
        let one = runtime_table(&run, CT);
        assert_eq!(
            one.lines().skip(2).collect::<Vec<_>>(),
            ["| sequential | tarpc | 30.0 µs | ±0.0 % | 33333 | 1.00× | — |"]
        );
        let all = tables(&run);
        assert!(
            all.contains("**multi-thread**: about multi-thread\n\n| shape"),
            "{all}"
        );
        assert!(
            all.contains("**current-thread**: about current-thread"),
            "{all}"
        );
        assert!(all.contains("targets"), "{all}");
    }

    #[test]
    fn the_section_describes_the_run_and_the_chart_shows_the_default_runtime() {
        let run = small();
        let context = Context {
            command: "test".into(),
            date: "today".into(),
            machine: "here".into(),
        };
        let section = section(&context, &run, "TABLES");
        assert!(section.contains("Each of 3 rounds"), "{section}");
        assert!(section.contains("makes 6400 timed calls"), "{section}");
        assert!(
            section.contains("- `spawned-64`: about spawned-64\n"),
            "{section}"
        );
        assert!(section.contains("- `tarpc`: tarpc stack\n"), "{section}");
        assert!(section.contains("TABLES"));
        let chart = chart(&run);
        assert_eq!(chart.matches("<rect").count(), 1 + 5, "{chart}");
        assert!(chart.contains("tarpc spawned-64"));
    }

    #[test]
    fn malformed_or_old_output_is_an_error() {
        let good = json(true, &[("tarpc", MT, "sequential", &[1000])]);
        assert!(parse(&good).is_ok());
        for broken in [
            good.replace("\"format\":2", "\"format\":1"),
            good.replace("[1000]", "[]"),
            good.replace("[1000]", "[0]"),
            good.replace("\"warm_up\":256", "\"warm_up\":\"x\""),
            good.replace("\"shape\":\"sequential\"", "\"shape\":1"),
            "{".to_string(),
        ] {
            assert!(parse(&broken).is_err(), "{broken}");
        }
        // the old format (no "format", batch figures per peer) is refused
        let old = r#"{"rounds": 3, "calls": 100, "batches": 10, "inflight": 64, "peers": [
            {"name": "tarpc", "description": "t", "sequential_round_ns": [1], "concurrent_batch_round_ns": [1]}]}"#;
        assert!(parse(old).unwrap_err().contains("older weft-peers"));
    }
}
