//! `cargo xtask soak --secs N`: builds the `weft-soak` binary
//! (benches/src/bin/soak.rs: many clients, all four call shapes, random
//! cancellations and deadlines, encryption and compression mixed per
//! connection, against an in-process server over TCP loopback) in release
//! and runs it for N seconds; it fails on a lost or duplicated message,
//! memory growth after warm-up, or a stream left in a connection's table.

use crate::cmd;

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let secs = crate::secs_option(args, "soak")?.to_string();
    cmd::run(
        "cargo",
        &[
            "run",
            "--quiet",
            "--release",
            "-p",
            "weft-benches",
            "--bin",
            "weft-soak",
            "--",
            "--secs",
            &secs,
        ],
    )
}
