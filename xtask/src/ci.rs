//! `cargo xtask ci [GROUP]`: exactly what .ci/run runs, in order.
//!
//! The steps fall into groups, one per job of .github/workflows/ci.yml, so
//! lint and tests report apart from coverage and fuzzing there; with no
//! group (what CI here runs) every group runs, in the order below.

use crate::prebuild::Prebuild;
use crate::{bench, cmd, coverage, fuzz, mutants, soak};

/// Runs the CI steps of one group, or of all; stops at the first failure.
/// Prints how long each step took at the end (also after a failure), so
/// the run's time budget (about 11 minutes) can be kept step by step.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let selection = match args {
        [] => Selection::All,
        [group] => Selection::Only(Group::parse(group)?),
        _ => return Err(format!("usage: cargo xtask ci [{}]", Group::NAMES)),
    };
    let mut times = Times::new(selection);
    let result = steps(&mut times);
    times.print();
    result
}

/// A set of steps that report together (one GitHub Actions job each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// fmt, clippy, rustdoc with warnings denied, packaging, the workflow's schema.
    Lint,
    /// The test suites (also with every feature), loom, mutants, the allocation gate.
    Test,
    /// Per-crate line coverage floors.
    Coverage,
    /// Every fuzz target (nightly) and the soak: the long randomised runs.
    Fuzz,
}

impl Group {
    const ALL: [Group; 4] = [Group::Lint, Group::Test, Group::Coverage, Group::Fuzz];
    const NAMES: &'static str = "lint|test|coverage|fuzz";

    fn name(self) -> &'static str {
        match self {
            Group::Lint => "lint",
            Group::Test => "test",
            Group::Coverage => "coverage",
            Group::Fuzz => "fuzz",
        }
    }

    fn parse(name: &str) -> Result<Group, String> {
        Group::ALL
            .into_iter()
            .find(|g| g.name() == name)
            .ok_or_else(|| format!("ci: unknown step group {name:?} (one of {})", Group::NAMES))
    }
}

/// Which groups a run executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Selection {
    /// Every group, in order (`cargo xtask ci`, `bash .ci/run`).
    All,
    /// One group (`cargo xtask ci test`, a workflow job).
    Only(Group),
}

impl Selection {
    fn wants(self, group: Group) -> bool {
        match self {
            Selection::All => true,
            Selection::Only(g) => g == group,
        }
    }
}

/// The selected groups, and the wall time per step in the order run.
struct Times {
    selection: Selection,
    times: Vec<(&'static str, std::time::Duration)>,
}

impl Times {
    fn new(selection: Selection) -> Times {
        Times {
            selection,
            times: Vec::new(),
        }
    }

    fn wants(&self, group: Group) -> bool {
        self.selection.wants(group)
    }

    /// Runs `step` if its group is selected, recording its time under `name`.
    fn step(
        &mut self,
        group: Group,
        name: &'static str,
        step: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        if !self.wants(group) {
            return Ok(());
        }
        let start = std::time::Instant::now();
        let r = step();
        self.times.push((name, start.elapsed()));
        r
    }

    fn print(&self) {
        println!("ci: time per step");
        for (name, d) in &self.times {
            println!("ci:   {name:<10} {:>6.0} s", d.as_secs_f64());
        }
    }
}

fn steps(t: &mut Times) -> Result<(), String> {
    use Group::{Coverage, Fuzz, Lint, Test};
    t.step(Lint, "fmt", || {
        cmd::run("cargo", &["fmt", "--all", "--", "--check"])
    })?;
    // The two builds only the last steps need (release with fat LTO, and
    // nightly with AddressSanitizer) start now at the lowest priority, and
    // fill the cores the steps in between leave idle.
    let mut builds = t.wants(Fuzz).then(Prebuilds::start);
    t.step(Lint, "clippy", clippy)?;
    t.step(Lint, "doc", doc)?;
    t.step(Lint, "package", package)?;
    t.step(Lint, "workflow", workflow_schema)?;
    // The README's test command, verbatim. The workspace tests open `weft
    // load --report`'s page in a headless browser; here that test must
    // run, not skip.
    t.step(Test, "test", || {
        let browser = browser()?;
        println!("ci: the --report test uses {browser}");
        cmd::run("cargo", &["test", "--workspace", "--all-features"])
    })?;
    // The mux driver's hand-offs and the rpc call entry's end, every
    // interleaving (loom).
    t.step(Test, "loom", loom)?;
    // Surviving mutants in the last commit's wire-facing code. On CI they
    // are written into the sources in place: no build may read the tree
    // meanwhile, so the prebuilds are waited for first; and what mutants
    // touched is newer than their artifacts afterwards, so they start
    // again (a few seconds of checks when nothing was touched).
    t.step(Test, "mutants", || {
        if let Some(builds) = builds.take() {
            builds.finish();
        }
        mutants::run(&["--in-diff".to_string()])
    })?;
    if builds.is_none() && t.wants(Fuzz) {
        builds = Some(Prebuilds::start());
    }
    t.step(Test, "bench", || bench::run(&["--check".to_string()]))?;
    t.step(Coverage, "coverage", || coverage::run(&[]))?;
    t.step(Test, "instr", instr)?;
    let (soak_build, fuzz_build) = match builds {
        Some(Prebuilds { soak, fuzz }) => (Some(soak), fuzz),
        None => (None, None),
    };
    // Every fuzz target for 30 s.
    t.step(Fuzz, "fuzz", || {
        if let Some(build) = fuzz_build {
            build.finish();
        }
        fuzz::run(&["--secs".to_string(), "30".to_string()])
    })?;
    // One minute of every call shape with cancellations.
    t.step(Fuzz, "soak", || {
        if let Some(build) = soak_build {
            build.finish();
        }
        soak::run(&["--secs".to_string(), "60".to_string()])
    })
}

/// The soak's and (when cargo-fuzz is there) the fuzz targets' builds,
/// running in the background ([`crate::prebuild`]).
struct Prebuilds {
    soak: Prebuild,
    fuzz: Option<Prebuild>,
}

impl Prebuilds {
    fn start() -> Prebuilds {
        Prebuilds {
            soak: Prebuild::start("soak", &soak::BUILD),
            fuzz: fuzz::cargo_fuzz_present().then(|| Prebuild::start("fuzz", &fuzz::BUILD)),
        }
    }

    /// Waits for both.
    fn finish(self) {
        self.soak.finish();
        if let Some(fuzz) = self.fuzz {
            fuzz.finish();
        }
    }
}

fn clippy() -> Result<(), String> {
    cmd::run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
    )
}

/// Instructions per call against benches/instr-baseline.json
/// (callgrind). Its release build shares the soak prebuild's package and
/// profile, so it compiles and links only `weft-instr`; it runs after
/// coverage rather than straight after bench because cargo would wait for
/// that prebuild (at nice 19, mostly one thread) with a core idle.
fn instr() -> Result<(), String> {
    crate::instr::run(&["--check".to_string()])
}

/// The loom models of weft-mux's driver and of weft-rpc's call entry
/// (`server/context/touch.rs`): a `--cfg loom` build (as tokio's), so
/// `--all-features` stays an ordinary build. In its own target directory:
/// RUSTFLAGS changes every crate's fingerprint, and sharing `target/` would
/// rebuild the whole workspace after this step. One cargo run for both
/// crates: weft-rpc builds on weft-mux, so the second costs one crate.
fn loom() -> Result<(), String> {
    cmd::run_env(
        "cargo",
        &[
            "test", "-p", "weft-mux", "-p", "weft-rpc", "--lib", "--", "loom",
        ],
        &[
            ("RUSTFLAGS", "--cfg loom"),
            ("CARGO_TARGET_DIR", "target/loom"),
        ],
    )
}

/// The API docs of every workspace crate, with rustdoc's warnings (broken
/// intra-doc links above all) as errors: what docs.rs would show.
fn doc() -> Result<(), String> {
    cmd::run_env(
        "cargo",
        &["doc", "--workspace", "--no-deps", "--locked"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )
}

/// The crates a user would depend on or install: each must package.
const PUBLISHED: [&str; 7] = [
    "weft-frame",
    "weft-transform",
    "weft-mux",
    "weft-rpc",
    "weft",
    "weft-macros",
    "weft-cli",
];

/// Each published crate packages: its manifest normalises (every inherited
/// field, every path dependency with a version, no unversioned normal
/// dependency) and its file list holds the README and licence texts.
///
/// Without verifying, and without a lock file: the crates stay `publish =
/// false` until the team decides, and cargo resolves a crate's dependencies
/// on its workspace siblings (for verifying, or for the lock file) only
/// against the registry plus those siblings that may be published, so the
/// dependents of weft-frame would fail with "no matching package named
/// `weft-frame`". The tests build the same sources; what packaging adds is
/// the manifest and the file list.
fn package() -> Result<(), String> {
    // `--allow-dirty`: a local run with uncommitted edits packages them.
    let mut args = vec![
        "package",
        "--no-verify",
        "--exclude-lockfile",
        "--allow-dirty",
    ];
    for name in PUBLISHED {
        args.extend(["-p", name]);
    }
    cmd::run("cargo", &args)
}

/// The version of check-jsonschema (PyPI) that checks the workflow: it
/// carries GitHub's workflow schema, so the check needs no network once
/// installed.
const CHECK_JSONSCHEMA: &str = "check-jsonschema==0.39.0";

/// .github/workflows/ci.yml against GitHub's workflow schema. The checker
/// goes into a virtualenv under target/ (Debian's system Python refuses
/// `pip install`: it is "externally managed"); where Python has no `venv`
/// module (Debian without python3-venv), into a plain directory with
/// `pip install --target`, which that rule does not cover.
fn workflow_schema() -> Result<(), String> {
    let target = cmd::root().join("target");
    let venv = target.join("ci-venv");
    let lib = target.join("ci-pylib");
    let args = [
        "--builtin-schema",
        "vendor.github-workflows",
        ".github/workflows/ci.yml",
    ];
    let pip_quiet = ["--quiet", "--disable-pip-version-check"];
    let checker = venv.join("bin").join("check-jsonschema");
    if !checker.exists() && !lib.join("check_jsonschema").exists() {
        let made = cmd::run("python3", &["-m", "venv", &venv.to_string_lossy()]);
        if made.is_ok() {
            let pip = venv.join("bin").join("pip");
            let mut pip_args = vec!["install"];
            pip_args.extend(pip_quiet);
            pip_args.push(CHECK_JSONSCHEMA);
            cmd::run(&pip.to_string_lossy(), &pip_args)?;
        } else {
            let lib = lib.to_string_lossy();
            let mut pip_args = vec!["-m", "pip", "install", "--target", &lib];
            pip_args.extend(pip_quiet);
            pip_args.push(CHECK_JSONSCHEMA);
            cmd::run("python3", &pip_args)?;
        }
    }
    if checker.exists() {
        cmd::run(&checker.to_string_lossy(), &args)
    } else {
        let mut module_args = vec!["-m", "check_jsonschema"];
        module_args.extend(args);
        cmd::run_env(
            "python3",
            &module_args,
            &[("PYTHONPATH", &lib.to_string_lossy())],
        )
    }
}

/// The headless browser `crates/cli/tests/report_browser.rs` will use:
/// `$WEFT_BROWSER`, or (off CI, where the test looks there itself)
/// `chromium` on `PATH`. None is an error, so CI cannot pass without
/// having run that test.
fn browser() -> Result<String, String> {
    let hint = "the --report test needs a headless Chromium: `apt-get install chromium` \
                and `export WEFT_BROWSER=/usr/bin/chromium` (what .ci/run does)";
    if let Some(b) = std::env::var_os("WEFT_BROWSER") {
        let b = std::path::PathBuf::from(b);
        return if b.exists() {
            Ok(b.display().to_string())
        } else {
            Err(format!(
                "WEFT_BROWSER={} does not exist; {hint}",
                b.display()
            ))
        };
    }
    if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0") {
        return Err(format!("WEFT_BROWSER is unset on CI; {hint}"));
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
                .find(|p| p.exists())
        })
        .map(|p| p.display().to_string())
        .ok_or_else(|| format!("no browser found; {hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_runs_only_its_own_steps_and_no_group_runs_all() {
        for group in Group::ALL {
            assert_eq!(Group::parse(group.name()), Ok(group));
            let only = Selection::Only(group);
            for other in Group::ALL {
                assert_eq!(only.wants(other), other == group, "{group:?} / {other:?}");
            }
            assert!(Selection::All.wants(group));
        }
        assert!(Group::parse("everything").is_err());
        assert!(Group::NAMES.split('|').eq(Group::ALL.map(Group::name)));
    }

    #[test]
    fn a_skipped_step_does_not_run_or_count() {
        let mut t = Times::new(Selection::Only(Group::Lint));
        let mut ran = Vec::new();
        t.step(Group::Lint, "fmt", || {
            ran.push("fmt");
            Ok(())
        })
        .unwrap();
        t.step(Group::Fuzz, "fuzz", || {
            ran.push("fuzz");
            Err("must not run".into())
        })
        .unwrap();
        assert_eq!(ran, ["fmt"]);
        assert_eq!(t.times.len(), 1);
    }

    #[test]
    fn ci_run_and_the_workflow_name_the_same_groups() {
        let script = cmd::read(".ci/run").unwrap();
        let workflow = cmd::read(".github/workflows/ci.yml").unwrap();
        for group in Group::ALL {
            let job = format!("bash .ci/run {}\n", group.name());
            assert!(workflow.contains(&job), "no workflow job runs `{job}`");
        }
        assert!(
            script.contains(&format!("\"\"|{})", Group::NAMES)),
            ".ci/run accepts other groups than `cargo xtask ci`"
        );
    }
}
