//! `weft-bulk`: large-message echo throughput (`weft_benches::bulk`), weft
//! beside the raw tokio codec in the same run.
//!
//! usage: weft-bulk [--sizes 65536,1048576,8388608] [--modes raw,plain,...]
//!                  [--shapes echo,stream] [--secs 3] [--rounds 3] [--frame BYTES]
//!                  [--split [--runtime RT] | --shared]
//!        weft-bulk --latency [--secs 3] [--rounds 3] [--frame BYTES] [--window BYTES]
//!                  [--split [--runtime RT]]
//!        weft-bulk --profile MODE --size BYTES --echoes N [--runtime RT]
//!        weft-bulk --serve ARGS... --runtime RT   (a split layout's server process)
//!   Rounds interleave every cell (shape × size × mode) in turn; each cell's
//!   median and range over the rounds is printed, in GB/s of responses
//!   (each way for echo), with weft's ratio to its baseline (plain to raw,
//!   encrypted to raw-sealed). `stream` is a count-style server-streaming
//!   call answered by 8 messages of the size.
//!   --latency times 64-byte echo calls on a connection alone and beside
//!   1 and 8 callers echoing 1 MiB back to back (rounds interleaved), and
//!   prints their p50 and p99 (the target: p99 beside one transfer at most
//!   twice the p99 alone). --window sets both ends' stream window (default
//!   64 KiB, not grown on loopback): a small call waits behind up to one
//!   window of the transfer's bytes in the kernel on each leg.
//!   --split runs every cell's server (weft's and the raw baselines' alike)
//!   in a process of its own pinned to core 0 and the client in this one
//!   pinned to core 1, each on a current-thread runtime (one core each:
//!   the runtime weft's docs suggest per core) or on `--runtime
//!   multi-thread`; without it (or with --shared) client and server share
//!   one runtime in this process, multi-thread unless `--runtime
//!   current-thread` (with which a `--profile` under callgrind repeats
//!   exactly).
//!   --frame sets weft's largest frame payload (16 KiB-1 MiB; default
//!   64 KiB). --profile runs N echoes of one cell untimed (for callgrind)
//!   and counts allocations (run it with two N for the cost per echo).

use std::alloc::System;
use std::time::Duration;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use weft_benches::Runtime;
use weft_benches::bulk::{Layout, Length, Mode, Shape, run, serve};
use weft_benches::bulk_latency::{Latency, Tuning, small_calls};

/// Counts allocations, so `--profile` can say how many an echo costs.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const USAGE: &str = "usage: weft-bulk [--sizes A,B] [--modes M,N] [--shapes echo,stream] [--secs S] \
                     [--rounds R] [--frame B] [--split [--runtime RT]] | --latency [--secs S] \
                     [--rounds R] [--frame B] [--window B] [--split [--runtime RT]] \
                     | --profile MODE --size BYTES --echoes N [--runtime RT]";

/// Large-message callers beside the small calls in `--latency` (0: alone).
const BESIDE: [usize; 3] = [0, 1, 8];

struct Args {
    sizes: Vec<usize>,
    modes: Vec<Mode>,
    shapes: Vec<Shape>,
    latency: bool,
    secs: f64,
    rounds: usize,
    frame: Option<u32>,
    window: Option<u32>,
    profile: Option<(Mode, u64)>,
    layout: Layout,
}

fn list<T>(v: &str, f: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    v.split(',')
        .map(|x| f(x).ok_or_else(|| format!("bad value {x:?}")))
        .collect()
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        sizes: vec![64 * 1024, 1024 * 1024, 8 * 1024 * 1024],
        modes: Mode::ALL.to_vec(),
        shapes: vec![Shape::Echo],
        latency: false,
        secs: 3.0,
        rounds: 3,
        frame: None,
        window: None,
        profile: None,
        layout: Layout::Shared(Runtime::MultiThread),
    };
    let (mut profile_mode, mut echoes) = (None, None);
    let (mut split, mut runtime) = (false, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--latency" => {
                a.latency = true;
                continue;
            }
            "--split" => {
                split = true;
                continue;
            }
            // The default, named (`cargo xtask bench --bulk` splits unless told).
            "--shared" => continue,
            _ => {}
        }
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--sizes" | "--size" => a.sizes = list(v, |x| x.parse().ok())?,
            "--modes" => a.modes = list(v, Mode::parse)?,
            "--shapes" => a.shapes = list(v, Shape::parse)?,
            "--secs" => a.secs = v.parse().map_err(|_| "--secs: a number")?,
            "--rounds" => a.rounds = v.parse().map_err(|_| "--rounds: a number")?,
            "--frame" => a.frame = Some(v.parse().map_err(|_| "--frame: a number")?),
            "--window" => a.window = Some(v.parse().map_err(|_| "--window: a number")?),
            "--profile" => profile_mode = Some(Mode::parse(v).ok_or("--profile: a mode")?),
            "--echoes" => echoes = Some(v.parse().map_err(|_| "--echoes: a number")?),
            "--runtime" => runtime = Some(Runtime::parse(v).ok_or("--runtime: a runtime")?),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if let Some(mode) = profile_mode {
        a.profile = Some((mode, echoes.ok_or("--profile needs --echoes")?));
    }
    a.layout = match split {
        true => Layout::Split(runtime.unwrap_or(Runtime::CurrentThread)),
        false => Layout::Shared(runtime.unwrap_or(Runtime::MultiThread)),
    };
    if a.profile.is_some() && split {
        // Callgrind counts one process: the profile keeps both ends in it.
        return Err("--profile runs both ends in one process (no --split)".into());
    }
    Ok(a)
}

fn gbps(size: usize, (echoes, took): (u64, Duration)) -> f64 {
    echoes as f64 * size as f64 / took.as_secs_f64() / 1e9
}

/// Exits with `e` and the usage.
fn fail(e: &str) -> ! {
    eprintln!("weft-bulk: {e}\n{USAGE}");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [serve_flag, rest @ .., runtime_flag, runtime] = &args[..]
        && serve_flag == "--serve"
        && runtime_flag == "--runtime"
    {
        // A split layout's server process.
        let rt = Runtime::parse(runtime).unwrap_or_else(|| fail("--runtime: a runtime"));
        serve(rest, rt).unwrap_or_else(|e| fail(&e));
        return;
    }
    let a = parse(&args).unwrap_or_else(|e| fail(&e));
    if matches!(a.layout, Layout::Split(_))
        && let Err(e) = weft_benches::split::pin_client()
    {
        fail(&e);
    }
    if let Some((mode, n)) = a.profile {
        let size = a.sizes[0];
        let region = Region::new(GLOBAL);
        let (done, took) = run(
            mode,
            Shape::Echo,
            size,
            Length::Echoes(n),
            a.frame,
            a.layout,
        );
        let allocs = region.change().allocations;
        println!(
            "{} {size} B: {done} echoes in {took:?}, {:.3} GB/s each way, \
             {allocs} allocations (start-up included)",
            mode.name(),
            gbps(size, (done, took))
        );
        return;
    }
    if a.latency {
        latency(&a);
        return;
    }
    let length = Length::Time(Duration::from_secs_f64(a.secs));
    // results[shape][size][mode] = GB/s of each round.
    let mut results = vec![vec![vec![Vec::new(); a.modes.len()]; a.sizes.len()]; a.shapes.len()];
    for round in 0..a.rounds {
        for (hi, &shape) in a.shapes.iter().enumerate() {
            for (si, &size) in a.sizes.iter().enumerate() {
                for (mi, &mode) in a.modes.iter().enumerate() {
                    let g = gbps(size, run(mode, shape, size, length, a.frame, a.layout));
                    eprintln!(
                        "round {round} {} {size} {}: {g:.3} GB/s",
                        shape.name(),
                        mode.name()
                    );
                    results[hi][si][mi].push(g);
                }
            }
        }
    }
    println!("{}\n", a.layout.description());
    println!("| call | message | mode | GB/s of responses, median (range) | / baseline |");
    println!("|---|---|---|---:|---:|");
    for (hi, &shape) in a.shapes.iter().enumerate() {
        for (si, &size) in a.sizes.iter().enumerate() {
            let cells = &mut results[hi][si];
            let medians: Vec<f64> = cells.iter_mut().map(|r| median(r)).collect();
            for (mi, &mode) in a.modes.iter().enumerate() {
                let r = &cells[mi];
                let base = a.modes.iter().position(|&m| m == mode.baseline());
                let ratio = match base {
                    Some(b) if b != mi => format!("{:.2}×", medians[mi] / medians[b]),
                    _ => "—".to_string(),
                };
                println!(
                    "| {} | {} KiB | {} | {:.3} ({:.3}–{:.3}) | {ratio} |",
                    shape.name(),
                    size / 1024,
                    mode.name(),
                    medians[mi],
                    r.first().copied().unwrap_or(0.0),
                    r.last().copied().unwrap_or(0.0),
                );
            }
        }
    }
}

/// `--latency`: small calls alone and beside 1 MiB echoes, rounds
/// interleaved; the median over rounds of each figure.
fn latency(a: &Args) {
    let length = Duration::from_secs_f64(a.secs);
    let mut runs: Vec<Vec<Latency>> = vec![Vec::new(); BESIDE.len()];
    for round in 0..a.rounds {
        for (i, &n) in BESIDE.iter().enumerate() {
            let tuning = Tuning {
                frame: a.frame,
                window: a.window,
            };
            let l = small_calls(n, length, tuning, a.layout);
            eprintln!(
                "round {round} beside {n}: {} calls, p50 {:?}, p99 {:?} (request leg {:?}, reply leg {:?}), {} large echoes",
                l.calls, l.p50, l.p99, l.request_p99, l.reply_p99, l.large
            );
            runs[i].push(l);
        }
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let med = |v: &[Latency], f: &dyn Fn(&Latency) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        median(&mut x)
    };
    let alone_p99 = med(&runs[0], &|l| us(l.p99));
    println!("{}\n", a.layout.description());
    println!(
        "| 1 MiB echo callers beside | small calls | p50 µs | p99 µs, median (range) | p99 / alone | 1 MiB echoes/s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for (i, &n) in BESIDE.iter().enumerate() {
        let r = &runs[i];
        let mut p99s: Vec<f64> = r.iter().map(|l| us(l.p99)).collect();
        let p99 = median(&mut p99s);
        println!(
            "| {n} | {:.0} | {:.0} | {:.0} ({:.0}–{:.0}) | {:.2}× | {:.0} |",
            med(r, &|l| l.calls as f64),
            med(r, &|l| us(l.p50)),
            p99,
            p99s.first().copied().unwrap_or(0.0),
            p99s.last().copied().unwrap_or(0.0),
            p99 / alone_p99,
            med(r, &|l| l.large as f64 / a.secs),
        );
    }
}

/// Sorts `v` and returns its median.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
