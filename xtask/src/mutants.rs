//! `cargo xtask mutants [--in-diff [REV]] [--package NAME]`: a mutation-score
//! gate on the wire-facing code (weft-frame, weft-transform, weft-mux's
//! session) with cargo-mutants, installed at a pinned version if missing.
//!
//! Every mutant that survives the tests must be listed in
//! xtask/mutants-baseline.txt with a reason (equivalent, or a performance
//! hint no test can observe); any other survivor fails the run. With
//! `--in-diff` only code changed since REV (default `HEAD~1`, working tree
//! included) is mutated: that is what CI runs. Without history to diff
//! against (a shallow or single-commit clone) it says so and passes; when
//! the diff changes no mutable code it says so before building anything.
//! Results: target/mutants/mutants.out/ (outcomes.json, missed.txt, logs).
//! On CI (`CI=true`) mutants are tested in place (the clone is disposable
//! and its build is reused) and an in-diff run is capped at
//! [`CI_MAX_MUTANTS`].

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::cmd;

const CARGO_MUTANTS: &str = "cargo-mutants@27.1.0";
const VERSION_LINE: &str = "cargo-mutants 27.1.0";
/// The accepted survivors, relative to the workspace root.
pub(crate) const BASELINE: &str = "xtask/mutants-baseline.txt";
const OUT_DIR: &str = "target/mutants";
const OUTCOMES: &str = "target/mutants/mutants.out/outcomes.json";
const PATCH: &str = "target/mutants/in-diff.patch";
/// On CI (`CI` set), an in-diff run tests at most this many mutants, an
/// even spread over the diff (round-robin shard), to stay within minutes.
const CI_MAX_MUTANTS: usize = 12;

/// One mutated package and the part of it that is mutated.
struct Target {
    package: &'static str,
    /// Directory prefix of the mutated files.
    dir: &'static str,
}

const TARGETS: &[Target] = &[
    Target {
        package: "weft-frame",
        dir: "crates/frame/src/",
    },
    Target {
        package: "weft-transform",
        dir: "crates/transform/src/",
    },
    Target {
        package: "weft-mux",
        dir: "crates/mux/src/session/",
    },
];

/// What to mutate.
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    /// Everything in scope.
    Full,
    /// Only code the diff against this revision touches.
    InDiff(String),
}

#[derive(Debug, PartialEq, Eq)]
struct Options {
    mode: Mode,
    package: Option<String>,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let usage = "usage: cargo xtask mutants [--in-diff [REV]] [--package NAME]";
    let mut options = Options {
        mode: Mode::Full,
        package: None,
    };
    let mut rest = args.iter().peekable();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--in-diff" => {
                let rev = rest.next_if(|next| !next.starts_with("--"));
                options.mode = Mode::InDiff(rev.map_or("HEAD~1", |r| r.as_str()).to_string());
            }
            "--package" => {
                let name = rest.next().ok_or(usage)?;
                if !TARGETS.iter().any(|t| t.package == name) {
                    return Err(format!("mutants: {name:?} is not a mutated package"));
                }
                options.package = Some(name.clone());
            }
            other => return Err(format!("mutants: unknown option {other:?}\n{usage}")),
        }
    }
    Ok(options)
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let options = parse_options(args)?;
    let baseline = parse_baseline(&cmd::read(BASELINE)?)?;
    let mut targets: Vec<&Target> = TARGETS
        .iter()
        .filter(|t| options.package.as_deref().is_none_or(|p| p == t.package))
        .collect();
    let mut extra: Vec<String> = Vec::new();
    if let Mode::InDiff(rev) = &options.mode {
        let Some(touched) = diff_against(rev, &targets)? else {
            return Ok(());
        };
        targets.retain(|t| touched.iter().any(|p| p.starts_with(t.dir)));
        extra.extend(["--in-diff".to_string(), PATCH.to_string()]);
    }
    ensure_installed()?;
    let mut scope: Vec<String> = Vec::new();
    for t in &targets {
        scope.extend(["-p".to_string(), t.package.to_string()]);
        scope.extend(["--file".to_string(), format!("{}**", t.dir)]);
    }
    scope.extend(extra);
    if matches!(options.mode, Mode::InDiff(_)) {
        let count = count_mutants(&scope)?;
        if count == 0 {
            println!(
                "mutants: the diff changes no mutable code (only comments, tests or declarations); nothing to test"
            );
            return Ok(());
        }
        if on_ci() && count > CI_MAX_MUTANTS {
            let shards = count.div_ceil(CI_MAX_MUTANTS);
            println!(
                "mutants: the diff has {count} mutants; CI tests every {shards}th (about \
                 {CI_MAX_MUTANTS}) to stay within minutes; `cargo xtask mutants --in-diff` tests all"
            );
            scope.extend([
                format!("--shard=0/{shards}"),
                "--sharding=round-robin".to_string(),
            ]);
        }
    }
    let mut argv: Vec<&str> = vec!["mutants"];
    argv.extend(scope.iter().map(String::as_str));
    argv.extend(["--timeout-multiplier", "3", "-o", OUT_DIR]);
    if on_ci() {
        // A CI clone is disposable and its target/ already holds the test
        // build: mutating in place skips a copy and a from-scratch build
        // (and is one job by nature).
        argv.push("--in-place");
    } else {
        argv.extend(["-j", "1"]);
    }
    match cmd::status("cargo", &argv)? {
        // 0: all caught; 2: some missed; 3: some timed out (counted caught).
        Some(0 | 2 | 3) => {}
        Some(4) => return Err("mutants: the tests fail on the unmutated tree".into()),
        other => return Err(format!("mutants: cargo-mutants failed ({other:?})")),
    }
    let outcomes = read_outcomes(&cmd::read(OUTCOMES)?)?;
    print!("{}", score_table(&outcomes));
    let verdict = judge(&outcomes, &baseline, source_line);
    if options.mode == Mode::Full {
        for stale in &verdict.stale {
            println!("mutants: baseline entry no longer survives, remove it: {stale}");
        }
    }
    if verdict.new.is_empty() {
        println!("mutants: no survivor outside {BASELINE}");
        return Ok(());
    }
    let mut msg = format!(
        "{} new surviving mutant(s): add a test that fails on each, or (if it is equivalent \
         or only a performance hint) an entry with the reason to {BASELINE}:",
        verdict.new.len()
    );
    for (name, at) in &verdict.new {
        msg.push_str(&format!("\n  {name}\n      at: {at}"));
    }
    Err(msg)
}

/// Whether this runs on CI (`CI` set and not `false`, as CI services do).
fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Writes the diff against `rev` (scoped to the targets' directories) to
/// [`PATCH`] and returns the in-scope Rust files it touches; `None` (having
/// said why) when there is nothing to test.
fn diff_against(rev: &str, targets: &[&Target]) -> Result<Option<Vec<String>>, String> {
    let exists = Command::new("git")
        .args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ])
        .current_dir(cmd::root())
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !exists {
        println!(
            "mutants: no commit {rev} in this clone (shallow or single-commit history); \
             in-diff run skipped. `git fetch --deepen=1` makes it possible."
        );
        return Ok(None);
    }
    let mut args = vec!["diff", rev, "--"];
    args.extend(targets.iter().map(|t| t.dir));
    let diff = cmd::output("git", &args)?;
    let touched = touched_rust_files(&diff);
    if touched.is_empty() {
        println!("mutants: the diff against {rev} touches no mutable code; nothing to test");
        return Ok(None);
    }
    cmd::write(PATCH, &diff)?;
    Ok(Some(touched))
}

/// The `.rs` files a unified diff changes (their new paths).
fn touched_rust_files(diff: &str) -> Vec<String> {
    diff.lines()
        .filter_map(|l| l.strip_prefix("+++ b/"))
        .filter(|p| p.ends_with(".rs"))
        .map(str::to_string)
        .collect()
}

fn ensure_installed() -> Result<(), String> {
    let version = Command::new("cargo")
        .args(["mutants", "--version"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    if version.trim() != VERSION_LINE {
        cmd::run("cargo", &["install", "--locked", CARGO_MUTANTS])?;
    }
    Ok(())
}

fn count_mutants(scope: &[String]) -> Result<usize, String> {
    let mut argv: Vec<&str> = vec!["mutants", "--list"];
    argv.extend(scope.iter().map(String::as_str));
    Ok(cmd::output("cargo", &argv)?.lines().count())
}

/// The text of line `line` (1-based) of a workspace file, trimmed.
fn source_line(file: &str, line: usize) -> String {
    cmd::read(file)
        .ok()
        .and_then(|text| text.lines().nth(line.wrapping_sub(1)).map(str::to_string))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// One accepted survivor: the mutant's name without line and column, the
/// trimmed source line it mutates (so two alike mutants in one function are
/// told apart and the entry survives edits above it), and why it may live.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Accepted {
    name: String,
    at: String,
    why: String,
}

/// Parses the baseline: blank-line separated entries of a name line, then
/// indented `at:` and `why:` lines; `#` lines are comments.
fn parse_baseline(text: &str) -> Result<Vec<Accepted>, String> {
    let mut entries = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |what: &str| format!("{BASELINE}:{}: {what}", n + 1);
        if line.starts_with(char::is_whitespace) {
            return Err(bad("an entry starts with the mutant's name, unindented"));
        }
        let mut field = |key: &str| {
            lines
                .next()
                .and_then(|(_, l)| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    bad(&format!(
                        "expected an indented `{key} ...` line after the name"
                    ))
                })
        };
        let at = field("at:")?;
        let why = field("why:")?;
        entries.push(Accepted {
            name: line.trim().to_string(),
            at,
            why,
        });
    }
    Ok(entries)
}

/// What cargo-mutants concluded about one mutant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Caught,
    Missed,
    Timeout,
    Unviable,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Mutant {
    package: String,
    file: String,
    line: usize,
    /// cargo-mutants' name, with line and column.
    name: String,
    outcome: Outcome,
}

impl Mutant {
    /// The name without `:line:col`, as the baseline lists it.
    fn stable_name(&self) -> String {
        let rest = self
            .name
            .strip_prefix(self.file.as_str())
            .and_then(|r| r.strip_prefix(':'))
            .and_then(|r| r.split_once(": "))
            .map_or(self.name.as_str(), |(_, description)| description);
        format!("{}: {rest}", self.file)
    }
}

/// The mutants of cargo-mutants' outcomes.json (the unmutated baseline
/// run is left out).
fn read_outcomes(json: &str) -> Result<Vec<Mutant>, String> {
    let doc: Value =
        serde_json::from_str(json).map_err(|e| format!("{OUTCOMES} is not JSON: {e}"))?;
    let bad = || format!("{OUTCOMES}: unexpected layout");
    let mut mutants = Vec::new();
    for o in doc["outcomes"].as_array().ok_or_else(bad)? {
        let Some(m) = o["scenario"].get("Mutant") else {
            continue;
        };
        let outcome = match o["summary"].as_str().ok_or_else(bad)? {
            "CaughtMutant" => Outcome::Caught,
            "MissedMutant" => Outcome::Missed,
            "Timeout" => Outcome::Timeout,
            "Unviable" => Outcome::Unviable,
            other => return Err(format!("{OUTCOMES}: unknown summary {other:?}")),
        };
        let text = |v: &Value| v.as_str().map(str::to_string).ok_or_else(bad);
        mutants.push(Mutant {
            package: text(&m["package"])?,
            file: text(&m["file"])?,
            line: m["span"]["start"]["line"].as_u64().ok_or_else(bad)? as usize,
            name: text(&m["name"])?,
            outcome,
        });
    }
    Ok(mutants)
}

/// Per package: caught (timeouts included: the tests noticed), missed,
/// unviable, and the score, caught / (caught + missed).
fn score_table(mutants: &[Mutant]) -> String {
    let mut tally: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    for m in mutants {
        let row = tally.entry(m.package.as_str()).or_default();
        row[m.outcome as usize] += 1;
    }
    let mut out = String::from(
        "| package | caught | timeout | missed | unviable | score |\n|---|---|---|---|---|---|\n",
    );
    for (package, [caught, missed, timeout, unviable]) in tally {
        let viable = caught + timeout + missed;
        let score = if viable == 0 {
            100.0
        } else {
            (caught + timeout) as f64 * 100.0 / viable as f64
        };
        out.push_str(&format!(
            "| {package} | {caught} | {timeout} | {missed} | {unviable} | {score:.1} % |\n"
        ));
    }
    out
}

/// Survivors not in the baseline (name with line:col, source line), and
/// baseline entries of the tested packages that no longer survive.
#[derive(Debug, Default, PartialEq, Eq)]
struct Verdict {
    new: Vec<(String, String)>,
    stale: Vec<String>,
}

fn judge(
    mutants: &[Mutant],
    baseline: &[Accepted],
    source: impl Fn(&str, usize) -> String,
) -> Verdict {
    let mut verdict = Verdict::default();
    let mut used = vec![false; baseline.len()];
    for m in mutants.iter().filter(|m| m.outcome == Outcome::Missed) {
        let (name, at) = (m.stable_name(), source(&m.file, m.line));
        match baseline.iter().position(|a| a.name == name && a.at == at) {
            Some(i) => used[i] = true,
            None => verdict.new.push((m.name.clone(), at)),
        }
    }
    let tested: Vec<&str> = mutants.iter().map(|m| m.file.as_str()).collect();
    for (a, used) in baseline.iter().zip(used) {
        let file = a.name.split_once(": ").map_or("", |(f, _)| f);
        if !used && tested.contains(&file) {
            verdict.stale.push(a.name.clone());
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_default_to_a_full_run_and_in_diff_to_the_previous_commit() {
        assert_eq!(parse_options(&[]).unwrap().mode, Mode::Full);
        let o = parse_options(&args(&["--in-diff"])).unwrap();
        assert_eq!(o.mode, Mode::InDiff("HEAD~1".into()));
        let o = parse_options(&args(&["--in-diff", "main", "--package", "weft-frame"])).unwrap();
        assert_eq!(o.mode, Mode::InDiff("main".into()));
        assert_eq!(o.package.as_deref(), Some("weft-frame"));
        assert!(parse_options(&args(&["--package", "weft-cli"])).is_err());
        assert!(parse_options(&args(&["--all"])).is_err());
    }

    #[test]
    fn touched_files_are_the_new_paths_of_rust_files() {
        let diff = "diff --git a/crates/frame/src/codec.rs b/crates/frame/src/codec.rs\n\
                    --- a/crates/frame/src/codec.rs\n+++ b/crates/frame/src/codec.rs\n\
                    @@ -1 +1 @@\n-a\n+b\n\
                    --- a/crates/frame/src/notes.md\n+++ b/crates/frame/src/notes.md\n\
                    --- a/crates/frame/src/gone.rs\n+++ /dev/null\n";
        assert_eq!(touched_rust_files(diff), ["crates/frame/src/codec.rs"]);
        assert!(touched_rust_files("").is_empty());
    }

    #[test]
    fn baseline_entries_need_a_line_and_a_reason() {
        let good = "# comment\n\ncrates/a/src/x.rs: replace - with + in f\n  at: v.reserve(n - m);\n  why: performance hint\n";
        assert_eq!(
            parse_baseline(good).unwrap(),
            [Accepted {
                name: "crates/a/src/x.rs: replace - with + in f".into(),
                at: "v.reserve(n - m);".into(),
                why: "performance hint".into(),
            }]
        );
        assert!(parse_baseline("crates/a/src/x.rs: m\n  at: x\n").is_err());
        assert!(parse_baseline("crates/a/src/x.rs: m\n  at: x\n  why:\n").is_err());
        assert!(parse_baseline("  at: x\n").is_err());
    }

    #[test]
    fn the_committed_baseline_parses_and_every_entry_has_a_reason() {
        let entries = parse_baseline(&cmd::read(BASELINE).unwrap()).unwrap();
        assert!(!entries.is_empty());
        for e in &entries {
            assert!(
                TARGETS.iter().any(|t| e.name.starts_with(t.dir)),
                "{}",
                e.name
            );
        }
    }

    fn mutant(name: &str, line: usize, outcome: Outcome) -> Mutant {
        Mutant {
            package: "weft-frame".into(),
            file: "crates/frame/src/codec.rs".into(),
            line,
            name: name.into(),
            outcome,
        }
    }

    #[test]
    fn outcomes_json_is_read_and_scored() {
        let json = r#"{"outcomes":[
            {"scenario":"Baseline","summary":"Success"},
            {"scenario":{"Mutant":{"package":"weft-frame","file":"crates/frame/src/codec.rs",
              "name":"crates/frame/src/codec.rs:66:44: replace - with + in f","span":{"start":{"line":66,"column":44}}}},
             "summary":"MissedMutant"},
            {"scenario":{"Mutant":{"package":"weft-frame","file":"crates/frame/src/codec.rs",
              "name":"crates/frame/src/codec.rs:70:1: replace f with ()","span":{"start":{"line":70,"column":1}}}},
             "summary":"CaughtMutant"},
            {"scenario":{"Mutant":{"package":"weft-frame","file":"crates/frame/src/codec.rs",
              "name":"crates/frame/src/codec.rs:71:1: replace g with ()","span":{"start":{"line":71,"column":1}}}},
             "summary":"Timeout"}]}"#;
        let mutants = read_outcomes(json).unwrap();
        assert_eq!(
            mutants[0],
            mutant(
                "crates/frame/src/codec.rs:66:44: replace - with + in f",
                66,
                Outcome::Missed
            )
        );
        assert_eq!(
            mutants[0].stable_name(),
            "crates/frame/src/codec.rs: replace - with + in f"
        );
        let table = score_table(&mutants);
        assert!(
            table.contains("| weft-frame | 1 | 1 | 1 | 0 | 66.7 % |"),
            "{table}"
        );
    }

    #[test]
    fn a_survivor_passes_only_with_its_name_and_line_in_the_baseline() {
        let accepted = |at: &str| Accepted {
            name: "crates/frame/src/codec.rs: replace - with + in f".into(),
            at: at.into(),
            why: "hint".into(),
        };
        let missed = [mutant(
            "crates/frame/src/codec.rs:66:44: replace - with + in f",
            66,
            Outcome::Missed,
        )];
        let source = |_: &str, line: usize| format!("line {line}");
        assert_eq!(
            judge(&missed, &[accepted("line 66")], source),
            Verdict::default()
        );
        // Same name, another line of the function: a new survivor.
        let v = judge(&missed, &[accepted("line 79")], source);
        assert_eq!(v.new.len(), 1);
        assert_eq!(
            v.stale,
            ["crates/frame/src/codec.rs: replace - with + in f"]
        );
        // Caught now: the entry is stale, nothing is new.
        let caught = [mutant(
            "crates/frame/src/codec.rs:66:44: replace - with + in f",
            66,
            Outcome::Caught,
        )];
        let v = judge(&caught, &[accepted("line 66")], source);
        assert!(v.new.is_empty());
        assert_eq!(v.stale.len(), 1);
    }
}
