//! The bulk target (`weft-bulk`): large-message echo throughput, 8 calls in
//! flight on one connection over TCP loopback, for weft (plain and
//! encrypted) and, in the same run, the two baselines it is held to:
//!
//! - `raw`: a tokio `LengthDelimitedCodec` echo, 8 requests pipelined on
//!   one connection (the transport beneath weft plus the codec's copy);
//! - `raw-sealed`: the same with every message sealed by the sender and
//!   opened by the receiver with ring's AES-256-GCM, whole (the bound an
//!   encrypted weft echo is compared with: raw codec plus the AEAD of the
//!   same bytes, twice each way in an echo).
//!
//! Two call shapes: `echo` (a unary call whose response is its request)
//! and `stream` (a count-style server-streaming call: an 8-byte request
//! for [`ITEMS`] messages of the cell's size; the raw baselines answer a
//! request with that many frames). Each cell runs for a fixed time and
//! reports response bytes per second (for `echo` the same each way).
//! Client and server share one multi-thread runtime (the shape
//! `#[tokio::main]` gives), as in `e2e`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio_util::codec::{Encoder, FramedRead, LengthDelimitedCodec};
use weft::{CallOptions, Client, Config, EncryptionPolicy, Listener, Router, Status};

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

/// One cell: calls of `shape` with `size`-byte messages in `mode` for
/// `length` (weft's frames up to `frame` bytes if given). Returns the
/// response messages received and the time they took.
pub fn run(
    mode: Mode,
    shape: Shape,
    size: usize,
    length: Length,
    frame: Option<u32>,
) -> (u64, Duration) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    match mode {
        Mode::Raw | Mode::RawSealed => raw(&rt, mode == Mode::RawSealed, shape, size, length),
        Mode::Plain | Mode::Encrypted => {
            weft_calls(&rt, mode == Mode::Encrypted, shape, size, length, frame)
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

fn weft_calls(
    rt: &Runtime,
    encrypted: bool,
    shape: Shape,
    size: usize,
    length: Length,
    frame: Option<u32>,
) -> (u64, Duration) {
    // Windows and limits sized to the whole response, as `config` sizes
    // them to the message: flow control is not what is measured.
    let config = config(size * shape.items() as usize, encrypted, frame);
    let router = router(size);
    rt.block_on(async {
        let listener = Listener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(weft::serve(listener, router, config.clone(), async {
            let _ = stopped.await;
        }));
        let client: Client = weft::connect(&addr, &config).await.expect("connect");
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
        let _ = stop.send(());
        (tally.done.load(Ordering::Relaxed), elapsed)
    })
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

    /// Seals `msg` in place, appending the tag.
    fn seal(&mut self, msg: &mut BytesMut) {
        let nonce = self.nonce();
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::empty(), msg)
            .expect("seal");
        msg.extend_from_slice(tag.as_ref());
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

/// The raw codec baseline: `echo` sends the message and the server sends
/// it back; `stream` sends an 8-byte request and the server answers with
/// [`ITEMS`] frames of the message.
fn raw(rt: &Runtime, sealed: bool, shape: Shape, size: usize, length: Length) -> (u64, Duration) {
    let items = shape.items();
    let codec = move || {
        LengthDelimitedCodec::builder()
            .max_frame_length(size + 1024)
            .new_codec()
    };
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move {
            let (sock, _) = listener.accept().await.expect("accept");
            sock.set_nodelay(true).expect("nodelay");
            let (r, mut w) = sock.into_split();
            let mut reader = FramedRead::new(r, codec());
            let (mut enc, mut buf) = (codec(), BytesMut::new());
            let (mut opener, mut sealer) = (Aead::new(), Aead::new());
            let item = message(size);
            while let Some(Ok(mut req)) = reader.next().await {
                if sealed {
                    opener.open(&mut req);
                }
                let replies = match shape {
                    Shape::Echo => vec![req.freeze()],
                    Shape::Stream => (0..items).map(|_| item.clone()).collect(),
                };
                for reply in replies {
                    // The codec's encode copies the message into `buf`
                    // (its one copy); sealing needs a buffer of its own.
                    let reply = if sealed {
                        let mut m = BytesMut::from(&reply[..]);
                        sealer.seal(&mut m);
                        m.freeze()
                    } else {
                        reply
                    };
                    enc.encode(reply, &mut buf).expect("encode");
                    if w.write_all(&buf).await.is_err() {
                        return;
                    }
                    buf.clear();
                }
            }
        });
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
            let (tally, slots, sent, msg) =
                (tally.clone(), slots.clone(), sent.clone(), msg.clone());
            let started = AtomicU64::new(0);
            tokio::spawn(async move {
                let (mut enc, mut buf, mut sealer) = (codec(), BytesMut::new(), Aead::new());
                while tally.claim(&started) {
                    slots.acquire().await.expect("open semaphore").forget();
                    if sealed {
                        let mut m = BytesMut::from(&msg[..]);
                        sealer.seal(&mut m);
                        enc.encode(m.freeze(), &mut buf).expect("encode");
                    } else {
                        enc.encode(msg.clone(), &mut buf).expect("encode");
                    }
                    w.write_all(&buf).await.expect("write");
                    buf.clear();
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                w
            })
        };
        let mut reader = FramedRead::new(r, codec());
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
    })
}
