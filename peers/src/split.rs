//! The split layout (`weft-peers --split`): each cell's server runs in a
//! process of its own pinned to core 0, the measuring client in this one
//! pinned to core 1 (the helpers are `weft_benches::split`'s, shared with
//! `weft-bulk --split`).
//!
//! The server process is this binary again, `weft-peers --serve PEER
//! --runtime RT`: it starts the peer's server ([`Peer::server`]) on that
//! runtime, prints the address on a line, and serves until its standard
//! input closes (when the [`ServerProcess`] is dropped).

pub use weft_benches::split::{CLIENT_CORE, SERVER_CORE, ServerProcess, pin_client};

use crate::{Peer, Runtime};

/// Starts `peer`'s server on `runtime` in a new process pinned to
/// [`SERVER_CORE`] and waits for its address.
pub fn start(peer: &Peer, runtime: Runtime) -> Result<ServerProcess, String> {
    ServerProcess::start(
        peer.name,
        &["--serve", peer.name, "--runtime", runtime.name()],
    )
}

/// The server process's `main`: starts `peer`'s server on `runtime`,
/// prints its address, serves until standard input closes.
pub fn serve(peer: &Peer, runtime: Runtime) {
    weft_benches::split::serve(runtime, peer.server);
}
