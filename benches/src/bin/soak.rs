//! `weft-soak`: the soak of `weft_benches::soak` (one server, every call
//! shape, cancellations, deadlines, refused streams, all security modes)
//! for `--secs` seconds; `cargo xtask soak --secs N` builds and runs it,
//! CI for 60 s. The test suite runs the same soak briefly
//! (benches/tests/soak.rs).
//!
//! usage: weft-soak [--secs N]   (exit code 0 = pass; the report is on stdout)

use std::time::Duration;

use weft_benches::soak::{Options, run};

fn main() {
    let mut secs = 10;
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag, n] if flag == "--secs" && n.parse::<u64>().is_ok_and(|n| n > 0) => {
            secs = n.parse().unwrap();
        }
        _ => {
            eprintln!("usage: weft-soak [--secs N>0]");
            std::process::exit(2);
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match rt.block_on(run(&Options::new(Duration::from_secs(secs)))) {
        Ok(report) => println!("weft-soak: pass\n{report}"),
        Err(e) => {
            eprintln!("weft-soak: FAIL: {e}");
            std::process::exit(1);
        }
    }
}
