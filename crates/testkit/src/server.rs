//! A real weft-mux echo server on TCP loopback, instrumented for hostile
//! tests, and a well-behaved bystander client that keeps doing round trips
//! while a test attacks the server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use weft_mux::pipeline::HandshakeConfig;
use weft_mux::{Config, Connection, Metadata, Role, Stream, connect};

use crate::modes::Mode;
use crate::wait::{Changes, STALL_LIMIT};

/// How a server-side stream ended, as its handler saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Which connection (1-based, in handshake order; see
    /// [`EchoServer::connection`]).
    pub conn: usize,
    /// The stream id.
    pub stream_id: u32,
    /// Bytes received before the end.
    pub received: usize,
    /// `Ok` for the peer's explicit end, `Err(description)` otherwise.
    pub end: Result<(), String>,
}

/// Largest figures seen on any server connection (sampled every 2 ms and
/// at each query, so short spikes between samples can be missed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// Streams in one connection's table.
    pub streams: usize,
    /// Peer-opened streams counted against the cap.
    pub inbound: usize,
    /// Control frames waiting to be sent.
    pub control_queued: usize,
    /// Streams waiting to be accepted.
    pub accept_queue: usize,
    /// Received bytes buffered or not yet granted back (connection window
    /// minus the credit the peer has left).
    pub recv_buffered: u64,
    /// Handlers running at once.
    pub handlers: usize,
}

/// Server settings for a test.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The mux configuration of every accepted connection.
    pub config: Config,
    /// Handlers that may run at once across the server (the accept loop
    /// waits for a free one, so further streams wait in the mux's accept
    /// queue).
    pub handlers: usize,
    /// Each handler sleeps this long before reading (a slow handler).
    pub handler_delay: Duration,
    /// The handshake settings clients (the bystander, raw peers) use.
    pub client: HandshakeConfig,
}

impl ServerOptions {
    /// Default options in security `mode`.
    pub fn mode(mode: &Mode) -> ServerOptions {
        let mut config = Config::default();
        config.handshake(mode.server.clone());
        ServerOptions {
            config,
            client: mode.client.clone(),
            ..ServerOptions::default()
        }
    }

    /// `config` with its handshake settings taken from `mode`.
    pub fn mode_with(mode: &Mode, mut config: Config) -> ServerOptions {
        config.handshake(mode.server.clone());
        ServerOptions {
            config,
            client: mode.client.clone(),
            ..ServerOptions::default()
        }
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            config: Config::default(),
            handlers: 64,
            handler_delay: Duration::ZERO,
            client: HandshakeConfig::default(),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    conns: Mutex<Vec<Connection>>,
    handshakes_failed: AtomicUsize,
    last_handshake_error: Mutex<Option<String>>,
    handlers_now: AtomicUsize,
    peak: Mutex<Peak>,
    outcomes: Mutex<Vec<Outcome>>,
    ended_ok: AtomicU64,
    ended_err: AtomicU64,
    connection_window: AtomicU64,
    /// Per connection (1-based): handlers running, and whether its accept
    /// loop has ended (the connection will start no more handlers).
    settling: Mutex<HashMap<usize, (usize, bool)>>,
    /// Bumped on a new connection, a failed handshake, a finished handler,
    /// an ended accept loop.
    changes: Changes,
}

impl State {
    /// Updates connection `n`'s settling entry, then wakes the waiters.
    fn settle(&self, n: usize, f: impl FnOnce(&mut (usize, bool))) {
        f(self.settling.lock().unwrap().entry(n).or_default());
        self.changes.bump();
    }

    fn sample(&self) {
        let conns = self.conns.lock().unwrap().clone();
        let window = self.connection_window.load(Ordering::Relaxed);
        let mut peak = self.peak.lock().unwrap();
        for c in conns {
            let st = c.stats();
            peak.streams = peak.streams.max(st.streams);
            peak.inbound = peak.inbound.max(st.inbound);
            peak.control_queued = peak.control_queued.max(st.control_queued);
            peak.accept_queue = peak.accept_queue.max(st.accept_queue);
            let buffered = window.saturating_sub(u64::from(st.conn_recv_window));
            peak.recv_buffered = peak.recv_buffered.max(buffered);
        }
        peak.handlers = peak.handlers.max(self.handlers_now.load(Ordering::Relaxed));
    }
}

/// An echo server: every stream's data is sent back as it arrives, and
/// the peer's end is answered with an end.
#[derive(Debug)]
pub struct EchoServer {
    addr: SocketAddr,
    client: HandshakeConfig,
    state: Arc<State>,
    tasks: Vec<JoinHandle<()>>,
}

impl EchoServer {
    /// Starts a server with default options.
    pub async fn start() -> EchoServer {
        EchoServer::with(ServerOptions::default()).await
    }

    /// Starts a server with `options` on an ephemeral loopback port.
    ///
    /// # Panics
    /// If the port cannot be bound.
    pub async fn with(options: ServerOptions) -> EchoServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        state
            .connection_window
            .store(connection_window(&options.config), Ordering::Relaxed);
        let slots = Arc::new(Semaphore::new(options.handlers));
        let client = options.client.clone();
        let st = state.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let (st, options, slots) = (st.clone(), options.clone(), slots.clone());
                tokio::spawn(async move {
                    match connect(tcp, Role::Server, options.config.clone()).await {
                        Ok((conn, mut incoming)) => {
                            let n = {
                                let mut conns = st.conns.lock().unwrap();
                                conns.push(conn);
                                conns.len()
                            };
                            st.changes.bump();
                            loop {
                                let permit = slots.clone().acquire_owned().await.unwrap();
                                let Some(stream) = incoming.accept().await else {
                                    break;
                                };
                                let st = st.clone();
                                let delay = options.handler_delay;
                                // Counted before the spawn: `settled` never
                                // sees a handler that is about to start.
                                st.handlers_now.fetch_add(1, Ordering::Relaxed);
                                st.settle(n, |e| e.0 += 1);
                                tokio::spawn(async move {
                                    st.sample();
                                    let outcome = echo(n, stream, delay).await;
                                    let counter = if outcome.end.is_ok() {
                                        &st.ended_ok
                                    } else {
                                        &st.ended_err
                                    };
                                    counter.fetch_add(1, Ordering::Relaxed);
                                    st.outcomes.lock().unwrap().push(outcome);
                                    st.handlers_now.fetch_sub(1, Ordering::Relaxed);
                                    st.settle(n, |e| e.0 -= 1);
                                    drop(permit);
                                });
                            }
                            st.settle(n, |e| e.1 = true);
                        }
                        Err(e) => {
                            st.handshakes_failed.fetch_add(1, Ordering::Relaxed);
                            *st.last_handshake_error.lock().unwrap() = Some(e.to_string());
                            st.changes.bump();
                        }
                    }
                });
            }
        });
        let st = state.clone();
        let sampler = tokio::spawn(async move {
            loop {
                st.sample();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        EchoServer {
            addr,
            client,
            state,
            tasks: vec![accept, sampler],
        }
    }

    /// The address to dial.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The handshake settings a client must use against this server.
    pub fn client_handshake(&self) -> HandshakeConfig {
        self.client.clone()
    }

    /// Every connection that completed its handshake, in order.
    pub fn connections(&self) -> Vec<Connection> {
        self.state.conns.lock().unwrap().clone()
    }

    /// Waits until `n` connections have completed their handshake; returns
    /// the `n`th (1-based).
    ///
    /// # Panics
    /// If that does not happen within [`STALL_LIMIT`].
    pub async fn connection(&self, n: usize) -> Connection {
        let conns = || self.state.conns.lock().unwrap().get(n - 1).cloned();
        let what = || format!("connection {n} never completed its handshake");
        self.state.changes.until(conns, what).await
    }

    /// Waits until connection `n` (1-based) has closed and returns the
    /// reason it closed with. Closed, not gone: after a close of its own
    /// the server may still linger, reading until the peer's end of file
    /// (`Connection::closed` waits for that too).
    ///
    /// # Panics
    /// If it does not close within [`STALL_LIMIT`].
    pub async fn close_reason(&self, n: usize) -> weft_frame::Reason {
        let conn = self.connection(n).await;
        let reason = || conn.close_cause().map(|c| c.reason);
        crate::wait::eventually(reason, || format!("connection {n} still open")).await
    }

    /// Handshakes that failed (garbage, timeout, EOF...).
    pub fn handshakes_failed(&self) -> usize {
        self.state.handshakes_failed.load(Ordering::Relaxed)
    }

    /// The last handshake failure's description.
    pub fn last_handshake_error(&self) -> Option<String> {
        self.state.last_handshake_error.lock().unwrap().clone()
    }

    /// Waits for `n` handshake failures.
    ///
    /// # Panics
    /// If they do not happen within [`STALL_LIMIT`].
    pub async fn wait_handshake_failures(&self, n: usize) {
        let done = || (self.handshakes_failed() >= n).then_some(());
        let what = || {
            format!(
                "{} handshake failures, expected {n}",
                self.handshakes_failed()
            )
        };
        self.state.changes.until(done, what).await;
    }

    /// The largest figures seen so far.
    pub fn peak(&self) -> Peak {
        self.state.sample();
        *self.state.peak.lock().unwrap()
    }

    /// Handlers that finished: (with the peer's explicit end, with an error).
    pub fn handled(&self) -> (u64, u64) {
        (
            self.state.ended_ok.load(Ordering::Relaxed),
            self.state.ended_err.load(Ordering::Relaxed),
        )
    }

    /// How every finished handler's stream ended.
    pub fn outcomes(&self) -> Vec<Outcome> {
        self.state.outcomes.lock().unwrap().clone()
    }

    /// Waits until connection `n` (1-based) can start no more handlers
    /// (its accept loop ended) and every handler it started has finished:
    /// from then on its [`EchoServer::outcomes`] are final.
    ///
    /// # Panics
    /// If that does not happen within [`STALL_LIMIT`].
    pub async fn settled(&self, n: usize) {
        let done = || {
            let settling = self.state.settling.lock().unwrap();
            (settling.get(&n) == Some(&(0, true))).then_some(())
        };
        let what = || {
            format!(
                "connection {n}: {:?}",
                self.state.settling.lock().unwrap().get(&n)
            )
        };
        self.state.changes.until(done, what).await;
    }

    /// Waits for the outcome of `stream_id` on connection `conn`
    /// (1-based).
    ///
    /// # Panics
    /// If it does not come within [`STALL_LIMIT`].
    pub async fn outcome(&self, conn: usize, stream_id: u32) -> Outcome {
        let found = || {
            self.outcomes()
                .into_iter()
                .find(|o| o.conn == conn && o.stream_id == stream_id)
        };
        let what = || format!("no outcome for stream {stream_id} of connection {conn}");
        self.state.changes.until(found, what).await
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn connection_window(config: &Config) -> u64 {
    // Config's fields are private; its Debug output is the only view. The
    // default (1 MiB) is what every test here uses unless it says otherwise.
    let dbg = format!("{config:?}");
    dbg.split("connection_window: ")
        .nth(1)
        .and_then(|s| s.split([',', ' ']).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024 * 1024)
}

async fn echo(conn: usize, stream: Stream, delay: Duration) -> Outcome {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let stream_id = stream.id();
    let (received, end) = crate::pair::echo(stream).await;
    Outcome {
        conn,
        stream_id,
        received,
        end: end.map_err(|e| e.to_string()),
    }
}

/// A well-behaved client on its own connection doing sequential round
/// trips (a unique payload each, its echo checked byte for byte) until
/// dropped.
#[derive(Debug)]
pub struct Bystander {
    completed: Arc<AtomicU64>,
    failed: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
    conn: Connection,
    /// Bumped after every round trip and on the failure.
    changes: Arc<Changes>,
}

impl Bystander {
    /// Connects to `server` and starts the round trips.
    ///
    /// # Panics
    /// If the connection cannot be made.
    pub async fn start(server: &EchoServer) -> Bystander {
        let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut config = Config::default();
        config.handshake(server.client_handshake());
        let (conn, _incoming) = connect(tcp, Role::Client, config).await.unwrap();
        let completed = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let changes = Arc::new(Changes::default());
        let (c, f, s, k, ch) = (
            completed.clone(),
            failed.clone(),
            stop.clone(),
            conn.clone(),
            changes.clone(),
        );
        let task = tokio::spawn(async move {
            let mut seq = 0u64;
            while !s.load(Ordering::Relaxed) {
                seq += 1;
                match round_trip(&k, seq).await {
                    Ok(()) => {
                        c.fetch_add(1, Ordering::Relaxed);
                        ch.bump();
                    }
                    Err(e) => {
                        *f.lock().unwrap() = Some(format!("round trip {seq}: {e}"));
                        ch.bump();
                        return;
                    }
                }
                // Leave the attacker room on a loaded machine.
                tokio::task::yield_now().await;
            }
        });
        let me = Bystander {
            completed,
            failed,
            stop,
            task,
            conn,
            changes,
        };
        me.assert_progress(1).await;
        me
    }

    /// Round trips completed so far.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// Waits for `more` further round trips.
    ///
    /// # Panics
    /// If a round trip failed, or none completed for [`STALL_LIMIT`].
    pub async fn assert_progress(&self, more: u64) {
        let goal = self.completed() + more;
        let done = || {
            if let Some(e) = self.failed.lock().unwrap().clone() {
                panic!("bystander failed: {e}");
            }
            (self.completed() >= goal).then_some(())
        };
        let what = || format!("bystander stalled at {} round trips", self.completed());
        self.changes.until(done, what).await;
    }

    /// Stops, checks that nothing failed, and returns the count.
    ///
    /// # Panics
    /// If a round trip failed.
    pub async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = tokio::time::timeout(STALL_LIMIT, self.task).await;
        if let Some(e) = self.failed.lock().unwrap().clone() {
            panic!("bystander failed: {e}");
        }
        self.completed.load(Ordering::Relaxed)
    }

    /// The bystander's connection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// One checked round trip: the payload carries `seq`, the echo must match.
///
/// # Errors
/// Any stream or connection error, or an echo that differs.
pub async fn round_trip(conn: &Connection, seq: u64) -> Result<(), String> {
    try_round_trip(conn, seq).await.map_err(|(_, e)| e)
}

/// Like [`round_trip`], retrying (up to 100 times, 2 ms apart) while the
/// server refuses the stream retry-safe (`REFUSED_STREAM`: its stream cap
/// is full of streams whose handlers have not finished yet).
///
/// # Errors
/// Any other error, or still refused after the retries.
pub async fn round_trip_retrying(conn: &Connection, seq: u64) -> Result<(), String> {
    for _ in 0..100 {
        match try_round_trip(conn, seq).await {
            Ok(()) => return Ok(()),
            Err((true, _)) => tokio::time::sleep(Duration::from_millis(2)).await,
            Err((false, e)) => return Err(e),
        }
    }
    Err(format!("round trip {seq}: refused 100 times"))
}

/// The round trip; the error says whether it was a retry-safe refusal.
async fn try_round_trip(conn: &Connection, seq: u64) -> Result<(), (bool, String)> {
    let mut payload = seq.to_be_bytes().to_vec();
    payload.extend_from_slice(b"-a-well-behaved-request-body");
    let payload = Bytes::from(payload);
    let mut s = conn
        .open(Metadata::new(), payload.clone(), true)
        .await
        .map_err(|e| (e.is_refused(), format!("open: {e}")))?;
    let mut got = Vec::new();
    loop {
        match s.recv().await {
            Ok(Some(c)) => got.extend_from_slice(&c.data),
            Ok(None) => break,
            Err(e) => return Err((e.is_refused(), format!("recv: {e}"))),
        }
    }
    if got != payload {
        return Err((false, format!("echo mismatch: {got:?}")));
    }
    Ok(())
}
