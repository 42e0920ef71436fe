//! # weft-testkit: hostile peers and faults on demand
//!
//! - [`FaultyIo`] wraps any `AsyncRead + AsyncWrite` and misbehaves at
//!   chosen byte offsets: it drops written bytes, corrupts, truncates or
//!   delays what is read, resets the connection, writes short or returns
//!   `Ok(0)`. Tests put it under a real weft connection to check that no
//!   completed call is lost or duplicated and that every incomplete one
//!   fails with a definite error.
//! - [`RawPeer`] completes weft's handshake over a real TCP socket through
//!   the same record pipeline an endpoint uses, then sends whatever frames
//!   or bytes a test scripts: the hostile peer of the end-to-end suite
//!   and of weft-mux's driver tests (over `tokio::io::duplex` there).
//! - [`delay_pair`] is an in-memory link where bytes arrive a fixed time
//!   after they are written (on tokio's clock, so a paused clock makes a
//!   long round trip free): the high-latency link of window-growth tests.
//! - [`duplex_pair`] / [`pair_over`] join two real mux endpoints in memory;
//!   [`echo`] is the echo service every test server runs.
//! - [`EchoServer`] is a real weft-mux server on TCP loopback, instrumented
//!   with the figures a hostile test bounds (stream table, control queue,
//!   buffered bytes, handlers running) and how each stream ended;
//!   [`Bystander`] is a well-behaved client that keeps doing checked round
//!   trips on the same server during an attack.
//! - [`Tap`] counts the writes through a transport and keeps a copy of
//!   the bytes, for tests of how frames leave (batched writes, records).
//! - [`resident_bytes`] and [`open_fds`] read another process's figures
//!   from /proc, for the memory examples.
//!
//! ## What this crate does not do
//! It is not a network emulator (latency only, no bandwidth model, no reordering across
//! connections) and is never a dependency of a library crate.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

mod delay;
mod faulty;
mod modes;
mod pair;
mod peer;
mod process;
mod server;
mod tap;
mod wait;

pub use delay::{DelayIo, IN_FLIGHT_LIMIT, Link, delay_pair, link_pair};
pub use faulty::{Faults, FaultyIo};
pub use modes::{Mode, TEST_PSK};
pub use pair::{Endpoint, duplex_pair, echo, echo_all, pair_over};
pub use peer::{
    PEER_PATIENCE, PEER_STREAM_WINDOW, PeerRead, RawPeer, data, dial_small, open, raw_listener,
    settings,
};
pub use process::{open_fds, resident_bytes};
pub use server::{
    Bystander, EchoServer, Outcome, Peak, ServerOptions, round_trip, round_trip_retrying,
};
pub use tap::{Tap, Tapped};
pub use wait::{Changes, SPIN_LIMIT, STALL_LIMIT, SpinGuard, eventually};
