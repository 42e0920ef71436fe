//! Reading divan's table. divan has no machine-readable output, so xtask
//! builds the bench executables (`cargo bench --no-run
//! --message-format=json`), runs each as `EXE --bench --color never`, and
//! parses the table: the header line holds `fastest`; cells split on `│`; the
//! first cell holds a tree prefix (3-character units), the name and the
//! fastest time; leaf rows are the ones with sample and iteration counts.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::cmd;

/// One leaf row: a bench's median time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// `<bench file>/<function>[/<arg>]`, as the registry names targets.
    pub(crate) path: String,
    pub(crate) median_ns: f64,
}

/// Builds the divan bench executables of weft-benches (release) and returns
/// their paths.
pub(crate) fn executables() -> Result<Vec<PathBuf>, String> {
    let out = cmd::output(
        "cargo",
        &[
            "bench",
            "-p",
            "weft-benches",
            "--no-run",
            "--message-format=json",
        ],
    )?;
    Ok(bench_executables(&out))
}

/// The executables of `bench` targets in cargo's JSON messages.
pub(crate) fn bench_executables(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bench"))
        })
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .collect()
}

/// Runs every bench executable `runs` times; returns each path's medians,
/// one per run.
pub(crate) fn measure(runs: usize) -> Result<BTreeMap<String, Vec<f64>>, String> {
    let exes = executables()?;
    if exes.is_empty() {
        return Err("cargo built no bench executables for weft-benches".into());
    }
    let mut medians: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for run in 1..=runs {
        for exe in &exes {
            println!("divan run {run}/{runs}");
            let table = cmd::output_of(exe, &["--bench", "--color", "never"])?;
            let rows = parse(&table);
            if rows.is_empty() {
                return Err(format!(
                    "no benchmark rows in the output of {}",
                    exe.display()
                ));
            }
            for row in rows {
                medians.entry(row.path).or_default().push(row.median_ns);
            }
        }
    }
    Ok(medians)
}

/// Parses divan's table into leaf rows.
pub(crate) fn parse(table: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut file = String::new();
    // The name column ends at the header's first `│`; tree lines (`│  ├─ `)
    // use the same character, so rows are cut there, not split on every `│`.
    let mut name_width = None;
    let mut stack: Vec<String> = Vec::new();
    for line in table.lines() {
        if line.contains("fastest") && line.contains('│') {
            file = line.split_whitespace().next().unwrap_or("").to_string();
            name_width = line.chars().position(|c| c == '│');
            stack.clear();
            continue;
        }
        let Some(width) = name_width else {
            continue;
        };
        let chars: Vec<char> = line.chars().collect();
        if chars.len() <= width || chars[width] != '│' {
            continue;
        }
        let first: String = chars[..width].iter().collect();
        let others: String = chars[width + 1..].iter().collect();
        let cells: Vec<&str> = std::iter::once(first.as_str())
            .chain(others.split('│'))
            .collect();
        if cells.len() < 6 {
            continue;
        }
        let Some((depth, rest)) = split_name(cells[0]) else {
            continue;
        };
        let is_leaf =
            cells[4].trim().parse::<u64>().is_ok() && cells[5].trim().parse::<u64>().is_ok();
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        let name_len = if is_leaf {
            tokens.len().saturating_sub(2)
        } else {
            tokens.len()
        };
        if name_len == 0 {
            continue;
        }
        let name = tokens[..name_len].join(" ");
        stack.truncate(depth);
        if is_leaf {
            let Some(median_ns) = parse_duration(cells[2]) else {
                continue;
            };
            let mut parts = vec![file.clone()];
            parts.extend(stack.iter().cloned());
            parts.push(name);
            rows.push(Row {
                path: parts.join("/"),
                median_ns,
            });
        } else {
            stack.push(name);
        }
    }
    rows
}

/// The depth of a named row (3-character tree units before its `├─ ` or
/// `╰─ ` connector) and the text after the connector; `None` for
/// continuation rows (throughput, allocation counts), which have no connector.
fn split_name(cell: &str) -> Option<(usize, &str)> {
    ["├─ ", "╰─ "].iter().find_map(|connector| {
        cell.find(connector).map(|at| {
            (
                cell[..at].chars().count() / 3,
                &cell[at + connector.len()..],
            )
        })
    })
}

/// `25.7 ns`, `1.77 µs`, `33.4 ms`, `2 s` in nanoseconds.
pub(crate) fn parse_duration(cell: &str) -> Option<f64> {
    let mut parts = cell.split_whitespace();
    let value: f64 = parts.next()?.parse().ok()?;
    let scale = match parts.next()? {
        "ps" => 1e-3,
        "ns" => 1.0,
        "µs" | "μs" | "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    Some(value * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
Timer precision: 20 ns
frame         fastest       │ slowest       │ median        │ mean          │ samples │ iters
╰─ decode                   │               │               │               │         │
   ├─ 64      25.7 ns       │ 41.59 ns      │ 26.34 ns      │ 26.85 ns      │ 100     │ 25600
   │          3.579 GB/s    │ 2.212 GB/s    │ 3.493 GB/s    │ 3.427 GB/s    │         │
   │          alloc:        │               │               │               │         │
   │            1           │ 1             │ 1             │ 1             │         │
   │            48 B        │ 48 B          │ 48 B          │ 48 B          │         │
   ├─ 1024    30.1 ns       │ 50 ns         │ 31.2 ns       │ 32 ns         │ 100     │ 12800
   ╰─ 65536   1.2 µs        │ 3.4 µs        │ 1.5 µs        │ 1.6 µs        │ 100     │ 400
";

    #[test]
    fn leaf_rows_get_full_paths_and_medians() {
        let rows = parse(TABLE);
        let got: Vec<(&str, f64)> = rows
            .iter()
            .map(|r| (r.path.as_str(), r.median_ns))
            .collect();
        assert_eq!(
            got,
            vec![
                ("frame/decode/64", 26.34),
                ("frame/decode/1024", 31.2),
                ("frame/decode/65536", 1500.0)
            ]
        );
    }

    #[test]
    fn benches_without_args_and_nested_groups() {
        let table = "\
transform       fastest │ slowest │ median  │ mean    │ samples │ iters
├─ passthrough  14 ns   │ 20 ns   │ 15 ns   │ 16 ns   │ 100     │ 1000
╰─ sealed               │         │         │         │         │
   ╰─ gcm               │         │         │         │         │
      ╰─ 1300   7.6 µs  │ 9 µs    │ 7.7 µs  │ 8 µs    │ 100     │ 100
";
        let paths: Vec<String> = parse(table).into_iter().map(|r| r.path).collect();
        assert_eq!(
            paths,
            vec!["transform/passthrough", "transform/sealed/gcm/1300"]
        );
    }

    /// Divan's own output for a group that is not the last: its children's
    /// tree prefix starts with `│`, the column separator's character.
    #[test]
    fn args_under_a_group_that_is_not_last() {
        let table = "\
Timer precision: 27 ns
transform              fastest       │ slowest       │ median        │ mean          │ samples │ iters
├─ codec_only          114.6 ns      │ 3.992 µs      │ 119.6 ns      │ 169.1 ns      │ 100     │ 100
│                      max alloc:    │               │               │               │         │
│                        0           │ 1             │ 0             │ 0.01          │         │
├─ deflate_settings                  │               │               │               │         │
│  ├─ (1, false)       13.66 µs      │ 4.083 ms      │ 14.1 µs       │ 55.53 µs      │ 100     │ 100
│  ╰─ (9, true)        16.5 µs       │ 2.205 ms      │ 17.4 µs       │ 39.58 µs      │ 100     │ 100
╰─ passthrough         83.08 ns      │ 86.05 ns      │ 83.93 ns      │ 84.01 ns      │ 100     │ 3200
";
        let got: Vec<(String, f64)> = parse(table)
            .into_iter()
            .map(|r| (r.path, r.median_ns))
            .collect();
        assert_eq!(
            got,
            vec![
                ("transform/codec_only".to_string(), 119.6),
                (
                    "transform/deflate_settings/(1, false)".to_string(),
                    14_100.0
                ),
                ("transform/deflate_settings/(9, true)".to_string(), 17_400.0),
                ("transform/passthrough".to_string(), 83.93),
            ]
        );
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(parse_duration("26.34 ns"), Some(26.34));
        assert_eq!(parse_duration("1.77 µs"), Some(1770.0));
        assert_eq!(parse_duration("2 ms"), Some(2e6));
        assert_eq!(parse_duration("1 s"), Some(1e9));
        assert_eq!(parse_duration("3.4 GB/s"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn only_bench_artifacts_with_executables_are_picked() {
        let messages = r#"{"reason":"compiler-artifact","target":{"kind":["lib"]},"executable":null}
{"reason":"compiler-artifact","target":{"kind":["bench"]},"executable":"/t/release/deps/frame-abc"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            bench_executables(messages),
            vec![PathBuf::from("/t/release/deps/frame-abc")]
        );
    }
}
