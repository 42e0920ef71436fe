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
pub mod split;
pub mod std_net;
pub mod tarpc_peer;
pub mod tokio_codec;
pub mod tonic_peer;
pub mod weft_handoff;
pub mod weft_peer;

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

// The shapes and runtimes are weft-benches' (shared with `weft-instr`, the
// instruction gate's harness, so both measure the same calls).
pub use weft_benches::{Runtime, Shape};

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
    /// How it is run.
    pub stack: Stack,
    /// Its server alone, for the server process of the split layout.
    pub server: StartServer,
}

/// Starts a peer's server on the current runtime (std-net: on a thread), on
/// a loopback port, serving every connection until the process ends.
pub type StartServer = fn() -> Pin<Box<dyn Future<Output = SocketAddr> + Send>>;

/// Where a cell's server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// In the measuring process, on the cell's runtime.
    InProcess,
    /// In a process of its own, listening here (`--split`).
    At(SocketAddr),
}

impl Place {
    /// The server's address: of the server `start` starts in this process,
    /// or of the other process's.
    pub async fn addr(self, start: impl Future<Output = SocketAddr>) -> SocketAddr {
        match self {
            Place::InProcess => start.await,
            Place::At(addr) => addr,
        }
    }
}

/// How a peer carries calls on its one connection, and so which shapes it
/// has.
#[derive(Debug, Clone, Copy)]
pub enum Stack {
    /// One request after another, no streams: sequential is a batch of one,
    /// joined is pipelined, spawned is not possible. The function times
    /// each of `counts.timed` batches of `inflight` calls.
    Pipelining(fn(Runtime, Counts, inflight: usize, Place) -> Vec<Duration>),
    /// Multiplexed calls: every shape.
    Multiplexing(fn(Runtime, Shape, Counts, Place) -> Timing),
}

/// What one run of a multiplexing peer timed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timing {
    /// Each call (sequential) or batch (joined) on its own.
    Each(Vec<Duration>),
    /// All the spawned callers, from the first one's start to the last
    /// one's end.
    Whole(Duration),
}

impl Peer {
    /// Whether this peer can be measured in `shape`.
    pub fn supports(&self, shape: Shape) -> bool {
        match (self.stack, shape) {
            (Stack::Pipelining(_), Shape::Spawned(_)) => false,
            (Stack::Pipelining(_), _) | (Stack::Multiplexing(_), _) => true,
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

/// Measures `peer` in `shape` on `runtime`, its server at `place`: `calls`
/// timed calls after `warm_up` untimed ones, both split among the shape's
/// callers (at least one unit each, see [`Shape::units`]). `None` if the
/// peer lacks the shape.
pub fn measure(
    peer: &Peer,
    runtime: Runtime,
    shape: Shape,
    (calls, warm_up): (usize, usize),
    place: Place,
) -> Option<Measured> {
    let counts = Counts {
        warm_up: shape.units(warm_up),
        timed: shape.units(calls),
    };
    let made = counts.timed * shape.callers();
    let timing = match (peer.stack, shape) {
        (Stack::Pipelining(_), Shape::Spawned(_)) => return None,
        (Stack::Pipelining(run), shape) => {
            Timing::Each(run(runtime, counts, shape.callers(), place))
        }
        (Stack::Multiplexing(run), shape) => run(runtime, shape, counts, place),
    };
    // the time measured, and the calls it covers
    let (time, covers) = match timing {
        Timing::Each(samples) => (median(samples), shape.callers()),
        Timing::Whole(time) => (time, made),
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
            stack: Stack::Multiplexing(weft_peer::run_plain),
            server: weft_peer::server_plain,
        },
        Peer {
            name: "weft-encrypted",
            description: "weft facade, raw unary call, Noise handshake + AES-256-GCM (compression negotiated)",
            stack: Stack::Multiplexing(weft_peer::run_encrypted),
            server: weft_peer::server_encrypted,
        },
        Peer {
            name: "weft-handoff",
            description: "weft, plain, behind a tarpc-style hand-off: callers pass a oneshot reply slot over an mpsc to one task that makes every call joined",
            stack: Stack::Multiplexing(weft_handoff::run),
            server: weft_peer::server_plain,
        },
        Peer {
            name: "std-net",
            description: "blocking std::net ping-pong, 4-byte length prefix, server thread (no tokio runtime: its figures under each runtime are the same measurement, repeated)",
            stack: Stack::Pipelining(std_net::run_batches),
            server: std_net::server,
        },
        Peer {
            name: "tokio-codec",
            description: "tokio LengthDelimitedCodec ping-pong (Framed), server task",
            stack: Stack::Pipelining(tokio_codec::run_batches),
            server: tokio_codec::server,
        },
        Peer {
            name: "tarpc",
            description: "tarpc 0.38, serde transport with bincode",
            stack: Stack::Multiplexing(tarpc_peer::run),
            server: tarpc_peer::server,
        },
        Peer {
            name: "tonic",
            description: "tonic 0.14 unary gRPC, hand-written bytes codec (no protobuf)",
            stack: Stack::Multiplexing(tonic_peer::run),
            server: tonic_peer::server,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every peer answers in every shape it has, on every runtime, with
    /// its server in process and with its server started alone on a
    /// runtime of its own, as the split layout's server process starts it
    /// (tiny counts: a debug build).
    #[test]
    fn every_peer_runs_every_shape_it_has_on_every_runtime_in_both_layouts() {
        for peer in peers() {
            let apart = Runtime::MultiThread.build();
            let addr = apart.block_on((peer.server)());
            for place in [Place::InProcess, Place::At(addr)] {
                for runtime in Runtime::ALL {
                    for shape in [Shape::Sequential, Shape::Joined(5), Shape::Spawned(4)] {
                        let at = format!(
                            "{} {} on {} ({place:?})",
                            peer.name,
                            shape.name(),
                            runtime.name()
                        );
                        match measure(&peer, runtime, shape, (20, 8), place) {
                            Some(m) => assert!(m.calls == 20 && m.per_call_ns > 0, "{at}: {m:?}"),
                            None => assert!(!peer.supports(shape), "{at}"),
                        }
                    }
                }
            }
        }
    }

    /// A cell with its server elsewhere calls that server, not one of its
    /// own: pointed at a closed port, every peer fails.
    #[test]
    fn every_peer_calls_the_server_it_is_given() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        for peer in peers() {
            let run = std::panic::catch_unwind(|| {
                measure(
                    &peer,
                    Runtime::CurrentThread,
                    Shape::Sequential,
                    (2, 1),
                    Place::At(closed),
                )
            });
            assert!(run.is_err(), "{} measured without its server", peer.name);
        }
    }

    #[test]
    fn measure_divides_by_the_calls_each_figure_covers() {
        fn batches(_: Runtime, c: Counts, k: usize, _: Place) -> Vec<Duration> {
            let mut samples = vec![Duration::from_micros(10 * k as u64); c.timed];
            samples[0] = Duration::from_secs(1); // an outlier the median ignores
            samples
        }
        fn streams(runtime: Runtime, shape: Shape, c: Counts, place: Place) -> Timing {
            match shape {
                Shape::Spawned(k) => Timing::Whole(Duration::from_micros(2 * (c.timed * k) as u64)),
                _ => Timing::Each(batches(runtime, c, shape.callers(), place)),
            }
        }
        let pipelining = Peer {
            name: "pipe",
            description: "fixed times",
            stack: Stack::Pipelining(batches),
            server: || Box::pin(async { SocketAddr::from(([127, 0, 0, 1], 9)) }),
        };
        let multiplexing = Peer {
            stack: Stack::Multiplexing(streams),
            ..pipelining
        };
        for peer in [pipelining, multiplexing] {
            let at = |shape| {
                measure(
                    &peer,
                    Runtime::MultiThread,
                    shape,
                    (64, 8),
                    Place::InProcess,
                )
            };
            let per_call = |per_call_ns| {
                Some(Measured {
                    calls: 64,
                    per_call_ns,
                })
            };
            assert_eq!(at(Shape::Sequential), per_call(10_000), "{}", peer.name);
            assert_eq!(at(Shape::Joined(8)), per_call(10_000));
        }
        assert!(!pipelining.supports(Shape::Spawned(2)));
        assert_eq!(
            measure(
                &pipelining,
                Runtime::CurrentThread,
                Shape::Spawned(2),
                (8, 8),
                Place::InProcess
            ),
            None
        );
        assert!(multiplexing.supports(Shape::Spawned(2)));
        let spawned = measure(
            &multiplexing,
            Runtime::MultiThread,
            Shape::Spawned(4),
            (64, 8),
            Place::InProcess,
        );
        assert_eq!(
            spawned,
            Some(Measured {
                calls: 64,
                per_call_ns: 2_000
            })
        );
    }
}
