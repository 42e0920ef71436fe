//! `weft-bulk`: large-message echo throughput (`weft_benches::bulk`), weft
//! beside the raw tokio codec in the same run.
//!
//! usage: weft-bulk [--sizes 65536,1048576,8388608] [--modes raw,plain,...]
//!                  [--secs 3] [--rounds 3] [--frame BYTES]
//!        weft-bulk --profile MODE --size BYTES --echoes N
//!   Rounds interleave every cell (size × mode) in turn; each cell's median
//!   and range over the rounds is printed, in GB/s each way, with weft's
//!   ratio to its baseline (plain to raw, encrypted to raw-sealed).
//!   --frame sets weft's largest frame payload (16 KiB-1 MiB; default
//!   64 KiB). --profile runs N echoes of one cell untimed (for callgrind)
//!   and counts allocations (run it with two N for the cost per echo).

use std::alloc::System;
use std::time::Duration;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use weft_benches::bulk::{Length, Mode, run};

/// Counts allocations, so `--profile` can say how many an echo costs.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const USAGE: &str = "usage: weft-bulk [--sizes A,B] [--modes M,N] [--secs S] [--rounds R] [--frame B] \
                     | --profile MODE --size BYTES --echoes N";

struct Args {
    sizes: Vec<usize>,
    modes: Vec<Mode>,
    secs: f64,
    rounds: usize,
    frame: Option<u32>,
    profile: Option<(Mode, u64)>,
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
        secs: 3.0,
        rounds: 3,
        frame: None,
        profile: None,
    };
    let (mut profile_mode, mut echoes) = (None, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--sizes" | "--size" => a.sizes = list(v, |x| x.parse().ok())?,
            "--modes" => a.modes = list(v, Mode::parse)?,
            "--secs" => a.secs = v.parse().map_err(|_| "--secs: a number")?,
            "--rounds" => a.rounds = v.parse().map_err(|_| "--rounds: a number")?,
            "--frame" => a.frame = Some(v.parse().map_err(|_| "--frame: a number")?),
            "--profile" => profile_mode = Some(Mode::parse(v).ok_or("--profile: a mode")?),
            "--echoes" => echoes = Some(v.parse().map_err(|_| "--echoes: a number")?),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if let Some(mode) = profile_mode {
        a.profile = Some((mode, echoes.ok_or("--profile needs --echoes")?));
    }
    Ok(a)
}

fn gbps(size: usize, (echoes, took): (u64, Duration)) -> f64 {
    echoes as f64 * size as f64 / took.as_secs_f64() / 1e9
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = parse(&args).unwrap_or_else(|e| {
        eprintln!("weft-bulk: {e}\n{USAGE}");
        std::process::exit(2);
    });
    if let Some((mode, n)) = a.profile {
        let size = a.sizes[0];
        let region = Region::new(GLOBAL);
        let (done, took) = run(mode, size, Length::Echoes(n), a.frame);
        let allocs = region.change().allocations;
        println!(
            "{} {size} B: {done} echoes in {took:?}, {:.3} GB/s each way, \
             {allocs} allocations (start-up included)",
            mode.name(),
            gbps(size, (done, took))
        );
        return;
    }
    let length = Length::Time(Duration::from_secs_f64(a.secs));
    // results[size][mode] = GB/s of each round.
    let mut results = vec![vec![Vec::new(); a.modes.len()]; a.sizes.len()];
    for round in 0..a.rounds {
        for (si, &size) in a.sizes.iter().enumerate() {
            for (mi, &mode) in a.modes.iter().enumerate() {
                let g = gbps(size, run(mode, size, length, a.frame));
                eprintln!("round {round} {size} {}: {g:.3} GB/s", mode.name());
                results[si][mi].push(g);
            }
        }
    }
    println!("| message | mode | GB/s each way, median (range) | / baseline |");
    println!("|---|---|---:|---:|");
    for (si, &size) in a.sizes.iter().enumerate() {
        let medians: Vec<f64> = results[si].iter_mut().map(|r| median(r)).collect();
        for (mi, &mode) in a.modes.iter().enumerate() {
            let r = &results[si][mi];
            let base = a.modes.iter().position(|&m| m == mode.baseline());
            let ratio = match base {
                Some(b) if b != mi => format!("{:.2}×", medians[mi] / medians[b]),
                _ => "—".to_string(),
            };
            println!(
                "| {} KiB | {} | {:.3} ({:.3}–{:.3}) | {ratio} |",
                size / 1024,
                mode.name(),
                medians[mi],
                r.first().copied().unwrap_or(0.0),
                r.last().copied().unwrap_or(0.0),
            );
        }
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
