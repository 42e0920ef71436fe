//! `cargo xtask soak --secs N`: builds the `weft-soak` binary in release
//! and runs it for N seconds. The soak itself is `weft_benches::soak`
//! (benches/src/soak/: many clients, all four call shapes, random
//! cancellations and deadlines, refused streams retried, every security
//! mode and compression mixed per connection, against an in-process server
//! over TCP loopback), the same code the test suite runs for 2 s
//! (benches/tests/soak.rs); it fails on a lost, duplicated or corrupted
//! message, a call the server ran twice, memory growth after warm-up, or a
//! stream left in a connection's table.

use crate::cmd;

/// What builds the binary: `cargo xtask ci` starts the same command early in
/// the background ([`crate::prebuild`]), so `cargo run` here finds it
/// fresh.
pub(crate) const BUILD: [&str; 7] = [
    "build",
    "--release",
    "--locked",
    "-p",
    "weft-benches",
    "--bin",
    "weft-soak",
];

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let secs = crate::secs_option(args, "soak")?.to_string();
    // `cargo run` of exactly what BUILD builds (the prebuild's artifact).
    let mut run = vec!["run"];
    run.extend_from_slice(&BUILD[1..]);
    run.extend_from_slice(&["--", "--secs", &secs]);
    cmd::run("cargo", &run)
}
