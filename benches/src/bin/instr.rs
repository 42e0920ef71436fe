//! `weft-instr`: one cell of the instruction gate (`weft_benches::instr`),
//! for `cargo xtask instr` to run under callgrind. It makes the warm-up and
//! the two measured phases, cutting the profile between them, and prints
//! the calls each phase made as JSON on stdout.
//!
//! usage: weft-instr --cell API/CASE [--units W,N1,N2] [--apart]
//!        weft-instr --list   (every cell and its default units)
//!   API: raw, typed, channel; CASE: sequential, sequential-encrypted,
//!   joined-64, spawned-64; units per caller (a joined-64 unit is 64 calls,
//!   a spawned-64 unit one call in each of 64 callers; default: the
//!   cell's own, `Cell::units`); --apart runs the
//!   server on a thread of its own (for `--by-layer`).

use weft_benches::instr::{Cell, Layout, run};

const USAGE: &str = "usage: weft-instr --cell API/CASE [--units W,N1,N2] [--apart] | --list";

fn parse(args: &[String]) -> Result<(Cell, [usize; 3], Layout), String> {
    let (mut cell, mut units, mut layout) = (None, None, Layout::Together);
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--apart" => layout = Layout::Apart,
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
    Ok((cell, units.unwrap_or(cell.units()), layout))
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
    let (cell, units, layout) = parse(&args).unwrap_or_else(|e| {
        eprintln!("weft-instr: {e}\n{USAGE}");
        std::process::exit(2);
    });
    let calls = run(cell, layout, units);
    println!(
        "{{\"cell\":\"{}\",\"calls\":[{},{},{}]}}",
        cell.name(),
        calls.warm_up,
        calls.n1,
        calls.n2
    );
}
