//! Running `weft-instr`'s cells under callgrind: the gate (`--check`,
//! `--bless`) and the by-layer table (`--by-layer`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::callgrind::{self, Profile};
use super::{gate, layers};
use crate::bench::report::{self, Context};
use crate::cmd;

/// What builds the binary: the soak's package and profile (`cargo xtask
/// ci` builds `weft-soak` early in the background), so only this binary
/// is compiled and linked here.
pub(crate) const BUILD: [&str; 7] = [
    "build",
    "--release",
    "--locked",
    "-p",
    "weft-benches",
    "--bin",
    "weft-instr",
];

/// The function `weft-instr` calls between phases.
const CUT: &str = "weft_benches::instr::cut";

/// The raw call's cells, the columns of the by-layer table.
const LAYER_CELLS: [&str; 4] = [
    "raw/sequential",
    "raw/sequential-encrypted",
    "raw/joined-64",
    "raw/spawned-64",
];

/// Where the by-layer table goes in docs/BENCHMARKS.md.
const SECTION: &str = "xtask instr --by-layer";

/// Check against the baseline, or rewrite it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Check,
    Bless,
}

/// `--check` and `--bless`.
pub(crate) fn check(mode: Mode) -> Result<(), String> {
    let tools = build()?;
    let started = std::time::Instant::now();
    let cells = list(&tools)?;
    let measured = in_parallel(&cells, |(cell, units)| measure(&tools, cell, units))?;
    println!(
        "instr: {} cells measured in {:.0} s",
        measured.len(),
        started.elapsed().as_secs_f64()
    );
    let old = std::fs::read_to_string(cmd::root().join(gate::BASELINE))
        .ok()
        .map(|t| gate::load(&t))
        .transpose()?;
    if mode == Mode::Bless {
        cmd::write(gate::BASELINE, &gate::render(&measured))?;
        // what the commit message should quote: old and new figures
        let old = old.unwrap_or_default();
        println!(
            "\nagainst the previous baseline:\n{}",
            gate::table(&gate::compare(&measured, &old))
        );
        return Ok(());
    }
    let baseline = old.ok_or_else(|| {
        format!(
            "instr: no {}; write it with `cargo xtask instr --bless`",
            gate::BASELINE
        )
    })?;
    let rows = gate::compare(&measured, &baseline);
    println!("\n{}", gate::table(&rows));
    gate::verdict(&rows)
}

/// Runs of each size per by-layer figure: with client and server on two
/// threads, how valgrind interleaves them decides how the server's reads
/// batch 64 calls in flight, which moves those cells by up to a fifth from
/// run to run; the run of median total is kept.
const LAYER_REPEATS: usize = 3;

/// `--by-layer`: each raw cell at N1 and at N2 units, client and server
/// apart, attributed by layer per thread; the table into BENCHMARKS.md.
pub(crate) fn by_layer() -> Result<(), String> {
    let tools = build()?;
    let context = Context::gather("cargo xtask instr --by-layer")?;
    let cells: Vec<(String, [u64; 3])> = list(&tools)?
        .into_iter()
        .filter(|(c, _)| LAYER_CELLS.contains(&c.as_str()))
        .collect();
    // (cell, (units, repeat)), the repeats of one size next to each other
    let runs: Vec<(String, ([u64; 3], usize))> = cells
        .iter()
        .flat_map(|(c, [w, n1, n2])| {
            [[*w, *n1, 0], [*w, *n2, 0]]
                .into_iter()
                .flat_map(move |units| (0..LAYER_REPEATS).map(move |r| (c.clone(), (units, r))))
        })
        .collect();
    let attributed = in_parallel(&runs, |(cell, (units, repeat))| {
        apart(&tools, cell, units, *repeat)
    })?;
    let medians: Vec<&(String, (Layers, u64))> = attributed
        .chunks(LAYER_REPEATS)
        .map(median_run)
        .collect::<Option<_>>()
        .ok_or("instr: a by-layer run is missing")?;
    let baseline = cmd::read(gate::BASELINE).and_then(|t| gate::load(&t)).ok();
    let mut columns = Vec::new();
    let mut gated = Vec::new();
    for pair in medians.chunks(2) {
        let [(cell, (small, c1)), (_, (large, c2))] = pair else {
            return Err("instr: a by-layer run is missing".into());
        };
        let calls = c2
            .checked_sub(*c1)
            .filter(|d| *d > 0)
            .ok_or_else(|| format!("instr: {cell}: the second run made no more calls"))?;
        columns.push((
            cell.trim_start_matches("raw/").to_string(),
            layers::per_call(small, large, calls),
        ));
        gated.push(baseline.as_ref().and_then(|b| b.get(cell).copied()));
    }
    let table = layers::table(&columns, &gated);
    println!("\n{table}");
    report::update_doc(SECTION, &section(&context, &table))
}

/// Instructions by layer.
type Layers = BTreeMap<layers::Layer, f64>;

/// The run of median total among repeats of one size.
fn median_run<T>(runs: &[(String, (Layers, T))]) -> Option<&(String, (Layers, T))> {
    let total = |run: &(String, (Layers, T))| run.1.0.values().sum::<f64>();
    let mut sorted: Vec<_> = runs.iter().collect();
    sorted.sort_by(|a, b| total(a).total_cmp(&total(b)));
    sorted.get(sorted.len() / 2).copied()
}

/// The generated part of the "Instructions per call, by layer" section
/// (its method is described above the markers).
fn section(context: &Context, table: &str) -> String {
    format!(
        "{}\n\nThe raw `Client::unary` call, nil request, 7-byte reply, TCP loopback; \
         instructions per call (callgrind `Ir`).\n\n{table}",
        context.line()
    )
}

/// What a measured run needs: the binary, the clock it is given, the
/// environment it runs in.
struct Tools {
    /// `weft-instr`, relative to the workspace root when the target
    /// directory is the default (the path is in the program's arguments,
    /// so on its stack: see [`Tools::env`]).
    exe: String,
    /// The whole environment of a run, but the clock.
    env: Vec<(&'static str, String)>,
}

/// The monotonic clock a measured run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// vclock.c's: the gate, one thread, where nothing waits on a timer.
    Virtual,
    /// The real one: two threads (`--by-layer`), where a side idles until
    /// the other writes, and a virtual clock that only moves when read
    /// would stretch every short timer into many idle wake-ups.
    Real,
}

/// The virtual clock preloaded into measured runs (vclock.c).
const SHIM_SOURCE: &str = "xtask/src/instr/vclock.c";
const SHIM: &str = "target/instr/libvclock.so";

/// Builds `weft-instr` and the virtual clock.
fn build() -> Result<Tools, String> {
    for (tool, package) in [
        ("valgrind", "valgrind"),
        ("setarch", "util-linux"),
        ("cc", "gcc"),
    ] {
        if !cmd::on_path(tool) {
            return Err(format!(
                "instr: {tool} is not installed (apt-get install -y {package})"
            ));
        }
    }
    cmd::run("cargo", &BUILD)?;
    std::fs::create_dir_all(cmd::root().join("target/instr")).map_err(|e| format!("instr: {e}"))?;
    cmd::run(
        "cc",
        &[
            "-O2",
            "-g",
            "-shared",
            "-fPIC",
            "-o",
            SHIM,
            SHIM_SOURCE,
            "-ldl",
        ],
    )?;
    let exe = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir)
            .join("release/weft-instr")
            .display()
            .to_string(),
        None => "target/release/weft-instr".to_string(),
    };
    Ok(Tools {
        exe,
        env: vec![
            ("PATH", "/usr/local/bin:/usr/bin:/bin".to_string()),
            ("LC_ALL", "C".to_string()),
        ],
    })
}

/// Every cell and its units (`weft-instr --list`).
fn list(tools: &Tools) -> Result<Vec<(String, [u64; 3])>, String> {
    cmd::output(&tools.exe, &["--list"])?
        .lines()
        .map(|line| {
            let bad = || format!("instr: weft-instr --list printed {line:?}");
            let (cell, units) = line.split_once(' ').ok_or_else(bad)?;
            let units: Vec<u64> = units
                .split(',')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| bad())?;
            Ok((cell.to_string(), units.try_into().map_err(|_| bad())?))
        })
        .collect()
}

/// A directory of its own for one run's profiles, emptied.
fn fresh_dir(cell: &str, tag: &str) -> Result<PathBuf, String> {
    let dir = cmd::root()
        .join("target/instr")
        .join(format!("{}{tag}", cell.replace('/', "_")));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("instr: {e}"))?;
    Ok(dir)
}

/// The calls `weft-instr` reports it made in each phase.
fn calls(stdout: &str) -> Result<[u64; 3], String> {
    let doc: serde_json::Value = serde_json::from_str(stdout.trim())
        .map_err(|e| format!("instr: weft-instr printed {stdout:?}: {e}"))?;
    let calls: Vec<u64> = doc["calls"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect())
        .unwrap_or_default();
    calls
        .try_into()
        .map_err(|_| format!("instr: weft-instr printed {stdout:?}"))
}

/// Runs `weft-instr` under callgrind with `extra` options, its profiles
/// into `dir`; returns what it printed. Everything that moved the counts
/// between runs is fixed: address-space randomisation is off (`setarch
/// -R`), the environment is [`Tools::env`] only and the binary's path
/// relative (both would move the stack, and with it the instructions
/// `memcpy` spends on unaligned heads and tails: about 2 per call), and
/// the gate's monotonic clock is virtual (vclock.c: code whose path
/// depends on the time read, a few instructions per call).
fn callgrind(
    tools: &Tools,
    clock: Clock,
    dir: &Path,
    extra: &[&str],
    args: &[&str],
) -> Result<String, String> {
    let out = format!("--callgrind-out-file={}", dir.join("cg.out").display());
    let log = format!("--log-file={}", dir.join("log").display());
    let mut full = vec![
        "-R",
        "valgrind",
        "--tool=callgrind",
        "--compress-strings=no",
        "--compress-pos=no",
        out.as_str(),
        log.as_str(),
    ];
    full.extend_from_slice(extra);
    full.push(&tools.exe);
    full.extend_from_slice(args);
    let preload = format!("./{SHIM}");
    let mut env: Vec<(&str, &str)> = tools.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    if clock == Clock::Virtual {
        env.push(("LD_PRELOAD", &preload));
    }
    cmd::output_in_env("setarch", &full, &env)
}

/// A run's profile without the virtual clock's own instructions (its
/// source file is vclock.c), so a clock read costs what it does unshimmed.
fn parse_unshimmed(text: &str) -> Result<Profile, String> {
    let mut profile = callgrind::parse(text)?;
    let mut shim = 0;
    profile.own.retain(|(_, file), own| {
        let is_shim = file.ends_with("vclock.c");
        if is_shim {
            shim += *own;
        }
        !is_shim
    });
    profile.total -= shim;
    Ok(profile)
}

/// One gate cell: instructions per call.
fn measure(tools: &Tools, cell: &str, units: &[u64; 3]) -> Result<u64, String> {
    let dir = fresh_dir(cell, "")?;
    let units = format!("{},{},{}", units[0], units[1], units[2]);
    let dump = format!("--dump-before={CUT}");
    let out = callgrind(
        tools,
        Clock::Virtual,
        &dir,
        &[&dump],
        &["--cell", cell, "--units", &units],
    )?;
    let [_, c1, c2] = calls(&out)?;
    // dumps 1-4 end before the cuts at the starts of the warm-up, N1 and
    // N2 phases, and at the end: 3 is the N1 phase, 4 the N2 phase
    let total = |part: u32| -> Result<u64, String> {
        let path = dir.join(format!("cg.out.{part}"));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("instr: {cell}: {} ({e}); did the cuts run?", path.display()))?;
        Ok(parse_unshimmed(&text)?.total)
    };
    if dir.join("cg.out.5").exists() {
        return Err(format!("instr: {cell}: more cuts than phases"));
    }
    per_call(total(3)?, total(4)?, c1, c2).map_err(|e| format!("{cell}: {e}"))
}

/// Instructions per call from the two phases' totals.
fn per_call(a: u64, b: u64, c1: u64, c2: u64) -> Result<u64, String> {
    if c2 <= c1 {
        return Err(format!("instr: the N2 phase made {c2} calls, N1 {c1}"));
    }
    super::per_op(a, b, c1, c2)
}

/// One by-layer run (client and server apart, no cuts): instructions by
/// layer over the whole run, and the calls of its measured phase.
fn apart(
    tools: &Tools,
    cell: &str,
    units: &[u64; 3],
    repeat: usize,
) -> Result<(Layers, u64), String> {
    let tag = format!("-apart-{}-{repeat}", units[1]);
    let dir = fresh_dir(cell, &tag)?;
    let units = format!("{},{},{}", units[0], units[1], units[2]);
    let out = callgrind(
        tools,
        Clock::Real,
        &dir,
        &["--separate-threads=yes"],
        &["--cell", cell, "--units", &units, "--apart"],
    )?;
    let [_, calls, _] = calls(&out)?;
    let mut by_layer = BTreeMap::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("instr: {e}"))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("instr: {e}"))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        // cg.out-01 is the main thread (the client's), cg.out-NN the others
        let Some(thread) = name.as_deref().and_then(|n| n.strip_prefix("cg.out-")) else {
            continue;
        };
        let side = if thread == "01" {
            layers::Side::Client
        } else {
            layers::Side::Server
        };
        let text = std::fs::read_to_string(&path).map_err(|e| format!("instr: {e}"))?;
        let profile: Profile = parse_unshimmed(&text)?;
        for (layer, v) in layers::attribute(&profile, side) {
            *by_layer.entry(layer).or_insert(0.0) += v;
        }
    }
    Ok((by_layer, calls))
}

/// Runs `f` over `items` on as many threads as there are cores (at most
/// 2: callgrind runs one thread of the program at a time), in order.
fn in_parallel<T: Sync, R: Send>(
    items: &[(String, T)],
    f: impl Fn(&(String, T)) -> Result<R, String> + Sync,
) -> Result<Vec<(String, R)>, String> {
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 2);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Result<R, String>>>> =
        std::sync::Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    results.lock().expect("results lock")[i] = Some(r);
                }
            });
        }
    });
    let results = results.into_inner().expect("results lock");
    items
        .iter()
        .zip(results)
        .map(|((name, _), r)| {
            r.unwrap_or_else(|| Err(format!("instr: {name} was not run")))
                .map(|r| (name.clone(), r))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_line_of_weft_instr_is_read() {
        assert_eq!(
            calls("{\"cell\":\"raw/sequential\",\"calls\":[200,1000,5000]}\n"),
            Ok([200, 1000, 5000])
        );
        assert!(calls("{\"calls\":[1,2]}").is_err());
        assert!(calls("nonsense").is_err());
        assert_eq!(per_call(1_000, 41_000, 1000, 5000), Ok(10));
        assert!(per_call(1, 2, 5, 5).is_err());
    }

    #[test]
    fn the_by_layer_run_kept_is_the_one_of_median_total() {
        let run = |total: f64| {
            (
                "raw/joined-64".to_string(),
                (Layers::from([(layers::Layer::Tokio, total)]), 0),
            )
        };
        let runs = [run(13_584.0), run(11_037.0), run(11_050.0)];
        let kept = median_run(&runs).unwrap();
        assert_eq!(kept.1.0[&layers::Layer::Tokio], 11_050.0);
        assert!(median_run::<u64>(&[]).is_none());
    }

    #[test]
    fn the_virtual_clocks_own_instructions_are_not_counted() {
        let p = parse_unshimmed(
            "events: Ir\nsummary: 100\nfl=/w/crates/rpc/src/a.rs\nfn=a\n1 78\n\
             fl=target/instr/vclock.c\nfn=clock_gettime\n1 22\n",
        )
        .unwrap();
        assert_eq!(p.total, 78);
        assert_eq!(p.own.len(), 1);
    }
}
