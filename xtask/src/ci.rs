//! `cargo xtask ci`: exactly what .ci/run runs, in order.

use crate::prebuild::Prebuild;
use crate::{bench, cmd, coverage, fuzz, mutants, soak};

/// Runs the CI steps; stops at the first failure. Prints how long each
/// step took at the end (also after a failure), so the run's time budget
/// (issue 18: about 11 minutes) can be kept step by step.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("ci takes no arguments, got {arg:?}"));
    }
    let mut times = Times::default();
    let result = steps(&mut times);
    times.print();
    result
}

/// Wall time per step, in the order run.
#[derive(Default)]
struct Times(Vec<(&'static str, std::time::Duration)>);

impl Times {
    /// Runs `step`, recording its time under `name`.
    fn step(
        &mut self,
        name: &'static str,
        step: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        let start = std::time::Instant::now();
        let r = step();
        self.0.push((name, start.elapsed()));
        r
    }

    fn print(&self) {
        println!("ci: time per step");
        for (name, d) in &self.0 {
            println!("ci:   {name:<10} {:>6.0} s", d.as_secs_f64());
        }
    }
}

fn steps(t: &mut Times) -> Result<(), String> {
    t.step("fmt", || {
        cmd::run("cargo", &["fmt", "--all", "--", "--check"])
    })?;
    // The two builds only the last steps need (release with fat LTO, and
    // nightly with AddressSanitizer) start now at the lowest priority, and
    // fill the cores the steps in between leave idle.
    let builds = Prebuilds::start();
    t.step("clippy", clippy)?;
    // Issue 17: the workspace tests open `weft load --report`'s page in a
    // headless browser; here that test must run, not skip.
    let browser = browser()?;
    println!("ci: the --report test uses {browser}");
    // The README's test command, verbatim.
    t.step("test", || cmd::run("cargo", &["test", "--workspace"]))?;
    t.step("cipher", real_cipher)?;
    // Issue 13: the driver's hand-off protocols, every interleaving (loom).
    t.step("loom", loom)?;
    // Issue 20: surviving mutants in the last commit's wire-facing code.
    // On CI they are written into the sources in place: no build may read
    // the tree meanwhile, so the prebuilds are waited for first; and what
    // mutants touched is newer than their artifacts afterwards, so they
    // start again (a few seconds of checks when nothing was touched).
    t.step("mutants", || {
        builds.finish();
        mutants::run(&["--in-diff".to_string()])
    })?;
    let builds = Prebuilds::start();
    t.step("bench", || bench::run(&["--check".to_string()]))?;
    t.step("coverage", || coverage::run(&[]))?;
    let Prebuilds {
        soak: soak_build,
        fuzz: fuzz_build,
    } = builds;
    // Issue 7: every fuzz target for 30 s.
    t.step("fuzz", || {
        if let Some(build) = fuzz_build {
            build.finish();
        }
        fuzz::run(&["--secs".to_string(), "30".to_string()])
    })?;
    // Issue 7: one minute of every call shape with cancellations.
    t.step("soak", || {
        soak_build.finish();
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

/// Records are sealed by real AES-256-GCM with every feature on: cargo
/// unifies features across a build, so a feature that swapped the cipher
/// would reach the `weft` binary through `--all-features`. weft-transform
/// has no features (its fuzz-only null cipher is `cfg(fuzzing)`, set by
/// cargo-fuzz alone), and this keeps it so: its records checked against
/// ring, then a real client and server over TCP with every feature of the
/// facade on. Not the whole workspace: weft-mux's `loom` feature does not
/// build a working driver (docs/SECURITY.md, "The fuzz-only null cipher").
fn real_cipher() -> Result<(), String> {
    for (package, test) in [
        ("weft-transform", "real_cipher"),
        ("weft", "wire_encrypted"),
    ] {
        cmd::run(
            "cargo",
            &["test", "-p", package, "--all-features", "--test", test],
        )?;
    }
    Ok(())
}

fn loom() -> Result<(), String> {
    cmd::run(
        "cargo",
        &[
            "test",
            "-p",
            "weft-mux",
            "--features",
            "loom",
            "--lib",
            "--",
            "loom",
        ],
    )
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
