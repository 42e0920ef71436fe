//! What one `weft-peers` run measures (from its command line), the order
//! its cells run in, and the JSON it prints.
//!
//! A cell is one peer in one shape on one runtime. Every round runs every
//! cell once, shape by shape, each shape on each runtime, each of those for
//! every peer that has the shape, so the figures compared with each other
//! are measured seconds apart; odd rounds run the same cells in reverse
//! order, so a load that drifts over the run weighs on the first and the
//! last cells alike. Each cell's figure per round is kept; the report takes
//! their median.

use serde_json::{Value, json};

use crate::split;
use crate::{Peer, Place, Runtime, Shape, measure};

/// Rounds when `--rounds` is not given.
pub const DEFAULT_ROUNDS: usize = 5;
/// Timed calls per cell and round when `--calls` is not given (a multiple of
/// 64, so every default shape makes exactly this many).
pub const DEFAULT_CALLS: usize = 12_800;
/// Untimed calls per cell and round before timing starts (split among the
/// callers like the timed ones) when `--warm-up` is not given.
pub const DEFAULT_WARM_UP: usize = 256;

/// The command line's usage text.
pub const USAGE: &str = "usage: weft-peers [--rounds R] [--calls N] [--warm-up W] \
    [--shape S[,S...]] [--runtime RT[,RT...]] [--only PEER[,PEER...]] [--split]\n\
    shapes: sequential, joined-K, spawned-K (default: sequential,spawned-2,spawned-4,\
    spawned-8,spawned-64,joined-64); runtimes: multi-thread, current-thread (default: both);\n\
    --calls N: timed calls per cell and round, split among its callers (default 12800);\n\
    --split: each server in a process of its own on core 0, the clients on core 1";

/// One run's plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Rounds over every cell.
    pub rounds: usize,
    /// Timed calls per cell and round.
    pub calls: usize,
    /// Untimed calls per cell and round.
    pub warm_up: usize,
    /// Shapes, in table order.
    pub shapes: Vec<Shape>,
    /// Runtimes, in table order.
    pub runtimes: Vec<Runtime>,
    /// Peers, in table order.
    pub peers: Vec<Peer>,
    /// Whether every peer, default shape and runtime is in (no filter),
    /// in the one-process layout (the one the docs' tables show).
    pub complete: bool,
    /// Each cell's server in a process of its own ([`crate::split`]).
    pub split: bool,
}

/// One peer in one shape on one runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// Index into [`Plan::peers`].
    pub peer: usize,
    /// The runtime.
    pub runtime: Runtime,
    /// The shape.
    pub shape: Shape,
}

impl Plan {
    /// Reads the command line (`args` without the program name); `peers` are
    /// every registered peer, `--only` keeps some.
    pub fn parse(args: &[String], peers: Vec<Peer>) -> Result<Self, String> {
        let mut plan = Plan {
            rounds: DEFAULT_ROUNDS,
            calls: DEFAULT_CALLS,
            warm_up: DEFAULT_WARM_UP,
            shapes: Shape::DEFAULT.to_vec(),
            runtimes: Runtime::ALL.to_vec(),
            peers,
            complete: true,
            split: false,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            if flag == "--split" {
                plan.split = true;
                plan.complete = false;
                continue;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let list = || value.split(',').filter(|v| !v.is_empty());
            match flag.as_str() {
                "--rounds" => plan.rounds = positive(flag, value)?,
                "--calls" => plan.calls = positive(flag, value)?,
                "--warm-up" => {
                    plan.warm_up = value
                        .parse()
                        .map_err(|_| format!("--warm-up needs a number, not {value:?}"))?;
                }
                "--shape" => {
                    plan.shapes = list()
                        .map(|name| Shape::parse(name).ok_or(format!("no shape {name:?}")))
                        .collect::<Result<_, _>>()?;
                    plan.complete &= Shape::DEFAULT.iter().all(|s| plan.shapes.contains(s));
                }
                "--runtime" => {
                    plan.runtimes = list()
                        .map(|name| Runtime::parse(name).ok_or(format!("no runtime {name:?}")))
                        .collect::<Result<_, _>>()?;
                    plan.complete &= plan.runtimes.len() == Runtime::ALL.len();
                }
                "--only" => {
                    let names: Vec<&str> = list().collect();
                    if let Some(unknown) = names
                        .iter()
                        .find(|n| !plan.peers.iter().any(|p| p.name == **n))
                    {
                        return Err(format!("--only: no peer {unknown:?}"));
                    }
                    let before = plan.peers.len();
                    plan.peers.retain(|p| names.contains(&p.name));
                    plan.complete &= plan.peers.len() == before;
                }
                "--batches" | "--inflight" | "--spawned" => {
                    return Err(format!(
                        "{flag} is gone: --calls N is the timed calls of every cell, and \
                         --shape names the shapes (joined-64, spawned-64, ...)"
                    ));
                }
                other => return Err(format!("unknown option {other:?}")),
            }
        }
        if plan.shapes.is_empty() || plan.runtimes.is_empty() || plan.peers.is_empty() {
            return Err("nothing to measure: empty --shape, --runtime or --only".into());
        }
        Ok(plan)
    }

    /// Every cell, in the order a forward round runs them.
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for &shape in &self.shapes {
            for &runtime in &self.runtimes {
                for (peer, p) in self.peers.iter().enumerate() {
                    if p.supports(shape) {
                        cells.push(Cell {
                            peer,
                            runtime,
                            shape,
                        });
                    }
                }
            }
        }
        cells
    }

    /// Indices into [`Plan::cells`] in the order round `round` (from 0) runs
    /// them: forward in even rounds, reversed in odd ones.
    pub fn order(round: usize, cells: usize) -> Vec<usize> {
        if round.is_multiple_of(2) {
            (0..cells).collect()
        } else {
            (0..cells).rev().collect()
        }
    }

    /// Runs every round, calling `progress` before each cell, and returns
    /// the report (see [`Plan::report`]).
    pub fn run(&self, mut progress: impl FnMut(usize, &Cell)) -> Value {
        let cells = self.cells();
        let mut per_call_ns = vec![Vec::with_capacity(self.rounds); cells.len()];
        let mut calls = vec![0; cells.len()];
        for round in 0..self.rounds {
            for i in Self::order(round, cells.len()) {
                let cell = &cells[i];
                progress(round, cell);
                let peer = &self.peers[cell.peer];
                let server = self
                    .split
                    .then(|| split::start(peer, cell.runtime))
                    .transpose()
                    .unwrap_or_else(|e| panic!("split layout: {e}"));
                let place = server
                    .as_ref()
                    .map_or(Place::InProcess, |s| Place::At(s.addr));
                let measured = measure(
                    peer,
                    cell.runtime,
                    cell.shape,
                    (self.calls, self.warm_up),
                    place,
                )
                .expect("cells() lists only the shapes a peer has");
                drop(server);
                per_call_ns[i].push(measured.per_call_ns);
                calls[i] = measured.calls;
            }
        }
        self.report(&cells, &calls, &per_call_ns)
    }

    /// The JSON `cargo xtask bench --peers` reads: the plan, then per peer
    /// its cells, each with the calls it times per round and its per-call
    /// wall time of every round (ns, in round order).
    pub fn report(&self, cells: &[Cell], calls: &[usize], per_call_ns: &[Vec<u64>]) -> Value {
        let peers: Vec<Value> = self
            .peers
            .iter()
            .enumerate()
            .map(|(index, p)| {
                let cells: Vec<Value> = cells
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.peer == index)
                    .map(|(i, c)| {
                        json!({
                            "runtime": c.runtime.name(),
                            "shape": c.shape.name(),
                            "callers": c.shape.callers(),
                            "calls": calls[i],
                            "per_call_round_ns": per_call_ns[i],
                        })
                    })
                    .collect();
                json!({"name": p.name, "description": p.description, "cells": cells})
            })
            .collect();
        json!({
            "format": 2,
            "rounds": self.rounds,
            "calls": self.calls,
            "warm_up": self.warm_up,
            "complete": self.complete,
            "layout": if self.split { "split" } else { "one-process" },
            "runtimes": self.runtimes.iter().map(|r| json!({
                "name": r.name(),
                "description": r.description(),
            })).collect::<Vec<_>>(),
            "shapes": self.shapes.iter().map(|s| json!({
                "name": s.name(),
                "callers": s.callers(),
                "description": s.description(),
            })).collect::<Vec<_>>(),
            "peers": peers,
        })
    }
}

fn positive(flag: &str, value: &str) -> Result<usize, String> {
    value
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{flag} needs a positive number, not {value:?}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Counts, Stack, Timing, peers};

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn defaults_measure_every_shape_runtime_and_peer() {
        let plan = Plan::parse(&[], peers()).unwrap();
        assert_eq!((plan.rounds, plan.calls, plan.warm_up), (5, 12_800, 256));
        assert_eq!(plan.shapes, Shape::DEFAULT);
        assert_eq!(plan.runtimes, Runtime::ALL);
        assert!(plan.complete);
        let cells = plan.cells();
        // 5 multiplexing peers x 6 shapes + 2 pipelining ones x 2, on 2 runtimes
        assert_eq!(cells.len(), (5 * 6 + 2 * 2) * 2);
        let std_net = plan.peers.iter().position(|p| p.name == "std-net").unwrap();
        assert!(
            cells
                .iter()
                .filter(|c| c.peer == std_net)
                .all(|c| !matches!(c.shape, Shape::Spawned(_)))
        );
        // shape by shape: every cell of the first shape comes first
        assert!(cells[..12].iter().all(|c| c.shape == Shape::Sequential));
        assert_eq!(plan.cells().len(), cells.len());
    }

    #[test]
    fn filters_keep_what_they_name_and_mark_the_run_incomplete() {
        let plan = Plan::parse(
            &args("--shape spawned-64 --runtime current-thread --only weft,tarpc --calls 640 --rounds 1"),
            peers(),
        )
        .unwrap();
        assert!(!plan.complete);
        assert_eq!((plan.rounds, plan.calls), (1, 640));
        let names: Vec<&str> = plan.peers.iter().map(|p| p.name).collect();
        assert_eq!(names, ["weft", "tarpc"]);
        let cells = plan.cells();
        assert_eq!(cells.len(), 2);
        assert!(
            cells
                .iter()
                .all(|c| c.runtime == Runtime::CurrentThread && c.shape == Shape::Spawned(64))
        );
        // more shapes than the default is still complete
        let more = Plan::parse(
            &args("--shape sequential,joined-64,joined-8,spawned-2,spawned-4,spawned-8,spawned-64"),
            peers(),
        )
        .unwrap();
        assert!(more.complete);
    }

    #[test]
    fn nonsense_and_the_old_count_flags_are_errors() {
        for line in [
            "--rounds 0",
            "--calls",
            "--calls many",
            "--shape burst-4",
            "--runtime multi",
            "--only nobody",
            "--spawned 300",
            "--batches 200",
            "--inflight 64",
            "--fast 1",
            "--shape ,",
        ] {
            assert!(Plan::parse(&args(line), peers()).is_err(), "{line}");
        }
        let gone = Plan::parse(&args("--spawned 300"), peers()).unwrap_err();
        assert!(gone.contains("--calls"), "{gone}");
    }

    #[test]
    fn split_takes_no_value_and_is_never_the_docs_run() {
        let plan = Plan::parse(&args("--split --rounds 2"), peers()).unwrap();
        assert!(plan.split && !plan.complete && plan.rounds == 2);
        let report = plan.report(&[], &[], &[]);
        assert_eq!(report["layout"], "split");
        assert!(!Plan::parse(&args("--rounds 2"), peers()).unwrap().split);
    }

    #[test]
    fn odd_rounds_run_the_cells_in_reverse() {
        assert_eq!(Plan::order(0, 3), [0, 1, 2]);
        assert_eq!(Plan::order(1, 3), [2, 1, 0]);
        assert_eq!(Plan::order(2, 3), [0, 1, 2]);
    }

    #[test]
    fn the_report_has_every_cell_with_its_round_figures() {
        // 20 µs per call alone, 1 µs per call in a batch of 64
        fn batches(_: Runtime, c: Counts, k: usize, _: Place) -> Vec<Duration> {
            let each = if k == 1 { 20 } else { k as u64 };
            vec![Duration::from_micros(each); c.timed]
        }
        let fake = Peer {
            name: "fake",
            description: "fixed times",
            stack: Stack::Multiplexing(|runtime, shape, c, place| match shape {
                Shape::Spawned(k) => Timing::Whole(Duration::from_micros(3 * (c.timed * k) as u64)),
                _ => Timing::Each(batches(runtime, c, shape.callers(), place)),
            }),
            server: || {
                Box::pin(std::future::ready(std::net::SocketAddr::from((
                    [127, 0, 0, 1],
                    9,
                ))))
            },
        };
        let pipelining = Peer {
            name: "pipe",
            stack: Stack::Pipelining(batches),
            ..fake
        };
        let plan = Plan::parse(
            &args("--rounds 2 --calls 64 --shape sequential,joined-64,spawned-8"),
            vec![fake, pipelining],
        )
        .unwrap();
        let mut seen = Vec::new();
        let report = plan.run(|round, cell| seen.push((round, *cell)));
        assert_eq!(seen.len(), 2 * (3 + 2) * 2);
        assert_eq!(seen[0].1, seen[seen.len() - 1].1, "round 2 runs backwards");
        assert_eq!(report["format"], 2);
        assert_eq!(report["rounds"], 2);
        assert_eq!(report["complete"], false);
        assert_eq!(report["layout"], "one-process");
        assert_eq!(report["shapes"][1]["name"], "joined-64");
        assert_eq!(report["runtimes"][1]["name"], "current-thread");
        let cells = report["peers"][0]["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 6);
        let cell = |shape: &str, runtime: &str| {
            cells
                .iter()
                .find(|c| c["shape"] == shape && c["runtime"] == runtime)
                .unwrap()
        };
        assert_eq!(
            cell("sequential", "multi-thread")["per_call_round_ns"],
            json!([20_000, 20_000])
        );
        assert_eq!(
            cell("joined-64", "current-thread")["per_call_round_ns"],
            json!([1_000, 1_000])
        );
        assert_eq!(
            cell("spawned-8", "multi-thread")["per_call_round_ns"],
            json!([3_000, 3_000])
        );
        assert_eq!(cell("spawned-8", "multi-thread")["calls"], 64);
        assert_eq!(cell("spawned-8", "multi-thread")["callers"], 8);
        assert_eq!(report["peers"][1]["cells"].as_array().unwrap().len(), 4);
    }
}
