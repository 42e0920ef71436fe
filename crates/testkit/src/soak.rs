//! The soak: many clients, many concurrent streaming calls, for a while,
//! against one echo server; every call checked byte for byte, counted
//! exactly once, and the server's stream tables empty at the end.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;
use weft_mux::{Config, Connection, Metadata, Role, connect};

use crate::modes::Mode;
use crate::server::{EchoServer, ServerOptions};

/// Concurrent calls per client connection.
pub const SOAK_STREAMS_PER_CLIENT: usize = 8;

/// What a soak did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SoakReport {
    /// Calls that completed with an echo identical to the request.
    pub calls: u64,
    /// Calls refused retry-safe (and retried).
    pub refused: u64,
    /// Payload bytes sent (and received back).
    pub bytes: u64,
    /// Echoes that differed from their request (must be 0).
    pub mismatches: u64,
    /// Call ids completed more than once (must be 0).
    pub duplicates: u64,
    /// Calls that failed with an error other than a refusal (must be 0).
    pub failures: u64,
    /// Handlers the server saw end cleanly (must equal `calls`).
    pub server_handled: u64,
    /// Streams left in the server's tables after the clients shut down
    /// (must be 0).
    pub server_streams_left: usize,
}

impl SoakReport {
    /// Whether every invariant held.
    pub fn is_clean(&self) -> bool {
        self.calls > 0
            && self.mismatches == 0
            && self.duplicates == 0
            && self.failures == 0
            && self.server_handled == self.calls
            && self.server_streams_left == 0
    }
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    refused: AtomicU64,
    bytes: AtomicU64,
    mismatches: AtomicU64,
    duplicates: AtomicU64,
    failures: AtomicU64,
}

/// The request body of call `id`: its length and bytes follow from the id,
/// so the echo can be checked without keeping the request.
fn body(id: u64) -> Bytes {
    let mut x = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let len = (x % 20_000) as usize;
    let mut v = Vec::with_capacity(len);
    for _ in 0..len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    Bytes::from(v)
}

/// Runs `clients` connections of [`SOAK_STREAMS_PER_CLIENT`] concurrent
/// streaming calls each against a fresh echo server in `mode` for
/// `duration`, then shuts the clients down and reads the server's tables.
///
/// # Panics
/// If the server cannot start or a client cannot connect.
pub async fn soak(duration: Duration, clients: usize, mode: &Mode) -> SoakReport {
    let mut options = ServerOptions::mode(mode);
    options.keep_outcomes = false;
    options.handlers = clients * SOAK_STREAMS_PER_CLIENT * 2;
    let server = EchoServer::with(options).await;
    let counters = Arc::new(Counters::default());
    let deadline = tokio::time::Instant::now() + duration;
    let mut conns = Vec::new();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..clients {
        let tcp = TcpStream::connect(server.addr()).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut config = Config::default();
        config.handshake(server.client_handshake());
        let (conn, _incoming) = connect(tcp, Role::Client, config).await.unwrap();
        conns.push(conn.clone());
        for s in 0..SOAK_STREAMS_PER_CLIENT {
            let (conn, counters) = (conn.clone(), counters.clone());
            let base = ((c * SOAK_STREAMS_PER_CLIENT + s) as u64) << 40;
            tasks.spawn(async move {
                let mut done = HashSet::new();
                let mut seq = 0u64;
                while tokio::time::Instant::now() < deadline {
                    seq += 1;
                    let id = base | seq;
                    match call(&conn, id).await {
                        Ok(n) => {
                            if !done.insert(id) {
                                counters.duplicates.fetch_add(1, Ordering::Relaxed);
                            }
                            counters.calls.fetch_add(1, Ordering::Relaxed);
                            counters.bytes.fetch_add(n, Ordering::Relaxed);
                        }
                        Err(Outcome::Refused) => {
                            counters.refused.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        Err(Outcome::Mismatch) => {
                            counters.mismatches.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Outcome::Failed) => {
                            counters.failures.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            });
        }
    }
    while tasks.join_next().await.is_some() {}
    for c in &conns {
        c.shutdown(Duration::from_secs(2)).await;
    }
    // Every server connection has closed its accept loop and finished its
    // handlers (an event, not a guess at how long that takes): the counts
    // below are final.
    for n in 1..=server.connections().len() {
        server.settled(n).await;
    }
    let left = server.connections().iter().map(|c| c.stats().streams).sum();
    SoakReport {
        calls: counters.calls.load(Ordering::Relaxed),
        refused: counters.refused.load(Ordering::Relaxed),
        bytes: counters.bytes.load(Ordering::Relaxed),
        mismatches: counters.mismatches.load(Ordering::Relaxed),
        duplicates: counters.duplicates.load(Ordering::Relaxed),
        failures: counters.failures.load(Ordering::Relaxed),
        server_handled: server.handled().0,
        server_streams_left: left,
    }
}

enum Outcome {
    Refused,
    Mismatch,
    Failed,
}

/// One streaming call: the body goes out in up to three pieces, the echo
/// comes back in whatever pieces, and must equal the body.
async fn call(conn: &Connection, id: u64) -> Result<u64, Outcome> {
    let want = body(id);
    let third = want.len() / 3;
    let mut s = conn
        .open(Metadata::new(), want.slice(..third), false)
        .await
        .map_err(|e| {
            if e.is_refused() {
                Outcome::Refused
            } else {
                Outcome::Failed
            }
        })?;
    let fail = |e: weft_mux::StreamError| {
        if e.is_refused() {
            Outcome::Refused
        } else {
            Outcome::Failed
        }
    };
    s.send(want.slice(third..2 * third), false)
        .await
        .map_err(fail)?;
    s.send(want.slice(2 * third..), true).await.map_err(fail)?;
    let mut got = Vec::with_capacity(want.len());
    loop {
        match s.recv().await {
            Ok(Some(c)) => got.extend_from_slice(&c.data),
            Ok(None) => break,
            Err(e) => return Err(fail(e)),
        }
    }
    if got == want {
        Ok(want.len() as u64)
    } else {
        Err(Outcome::Mismatch)
    }
}
