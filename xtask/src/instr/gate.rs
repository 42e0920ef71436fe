//! The instruction gate's baseline (benches/instr-baseline.json) and its
//! verdict: a cell fails above +2 % of its baseline figure, and the table
//! shows every cell (baseline, now, ratio).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

/// The committed baseline, relative to the workspace root.
pub(crate) const BASELINE: &str = "benches/instr-baseline.json";

/// A cell may cost this many percent more than its baseline.
pub(crate) const TOLERANCE_PERCENT: u64 = 2;

/// Cell name → instructions per call.
pub(crate) type Figures = BTreeMap<String, u64>;

pub(crate) use crate::baseline::Outcome;

impl Outcome {
    fn text(self) -> &'static str {
        match self {
            Outcome::Pass => "ok",
            Outcome::Improved => "below baseline (bless to keep it)",
            Outcome::Regressed => "ABOVE +2 %",
            Outcome::Unbaselined => "not in baseline",
            Outcome::Vanished => "no longer measured",
        }
    }
}

/// One row of the verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) cell: String,
    pub(crate) baseline: Option<u64>,
    pub(crate) now: Option<u64>,
    pub(crate) outcome: Outcome,
}

/// `now` against `baseline`, exact integer arithmetic: a regression is
/// `now * 100 > baseline * (100 + TOLERANCE_PERCENT)`.
pub(crate) fn judge(baseline: u64, now: u64) -> Outcome {
    let (now, base) = (u128::from(now) * 100, u128::from(baseline));
    if now > base * u128::from(100 + TOLERANCE_PERCENT) {
        Outcome::Regressed
    } else if now < base * u128::from(100 - TOLERANCE_PERCENT) {
        Outcome::Improved
    } else {
        Outcome::Pass
    }
}

/// Every measured and every baselined cell, measured ones in their order.
pub(crate) fn compare(measured: &[(String, u64)], baseline: &Figures) -> Vec<Row> {
    let mut rows: Vec<Row> = measured
        .iter()
        .map(|(cell, now)| {
            let base = baseline.get(cell).copied();
            Row {
                cell: cell.clone(),
                baseline: base,
                now: Some(*now),
                outcome: base.map_or(Outcome::Unbaselined, |b| judge(b, *now)),
            }
        })
        .collect();
    for (cell, base) in baseline {
        if !measured.iter().any(|(c, _)| c == cell) {
            rows.push(Row {
                cell: cell.clone(),
                baseline: Some(*base),
                now: None,
                outcome: Outcome::Vanished,
            });
        }
    }
    rows
}

/// The verdict as a table, one line per cell.
pub(crate) fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<30} {:>10} {:>10} {:>8}  verdict\n",
        "cell (instructions per call)", "baseline", "now", "ratio"
    );
    for r in rows {
        let num = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let ratio = match (r.baseline, r.now) {
            (Some(b), Some(n)) if b > 0 => format!("{:.4}", n as f64 / b as f64),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "{:<30} {:>10} {:>10} {:>8}  {}",
            r.cell,
            num(r.baseline),
            num(r.now),
            ratio,
            r.outcome.text()
        );
    }
    out
}

/// Passes unless a row fails; the error names the failing cells.
pub(crate) fn verdict(rows: &[Row]) -> Result<(), String> {
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| r.outcome.fails())
        .map(|r| format!("{}: {}", r.cell, r.outcome.text()))
        .collect();
    if failed.is_empty() {
        println!(
            "instruction gate: pass ({} cells within +{TOLERANCE_PERCENT} %)",
            rows.len()
        );
        Ok(())
    } else {
        Err(format!(
            "instruction gate failed (a deliberate cost is blessed with `cargo xtask instr --bless`, \
             the commit saying why):\n  {}",
            failed.join("\n  ")
        ))
    }
}

/// The baseline file's text for `measured`.
pub(crate) fn render(measured: &[(String, u64)]) -> String {
    let cells: serde_json::Map<String, Value> = measured
        .iter()
        .map(|(c, n)| (c.clone(), json!(n)))
        .collect();
    let doc = json!({
        "about": "Instructions per call (callgrind Ir, client and server together, the \
                  difference of two phases of one run) of each cell of `cargo xtask instr`; \
                  --check fails above +2 %. Rewritten by `cargo xtask instr --bless`; the \
                  commit says why.",
        "instructions_per_call": cells,
    });
    serde_json::to_string_pretty(&doc).expect("a JSON value serialises") + "\n"
}

/// Reads a baseline file's text.
pub(crate) fn load(text: &str) -> Result<Figures, String> {
    let doc: Value =
        serde_json::from_str(text).map_err(|e| format!("{BASELINE}: not JSON: {e}"))?;
    let cells = doc
        .get("instructions_per_call")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("{BASELINE}: no instructions_per_call object"))?;
    cells
        .iter()
        .map(|(cell, n)| {
            n.as_u64()
                .map(|n| (cell.clone(), n))
                .ok_or_else(|| format!("{BASELINE}: {cell} is not a count"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_fails_above_two_percent_and_passes_below() {
        assert_eq!(judge(10_000, 10_210), Outcome::Regressed, "+2.1 %");
        assert_eq!(judge(10_000, 10_190), Outcome::Pass, "+1.9 %");
        assert_eq!(judge(10_000, 10_200), Outcome::Pass, "+2.0 % exactly");
        assert_eq!(judge(10_000, 9_810), Outcome::Pass, "-1.9 %");
        assert_eq!(judge(10_000, 9_790), Outcome::Improved, "-2.1 %");
        let rows = compare(
            &[("raw/sequential".into(), 10_210)],
            &Figures::from([("raw/sequential".into(), 10_000)]),
        );
        let err = verdict(&rows).unwrap_err();
        assert!(err.contains("raw/sequential: ABOVE"), "{err}");
        let rows = compare(
            &[("raw/sequential".into(), 10_190)],
            &Figures::from([("raw/sequential".into(), 10_000)]),
        );
        assert!(verdict(&rows).is_ok());
    }

    #[test]
    fn new_and_vanished_cells_fail_until_blessed() {
        let baseline = Figures::from([("a".into(), 100), ("gone".into(), 100)]);
        let rows = compare(&[("a".into(), 100), ("new".into(), 5)], &baseline);
        let outcomes: Vec<_> = rows.iter().map(|r| (r.cell.as_str(), r.outcome)).collect();
        assert_eq!(
            outcomes,
            [
                ("a", Outcome::Pass),
                ("new", Outcome::Unbaselined),
                ("gone", Outcome::Vanished)
            ]
        );
        assert!(verdict(&rows).is_err());
    }

    #[test]
    fn bless_round_trips_and_the_table_shows_every_cell() {
        let measured = vec![
            ("raw/sequential".to_string(), 14_176),
            ("typed/joined-64".to_string(), 9_001),
        ];
        let text = render(&measured);
        let back = load(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back["raw/sequential"], 14_176);
        assert_eq!(back["typed/joined-64"], 9_001);
        let rows = compare(&measured, &back);
        assert!(rows.iter().all(|r| r.outcome == Outcome::Pass));
        let t = table(&rows);
        assert_eq!(t.lines().count(), 3, "{t}");
        assert!(t.contains("14176") && t.contains("1.0000"), "{t}");
        assert!(load("{}").is_err());
        assert!(load(r#"{"instructions_per_call":{"a":"x"}}"#).is_err());
    }
}
