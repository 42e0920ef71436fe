//! `weft load --report FILE.html` opened in a real headless browser: the
//! plots must lay out with a size, draw their lines and bars, and the page
//! must raise no script error.
//!
//! The browser is `$WEFT_BROWSER` (a Chromium binary). `.ci/run` installs
//! Debian's `chromium` and exports it, and `cargo xtask ci` refuses to run
//! without one, so CI never skips this test; with `CI` set and no
//! `WEFT_BROWSER` the test fails. Elsewhere it looks for `chromium` on
//! `PATH`, and without one it says so on stderr and checks nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The browser to use, or `None` off CI when there is none.
fn browser() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("WEFT_BROWSER") {
        let b = PathBuf::from(b);
        assert!(b.exists(), "WEFT_BROWSER={} does not exist", b.display());
        return Some(b);
    }
    let on_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(
        !on_ci,
        "WEFT_BROWSER is unset on CI: the --report test needs a headless Chromium \
         (.ci/run installs Debian's chromium and exports WEFT_BROWSER=/usr/bin/chromium)"
    );
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
            .find(|p| p.exists())
    });
    if found.is_none() {
        eprintln!(
            "report_browser: NOT CHECKED: no chromium on PATH and WEFT_BROWSER unset \
             (apt-get install chromium, or set WEFT_BROWSER; CI always runs it)"
        );
    }
    found
}

/// A fresh directory for this test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weft-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `weft load` against its in-process server with `args` and
/// `--report`, and returns the page.
fn report(dir: &Path, name: &str, args: &[&str]) -> String {
    let file = dir.join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("load")
        .args(args)
        .arg("--report")
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "weft load {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&file).unwrap()
}

/// Records script errors and `console.error` calls from the start of the
/// page (the report itself has no scripts: this is what proves it).
const CATCH: &str = "<script>window.__weftErrors=[];\
addEventListener('error',e=>__weftErrors.push('error: '+e.message));\
addEventListener('unhandledrejection',e=>__weftErrors.push('rejection: '+e.reason));\
const __weftConsole=console.error;console.error=(...a)=>{__weftErrors.push('console: '+a.join(' '));__weftConsole(...a)};\
</script>";

/// Runs after the page is parsed: measures every plot as laid out and
/// writes the findings as JSON into `<pre id="weft-probe">`.
const PROBE: &str = "<script>(()=>{\
const box=e=>{const r=e.getBoundingClientRect();return [r.width,r.height]};\
const svgs=[...document.querySelectorAll('svg')].map(box);\
const lines=[...document.querySelectorAll('path.series')].map(p=>({name:p.dataset.name,length:p.getTotalLength(),box:box(p)}));\
const bars=[...document.querySelectorAll('rect.bucket')].map(box);\
const out=document.createElement('pre');out.id='weft-probe';\
out.textContent=JSON.stringify({title:document.title,svgs,lines,bars,errors:__weftErrors});\
document.body.appendChild(out)})()</script>";

/// What the browser saw of the page.
#[derive(Debug)]
struct Seen {
    title: String,
    svgs: Vec<(f64, f64)>,
    /// Name and drawn length of each plotted line.
    lines: Vec<(String, f64)>,
    bars: Vec<(f64, f64)>,
    errors: Vec<String>,
}

/// Opens `html` (with the catcher and the probe added) in the browser and
/// reads back what the probe found.
fn open(browser: &Path, dir: &Path, name: &str, html: &str) -> Seen {
    let page = html
        .replacen("<head>", &format!("<head>{CATCH}"), 1)
        .replacen("</body>", &format!("{PROBE}</body>"), 1);
    assert_eq!(
        page.len(),
        html.len() + CATCH.len() + PROBE.len(),
        "hooks placed"
    );
    let file = dir.join(format!("probe-{name}"));
    std::fs::write(&file, page).unwrap();
    // The flags of a headless run on a machine with no network (no
    // background fetches, no sandbox as root) and a fresh profile.
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1024,1400",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {}: {e}", browser.display()));
    // Not a timing assertion: a browser that hangs must not hang the test.
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{} did not finish within 60 s", browser.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let Some(json) = dom
        .split("<pre id=\"weft-probe\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
    else {
        panic!(
            "no probe output from {} ({}):\n{dom}\n{}",
            browser.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let json = json
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let pair = |b: &serde_json::Value| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap());
    let list = |k: &str| v[k].as_array().unwrap().clone();
    Seen {
        title: v["title"].as_str().unwrap().to_owned(),
        svgs: list("svgs").iter().map(pair).collect(),
        lines: list("lines")
            .iter()
            .map(|l| {
                let name = l["name"].as_str().unwrap().to_owned();
                (name, l["length"].as_f64().unwrap())
            })
            .collect(),
        bars: list("bars").iter().map(pair).collect(),
        errors: list("errors")
            .iter()
            .map(|e| e.as_str().unwrap().to_owned())
            .collect(),
    }
}

#[test]
fn the_html_report_renders_its_plots_in_a_headless_browser() {
    let Some(browser) = browser() else { return };
    let dir = scratch("report-browser");

    // A timed run: throughput and p99 over time, and the histogram.
    let html = report(
        &dir,
        "run.html",
        &["--duration", "2100ms", "--concurrency", "2"],
    );
    let seen = open(&browser, &dir, "run.html", &html);
    assert_eq!(seen.title, "weft load report", "{seen:?}");
    assert!(seen.errors.is_empty(), "{seen:?}");
    assert_eq!(seen.svgs.len(), 2, "{seen:?}");
    for (w, h) in &seen.svgs {
        assert!(
            *w >= 700.0 && *h >= 200.0,
            "a plot laid out small: {seen:?}"
        );
    }
    let names: Vec<&str> = seen.lines.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["calls/s", "p99 µs"], "{seen:?}");
    for (name, length) in &seen.lines {
        assert!(*length > 100.0, "{name} drew {length} px: {seen:?}");
    }
    assert!(!seen.bars.is_empty(), "{seen:?}");
    assert!(
        seen.bars.iter().all(|(w, _)| *w > 0.0) && seen.bars.iter().any(|(_, h)| *h > 10.0),
        "histogram bars without a size: {seen:?}"
    );

    // A sweep: throughput and p99 per step.
    let html = report(
        &dir,
        "sweep.html",
        &["--sweep", "--concurrency", "4", "--duration", "300ms"],
    );
    let seen = open(&browser, &dir, "sweep.html", &html);
    assert!(seen.errors.is_empty(), "{seen:?}");
    assert_eq!(seen.svgs.len(), 1, "{seen:?}");
    let (w, h) = seen.svgs[0];
    assert!(w >= 700.0 && h >= 200.0, "{seen:?}");
    for (name, length) in &seen.lines {
        assert!(*length > 100.0, "{name} drew {length} px: {seen:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
