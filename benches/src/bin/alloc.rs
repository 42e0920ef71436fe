//! `weft-alloc`: the allocation harness behind `cargo xtask bench`'s gate.
//!
//! For every registered target it builds the op, runs it `--warm-up` times,
//! then `--iterations` times counting every allocation (all threads, through a
//! counting global allocator) made inside `Op::run` only, and prints
//! allocations and bytes per op as one JSON document on stdout. Reallocations
//! count as allocations; bytes are those requested (a realloc's growth).
//!
//! usage: weft-alloc [--iterations N] [--warm-up W]

use std::alloc::System;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    let mut iterations: u64 = 1000;
    let mut warm_up: u64 = 100;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok());
        match (pair[0].as_str(), value) {
            ("--iterations", Some(v)) if v > 0 => iterations = v,
            ("--warm-up", Some(v)) => warm_up = v,
            _ => {
                eprintln!("usage: weft-alloc [--iterations N>0] [--warm-up W]");
                std::process::exit(2);
            }
        }
    }
    self_check();
    let mut rows = Vec::new();
    for target in weft_benches::targets() {
        let mut op = (target.make)();
        for _ in 0..warm_up {
            op.prepare();
            op.run();
        }
        let (mut allocs, mut bytes) = (0u64, 0u64);
        for _ in 0..iterations {
            op.prepare();
            let region = Region::new(GLOBAL);
            op.run();
            let change = region.change();
            allocs += (change.allocations + change.reallocations) as u64;
            bytes += change.bytes_allocated as u64;
        }
        rows.push(format!(
            "    {{\"name\": {:?}, \"label\": {:?}, \"allocs_per_op\": {}, \"bytes_per_op\": {}, \"bytes_processed\": {}}}",
            target.name,
            target.label,
            allocs as f64 / iterations as f64,
            bytes as f64 / iterations as f64,
            op.bytes().map_or("null".to_string(), |b| b.to_string()),
        ));
    }
    println!(
        "{{\n  \"iterations\": {iterations},\n  \"warm_up\": {warm_up},\n  \"targets\": [\n{}\n  ]\n}}",
        rows.join(",\n")
    );
}

/// Proves the counter counts before trusting a zero: one boxed value must be
/// exactly one allocation of its size.
fn self_check() {
    let region = Region::new(GLOBAL);
    let boxed = std::hint::black_box(Box::new(std::hint::black_box([7u8; 24])));
    let change = region.change();
    drop(boxed);
    if (change.allocations, change.bytes_allocated) != (1, 24) {
        eprintln!("weft-alloc: the counting allocator is not counting ({change:?})");
        std::process::exit(1);
    }
}
