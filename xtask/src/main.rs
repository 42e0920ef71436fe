//! `cargo xtask`: project automation, one subcommand per module.
//!
//! Every command it runs is printed first, so a CI log shows exactly what
//! happened. It depends on nothing but std.

mod ci;
mod cmd;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  ci      what .ci/run runs, in order: fmt check, clippy -D warnings, tests";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci::run(&args[1..]),
        Some("-h" | "--help" | "help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command {other:?}\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
