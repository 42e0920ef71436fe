//! The split layout (`weft-peers --split`): each cell's server runs in a
//! process of its own pinned to core 0, the measuring client in this one
//! pinned to core 1, as two machines would be; nothing the server does is
//! scheduled on the client's core, and the figure does not depend on how
//! one process's threads share two cores.
//!
//! The server process is this binary again, `weft-peers --serve PEER
//! --runtime RT`: it starts the peer's server ([`Peer::server`]) on that
//! runtime, prints the address on a line, and serves until its standard
//! input closes (when [`ServerProcess`] is dropped). Pinning uses
//! `taskset` (util-linux).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::{Peer, Runtime};

/// The core the server processes run on.
pub const SERVER_CORE: usize = 0;
/// The core the measuring process runs on.
pub const CLIENT_CORE: usize = 1;

/// Pins this process (its main thread, and so every thread started after)
/// to [`CLIENT_CORE`].
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

/// A peer's server in a process of its own, pinned to [`SERVER_CORE`];
/// ended when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `peer`'s server on `runtime` in a new process and waits for
    /// its address.
    pub fn start(peer: &Peer, runtime: Runtime) -> Result<ServerProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
        let mut child = Command::new("taskset")
            .arg("-c")
            .arg(SERVER_CORE.to_string())
            .arg(exe)
            .args(["--serve", peer.name, "--runtime", runtime.name()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("start the {} server process: {e}", peer.name))?;
        let stdin = child.stdin.take();
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("{} server process: {e}", peer.name))?;
        let addr = line.trim().parse().map_err(|_| {
            let _ = child.kill();
            format!(
                "{} server process printed {line:?}, not an address",
                peer.name
            )
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

/// The server process's `main`: starts `peer`'s server on `runtime`,
/// prints its address, serves until standard input closes.
pub fn serve(peer: &Peer, runtime: Runtime) {
    let rt = runtime.build();
    rt.block_on(async {
        let addr = (peer.server)().await;
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
