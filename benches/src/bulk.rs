//! The bulk target (`weft-bulk`): large-message echo throughput, 8 calls in
//! flight on one connection over TCP loopback, for weft (plain and
//! encrypted) and, in the same run, the two baselines it is held to:
//!
//! - `raw`: a tokio `LengthDelimitedCodec` echo, 8 requests pipelined on
//!   one connection (the transport beneath weft plus the codec's copy);
//! - `raw-sealed`: the same with every message sealed by the sender and
//!   opened by the receiver with ring's AES-256-GCM, whole (the bound an
//!   encrypted weft echo is compared with: raw codec plus the AEAD of the
//!   same bytes, twice each way in an echo), sealed where the codec's copy
//!   put it, so it does no copy the raw codec does not.
//!
//! Both baselines are pipelined at each end as weft is: the client writes
//! from one task and reads in another; the server reads (and opens) in
//! one task and frames (and seals) and writes in another, linked by a
//! channel.
//!
//! Two call shapes: `echo` (a unary call whose response is its request)
//! and `stream` (a count-style server-streaming call: an 8-byte request
//! for [`ITEMS`] messages of the cell's size; the raw baselines answer a
//! request with that many frames). Each cell runs for a fixed time and
//! reports response bytes per second (for `echo` the same each way).
//!
//! Two layouts ([`Layout`]): client and server sharing one runtime in one
//! process (multi-thread, the shape `#[tokio::main]` gives, as in `e2e`;
//! what `--profile` runs, so callgrind sees both ends), or split: every
//! mode's server (weft's and the raw baselines' alike) in a process of its
//! own pinned to one core, the client in this one pinned to the other
//! ([`crate::split`]), each on the same runtime.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::codec::{Encoder, FramedRead, LengthDelimitedCodec};
use weft::{CallOptions, Client, Config, EncryptionPolicy, Listener, Router, Status};

use crate::Runtime;
use crate::bulk_latency::Tuning;
use crate::split::ServerProcess;

/// Calls (or pipelined requests) in flight on the one connection.
pub const IN_FLIGHT: usize = 8;

/// The echo method's name.
pub const METHOD: &str = "echo";

/// The count-style server-streaming method's name.
pub const STREAM_METHOD: &str = "count";

/// Messages a `stream` call answers with.
pub const ITEMS: u32 = 8;

/// The call each cell makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A unary echo: the response is the request.
    Echo,
    /// A small request answered by [`ITEMS`] messages of the cell's size.
    Stream,
}

impl Shape {
    /// Both shapes, in table order.
    pub const ALL: [Shape; 2] = [Shape::Echo, Shape::Stream];

    /// Its name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Echo => "echo",
            Shape::Stream => "stream",
        }
    }

    /// The shape called `name`.
    pub fn parse(name: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Response messages per call.
    pub fn items(self) -> u32 {
        match self {
            Shape::Echo => 1,
            Shape::Stream => ITEMS,
        }
    }
}

/// What carries the echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// tokio's `LengthDelimitedCodec`, pipelined.
    Raw,
    /// The raw codec, each message sealed and opened with AES-256-GCM.
    RawSealed,
    /// weft, encryption and compression off.
    Plain,
    /// weft, AES-256-GCM, compression off.
    Encrypted,
}

impl Mode {
    /// Every mode, in table order.
    pub const ALL: [Mode; 4] = [Mode::Raw, Mode::Plain, Mode::RawSealed, Mode::Encrypted];

    /// Its name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Raw => "raw",
            Mode::RawSealed => "raw-sealed",
            Mode::Plain => "plain",
            Mode::Encrypted => "encrypted",
        }
    }

    /// The mode called `name`.
    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The baseline a weft mode is compared with (itself for a baseline).
    pub fn baseline(self) -> Mode {
        match self {
            Mode::Plain | Mode::Raw => Mode::Raw,
            Mode::Encrypted | Mode::RawSealed => Mode::RawSealed,
        }
    }
}

/// How long a cell runs: for a time, or for a number of echoes (a profile).
#[derive(Debug, Clone, Copy)]
pub enum Length {
    /// Echoes until this much time has passed.
    Time(Duration),
    /// Exactly this many echoes.
    Echoes(u64),
}

/// The weft configuration of a bulk cell: compression off, messages and
/// windows raised to the message size (so flow control is not what is
/// measured), encryption as the mode says, frame payloads up to `frame`
/// bytes if given (else the default 64 KiB).
pub fn config(size: usize, encrypted: bool, frame: Option<u32>) -> Config {
    let size = u32::try_from(size).expect("message size fits u32");
    let stream = size.max(256 * 1024).saturating_add(64 * 1024);
    let conn = stream.saturating_mul(IN_FLIGHT as u32).max(1024 * 1024);
    let config = match frame {
        Some(bytes) => Config::new().max_frame_payload(bytes),
        None => Config::new(),
    };
    config
        .encryption(if encrypted {
            EncryptionPolicy::Required
        } else {
            EncryptionPolicy::Off
        })
        .compression(false)
        .max_message(size.max(4 * 1024 * 1024))
        .stream_window(stream)
        .connection_window(conn)
}

/// Where a cell's client and server run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Both in this process, on one runtime of this kind (multi-thread
    /// by default; current-thread makes a `--profile` under callgrind
    /// repeat exactly, as no two threads race for the socket's bytes).
    Shared(Runtime),
    /// The server in a process of its own pinned to
    /// [`SERVER_CORE`](crate::split::SERVER_CORE), the client in this
    /// process (pinned by the caller, see
    /// [`pin_client`](crate::split::pin_client)), each on this runtime.
    Split(Runtime),
}

impl Layout {
    /// One line for a report.
    pub fn description(self) -> String {
        match self {
            Layout::Shared(rt) => format!(
                "layout: client and server in one process, one {} runtime",
                rt.name()
            ),
            Layout::Split(rt) => format!(
                "layout: split, each server in its own process on core {}, the client on core {}, \
                 each on a {} runtime",
                crate::split::SERVER_CORE,
                crate::split::CLIENT_CORE,
                rt.name()
            ),
        }
    }

    /// Runs `client` against `server`, started here (shared) or in a
    /// server process (split) whose `main` hands its arguments to
    /// [`serve`].
    pub(crate) fn run<C, T>(self, server: Server, client: C) -> T
    where
        C: AsyncFnOnce(SocketAddr) -> T,
    {
        match self {
            Layout::Shared(runtime) => runtime.build().block_on(async {
                let addr = server.start().await;
                client(addr).await
            }),
            Layout::Split(runtime) => {
                let mut args = vec!["--serve".to_string()];
                args.extend(server.args());
                args.extend(["--runtime".into(), runtime.name().into()]);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let server = ServerProcess::start("weft-bulk", &args)
                    .unwrap_or_else(|e| panic!("split layout: {e}"));
                runtime.build().block_on(client(server.addr))
            }
        }
    }
}

/// The server a measurement runs against, and its description on a split
/// layout's server-process command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// A throughput cell's ([`run`]).
    Cell {
        /// What carries the calls.
        mode: Mode,
        /// The calls answered.
        shape: Shape,
        /// Message bytes.
        size: usize,
        /// weft's largest frame payload, if not the default.
        frame: Option<u32>,
    },
    /// The latency run's ([`small_calls`](crate::bulk_latency::small_calls)).
    Latency {
        /// What its connections change from the defaults.
        tuning: Tuning,
    },
}

impl Server {
    /// Its command-line words (what [`Server::parse`] reads back).
    pub fn args(self) -> Vec<String> {
        let (mut args, frame) = match self {
            Server::Cell {
                mode,
                shape,
                size,
                frame,
            } => (
                vec![
                    "cell".to_string(),
                    mode.name().into(),
                    shape.name().into(),
                    size.to_string(),
                ],
                frame,
            ),
            Server::Latency { tuning } => {
                // Both optional numbers, "-" for none, so each keeps its place.
                let word = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
                let words = [
                    "latency".to_string(),
                    word(tuning.frame),
                    word(tuning.window),
                ];
                return words.to_vec();
            }
        };
        args.extend(frame.map(|f| f.to_string()));
        args
    }

    /// The server `args` ([`Server::args`]) describe.
    pub fn parse(args: &[String]) -> Result<Server, String> {
        let bad = || format!("--serve {}: not a bulk server", args.join(" "));
        let words: Vec<&str> = args.iter().map(String::as_str).collect();
        let frame = |f: &[&str]| match f {
            [] => Ok(None),
            [f] => f.parse().map(Some).map_err(|_| bad()),
            _ => Err(bad()),
        };
        match words[..] {
            ["cell", mode, shape, size, ref frame_arg @ ..] => Ok(Server::Cell {
                mode: Mode::parse(mode).ok_or_else(bad)?,
                shape: Shape::parse(shape).ok_or_else(bad)?,
                size: size.parse().map_err(|_| bad())?,
                frame: frame(frame_arg)?,
            }),
            ["latency", frame, window] => {
                let word = |w: &str| match w {
                    "-" => Ok(None),
                    n => n.parse().map(Some).map_err(|_| bad()),
                };
                let tuning = Tuning {
                    frame: word(frame)?,
                    window: word(window)?,
                };
                Ok(Server::Latency { tuning })
            }
            _ => Err(bad()),
        }
    }

    /// Starts it on the current runtime (its tasks spawned there, serving
    /// until the runtime ends) and returns its address.
    pub async fn start(self) -> SocketAddr {
        match self {
            Server::Cell {
                mode,
                shape,
                size,
                frame,
            } => start(mode, shape, size, frame).await,
            Server::Latency { tuning } => crate::bulk_latency::start(tuning).await,
        }
    }
}

/// A server process's `main` (`weft-bulk --serve ARGS --runtime RT`):
/// serves what `args` describe ([`Server::parse`]) on `runtime` until
/// standard input closes.
pub fn serve(args: &[String], runtime: Runtime) -> Result<(), String> {
    let server = Server::parse(args)?;
    crate::split::serve(runtime, || server.start());
    Ok(())
}

/// One cell: calls of `shape` with `size`-byte messages in `mode` for
/// `length` (weft's frames up to `frame` bytes if given), client and
/// server laid out as `layout` says. Returns the response messages
/// received and the time they took.
pub fn run(
    mode: Mode,
    shape: Shape,
    size: usize,
    length: Length,
    frame: Option<u32>,
    layout: Layout,
) -> (u64, Duration) {
    let server = Server::Cell {
        mode,
        shape,
        size,
        frame,
    };
    layout.run(server, async |addr| match mode {
        Mode::Raw | Mode::RawSealed => {
            raw(addr, mode == Mode::RawSealed, shape, size, length).await
        }
        Mode::Plain | Mode::Encrypted => {
            weft_calls(addr, mode == Mode::Encrypted, shape, size, length, frame).await
        }
    })
}

/// Starts a cell's server on the current runtime (its tasks spawned there,
/// serving until the runtime ends) and returns its address.
async fn start(mode: Mode, shape: Shape, size: usize, frame: Option<u32>) -> SocketAddr {
    match mode {
        Mode::Raw | Mode::RawSealed => raw_server(mode == Mode::RawSealed, shape, size).await,
        Mode::Plain | Mode::Encrypted => {
            let config = config(
                size * shape.items() as usize,
                mode == Mode::Encrypted,
                frame,
            );
            let listener = Listener::bind("127.0.0.1:0").await.expect("bind loopback");
            let addr = listener.local_addr().expect("local addr");
            tokio::spawn(weft::serve(
                listener,
                router(size),
                config,
                std::future::pending(),
            ));
            addr.parse().expect("a TCP address")
        }
    }
}

/// The message sent: `size` bytes, a pattern so a wrong echo shows.
pub fn message(size: usize) -> Bytes {
    (0..size)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// Counts echoes and says when to stop.
struct Tally {
    done: AtomicU64,
    stop: AtomicBool,
    length: Length,
}

impl Tally {
    fn new(length: Length) -> Arc<Tally> {
        Arc::new(Tally {
            done: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            length,
        })
    }

    /// Claims the right to start one more echo.
    fn claim(&self, started: &AtomicU64) -> bool {
        match self.length {
            Length::Time(_) => !self.stop.load(Ordering::Relaxed),
            Length::Echoes(n) => started.fetch_add(1, Ordering::Relaxed) < n,
        }
    }

    /// Stops a timed cell after its time.
    async fn time(self: Arc<Self>) {
        if let Length::Time(d) = self.length {
            tokio::time::sleep(d).await;
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// The bench's weft service: `echo` and `count` (answers an 8-byte count
/// with that many `size`-byte messages).
pub fn router(size: usize) -> Router {
    let item = message(size);
    Router::new()
        .unary(METHOD, |_ctx, req: Bytes| async move {
            // The echo hands the request's buffer back as the response.
            Ok::<_, Status>(req)
        })
        .server_streaming(STREAM_METHOD, move |_ctx, req: Bytes, mut sink| {
            let item = item.clone();
            async move {
                let n = <[u8; 8]>::try_from(&req[..])
                    .map(u64::from_be_bytes)
                    .map_err(|_| Status::invalid_argument("an 8-byte count"))?;
                for _ in 0..n.min(1024) {
                    sink.send(item.clone()).await?;
                }
                Ok(())
            }
        })
}

/// One call of `shape` on `client`; the response messages it received.
pub async fn call(client: &Client, shape: Shape, msg: &Bytes) -> u64 {
    match shape {
        Shape::Echo => {
            let reply = client.unary(METHOD, msg.clone()).await.expect("echo");
            assert_eq!(reply.len(), msg.len());
            1
        }
        Shape::Stream => {
            let count = Bytes::copy_from_slice(&u64::from(ITEMS).to_be_bytes());
            let mut s = client
                .server_streaming(STREAM_METHOD, count, &CallOptions::new())
                .await
                .expect("count");
            let mut got = 0;
            while let Some(m) = s.message().await.expect("an item") {
                assert_eq!(m.len(), msg.len());
                got += 1;
            }
            assert_eq!(got, u64::from(ITEMS));
            got
        }
    }
}

async fn weft_calls(
    addr: SocketAddr,
    encrypted: bool,
    shape: Shape,
    size: usize,
    length: Length,
    frame: Option<u32>,
) -> (u64, Duration) {
    // Windows and limits sized to the whole response, as `config` sizes
    // them to the message: flow control is not what is measured.
    let config = config(size * shape.items() as usize, encrypted, frame);
    let client: Client = weft::connect(&addr.to_string(), &config)
        .await
        .expect("connect");
    assert_eq!(client.connection().negotiated().encrypted, encrypted);
    let msg = message(size);
    // One warm-up round, not counted.
    let reply = client.unary(METHOD, msg.clone()).await.expect("echo");
    assert_eq!(reply, msg);
    call(&client, shape, &msg).await;
    let tally = Tally::new(length);
    let started = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let timer = tokio::spawn(tally.clone().time());
    let callers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (client, msg, tally, started) =
                (client.clone(), msg.clone(), tally.clone(), started.clone());
            tokio::spawn(async move {
                while tally.claim(&started) {
                    let got = call(&client, shape, &msg).await;
                    tally.done.fetch_add(got, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for c in callers {
        c.await.expect("a caller panicked");
    }
    let elapsed = t0.elapsed();
    timer.abort();
    (tally.done.load(Ordering::Relaxed), elapsed)
}

/// ring AES-256-GCM with a counter nonce, sealing or opening whole messages.
struct Aead {
    key: LessSafeKey,
    counter: u64,
}

impl Aead {
    fn new() -> Aead {
        let key = UnboundKey::new(&AES_256_GCM, &[7; 32]).expect("a 32-byte key");
        Aead {
            key: LessSafeKey::new(key),
            counter: 0,
        }
    }

    fn nonce(&mut self) -> Nonce {
        self.counter += 1;
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&self.counter.to_be_bytes());
        Nonce::assume_unique_for_key(n)
    }

    /// Opens `msg` in place (the sender's counter runs in step with ours).
    fn open(&mut self, msg: &mut BytesMut) {
        let nonce = self.nonce();
        let len = self
            .key
            .open_in_place(nonce, Aad::empty(), msg)
            .expect("open")
            .len();
        msg.truncate(len);
    }
}

/// The raw codec's framing for `size`-byte messages.
fn raw_codec(size: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(size + 1024)
        .new_codec()
}

/// How a raw baseline's side frames what it sends: the codec's encode
/// (its 4-byte length and its one copy of the message into the write
/// buffer), and with a sealer, that copy sealed where it lies and the tag
/// appended. So `raw-sealed` does exactly `raw`'s byte work plus the AEAD
/// of the same bytes: no copy of its own.
struct Framer {
    codec: LengthDelimitedCodec,
    sealer: Option<Aead>,
}

impl Framer {
    fn new(size: usize, sealed: bool) -> Framer {
        Framer {
            codec: raw_codec(size),
            sealer: sealed.then(Aead::new),
        }
    }

    /// Appends `msg`'s frame (sealed if this side seals) to `buf`.
    fn frame(&mut self, msg: &Bytes, buf: &mut BytesMut) {
        let Some(sealer) = &mut self.sealer else {
            self.codec.encode(msg.clone(), buf).expect("encode");
            return;
        };
        // The codec's layout (a big-endian u32 length, its default), for
        // the message and its tag; the peer's codec reads it back.
        let len = u32::try_from(msg.len() + AES_256_GCM.tag_len()).expect("a u32 length");
        buf.extend_from_slice(&len.to_be_bytes());
        let at = buf.len();
        buf.extend_from_slice(msg);
        let nonce = sealer.nonce();
        let tag = sealer
            .key
            .seal_in_place_separate_tag(nonce, Aad::empty(), &mut buf[at..])
            .expect("seal");
        buf.extend_from_slice(tag.as_ref());
    }
}

/// The raw baselines' server: `echo` sends each message back; `stream`
/// answers a request with [`ITEMS`] frames of the message. Serves every
/// connection until the runtime ends.
async fn raw_server(sealed: bool, shape: Shape, size: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(raw_serve(sock, sealed, shape, size));
        }
    });
    addr
}

/// One connection of [`raw_server`], pipelined as weft's own reader and
/// writer are: this task reads (and opens) requests and hands them to a
/// writer task over a channel, which frames (and seals) the answers and
/// writes them. So the socket is read while an answer is being written,
/// and an answer is written while the next request arrives; a serial loop
/// (read, open, seal, write, one after another) left either direction
/// idle while the other worked, and was no fair bound for weft.
async fn raw_serve(sock: TcpStream, sealed: bool, shape: Shape, size: usize) {
    sock.set_nodelay(true).expect("nodelay");
    let (r, w) = sock.into_split();
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    tokio::spawn(raw_answer(w, rx, sealed, shape, size));
    let mut reader = FramedRead::new(r, raw_codec(size));
    let mut opener = Aead::new();
    while let Some(Ok(mut req)) = reader.next().await {
        if sealed {
            opener.open(&mut req);
        }
        if tx.send(req.freeze()).await.is_err() {
            return;
        }
    }
}

/// [`raw_serve`]'s writer: answers each request `requests` hands it
/// (`echo`: the request; `stream`: [`ITEMS`] messages) until the reader
/// ends or the socket fails.
async fn raw_answer(
    mut w: OwnedWriteHalf,
    mut requests: mpsc::Receiver<Bytes>,
    sealed: bool,
    shape: Shape,
    size: usize,
) {
    let (mut framer, mut buf) = (Framer::new(size, sealed), BytesMut::new());
    let item = message(size);
    while let Some(req) = requests.recv().await {
        let reply = match shape {
            Shape::Echo => &req,
            Shape::Stream => &item,
        };
        for _ in 0..shape.items() {
            framer.frame(reply, &mut buf);
            if w.write_all(&buf).await.is_err() {
                return;
            }
            buf.clear();
        }
    }
}

/// The raw baselines' client: `echo` sends the message and waits for it
/// back; `stream` sends an 8-byte request and counts the [`ITEMS`] frames
/// answering it. [`IN_FLIGHT`] requests pipelined.
async fn raw(
    addr: SocketAddr,
    sealed: bool,
    shape: Shape,
    size: usize,
    length: Length,
) -> (u64, Duration) {
    let items = shape.items();
    let sock = TcpStream::connect(addr).await.expect("connect");
    sock.set_nodelay(true).expect("nodelay");
    let (r, mut w) = sock.into_split();
    let msg = match shape {
        Shape::Echo => message(size),
        Shape::Stream => Bytes::copy_from_slice(&u64::from(items).to_be_bytes()),
    };
    let tally = Tally::new(length);
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let sent = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let timer = tokio::spawn(tally.clone().time());
    let writer = {
        let (tally, slots, sent, msg) = (tally.clone(), slots.clone(), sent.clone(), msg.clone());
        let started = AtomicU64::new(0);
        tokio::spawn(async move {
            let (mut framer, mut buf) = (Framer::new(size, sealed), BytesMut::new());
            while tally.claim(&started) {
                slots.acquire().await.expect("open semaphore").forget();
                framer.frame(&msg, &mut buf);
                w.write_all(&buf).await.expect("write");
                buf.clear();
                sent.fetch_add(1, Ordering::Relaxed);
            }
            w
        })
    };
    let mut reader = FramedRead::new(r, raw_codec(size));
    let mut opener = Aead::new();
    let mut writer = writer;
    let mut writing = true;
    // Frames of the current call's answer received so far.
    let mut part = 0;
    loop {
        let answered = tally.done.load(Ordering::Relaxed);
        if !writing && answered == sent.load(Ordering::Relaxed) * u64::from(items) {
            break;
        }
        let next = if writing {
            tokio::select! {
                next = reader.next() => next,
                w = &mut writer => {
                    drop(w.expect("the raw writer panicked"));
                    writing = false;
                    continue;
                }
            }
        } else {
            reader.next().await
        };
        let Some(Ok(mut reply)) = next else {
            panic!("raw echo connection ended");
        };
        if sealed {
            opener.open(&mut reply);
        }
        assert_eq!(reply.len(), size);
        tally.done.fetch_add(1, Ordering::Relaxed);
        part += 1;
        if part == items {
            part = 0;
            slots.add_permits(1);
        }
    }
    let elapsed = t0.elapsed();
    timer.abort();
    (tally.done.load(Ordering::Relaxed), elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The raw baselines' frames read back through the codec as the
    /// message itself, sealed or not: `raw-sealed` seals the codec's copy
    /// where it lies, and its peer opens what its codec reads.
    #[test]
    fn a_raw_frame_reads_back_as_its_message_sealed_or_not() {
        use tokio_util::codec::Decoder;
        let msg = message(1000);
        for sealed in [false, true] {
            let (mut framer, mut buf) = (Framer::new(msg.len(), sealed), BytesMut::new());
            let (mut codec, mut opener) = (raw_codec(msg.len()), Aead::new());
            for _ in 0..3 {
                framer.frame(&msg, &mut buf);
            }
            for _ in 0..3 {
                let mut got = codec.decode(&mut buf).expect("a frame").expect("whole");
                if sealed {
                    assert_ne!(got[..msg.len()], msg[..], "sealed bytes differ");
                    opener.open(&mut got);
                }
                assert_eq!(got, msg, "sealed: {sealed}");
            }
            assert!(buf.is_empty());
        }
    }

    /// A split layout's server process rebuilds the server its parent
    /// described, every field included; anything else is refused.
    #[test]
    fn a_servers_arguments_name_it_exactly() {
        let servers = [
            Server::Cell {
                mode: Mode::RawSealed,
                shape: Shape::Stream,
                size: 1 << 20,
                frame: None,
            },
            Server::Cell {
                mode: Mode::Encrypted,
                shape: Shape::Echo,
                size: 65536,
                frame: Some(16384),
            },
            Server::Latency {
                tuning: Tuning::default(),
            },
            Server::Latency {
                tuning: Tuning {
                    frame: Some(32768),
                    window: None,
                },
            },
            Server::Latency {
                tuning: Tuning {
                    frame: None,
                    window: Some(65536),
                },
            },
        ];
        for server in servers {
            assert_eq!(Server::parse(&server.args()), Ok(server));
        }
        for bad in [
            &["cell", "plain", "echo"][..],
            &["cell", "sealed", "echo", "64"],
            &["cell", "plain", "echo", "64", "1", "2"],
            &["latency", "big"],
            &["latency", "-"],
            &["latency", "-", "big"],
            &[],
        ] {
            let bad: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(Server::parse(&bad).is_err(), "{bad:?}");
        }
    }
}
