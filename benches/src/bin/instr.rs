//! `weft-instr`: one cell of the instruction gate (`weft_benches::instr`),
//! for `cargo xtask instr` to run under callgrind. It makes the warm-up and
//! the two measured phases, cutting the profile between them, and prints
//! the calls each phase made as JSON on stdout.
//!
//! usage: weft-instr --cell API/CASE [--units W,N1,N2] [--apart] [--traced] [--metered]
//!        weft-instr --list   (every cell and its default units)
//!   API: raw, typed, channel; CASE: sequential, sequential-encrypted,
//!   joined-64, spawned-64, joined-64-encrypted, spawned-64-encrypted; units per caller (a joined-64 unit is 64 calls,
//!   a spawned-64 unit one call in each of 64 callers; default: the
//!   cell's own, `Cell::units`); --apart runs the
//!   server on a thread of its own (for `--by-layer`); --traced installs
//!   a tracing subscriber (the registry, `INFO`), --metered a metrics
//!   recorder (metrics-util's debugging one), for the cost of
//!   observability when someone listens (not gate cells: docs/BENCHMARKS.md).

use weft_benches::instr::{Cell, Layout, run};

const USAGE: &str =
    "usage: weft-instr --cell API/CASE [--units W,N1,N2] [--apart] [--traced] [--metered] | --list";

/// What observes the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Observers {
    /// Nothing installed (the gate's cells).
    None,
    /// A tracing subscriber.
    Traced,
    /// A metrics recorder.
    Metered,
    /// Both.
    Both,
}

impl Observers {
    /// These and `more`.
    fn and(self, more: Observers) -> Observers {
        match (self, more) {
            (Observers::None, o) | (o, Observers::None) => o,
            (a, b) if a == b => a,
            _ => Observers::Both,
        }
    }

    /// Installs them, globally.
    fn install(self) {
        if matches!(self, Observers::Traced | Observers::Both) {
            use tracing_subscriber::layer::SubscriberExt;
            let subscriber =
                tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::INFO);
            tracing::subscriber::set_global_default(subscriber).expect("no subscriber yet");
        }
        if matches!(self, Observers::Metered | Observers::Both) {
            metrics_util::debugging::DebuggingRecorder::new()
                .install()
                .expect("no recorder yet");
        }
    }
}

fn parse(args: &[String]) -> Result<(Cell, [usize; 3], Layout, Observers), String> {
    let (mut cell, mut units, mut layout) = (None, None, Layout::Together);
    let mut observers = Observers::None;
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--apart" => layout = Layout::Apart,
            "--traced" => observers = observers.and(Observers::Traced),
            "--metered" => observers = observers.and(Observers::Metered),
            "--cell" => {
                let name = args.next().ok_or("--cell needs a value")?;
                cell = Some(Cell::parse(name).ok_or_else(|| format!("no cell {name:?}"))?);
            }
            "--units" => {
                let list = args.next().ok_or("--units needs a value")?;
                let n: Vec<usize> = list
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .map_err(|_| format!("--units {list:?}: three numbers"))?;
                units = Some(
                    <[usize; 3]>::try_from(n)
                        .map_err(|_| format!("--units {list:?}: three numbers"))?,
                );
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    let cell: Cell = cell.ok_or("--cell is required")?;
    Ok((cell, units.unwrap_or(cell.units()), layout, observers))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args == ["--list"] {
        for cell in Cell::all() {
            let [w, n1, n2] = cell.units();
            println!("{} {w},{n1},{n2}", cell.name());
        }
        return;
    }
    let (cell, units, layout, observers) = parse(&args).unwrap_or_else(|e| {
        eprintln!("weft-instr: {e}\n{USAGE}");
        std::process::exit(2);
    });
    observers.install();
    let calls = run(cell, layout, units);
    println!(
        "{{\"cell\":\"{}\",\"calls\":[{},{},{}]}}",
        cell.name(),
        calls.warm_up,
        calls.n1,
        calls.n2
    );
}
