//! The RPC stacks weft is measured against, for `cargo xtask bench --peers`.
//!
//! Each peer runs a server and a client in this process over TCP loopback and
//! times the same exchange: a nil request and the 7-byte response
//! [`RESPONSE`] (`{"n":1}`). Every peer offers two measurements with the same
//! shape (see [`Peer`]):
//!
//! - `run_sequential(n)`: one connection, one call at a time; returns the
//!   round-trip time of each of `n` calls (after a warm-up that is not
//!   returned).
//! - `run_concurrent(n, inflight)`: one connection, `inflight` calls issued
//!   together and awaited together; returns the wall time of each of `n` such
//!   batches. Per-call cost is `batch / inflight`.
//! - `run_spawned(n, callers)` (the multiplexing peers only): one connection
//!   shared by `callers` spawned tasks, each making `n` calls one after
//!   another; returns the wall time of all of them. Per-call cost is
//!   `total / (n * callers)`. This is how a tokio service usually makes
//!   concurrent calls (a cloned client per task), and unlike `join_all`
//!   it puts client work on every runtime worker.
//!
//! The binary (`src/main.rs`) runs the peers interleaved (A B C D A B C D …)
//! over several rounds and prints JSON for `cargo xtask bench --peers`.
//!
//! What it does NOT do: it is not a library anyone depends on, it is not a
//! default workspace member (`cargo test` never builds tarpc or tonic), and it
//! proves nothing by itself: figures are only compared within one run.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod runtime;
pub mod std_net;
pub mod tarpc_peer;
pub mod tokio_codec;
pub mod tonic_peer;
pub mod weft_peer;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Barrier;

pub use runtime::runtime;

/// The response every peer returns to a nil request: 7 bytes of JSON.
pub const RESPONSE: &[u8] = b"{\"n\":1}";

/// Calls made (sequential) or batches run (concurrent) before timing starts.
pub const WARM_UP: usize = 200;

/// One stack under measurement.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// Short name used in tables and JSON (`std-net`, `tokio-codec`, ...).
    pub name: &'static str,
    /// What is measured, in one line, for the report.
    pub description: &'static str,
    /// Times `n` sequential round trips on one connection.
    pub run_sequential: fn(n: usize) -> Vec<Duration>,
    /// Times `n` batches of `inflight` concurrent calls on one connection.
    pub run_concurrent: fn(n: usize, inflight: usize) -> Vec<Duration>,
    /// Times `callers` spawned tasks making `n` calls each on one
    /// connection; `None` for the peers without multiplexing.
    pub run_spawned: Option<fn(n: usize, callers: usize) -> Duration>,
}

/// Every registered peer, in the order they run within a round.
pub fn peers() -> Vec<Peer> {
    vec![
        // weft first: its plain and encrypted entries (same shape as the
        // others: TCP loopback, nil request, RESPONSE, `runtime()`).
        Peer {
            name: "weft",
            description: "weft facade, raw unary call, encryption and compression off",
            run_sequential: weft_peer::run_sequential_plain,
            run_concurrent: weft_peer::run_concurrent_plain,
            run_spawned: Some(weft_peer::run_spawned_plain),
        },
        Peer {
            name: "weft-encrypted",
            description: "weft facade, raw unary call, Noise handshake + AES-256-GCM (compression negotiated)",
            run_sequential: weft_peer::run_sequential_encrypted,
            run_concurrent: weft_peer::run_concurrent_encrypted,
            run_spawned: Some(weft_peer::run_spawned_encrypted),
        },
        Peer {
            name: "std-net",
            description: "blocking std::net ping-pong, 4-byte length prefix, server thread",
            run_sequential: std_net::run_sequential,
            run_concurrent: std_net::run_concurrent,
            run_spawned: None,
        },
        Peer {
            name: "tokio-codec",
            description: "tokio LengthDelimitedCodec ping-pong (Framed), server task",
            run_sequential: tokio_codec::run_sequential,
            run_concurrent: tokio_codec::run_concurrent,
            run_spawned: None,
        },
        Peer {
            name: "tarpc",
            description: "tarpc 0.38, serde transport with bincode",
            run_sequential: tarpc_peer::run_sequential,
            run_concurrent: tarpc_peer::run_concurrent,
            run_spawned: Some(tarpc_peer::run_spawned),
        },
        Peer {
            name: "tonic",
            description: "tonic 0.14 unary gRPC, hand-written bytes codec (no protobuf)",
            run_sequential: tonic_peer::run_sequential,
            run_concurrent: tonic_peer::run_concurrent,
            run_spawned: Some(tonic_peer::run_spawned),
        },
    ]
}

/// Runs `call` `WARM_UP` times, then `n` times timing each: the measuring
/// loop of the async peers (`call` is one call, or one concurrent batch).
pub(crate) async fn time_each(n: usize, mut call: impl AsyncFnMut()) -> Vec<Duration> {
    for _ in 0..WARM_UP {
        call().await;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = std::time::Instant::now();
        call().await;
        samples.push(start.elapsed());
    }
    samples
}

/// A multiplexing peer's client, cloned into each spawned caller task.
pub(crate) trait Caller: Clone + Send + Sync + 'static {
    /// Makes one call and checks its response.
    fn call(&self) -> impl Future<Output = ()> + Send + '_;
}

/// Spawns `callers` tasks, each with its own clone of `client`; each makes
/// `WARM_UP` untimed calls, then (all released together) `n` timed ones.
/// Returns the wall time from the release until the last task finished.
pub(crate) async fn time_spawned(n: usize, callers: usize, client: impl Caller) -> Duration {
    let start_line = Arc::new(Barrier::new(callers + 1));
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (client, start_line) = (client.clone(), start_line.clone());
            tokio::spawn(async move {
                for _ in 0..WARM_UP {
                    client.call().await;
                }
                start_line.wait().await;
                for _ in 0..n {
                    client.call().await;
                }
            })
        })
        .collect();
    start_line.wait().await;
    let start = std::time::Instant::now();
    for task in tasks {
        task.await.expect("a caller task panicked");
    }
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every peer answers and returns exactly the samples asked for.
    #[test]
    fn every_peer_returns_one_sample_per_call_and_batch() {
        for peer in peers() {
            assert_eq!((peer.run_sequential)(5).len(), 5, "{}", peer.name);
            assert_eq!((peer.run_concurrent)(3, 8).len(), 3, "{}", peer.name);
            if let Some(run_spawned) = peer.run_spawned {
                assert!(run_spawned(3, 4) > Duration::ZERO, "{}", peer.name);
            }
        }
    }
}
