//! `cargo xtask instr`: instructions per call, counted by valgrind's
//! callgrind (`Ir`, user space, all threads), which repeat exactly for the
//! same binary and inputs on a loaded or an idle machine; so these gate,
//! and wall time never does.
//!
//! - `instr --check` (CI): the instruction gate. Builds `weft-instr`
//!   (benches/src/bin/instr.rs, release like the shipped binary), runs
//!   each of its cells (raw, typed and `Channel` unary calls, the typed
//!   call over a `Channel` and the raw `Channel` call it wraps;
//!   sequential, joined-64 and spawned-64, each plain and encrypted; one
//!   current-thread runtime) under callgrind, and compares the instructions per call with
//!   benches/instr-baseline.json: more than +2 % on any cell fails. Every
//!   cell is printed with its baseline, figure and ratio.
//! - `instr --bless`: the same, then rewrites the baseline (say why in the
//!   commit).
//! - `instr --by-layer`: the raw call's cost per layer, client and server
//!   on a thread each ([`layers`]), into docs/BENCHMARKS.md.
//! - `instr [--n1 N] [--n2 N] -- COMMAND ARGS...`: any command, measured
//!   differentially: `(Ir(run with N2 operations) - Ir(run with N1)) /
//!   (N2 - N1)`, every literal `{N}` in COMMAND ARGS replaced by the count.
//!
//! A gate cell is measured in one run: `weft-instr` calls
//! `weft_benches::instr::cut` between its phases (warm-up, N1 units, N2
//! units) and callgrind, told `--dump-before` that function, writes each
//! phase's profile to a file of its own; the figure is
//! `(Ir(N2 phase) - Ir(N1 phase)) / (calls(N2) - calls(N1))`, so start-up,
//! connection set-up and the edges of a phase cancel out.
//!
//! Needs valgrind (`apt-get install -y valgrind`; .ci/run installs it).

mod callgrind;
mod cells;
mod gate;
mod layers;

use std::path::Path;

use crate::cmd;

/// Parsed options: the two operation counts and the command template.
#[derive(Debug, PartialEq)]
struct Options {
    n1: u64,
    n2: u64,
    command: Vec<String>,
}

const USAGE: &str = "usage: cargo xtask instr --check | --bless | --by-layer | [--n1 N] [--n2 N] -- COMMAND ARGS... ({N} = count)";

fn parse(args: &[String]) -> Result<Options, String> {
    let (mut n1, mut n2) = (1000, 6000);
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--" => break,
            flag @ ("--n1" | "--n2") => {
                let n = args
                    .get(i + 1)
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| format!("instr: {flag} needs a number\n{USAGE}"))?;
                if flag == "--n1" {
                    n1 = n;
                } else {
                    n2 = n;
                }
                i += 2;
            }
            other => return Err(format!("instr: unknown option {other:?}\n{USAGE}")),
        }
    }
    let command: Vec<String> = args.get(i + 1..).unwrap_or_default().to_vec();
    if command.is_empty() {
        return Err(format!("instr: no command given\n{USAGE}"));
    }
    if n2 <= n1 {
        return Err(format!(
            "instr: --n2 ({n2}) must be larger than --n1 ({n1})"
        ));
    }
    Ok(Options { n1, n2, command })
}

/// The command with `{N}` replaced by `n`.
fn with_count(command: &[String], n: u64) -> Vec<String> {
    command
        .iter()
        .map(|a| a.replace("{N}", &n.to_string()))
        .collect()
}

/// The `Collected : N` figure of a callgrind log.
fn collected(log: &str) -> Option<u64> {
    log.lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|v| v.trim().parse().ok())
}

/// Instructions per operation from the two totals.
fn per_op(a: u64, b: u64, n1: u64, n2: u64) -> Result<u64, String> {
    b.checked_sub(a)
        .map(|d| d / (n2 - n1))
        .ok_or_else(|| format!("instr: the larger run counted fewer instructions ({b} < {a})"))
}

fn ir(dir: &Path, command: &[String], n: u64) -> Result<u64, String> {
    let args = with_count(command, n);
    let out = dir.join(format!("cg.{n}"));
    let log = dir.join(format!("log.{n}"));
    let mut full = vec![
        "--tool=callgrind".to_string(),
        format!("--callgrind-out-file={}", out.display()),
        format!("--log-file={}", log.display()),
    ];
    full.extend(args);
    let refs: Vec<&str> = full.iter().map(String::as_str).collect();
    cmd::output("valgrind", &refs)?;
    let text = std::fs::read_to_string(&log).map_err(|e| format!("instr: {e}"))?;
    collected(&text).ok_or_else(|| format!("instr: no `Collected` line in {}", log.display()))
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("--check") if args.len() == 1 => return cells::check(cells::Mode::Check),
        Some("--bless") if args.len() == 1 => return cells::check(cells::Mode::Bless),
        Some("--by-layer") if args.len() == 1 => return cells::by_layer(),
        Some("--check" | "--bless" | "--by-layer") => {
            return Err(format!("instr: {} takes no other option\n{USAGE}", args[0]));
        }
        _ => {}
    }
    let o = parse(args)?;
    let dir = cmd::root().join("target/instr");
    std::fs::create_dir_all(&dir).map_err(|e| format!("instr: {e}"))?;
    let a = ir(&dir, &o.command, o.n1)?;
    let b = ir(&dir, &o.command, o.n2)?;
    println!("Ir({})={a} Ir({})={b}", o.n1, o.n2);
    println!("instructions per operation: {}", per_op(a, b, o.n1, o.n2)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_counts_and_the_command_after_the_separator() {
        let o = parse(&strings(&[
            "--n1", "640", "--n2", "1920", "--", "bin", "--calls", "{N}",
        ]))
        .unwrap();
        assert_eq!((o.n1, o.n2), (640, 1920));
        assert_eq!(
            with_count(&o.command, 640),
            strings(&["bin", "--calls", "640"])
        );
        let d = parse(&strings(&["--", "bin"])).unwrap();
        assert_eq!((d.n1, d.n2), (1000, 6000));
    }

    #[test]
    fn bad_options_are_refused_with_a_reason() {
        assert!(
            parse(&strings(&["--n1", "x", "--", "b"]))
                .unwrap_err()
                .contains("--n1 needs")
        );
        assert!(
            parse(&strings(&["--n1", "5"]))
                .unwrap_err()
                .contains("no command")
        );
        assert!(
            parse(&strings(&["--n1", "9", "--n2", "9", "--", "b"]))
                .unwrap_err()
                .contains("larger")
        );
        assert!(
            parse(&strings(&["--what", "--", "b"]))
                .unwrap_err()
                .contains("unknown option")
        );
    }

    #[test]
    fn the_figure_is_the_difference_per_operation_from_callgrinds_log() {
        let log = "==1== Events    : Ir\n==1== Collected : 62271551\n==1==\n";
        assert_eq!(collected(log), Some(62_271_551));
        assert_eq!(collected("nothing"), None);
        assert_eq!(per_op(1_000_000, 15_000_000, 1000, 2000), Ok(14_000));
        assert!(per_op(5, 4, 1, 2).is_err());
    }
}
