//! The `weft` binary (work in progress: arguments and load-report
//! arithmetic are here; the commands land with the facade).

mod args;
mod report;

fn main() {
    use clap::Parser as _;
    let cli = args::Cli::parse();
    eprintln!("weft: {cli:?}: the commands land with the facade");
    std::process::exit(2);
}
