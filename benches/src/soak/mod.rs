//! The soak: one implementation for the test suite's short run
//! (`benches/tests/soak.rs`, a few seconds) and CI's long one (`cargo xtask
//! soak --secs 60` runs the `weft-soak` binary, `src/bin/soak.rs`).
//!
//! - One in-process weft server, [`Options::connections`] TCP loopback
//!   connections with [`Options::tasks`] tasks each. Connection `i` is
//!   plain, Noise NN or pre-shared key (`i % 3`) and compressed or not
//!   (`(i / 3) % 2`): six connections cover every pair.
//! - Each task issues calls of all four shapes at random: unary echo,
//!   server streaming, client streaming, bidi, plus a 20 ms unary under a
//!   deadline (2 ms: must end `DEADLINE_EXCEEDED`; 2 s: must succeed), and
//!   drops one call in eight after 0 to 2 ms (a cancellation). Messages are
//!   up to 20,000 bytes.
//! - The server takes one stream per connection fewer than it has tasks,
//!   so opens wait for a slot under its cap (`Connection::open` queues,
//!   first come, first served), and a stream is refused (`REFUSED_STREAM`)
//!   when a cancelled call's stream still holds its slot; a refused call is
//!   retried under the same call id. Every handler records the call it runs, and a call run twice (a
//!   refused stream that was processed after all) fails the run.
//! - Lost or duplicated messages: every message names its task, call and
//!   index and carries filler derived from them, checked byte for byte on
//!   arrival (by the server's handlers too); a call stuck for 10 s fails;
//!   calls issued must equal completed + cancelled + deadline exceeded,
//!   each outcome must occur, and the server must have run between
//!   completed and issued calls.
//! - Memory: the process RSS after the warm-up (the first quarter) and at
//!   the end; growth above [`RSS_GROWTH_BOUND`] fails.
//! - Leaks: once the clients stop, every server and client connection's
//!   stream table and accept queue must drain to empty.

mod client;
mod msg;
mod server;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use weft::mux::Connection;
use weft::{Client, Config, EncryptionPolicy, Server};

use client::{Counts, SHAPE_NAMES, SHAPES};
use server::{SLOW, Seen};

/// RSS may grow by at most this much between the end of the warm-up and
/// the end of the run (allocator caches and runtime queues settle during
/// the warm-up; a per-call leak at thousands of calls a second exceeds it
/// within seconds).
pub const RSS_GROWTH_BOUND: u64 = 8 * 1024 * 1024;

/// The pre-shared key of the soak's PSK connections.
const PSK: [u8; 32] = [0x5A; 32];

/// How long the stream tables may take to drain once the clients stop
/// (resets and closes are asynchronous); a leak never drains.
const DRAIN: Duration = Duration::from_secs(10);

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long the clients keep calling.
    pub run: Duration,
    /// Client connections (six cover every security mode and compression).
    pub connections: usize,
    /// Tasks per connection, each with one call at a time.
    pub tasks: usize,
}

impl Options {
    /// The soak's shape, for `run`: twelve connections (every security
    /// mode and compression twice) of four tasks.
    pub fn new(run: Duration) -> Options {
        Options {
            run,
            connections: 12,
            tasks: 4,
        }
    }

    /// Streams the server takes per connection: one fewer than the tasks,
    /// so callers wait for slots (the case that once lost connections: a
    /// refused client-streaming call's in-flight data was charged as a
    /// late-frame flood), and refusals still come after cancellations.
    fn server_streams(&self) -> usize {
        self.tasks.saturating_sub(1).max(1)
    }
}

/// What a clean soak did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// How long the clients called, seconds.
    pub secs: f64,
    /// Client connections.
    pub connections: usize,
    /// Tasks per connection.
    pub tasks: usize,
    /// Calls issued.
    pub issued: u64,
    /// Calls that completed, every message checked.
    pub completed: u64,
    /// Calls the client dropped.
    pub cancelled: u64,
    /// Calls that ended `DEADLINE_EXCEEDED`.
    pub expired: u64,
    /// Attempts refused by the server and retried.
    pub refused: u64,
    /// Calls issued per shape.
    pub shapes: [u64; SHAPES],
    /// Messages checked on completed calls.
    pub messages: u64,
    /// Calls whose handler ran.
    pub handled: u64,
    /// Calls whose handler ran twice (must be 0).
    pub duplicates: u64,
    /// RSS after the warm-up, bytes.
    pub rss_warm: u64,
    /// RSS at the end, bytes.
    pub rss_end: u64,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / 1_048_576.0;
        writeln!(
            f,
            "  {:.1} s, {} connections x {} tasks (plain, Noise NN, PSK; compressed or not)",
            self.secs, self.connections, self.tasks
        )?;
        writeln!(
            f,
            "  calls: {} issued = {} completed + {} cancelled + {} deadline exceeded; {} refused attempts retried",
            self.issued, self.completed, self.cancelled, self.expired, self.refused
        )?;
        let shapes: Vec<String> = SHAPE_NAMES
            .iter()
            .zip(self.shapes)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        writeln!(f, "  shapes: {}", shapes.join(", "))?;
        writeln!(
            f,
            "  messages checked: {}; server ran {} calls, {} of them twice",
            self.messages, self.handled, self.duplicates
        )?;
        writeln!(
            f,
            "  RSS: {:.1} MiB after warm-up, {:.1} MiB at the end (growth {:.1} MiB, bound {} MiB)",
            mib(self.rss_warm),
            mib(self.rss_end),
            mib(self.rss_end.saturating_sub(self.rss_warm)),
            RSS_GROWTH_BOUND / 1_048_576
        )?;
        write!(
            f,
            "  stream tables: all {} connections empty (both ends)",
            2 * self.connections
        )
    }
}

/// Runs the soak; `Err` says which check failed.
pub async fn run(options: &Options) -> Result<Report, String> {
    let seen = Arc::new(Seen::default());
    let server = Server::new(server::router(&seen));
    let (server_conns, clients) = connect_all(&server, options).await?;

    let start = Instant::now();
    let end = start + options.run;
    let counts = Arc::new(Counts::default());
    let mut tasks = tokio::task::JoinSet::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..options.tasks {
            let (client, counts) = (client.clone(), counts.clone());
            let id = (c * options.tasks + t) as u64;
            tasks.spawn(async move { client::task(client, id, end, counts).await });
        }
    }

    tokio::time::sleep(options.run / 4).await;
    let rss_warm = rss_bytes()?;
    let mut failures = Vec::new();
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("task panicked: {e}")),
        }
    }
    let rss_end = rss_bytes()?;
    let secs = start.elapsed().as_secs_f64();
    if !failures.is_empty() {
        failures.truncate(10);
        return Err(failures.join("\n"));
    }

    let all: Vec<&Connection> = server_conns
        .iter()
        .chain(clients.iter().map(Client::connection))
        .collect();
    drained(&all).await?;

    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let c = &counts;
    let report = Report {
        secs,
        connections: options.connections,
        tasks: options.tasks,
        issued: get(&c.issued),
        completed: get(&c.completed),
        cancelled: get(&c.cancelled),
        expired: get(&c.expired),
        refused: get(&c.refused),
        shapes: std::array::from_fn(|i| get(&c.shapes[i])),
        messages: get(&c.messages),
        handled: get(&seen.handled),
        duplicates: get(&seen.duplicates),
        rss_warm,
        rss_end,
    };
    check(&report)?;
    Ok(report)
}

/// The run's invariants over its counts.
fn check(r: &Report) -> Result<(), String> {
    if r.duplicates != 0 {
        return Err(format!("the server ran {} calls twice\n{r}", r.duplicates));
    }
    if r.completed + r.cancelled + r.expired != r.issued {
        return Err(format!(
            "{} calls issued, {} completed + {} cancelled + {} expired\n{r}",
            r.issued, r.completed, r.cancelled, r.expired
        ));
    }
    if r.handled < r.completed || r.handled > r.issued {
        return Err(format!(
            "the server ran {} calls; clients completed {} of {}\n{r}",
            r.handled, r.completed, r.issued
        ));
    }
    if r.completed == 0 || r.cancelled == 0 || r.expired == 0 {
        return Err(format!("the run did not exercise every outcome\n{r}"));
    }
    if let Some(i) = r.shapes.iter().position(|&n| n == 0) {
        return Err(format!("no {} call was issued\n{r}", SHAPE_NAMES[i]));
    }
    if r.rss_end.saturating_sub(r.rss_warm) > RSS_GROWTH_BOUND {
        return Err(format!("memory grew after warm-up\n{r}"));
    }
    Ok(())
}

/// Connection `i`'s client config: security `i % 3`, compression `(i / 3) % 2`.
fn client_config(i: usize) -> Config {
    let config = match i % 3 {
        0 => Config::new().encryption(EncryptionPolicy::Off),
        1 => Config::new().encryption(EncryptionPolicy::Required),
        _ => Config::new()
            .encryption(EncryptionPolicy::Required)
            .psk(PSK),
    };
    config
        .compression((i / 3) % 2 == 1)
        // Compress even small messages on compressed connections.
        .compression_min_size(16)
}

/// Accepts and connects `options.connections` connections, checking each
/// negotiated what its config asked for.
async fn connect_all(
    server: &Server,
    options: &Options,
) -> Result<(Vec<Connection>, Vec<Client>), String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // The server takes plain or encrypted, compressed or not: each
    // client's config decides (a server with a PSK takes only PSK peers).
    let server_config = Config::new()
        .encryption(EncryptionPolicy::Preferred)
        .max_concurrent_streams(options.server_streams());
    let psk_server_config = server_config.clone().psk(PSK);
    let mut server_conns = Vec::new();
    let mut clients = Vec::new();
    for i in 0..options.connections {
        let config = client_config(i);
        let accept_config = if i % 3 == 2 {
            &psk_server_config
        } else {
            &server_config
        };
        let (accepted, client) = tokio::join!(
            async {
                let (io, peer) = listener.accept().await.map_err(|e| e.to_string())?;
                io.set_nodelay(true).map_err(|e| e.to_string())?;
                weft::accept_io(io, server, accept_config, Some(peer.to_string()))
                    .await
                    .map_err(|e| e.to_string())
            },
            async {
                let io = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
                io.set_nodelay(true).map_err(|e| e.to_string())?;
                weft::connect_io(io, &config)
                    .await
                    .map_err(|e| e.to_string())
            }
        );
        let (conn, serving) = accepted?;
        tokio::spawn(serving);
        let client = client?;
        let n = client.connection().negotiated();
        let want = (i % 3 != 0, (i / 3) % 2 == 1, i % 3 == 2);
        if (n.encrypted, n.compressed, n.authenticated) != want {
            return Err(format!(
                "connection {i}: negotiated {n:?}, want (encrypted, compressed, authenticated) = {want:?}"
            ));
        }
        server_conns.push(conn);
        clients.push(client);
    }
    Ok((server_conns, clients))
}

/// Waits until every connection's stream table and accept queue are empty.
async fn drained(all: &[&Connection]) -> Result<(), String> {
    let empty = || {
        all.iter()
            .all(|c| c.stats().streams == 0 && c.stats().accept_queue == 0)
    };
    let wait = async {
        while !empty() {
            tokio::time::sleep(SLOW).await;
        }
    };
    if tokio::time::timeout(DRAIN, wait).await.is_ok() {
        return Ok(());
    }
    let left: Vec<String> = all
        .iter()
        .map(|c| c.stats())
        .filter(|s| s.streams != 0 || s.accept_queue != 0)
        .map(|s| format!("{s:?}"))
        .collect();
    Err(format!(
        "stream tables not empty {DRAIN:?} after the clients stopped: {left:?}"
    ))
}

/// The resident set size of this process.
fn rss_bytes() -> Result<u64, String> {
    let statm = std::fs::read_to_string("/proc/self/statm").map_err(|e| e.to_string())?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .ok_or("cannot parse /proc/self/statm")?;
    Ok(pages * 4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean() -> Report {
        Report {
            secs: 1.0,
            connections: 6,
            tasks: 5,
            issued: 100,
            completed: 80,
            cancelled: 12,
            expired: 8,
            refused: 3,
            shapes: [20; 5],
            messages: 300,
            handled: 90,
            duplicates: 0,
            rss_warm: 10 << 20,
            rss_end: 11 << 20,
        }
    }

    #[test]
    fn each_broken_invariant_fails_the_check() {
        assert_eq!(check(&clean()), Ok(()));
        let broken = [
            Report {
                duplicates: 1,
                ..clean()
            },
            Report {
                completed: 79,
                ..clean()
            },
            Report {
                handled: 79,
                ..clean()
            },
            Report {
                handled: 101,
                ..clean()
            },
            Report {
                shapes: [20, 20, 0, 20, 20],
                ..clean()
            },
            Report {
                rss_end: (10 << 20) + RSS_GROWTH_BOUND + 1,
                ..clean()
            },
        ];
        for r in broken {
            assert!(check(&r).is_err(), "{r:?}");
        }
    }

    #[test]
    fn six_connections_cover_every_mode_and_compression() {
        let mut pairs: Vec<(usize, bool)> = (0..6).map(|i| (i % 3, (i / 3) % 2 == 1)).collect();
        pairs.sort_unstable();
        pairs.dedup();
        assert_eq!(pairs.len(), 6);
        assert_eq!(Options::new(Duration::from_secs(1)).connections % 6, 0);
    }
}
