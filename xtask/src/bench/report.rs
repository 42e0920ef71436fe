//! Rendering results: the terminal/markdown tables, the generated sections of
//! docs/BENCHMARKS.md (between `<!-- BEGIN name -->` and `<!-- END name -->`
//! markers) and the machine line that says where figures come from.

use std::fmt::Write as _;

use crate::cmd;
use crate::stats::{Summary, format_count, format_ns, format_rate};

use super::alloc::Outcome;

/// The document the tables are rendered into.
pub(crate) const DOC: &str = "docs/BENCHMARKS.md";
/// The generated section `cargo xtask bench` rewrites in [`DOC`].
pub(crate) const TARGETS_SECTION: &str = "xtask bench";
/// The generated section `cargo xtask bench --peers` rewrites in [`DOC`].
pub(crate) const PEERS_SECTION: &str = "xtask bench --peers";

/// One target's figures (time from divan, counts from the harness).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TargetRow {
    pub(crate) name: String,
    pub(crate) label: String,
    /// Per-run medians, in nanoseconds.
    pub(crate) time: Option<Summary>,
    pub(crate) bytes_processed: Option<u64>,
    pub(crate) allocs: Option<f64>,
    pub(crate) bytes: Option<f64>,
    pub(crate) gate: Option<Outcome>,
}

impl TargetRow {
    /// Bytes per second at the median time.
    pub(crate) fn throughput(&self) -> Option<f64> {
        let time = self.time?;
        let bytes = self.bytes_processed?;
        (time.median > 0.0).then(|| bytes as f64 / (time.median / 1e9))
    }
}

/// Where and when: `date, CPU, cores, OS, rustc`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Context {
    pub(crate) command: String,
    pub(crate) date: String,
    pub(crate) machine: String,
}

impl Context {
    /// Gathers the date and machine description for `command`.
    pub(crate) fn gather(command: &str) -> Result<Self, String> {
        let date = cmd::output("date", &["-u", "+%Y-%m-%d %H:%M UTC"])?
            .trim()
            .to_string();
        let rustc = cmd::output("rustc", &["-V"])?.trim().to_string();
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let cores = std::thread::available_parallelism().map_or(0, usize::from);
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|r| {
                r.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|n| n.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| std::env::consts::OS.into());
        Ok(Self {
            command: command.into(),
            date,
            machine: format!("{cpu}, {cores} cores, {os}, {rustc}"),
        })
    }

    pub(crate) fn line(&self) -> String {
        format!(
            "Measured by `{}` on {}; machine: {}.",
            self.command, self.date, self.machine
        )
    }
}

/// The targets table (markdown; also what the terminal shows).
pub(crate) fn targets_table(rows: &[TargetRow]) -> String {
    let mut out = String::from(
        "| target | median | spread | throughput | allocs/op | bytes/op | allocation gate |\n\
         |---|---:|---:|---:|---:|---:|---|\n",
    );
    for row in rows {
        let dash = || "—".to_string();
        let gate = match row.gate {
            Some(Outcome::Pass) => "at baseline",
            Some(Outcome::Improved) => "below baseline (bless)",
            Some(Outcome::Regressed) => "**ABOVE baseline**",
            Some(Outcome::Unbaselined) => "**not in baseline**",
            Some(Outcome::Vanished) => "**no longer measured**",
            None => "not gated",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {gate} |",
            row.label,
            row.time.map_or_else(dash, |t| format_ns(t.median)),
            row.time
                .map_or_else(dash, |t| format!("±{:.1} %", t.spread_percent())),
            row.throughput().map_or_else(dash, format_rate),
            row.allocs.map_or_else(dash, format_count),
            row.bytes.map_or_else(dash, format_count),
        );
    }
    out
}

/// The generated section for the targets: context, method, table.
pub(crate) fn targets_section(context: &Context, runs: usize, rows: &[TargetRow]) -> String {
    format!(
        "{}\n\nTime: {runs} run{} of each divan bench (100 samples each); the median of the \
         run medians, spread = ± half the range of the run medians. Throughput is bytes per \
         op (the encoded frame, or the payload) at the median. Allocations: the `weft-alloc` \
         harness, 1000 ops after a warm-up, all threads, exact.\n\n{}\n![time per op](benchmarks.svg)\n",
        context.line(),
        if runs == 1 { "" } else { "s" },
        targets_table(rows)
    )
}

/// Replaces the text between `<!-- BEGIN name -->` and `<!-- END name -->`
/// in `doc` with `content`; fails if the markers are missing or out of order.
pub(crate) fn replace_section(doc: &str, name: &str, content: &str) -> Result<String, String> {
    let begin = format!("<!-- BEGIN {name} -->");
    let end = format!("<!-- END {name} -->");
    let start = doc
        .find(&begin)
        .ok_or_else(|| format!("{DOC} has no {begin} marker"))?
        + begin.len();
    let stop = doc[start..]
        .find(&end)
        .ok_or_else(|| format!("{DOC} has no {end} marker after {begin}"))?
        + start;
    Ok(format!("{}\n{}{}", &doc[..start], content, &doc[stop..]))
}

/// Rewrites one generated section of docs/BENCHMARKS.md.
pub(crate) fn update_doc(section: &str, content: &str) -> Result<(), String> {
    let doc = cmd::read(DOC)?;
    cmd::write(DOC, &replace_section(&doc, section, content)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, median: Option<f64>) -> TargetRow {
        TargetRow {
            name: label.into(),
            label: label.into(),
            time: median.and_then(|m| Summary::of(&[m * 0.9, m, m * 1.1])),
            bytes_processed: Some(1000),
            allocs: Some(0.0),
            bytes: Some(0.0),
            gate: Some(Outcome::Pass),
        }
    }

    #[test]
    fn table_has_a_line_per_target_and_dashes_for_missing_figures() {
        let table = targets_table(&[row("frame decode 1 KiB", Some(1000.0)), row("x", None)]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[2],
            "| frame decode 1 KiB | 1.00 µs | ±10.0 % | 1.00 GB/s | 0 | 0 | at baseline |"
        );
        assert!(lines[3].starts_with("| x | — | — | — |"));
    }

    #[test]
    fn sections_are_replaced_between_their_markers_only() {
        let doc = "intro\n<!-- BEGIN a -->\nold a\n<!-- END a -->\nmiddle\n<!-- BEGIN b -->\nold b\n<!-- END b -->\n";
        let new = replace_section(doc, "a", "new a\n").unwrap();
        assert_eq!(
            new,
            "intro\n<!-- BEGIN a -->\nnew a\n<!-- END a -->\nmiddle\n<!-- BEGIN b -->\nold b\n<!-- END b -->\n"
        );
        // idempotent
        assert_eq!(replace_section(&new, "a", "new a\n").unwrap(), new);
        assert!(replace_section(doc, "c", "x").is_err());
    }

    /// The page keeps both generated sections' markers (a rewrite of the
    /// prose around them must not lose one), and replacing one leaves the
    /// other and everything outside the markers as it was.
    #[test]
    fn the_page_has_both_generated_sections() {
        let doc = cmd::read(DOC).unwrap();
        for (name, other) in [
            (TARGETS_SECTION, PEERS_SECTION),
            (PEERS_SECTION, TARGETS_SECTION),
        ] {
            let new = replace_section(&doc, name, "REPLACED\n").unwrap();
            assert!(new.contains(&format!(
                "<!-- BEGIN {name} -->\nREPLACED\n<!-- END {name} -->"
            )));
            let begin = format!("<!-- BEGIN {other} -->");
            let kept = &doc[doc.find(&begin).unwrap()..];
            let kept = &kept[..kept.find(&format!("<!-- END {other} -->")).unwrap()];
            assert!(new.contains(kept), "replacing {name} changed {other}");
            // Only the named block changes: every block is still there.
            assert_eq!(
                new.matches("<!-- BEGIN ").count(),
                doc.matches("<!-- BEGIN ").count()
            );
        }
    }
}
