//! The RPC stacks weft is measured against, for `cargo xtask bench --peers`.
//!
//! Each peer runs a server and a client in this process over TCP loopback and
//! times the same exchange: a nil request and the 7-byte response
//! [`RESPONSE`] (`{"n":1}`), on one connection, in each [`Shape`] it
//! supports and on each [`Runtime`] (see [`Peer`] and [`measure`]):
//!
//! - sequential: one call at a time; the median round trip.
//! - joined `k`: `k` calls issued together from one task and awaited
//!   together; the median batch divided by `k`. For std-net and tokio-codec
//!   (no multiplexing) this is pipelining: `k` requests in one write, then
//!   `k` responses, the best any protocol could do on one connection.
//! - spawned `k` (the multiplexing peers only): `k` spawned tasks sharing one
//!   client (a clone each), each making its share of the calls one after
//!   another; wall time divided by the calls. This is how a tokio service
//!   usually makes concurrent calls, and unlike `join_all` it puts client
//!   work on every runtime worker.
//!
//! The binary (`src/main.rs`, the plan in [`plan`]) runs the cells
//! interleaved over several rounds and prints JSON for `cargo xtask bench
//! --peers`.
//!
//! What it does NOT do: it is not a library anyone depends on, it is not a
//! default workspace member (`cargo test` never builds tarpc or tonic), and it
//! proves nothing by itself: figures are only compared within one run.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod drive;
pub mod plan;
mod runtime;
mod shape;
pub mod std_net;
pub mod tarpc_peer;
pub mod tokio_codec;
pub mod tonic_peer;
pub mod weft_peer;

use std::time::Duration;

pub use runtime::Runtime;
pub use shape::Shape;

/// The response every peer returns to a nil request: 7 bytes of JSON.
pub const RESPONSE: &[u8] = b"{\"n\":1}";

/// How many units (calls, batches, or calls per spawned caller) one run
/// makes untimed, then timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Units made before timing starts.
    pub warm_up: usize,
    /// Units timed.
    pub timed: usize,
}

/// One stack under measurement.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// Short name used in tables and JSON (`std-net`, `tokio-codec`, ...).
    pub name: &'static str,
    /// What is measured, in one line, for the report.
    pub description: &'static str,
    /// Times each of `counts.timed` sequential round trips on one
    /// connection.
    pub run_sequential: fn(Runtime, Counts) -> Vec<Duration>,
    /// Times each of `counts.timed` batches of `inflight` calls issued
    /// together on one connection.
    pub run_joined: fn(Runtime, Counts, inflight: usize) -> Vec<Duration>,
    /// Times `callers` spawned tasks making `counts.timed` calls each on one
    /// connection (all of them, from their release to the last one's end);
    /// `None` for the peers without multiplexing.
    pub run_spawned: Option<fn(Runtime, Counts, callers: usize) -> Duration>,
}

impl Peer {
    /// Whether this peer can be measured in `shape`.
    pub fn supports(&self, shape: Shape) -> bool {
        match shape {
            Shape::Sequential | Shape::Joined(_) => true,
            Shape::Spawned(_) => self.run_spawned.is_some(),
        }
    }
}

/// One cell's figure: the calls timed, and the wall time per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// Calls made while timing.
    pub calls: usize,
    /// Per-call wall time (see the crate docs for each shape), ns.
    pub per_call_ns: u64,
}

/// Measures `peer` in `shape` on `runtime`: `calls` timed calls after
/// `warm_up` untimed ones, both split among the shape's callers (at least one
/// unit each, see [`Shape::units`]). `None` if the peer lacks the shape.
pub fn measure(
    peer: &Peer,
    runtime: Runtime,
    shape: Shape,
    calls: usize,
    warm_up: usize,
) -> Option<Measured> {
    let counts = Counts {
        warm_up: shape.units(warm_up),
        timed: shape.units(calls),
    };
    let made = counts.timed * shape.callers();
    // the time measured, and the calls it covers
    let (time, covers) = match shape {
        Shape::Sequential => (median((peer.run_sequential)(runtime, counts)), 1),
        Shape::Joined(k) => (median((peer.run_joined)(runtime, counts, k)), k),
        Shape::Spawned(k) => ((peer.run_spawned?)(runtime, counts, k), made),
    };
    let per_call = time.as_nanos() / covers as u128;
    Some(Measured {
        calls: made,
        per_call_ns: u64::try_from(per_call).unwrap_or(u64::MAX),
    })
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// Every registered peer, in the order they run within a round.
pub fn peers() -> Vec<Peer> {
    vec![
        // weft first: its plain and encrypted entries (same shape as the
        // others: TCP loopback, nil request, RESPONSE, the same runtime).
        Peer {
            name: "weft",
            description: "weft facade, raw unary call, encryption and compression off",
            run_sequential: weft_peer::run_sequential_plain,
            run_joined: weft_peer::run_joined_plain,
            run_spawned: Some(weft_peer::run_spawned_plain),
        },
        Peer {
            name: "weft-encrypted",
            description: "weft facade, raw unary call, Noise handshake + AES-256-GCM (compression negotiated)",
            run_sequential: weft_peer::run_sequential_encrypted,
            run_joined: weft_peer::run_joined_encrypted,
            run_spawned: Some(weft_peer::run_spawned_encrypted),
        },
        Peer {
            name: "std-net",
            description: "blocking std::net ping-pong, 4-byte length prefix, server thread (no tokio runtime: its figures under each runtime are the same measurement, repeated)",
            run_sequential: std_net::run_sequential,
            run_joined: std_net::run_joined,
            run_spawned: None,
        },
        Peer {
            name: "tokio-codec",
            description: "tokio LengthDelimitedCodec ping-pong (Framed), server task",
            run_sequential: tokio_codec::run_sequential,
            run_joined: tokio_codec::run_joined,
            run_spawned: None,
        },
        Peer {
            name: "tarpc",
            description: "tarpc 0.38, serde transport with bincode",
            run_sequential: tarpc_peer::run_sequential,
            run_joined: tarpc_peer::run_joined,
            run_spawned: Some(tarpc_peer::run_spawned),
        },
        Peer {
            name: "tonic",
            description: "tonic 0.14 unary gRPC, hand-written bytes codec (no protobuf)",
            run_sequential: tonic_peer::run_sequential,
            run_joined: tonic_peer::run_joined,
            run_spawned: Some(tonic_peer::run_spawned),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every peer answers in every shape it has, on every runtime, and
    /// returns exactly the samples asked for (tiny counts: a debug build).
    #[test]
    fn every_peer_runs_every_shape_it_has_on_every_runtime() {
        let counts = Counts {
            warm_up: 2,
            timed: 3,
        };
        for peer in peers() {
            for runtime in Runtime::ALL {
                let at = format!("{} on {}", peer.name, runtime.name());
                assert_eq!((peer.run_sequential)(runtime, counts).len(), 3, "{at}");
                assert_eq!((peer.run_joined)(runtime, counts, 5).len(), 3, "{at}");
                if let Some(run_spawned) = peer.run_spawned {
                    assert!(run_spawned(runtime, counts, 4) > Duration::ZERO, "{at}");
                }
            }
        }
    }

    #[test]
    fn measure_divides_by_the_calls_each_figure_covers() {
        let peer = Peer {
            name: "fake",
            description: "fixed times",
            run_sequential: |_, c| vec![Duration::from_micros(10); c.timed],
            run_joined: |_, c, _| {
                let mut samples = vec![Duration::from_micros(80); c.timed];
                samples[0] = Duration::from_secs(1); // an outlier the median ignores
                samples
            },
            run_spawned: Some(|_, c, callers| {
                Duration::from_micros(2 * (c.timed * callers) as u64)
            }),
        };
        let at = |shape| measure(&peer, Runtime::MultiThread, shape, 64, 8).unwrap();
        assert_eq!(
            at(Shape::Sequential),
            Measured {
                calls: 64,
                per_call_ns: 10_000
            }
        );
        assert_eq!(
            at(Shape::Joined(8)),
            Measured {
                calls: 64,
                per_call_ns: 10_000
            }
        );
        assert_eq!(
            at(Shape::Spawned(4)),
            Measured {
                calls: 64,
                per_call_ns: 2_000
            }
        );
        let pipelining = Peer {
            run_spawned: None,
            ..peer
        };
        assert!(!pipelining.supports(Shape::Spawned(2)));
        assert_eq!(
            measure(&pipelining, Runtime::CurrentThread, Shape::Spawned(2), 8, 8),
            None
        );
    }
}
