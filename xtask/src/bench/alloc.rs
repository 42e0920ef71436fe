//! The allocation gate: allocations and bytes per op, measured by the
//! `weft-alloc` harness (benches/src/bin/alloc.rs), against the committed
//! baseline. Above the baseline fails; below it passes with a hint to bless.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cmd;

/// The committed baseline, relative to the workspace root.
pub(crate) const BASELINE: &str = "benches/alloc-baseline.json";

/// Iterations the harness counts over (after its warm-up).
const ITERATIONS: &str = "1000";

/// Differences below this are rounding, not allocations.
const EPSILON: f64 = 1e-9;

/// One target's counts, as the harness printed them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Measured {
    pub(crate) name: String,
    pub(crate) label: String,
    pub(crate) allocs: f64,
    pub(crate) bytes: f64,
    /// Bytes processed per op, when a throughput is meaningful.
    pub(crate) bytes_processed: Option<u64>,
}

/// One target's committed limits. Tolerances (default 0) are for targets
/// whose counts vary between runs (threads, runtimes); deterministic targets
/// have none.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Limit {
    pub(crate) allocs: f64,
    pub(crate) bytes: f64,
    pub(crate) allocs_tolerance: f64,
    pub(crate) bytes_tolerance: f64,
}

/// The committed baseline: target name to limits.
pub(crate) type Baseline = BTreeMap<String, Limit>;

pub(crate) use crate::baseline::Outcome;

/// One line of the gate's verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    pub(crate) name: String,
    pub(crate) outcome: Outcome,
    pub(crate) message: String,
}

/// Runs the harness (dev profile: counts do not depend on optimisation, and
/// CI has the dev build already) and parses its output.
pub(crate) fn measure() -> Result<Vec<Measured>, String> {
    let json = cmd::output(
        "cargo",
        &[
            "run",
            "--quiet",
            "-p",
            "weft-benches",
            "--bin",
            "weft-alloc",
            "--",
            "--iterations",
            ITERATIONS,
        ],
    )?;
    cmd::write("target/bench/alloc.json", &json)?;
    parse_measured(&json)
}

/// Parses the harness's JSON.
pub(crate) fn parse_measured(json: &str) -> Result<Vec<Measured>, String> {
    let doc: Value = serde_json::from_str(json).map_err(|e| format!("harness output: {e}"))?;
    let targets = doc["targets"]
        .as_array()
        .ok_or("harness output has no \"targets\" array")?;
    targets
        .iter()
        .map(|t| {
            let name = t["name"].as_str().ok_or("a harness target has no name")?;
            let number = |key: &str| {
                t[key]
                    .as_f64()
                    .ok_or_else(|| format!("harness target {name}: no number {key:?}"))
            };
            Ok(Measured {
                name: name.to_string(),
                label: t["label"].as_str().unwrap_or(name).to_string(),
                allocs: number("allocs_per_op")?,
                bytes: number("bytes_per_op")?,
                bytes_processed: t["bytes_processed"].as_u64(),
            })
        })
        .collect()
}

/// Reads and parses the committed baseline.
pub(crate) fn load_baseline(relative: &str) -> Result<Baseline, String> {
    parse_baseline(&cmd::read(relative)?).map_err(|e| format!("{relative}: {e}"))
}

/// Parses a baseline document.
pub(crate) fn parse_baseline(json: &str) -> Result<Baseline, String> {
    let doc: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let targets = doc["targets"].as_object().ok_or("no \"targets\" object")?;
    targets
        .iter()
        .map(|(name, t)| {
            let number = |key: &str| {
                t[key]
                    .as_f64()
                    .ok_or_else(|| format!("target {name}: no number {key:?}"))
            };
            let limit = Limit {
                allocs: number("allocs_per_op")?,
                bytes: number("bytes_per_op")?,
                allocs_tolerance: t["allocs_tolerance"].as_f64().unwrap_or(0.0),
                bytes_tolerance: t["bytes_tolerance"].as_f64().unwrap_or(0.0),
            };
            Ok((name.clone(), limit))
        })
        .collect()
}

/// Compares every measured target with the baseline, and reports baseline
/// entries that were not measured.
pub(crate) fn compare(measured: &[Measured], baseline: &Baseline) -> Vec<Finding> {
    let mut findings: Vec<Finding> = measured
        .iter()
        .map(|m| match baseline.get(&m.name) {
            None => Finding {
                name: m.name.clone(),
                outcome: Outcome::Unbaselined,
                message: format!(
                    "{}: {} allocs/op, {} B/op, not in {BASELINE}: run `cargo xtask bench --bless`",
                    m.name, m.allocs, m.bytes
                ),
            },
            Some(limit) => judge(m, limit),
        })
        .collect();
    for name in baseline.keys() {
        if !measured.iter().any(|m| &m.name == name) {
            findings.push(Finding {
                name: name.clone(),
                outcome: Outcome::Vanished,
                message: format!(
                    "{name}: in {BASELINE} but no longer measured: run `cargo xtask bench --bless`"
                ),
            });
        }
    }
    findings
}

fn judge(m: &Measured, limit: &Limit) -> Finding {
    let mut above = Vec::new();
    let mut below = Vec::new();
    for (what, got, want, tolerance) in [
        ("allocs/op", m.allocs, limit.allocs, limit.allocs_tolerance),
        ("bytes/op", m.bytes, limit.bytes, limit.bytes_tolerance),
    ] {
        if got > want + tolerance + EPSILON {
            above.push(format!(
                "{what} {got} > baseline {want} (+{tolerance} tolerance), {:+}",
                got - want
            ));
        } else if got < want - tolerance - EPSILON {
            below.push(format!("{what} {got} < baseline {want}"));
        }
    }
    let (outcome, message) = if !above.is_empty() {
        (
            Outcome::Regressed,
            format!("{}: REGRESSED: {}", m.name, above.join("; ")),
        )
    } else if !below.is_empty() {
        (
            Outcome::Improved,
            format!(
                "{}: improved: {} (run `cargo xtask bench --bless` to lock it in)",
                m.name,
                below.join("; ")
            ),
        )
    } else {
        (
            Outcome::Pass,
            format!(
                "{}: {} allocs/op, {} B/op: at baseline",
                m.name, m.allocs, m.bytes
            ),
        )
    };
    Finding {
        name: m.name.clone(),
        outcome,
        message,
    }
}

/// The baseline document for `measured`, keeping the tolerances of `old`.
pub(crate) fn blessed(measured: &[Measured], old: &Baseline) -> String {
    let mut targets = serde_json::Map::new();
    for m in measured {
        let mut entry = json!({ "allocs_per_op": m.allocs, "bytes_per_op": m.bytes });
        if let Some(limit) = old.get(&m.name) {
            for (key, tolerance) in [
                ("allocs_tolerance", limit.allocs_tolerance),
                ("bytes_tolerance", limit.bytes_tolerance),
            ] {
                if tolerance != 0.0 {
                    entry[key] = json!(tolerance);
                }
            }
        }
        targets.insert(m.name.clone(), entry);
    }
    let doc = json!({
        "about": "Allocations and bytes allocated per op, counted by `cargo run -p weft-benches --bin weft-alloc` (all threads, inside the op only, after a warm-up). `cargo xtask bench` fails above these; `cargo xtask bench --bless` rewrites them. Optional allocs_tolerance / bytes_tolerance per target are for counts that vary between runs.",
        "targets": targets,
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value serialises");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> Baseline {
        load_baseline(BASELINE).expect("the committed baseline parses")
    }

    /// What the harness would print if every target sat exactly at `baseline`.
    fn at(baseline: &Baseline) -> Vec<Measured> {
        baseline
            .iter()
            .map(|(name, limit)| Measured {
                name: name.clone(),
                label: name.clone(),
                allocs: limit.allocs,
                bytes: limit.bytes,
                bytes_processed: None,
            })
            .collect()
    }

    /// A temporary copy of the committed baseline with `edit` applied to
    /// every target, written to disk and read back through the same loader.
    fn edited_copy(edit: impl Fn(&mut Value)) -> Baseline {
        let mut doc: Value = serde_json::from_str(&cmd::read(BASELINE).unwrap()).unwrap();
        for (_, target) in doc["targets"].as_object_mut().unwrap() {
            edit(target);
        }
        // Tests run in parallel threads of one process: one directory per copy.
        static COPIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let copy = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("xtask-alloc-{}-{copy}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("alloc-baseline.json");
        std::fs::write(&path, doc.to_string()).unwrap();
        let copy = parse_baseline(&std::fs::read_to_string(&path).unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        copy
    }

    #[test]
    fn committed_baseline_is_not_empty() {
        assert!(!committed().is_empty());
    }

    #[test]
    fn counts_at_the_baseline_pass() {
        let baseline = committed();
        let findings = compare(&at(&baseline), &baseline);
        assert_eq!(findings.len(), baseline.len());
        assert!(
            findings.iter().all(|f| f.outcome == Outcome::Pass),
            "{findings:?}"
        );
    }

    #[test]
    fn a_lowered_baseline_makes_the_gate_fail() {
        let measured = at(&committed());
        let lowered = edited_copy(|t| {
            let allocs = t["allocs_per_op"].as_f64().unwrap();
            t["allocs_per_op"] = json!(allocs - 1.0);
        });
        let findings = compare(&measured, &lowered);
        assert!(!findings.is_empty());
        for f in &findings {
            assert_eq!(f.outcome, Outcome::Regressed, "{f:?}");
            assert!(f.outcome.fails());
            assert!(f.message.contains("REGRESSED") && f.message.contains(&f.name));
        }
    }

    #[test]
    fn lowered_bytes_alone_also_fail() {
        let measured = at(&committed());
        let lowered = edited_copy(|t| {
            // One byte beyond the target's tolerance (the e2e targets have one).
            let bytes = t["bytes_per_op"].as_f64().unwrap();
            let tolerance = t["bytes_tolerance"].as_f64().unwrap_or(0.0);
            t["bytes_per_op"] = json!(bytes - tolerance - 1.0);
        });
        assert!(
            compare(&measured, &lowered)
                .iter()
                .all(|f| f.outcome == Outcome::Regressed)
        );
    }

    #[test]
    fn a_raised_baseline_passes_with_a_bless_hint() {
        let measured = at(&committed());
        let raised = edited_copy(|t| {
            let allocs = t["allocs_per_op"].as_f64().unwrap();
            t["allocs_per_op"] = json!(allocs + 2.0);
        });
        for f in compare(&measured, &raised) {
            assert_eq!(f.outcome, Outcome::Improved);
            assert!(!f.outcome.fails());
            assert!(f.message.contains("--bless"));
        }
    }

    #[test]
    fn tolerance_absorbs_variation_up_to_its_size_only() {
        let mut baseline = Baseline::new();
        baseline.insert(
            "e2e/x/plain".into(),
            Limit {
                allocs: 4.0,
                bytes: 100.0,
                allocs_tolerance: 0.5,
                bytes_tolerance: 0.0,
            },
        );
        let mut m = at(&baseline);
        m[0].allocs = 4.4;
        assert_eq!(compare(&m, &baseline)[0].outcome, Outcome::Pass);
        m[0].allocs = 4.6;
        assert_eq!(compare(&m, &baseline)[0].outcome, Outcome::Regressed);
    }

    #[test]
    fn new_and_vanished_targets_fail_until_blessed() {
        let baseline = committed();
        let mut measured = at(&baseline);
        let gone = measured.remove(0);
        measured.push(Measured {
            name: "new/target/1".into(),
            label: "new".into(),
            allocs: 0.0,
            bytes: 0.0,
            bytes_processed: None,
        });
        let findings = compare(&measured, &baseline);
        let outcome = |name: &str| findings.iter().find(|f| f.name == name).unwrap().outcome;
        assert_eq!(outcome("new/target/1"), Outcome::Unbaselined);
        assert_eq!(outcome(&gone.name), Outcome::Vanished);
        // blessing makes the same measurement pass
        let blessed = parse_baseline(&blessed(&measured, &baseline)).unwrap();
        assert!(
            compare(&measured, &blessed)
                .iter()
                .all(|f| f.outcome == Outcome::Pass)
        );
    }

    #[test]
    fn blessing_keeps_tolerances() {
        let mut old = Baseline::new();
        old.insert(
            "a/b/c".into(),
            Limit {
                allocs: 1.0,
                bytes: 8.0,
                allocs_tolerance: 0.25,
                bytes_tolerance: 16.0,
            },
        );
        let measured = vec![Measured {
            name: "a/b/c".into(),
            label: "abc".into(),
            allocs: 2.0,
            bytes: 24.0,
            bytes_processed: Some(3),
        }];
        let new = parse_baseline(&blessed(&measured, &old)).unwrap();
        assert_eq!(
            new["a/b/c"],
            Limit {
                allocs: 2.0,
                bytes: 24.0,
                allocs_tolerance: 0.25,
                bytes_tolerance: 16.0
            }
        );
    }

    #[test]
    fn harness_output_parses() {
        let json = r#"{"iterations": 10, "warm_up": 1, "targets": [
            {"name": "frame/decode/64", "label": "frame decode 64 B", "allocs_per_op": 0, "bytes_per_op": 0, "bytes_processed": 92},
            {"name": "e2e/call/plain", "label": "e2e", "allocs_per_op": 3.5, "bytes_per_op": 120.25, "bytes_processed": null}]}"#;
        let m = parse_measured(json).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].bytes_processed, Some(92));
        assert_eq!(
            (m[1].allocs, m[1].bytes, m[1].bytes_processed),
            (3.5, 120.25, None)
        );
        assert!(parse_measured("{}").is_err());
    }
}
