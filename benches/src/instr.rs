//! The cells of the instruction gate (`cargo xtask instr --check`) and the
//! run the `weft-instr` binary makes of one of them, for valgrind's
//! callgrind to count.
//!
//! A cell is one way of calling (the raw [`weft::Client`] unary call, the
//! typed call of a `#[weft::service]` client over a `Client`, a
//! [`weft::Channel`] unary call, the typed call over a `Channel`) in one case (sequential, joined-64 and
//! spawned-64, each plain and encrypted), over TCP loopback, nil request, the [`e2e`] server. A run
//! makes three phases of calls (warm-up, `n1`, `n2` units per caller, see
//! [`drive`](crate::drive)) and calls [`cut`] at every boundary; xtask runs it under
//! `valgrind --tool=callgrind --dump-before=<cut>`, so each phase's
//! instructions land in a profile of their own, and
//! `(Ir(n2 phase) - Ir(n1 phase)) / (calls(n2) - calls(n1))` is the cost of
//! one call with every fixed cost (start-up, connection, the first and last
//! call of a phase) cancelled out.
//!
//! Deterministic by construction: one current-thread runtime (no thread
//! scheduling), no timing in the loop, fixed counts; xtask pins the rest
//! (address layout, environment, a virtual clock: docs/TESTING.md), so the
//! same binary counts the same instructions on every run.
//! [`Layout::Apart`] (client and server on a thread each, for
//! `--by-layer`) gives up the first for a per-side profile.

use weft::{Bytes, Channel, Client, Context, Listener, Router, Status};

use crate::drive::{Caller, Marks, run_phases};
use crate::e2e::{self, METHOD, RESPONSE};
use crate::{Runtime, Shape};

/// The function whose every entry cuts the profile
/// (`valgrind --dump-before=`[`CUT_SYMBOL`]).
#[inline(never)]
pub fn cut(phase: usize) {
    std::hint::black_box(("weft-instr phase boundary", phase));
}

/// [`cut`]'s name as callgrind shows it (a pattern for `--dump-before`).
pub const CUT_SYMBOL: &str = "weft_benches::instr::cut";

/// How the calls are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `weft::Client::unary` (the `weft_rpc` client), raw bytes.
    Raw,
    /// The generated client of a `#[weft::service]` trait (JSON codec).
    Typed,
    /// `weft::Channel::unary`: the pooled, reconnecting client.
    Channel,
    /// The generated client over a `weft::Channel` (its default caller,
    /// what users hold): compared with [`Api::Channel`], the cost of the
    /// typed layer alone.
    TypedChannel,
    /// `weft::Channel::unary` of the typed method with its JSON request
    /// bytes: the raw call a typed call over a `Channel` wraps (same
    /// method, same server, same bytes), so [`Api::TypedChannel`] against
    /// it is what the typed client alone adds.
    ChannelJson,
    /// `weft::Client::unary` of the typed method with its JSON request
    /// bytes: the raw call the typed call over a `Client` wraps (same
    /// method, same server, same bytes), so [`Api::Typed`] against it is
    /// what the typed client alone adds, and [`Api::Raw`] against it what
    /// a 4-byte request and a 1-byte reply cost over nil bytes.
    RawJson,
}

/// What is called, how many at once, and whether encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// One call at a time, encryption and compression off.
    Sequential,
    /// One call at a time, AES-256-GCM (compression negotiated).
    SequentialEncrypted,
    /// 64 calls joined in one task, plain.
    Joined64,
    /// 64 spawned callers on one client, plain.
    Spawned64,
    /// [`Case::Joined64`] with AES-256-GCM (compression negotiated): with
    /// the sequential pair, encrypted against plain can be read in every
    /// shape, where many frames share a write.
    Joined64Encrypted,
    /// [`Case::Spawned64`] with AES-256-GCM (compression negotiated).
    Spawned64Encrypted,
}

impl Api {
    /// Every API, in table order.
    pub const ALL: [Api; 6] = [
        Api::Raw,
        Api::Typed,
        Api::Channel,
        Api::TypedChannel,
        Api::ChannelJson,
        Api::RawJson,
    ];

    /// Its name in cell names.
    pub fn name(self) -> &'static str {
        match self {
            Api::Raw => "raw",
            Api::Typed => "typed",
            Api::Channel => "channel",
            Api::TypedChannel => "typed-channel",
            Api::ChannelJson => "channel-json",
            Api::RawJson => "raw-json",
        }
    }
}

impl Case {
    /// Every case, in table order.
    pub const ALL: [Case; 6] = [
        Case::Sequential,
        Case::SequentialEncrypted,
        Case::Joined64,
        Case::Spawned64,
        Case::Joined64Encrypted,
        Case::Spawned64Encrypted,
    ];

    /// Its name in cell names.
    pub fn name(self) -> &'static str {
        match self {
            Case::Sequential => "sequential",
            Case::SequentialEncrypted => "sequential-encrypted",
            Case::Joined64 => "joined-64",
            Case::Spawned64 => "spawned-64",
            Case::Joined64Encrypted => "joined-64-encrypted",
            Case::Spawned64Encrypted => "spawned-64-encrypted",
        }
    }

    /// The call shape.
    pub fn shape(self) -> Shape {
        match self {
            Case::Sequential | Case::SequentialEncrypted => Shape::Sequential,
            Case::Joined64 | Case::Joined64Encrypted => Shape::Joined(64),
            Case::Spawned64 | Case::Spawned64Encrypted => Shape::Spawned(64),
        }
    }

    /// Whether the connection is encrypted.
    pub fn encrypted(self) -> bool {
        matches!(
            self,
            Case::SequentialEncrypted | Case::Joined64Encrypted | Case::Spawned64Encrypted
        )
    }
}

/// One gated measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// How calls are made.
    pub api: Api,
    /// In which case.
    pub case: Case,
}

impl Cell {
    /// Every cell, in table order (API by API).
    pub fn all() -> Vec<Cell> {
        Api::ALL
            .into_iter()
            .flat_map(|api| Case::ALL.map(|case| Cell { api, case }))
            .collect()
    }

    /// `api/case`, e.g. `raw/joined-64`.
    pub fn name(self) -> String {
        format!("{}/{}", self.api.name(), self.case.name())
    }

    /// The cell named `name` ([`Cell::name`]).
    pub fn parse(name: &str) -> Option<Cell> {
        Cell::all().into_iter().find(|c| c.name() == name)
    }

    /// Units per caller of its warm-up and its two measured phases: 4,000
    /// calls measured sequentially, 4,096 in the 64-call shapes (a unit is
    /// then 64 calls), about 2 s of callgrind per cell on the CI machine;
    /// the figure is exact at any count, larger ones only cost time.
    pub fn units(self) -> [usize; 3] {
        match self.case.shape() {
            Shape::Sequential => [200, 1000, 5000],
            Shape::Joined(_) | Shape::Spawned(_) => [4, 16, 80],
        }
    }
}

/// Where the server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Client and server on one current-thread runtime (the gate: nothing
    /// depends on thread scheduling).
    Together,
    /// The server on a current-thread runtime of its own thread, the client
    /// on the calling thread's (`--by-layer`, with callgrind's
    /// `--separate-threads=yes`: one profile per side).
    Apart,
}

/// Calls made in each phase of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calls {
    /// Warm-up calls (not counted).
    pub warm_up: usize,
    /// Calls of the first measured phase.
    pub n1: usize,
    /// Calls of the second measured phase.
    pub n2: usize,
}

/// A typed service with one unary method, answering 1 to nil.
#[weft::service(package = "instr")]
pub trait Count {
    /// Answers 1.
    async fn one(&self, ctx: Context, request: ()) -> Result<u32, Status>;
}

/// The [`Count`] server's implementation.
#[derive(Debug, Clone, Copy)]
struct One;

impl Count for One {
    async fn one(&self, _ctx: Context, _request: ()) -> Result<u32, Status> {
        Ok(1)
    }
}

/// The raw call of the [`e2e`] server's method.
impl Caller for Client {
    async fn call(&self) {
        let body = self.unary(METHOD, Bytes::new()).await.expect("weft call");
        assert_eq!(body, RESPONSE);
    }
}

impl Caller for CountClient<Client> {
    async fn call(&self) {
        assert_eq!(self.one(()).await.expect("typed call"), 1);
    }
}

impl Caller for CountClient<Channel> {
    async fn call(&self) {
        assert_eq!(self.one(()).await.expect("typed channel call"), 1);
    }
}

impl Caller for Channel {
    async fn call(&self) {
        let body = self
            .unary(METHOD, Bytes::new())
            .await
            .expect("channel call");
        assert_eq!(body, RESPONSE);
    }
}

/// A raw unary call of bytes: [`Client::unary`] or [`Channel::unary`].
trait UnaryBytes: Clone + Send + Sync + 'static {
    /// Calls `method` with `body`.
    fn unary_bytes(
        &self,
        method: &'static str,
        body: Bytes,
    ) -> impl Future<Output = Result<Bytes, Status>> + Send;
}

impl UnaryBytes for Client {
    fn unary_bytes(
        &self,
        method: &'static str,
        body: Bytes,
    ) -> impl Future<Output = Result<Bytes, Status>> + Send {
        self.unary(method, body)
    }
}

impl UnaryBytes for Channel {
    fn unary_bytes(
        &self,
        method: &'static str,
        body: Bytes,
    ) -> impl Future<Output = Result<Bytes, Status>> + Send {
        self.unary(method, body)
    }
}

/// [`Api::ChannelJson`]'s and [`Api::RawJson`]'s caller: the typed method
/// called raw, with its JSON request bytes.
#[derive(Clone)]
struct JsonBytes<C>(C);

impl<C: UnaryBytes> Caller for JsonBytes<C> {
    async fn call(&self) {
        let body = self
            .0
            .unary_bytes(CountMethods::ONE, Bytes::from_static(b"null"))
            .await
            .expect("raw call of the typed method");
        assert_eq!(body, &b"1"[..]);
    }
}

/// Cuts the profile at every phase boundary.
struct Cuts;

impl Marks for Cuts {
    fn mark(&mut self, phase: usize) {
        cut(phase);
    }
}

/// Runs `cell`: `units` (warm-up, n1, n2) units per caller, cutting the
/// profile between phases. Returns the calls each phase made.
pub fn run(cell: Cell, layout: Layout, units: [usize; 3]) -> Calls {
    let config = e2e::config(cell.case.encrypted());
    let router = || e2e::router().add_service(CountServer::new(One));
    let (server, addr) = match layout {
        Layout::Together => (None, None),
        Layout::Apart => {
            let (server, addr) = Server::start(router(), config.clone());
            (Some(server), Some(addr))
        }
    };
    Runtime::CurrentThread.build().block_on(async {
        let addr = match addr {
            Some(addr) => addr,
            None => serve(router(), config.clone()).await,
        };
        let shape = cell.case.shape();
        let client = weft::connect(&addr, &config).await.expect("connect");
        assert_eq!(
            client.connection().negotiated().encrypted,
            cell.case.encrypted()
        );
        match cell.api {
            Api::Raw => run_phases(client, shape, &units, Cuts).await,
            Api::Typed => run_phases(CountClient::new(client), shape, &units, Cuts).await,
            Api::Channel => {
                let channel = Channel::new(&addr, &config).expect("channel");
                run_phases(channel, shape, &units, Cuts).await
            }
            Api::TypedChannel => {
                let channel = Channel::new(&addr, &config).expect("channel");
                run_phases(CountClient::new(channel), shape, &units, Cuts).await
            }
            Api::ChannelJson => {
                let channel = Channel::new(&addr, &config).expect("channel");
                run_phases(JsonBytes(channel), shape, &units, Cuts).await
            }
            Api::RawJson => run_phases(JsonBytes(client), shape, &units, Cuts).await,
        };
    });
    drop(server);
    let calls = |u: usize| u * cell.case.shape().callers();
    Calls {
        warm_up: calls(units[0]),
        n1: calls(units[1]),
        n2: calls(units[2]),
    }
}

/// Serves `router` on a free loopback port from the current runtime; the
/// server ends with the runtime.
async fn serve(router: Router, config: weft::Config) -> String {
    let listener = Listener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(weft::serve(
        listener,
        router,
        config,
        std::future::pending(),
    ));
    addr
}

/// A server on a thread and current-thread runtime of its own; dropping
/// it stops it and joins the thread.
struct Server {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(router: Router, config: weft::Config) -> (Server, String) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (tell, told) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            Runtime::CurrentThread.build().block_on(async move {
                let listener = Listener::bind("127.0.0.1:0").await.expect("bind");
                tell.send(listener.local_addr().expect("local addr"))
                    .expect("the client waits for the address");
                weft::serve(listener, router, config, async {
                    let _ = stopped.await;
                })
                .await
                .expect("serve");
            });
        });
        let addr = told.recv().expect("the server thread binds");
        let server = Server {
            stop: Some(stop),
            thread: Some(thread),
        };
        (server, addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_names_round_trip() {
        assert_eq!(Cell::all().len(), 36);
        for cell in Cell::all() {
            assert_eq!(Cell::parse(&cell.name()), Some(cell));
        }
        assert_eq!(Cell::parse("raw/joined-8"), None);
    }

    /// Every cell answers in both layouts (tiny counts: a debug build).
    #[test]
    fn every_cell_runs_in_both_layouts() {
        for layout in [Layout::Together, Layout::Apart] {
            for cell in Cell::all() {
                let calls = run(cell, layout, [1, 1, 2]);
                let k = cell.case.shape().callers();
                assert_eq!((calls.n1, calls.n2), (k, 2 * k), "{}", cell.name());
            }
        }
    }
}
#[cfg(test)]
mod future_sizes {
    use super::*;

    /// What a raw `Channel` call holds beside the `Client` call it wraps:
    /// the call's options (16 bytes), its attempt (the method's key 24,
    /// the request kept for a retry 32), the channel (8), the lease (8),
    /// and the state's tag and drop flags (8). At 104 (a lease of two
    /// words), the call future (232 bytes) wrapped in a caller's `async fn`
    /// (248) made the copy `join_all` takes into a task's `Option` 264
    /// bytes, past the 256 where glibc's `memcpy` leaves its short path
    /// (about 21 instructions a call at joined-64).
    const CHANNEL_STATE: usize = 96;

    /// Every byte of a call's future is copied each time it is moved (into
    /// a caller's state, a join, a spawn), so a `Channel` call must hold
    /// the `Client` call it wraps once, plus its retry loop's state
    /// ([`CHANNEL_STATE`] at most), and a typed call no more than the raw
    /// call. A wrapper that takes the call as an `async fn` argument holds
    /// it twice (the `Channel`'s did: 2,336 bytes against the client's 728).
    #[test]
    fn a_channel_call_holds_the_client_call_once_and_typing_adds_nothing() {
        Runtime::CurrentThread.build().block_on(async {
            let config = e2e::config(false);
            let addr = serve(e2e::router(), config.clone()).await;
            let client = weft::connect(&addr, &config).await.expect("connect");
            let channel = Channel::new(&addr, &config).expect("channel");
            let typed = CountClient::new(channel.clone());
            let client_call = std::mem::size_of_val(&client.unary(METHOD, Bytes::new()));
            let channel_call = std::mem::size_of_val(&channel.unary(METHOD, Bytes::new()));
            let typed_call = std::mem::size_of_val(&typed.one(()));
            assert!(
                channel_call <= client_call + CHANNEL_STATE,
                "a Channel call is {channel_call} bytes, its Client call {client_call}: \
                 more than {CHANNEL_STATE} of its own"
            );
            assert!(
                typed_call <= channel_call,
                "a typed call is {typed_call} bytes, the raw Channel call {channel_call}"
            );
        });
    }
}
