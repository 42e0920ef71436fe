//! The split layout: a measurement's server runs in a process of its own
//! pinned to core 0, the measuring client in the calling process pinned to
//! core 1, as two machines would be; nothing the server does is scheduled
//! on the client's core, and the figure does not depend on how one
//! process's threads share two cores.
//!
//! The server process is the calling binary again, started with arguments
//! of its own choosing ([`ServerProcess::start`]); its `main` hands them to
//! [`serve`], which starts the server on the given runtime, prints the
//! address on a line, and serves until its standard input closes (when
//! the [`ServerProcess`] is dropped). Pinning uses `taskset` (util-linux).
//! `weft-peers --split` and `weft-bulk --split` both run this way.

use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::Runtime;

/// The core the server processes run on.
pub const SERVER_CORE: usize = 0;
/// The core the measuring process runs on.
pub const CLIENT_CORE: usize = 1;

/// Pins this process (its main thread, and so every thread started after)
/// to [`CLIENT_CORE`]. Call it before building a runtime: tokio sizes its
/// worker pool from the cores the process may use.
pub fn pin_client() -> Result<(), String> {
    let pid = std::process::id().to_string();
    let core = CLIENT_CORE.to_string();
    let status = Command::new("taskset")
        .args(["-p", "-c", &core, &pid])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("--split needs taskset (util-linux): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("taskset -p -c {core} {pid}: {status}"))
    }
}

/// A server in a process of its own, pinned to [`SERVER_CORE`]; ended
/// when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts this binary again with `args` (which make its `main` call
    /// [`serve`]) in a new process pinned to [`SERVER_CORE`], and waits for
    /// the address it prints. `what` names the server in errors.
    pub fn start(what: &str, args: &[&str]) -> Result<ServerProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
        let mut child = Command::new("taskset")
            .arg("-c")
            .arg(SERVER_CORE.to_string())
            .arg(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("start the {what} server process: {e}"))?;
        let stdin = child.stdin.take();
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("{what} server process: {e}"))?;
        let addr = line.trim().parse().map_err(|_| {
            let _ = child.kill();
            format!("{what} server process printed {line:?}, not an address")
        })?;
        Ok(ServerProcess { child, stdin, addr })
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF: the server process exits
        if self.child.wait().is_err() {
            let _ = self.child.kill();
        }
    }
}

/// The server process's `main`: on `runtime`, starts the server `start`
/// returns the address of (its tasks spawned, so they run on), prints
/// that address, and serves until standard input closes.
pub fn serve<F, Fut>(runtime: Runtime, start: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = SocketAddr>,
{
    let rt = runtime.build();
    rt.block_on(async {
        let addr = start().await;
        let mut out = std::io::stdout();
        writeln!(out, "{addr}")
            .and_then(|()| out.flush())
            .expect("print the address");
        tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        })
        .await
        .expect("stdin watcher");
    });
}
