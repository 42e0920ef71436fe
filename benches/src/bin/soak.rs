//! `weft-soak`: a soak run against an in-process weft server over TCP
//! loopback; `cargo xtask soak --secs N` builds it (release) and runs it.
//!
//! - 8 connections, 4 tasks each, for `--secs` seconds. Connection `i` is
//!   plain or encrypted (`i` odd) and compressed or not (`i / 2` odd); the
//!   server accepts either.
//! - Each task issues calls of all four shapes at random: unary echo,
//!   server streaming, client streaming, bidi (each message carries the
//!   task, the call and its index; every response is checked for content
//!   and order), plus a slow unary under a deadline (short: must end
//!   `DEADLINE_EXCEEDED`; long: must succeed) and random cancellations (the
//!   call's future dropped after a random short time).
//! - Lost or duplicated messages: every completed call is checked message
//!   by message; a call that hangs (10 s) fails the run; per task, calls
//!   completed + cancelled + expired deadlines must equal calls issued; the
//!   server's count of echo calls must lie between the clients' completed
//!   and issued echo calls.
//! - Memory: the process RSS (/proc/self/statm) after the warm-up (the
//!   first quarter of the run) and at the end; growth above
//!   `RSS_GROWTH_BOUND` fails.
//! - Leaks: once the clients stop, every server and client connection's
//!   stream table and accept queue must drain to empty.
//!
//! usage: weft-soak [--secs N]   (exit code 0 = pass; the report is on stdout)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use weft::mux::Connection;
use weft::{
    BidiStream, Bytes, CallOptions, Client, Code, Config, Context, EncryptionPolicy, RequestStream,
    ResponseSink, Router, Server, Status,
};

const CONNECTIONS: usize = 8;
const TASKS_PER_CONNECTION: usize = 4;
/// RSS may grow by at most this much between the end of the warm-up and
/// the end of the run (allocator caches and runtime queues settle during
/// the warm-up; a per-call leak at thousands of calls a second exceeds it
/// within seconds).
const RSS_GROWTH_BOUND: u64 = 8 * 1024 * 1024;
/// How long the `slow` handler sleeps before answering.
const SLOW: Duration = Duration::from_millis(20);
/// A call not finished by then is a lost message.
const HANG: Duration = Duration::from_secs(10);

fn main() {
    let mut secs = 10;
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag, n] if flag == "--secs" && n.parse::<u64>().is_ok_and(|n| n > 0) => {
            secs = n.parse().unwrap();
        }
        _ => {
            eprintln!("usage: weft-soak [--secs N>0]");
            std::process::exit(2);
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match rt.block_on(soak(Duration::from_secs(secs))) {
        Ok(report) => println!("weft-soak: pass\n{report}"),
        Err(e) => {
            eprintln!("weft-soak: FAIL: {e}");
            std::process::exit(1);
        }
    }
}

/// What every task counts.
#[derive(Debug, Default)]
struct Counts {
    issued: AtomicU64,
    completed: AtomicU64,
    cancelled: AtomicU64,
    expired: AtomicU64,
    echo_issued: AtomicU64,
    echo_completed: AtomicU64,
    messages: AtomicU64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

async fn soak(run: Duration) -> Result<String, String> {
    let server_echoes = Arc::new(AtomicU64::new(0));
    let server = Server::new(router(server_echoes.clone()));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // The server accepts plain and encrypted, compressed or not: each
    // client's config decides.
    let server_config = Config::new().encryption(EncryptionPolicy::Preferred);
    let mut server_conns = Vec::new();
    let mut clients = Vec::new();
    for i in 0..CONNECTIONS {
        let config = Config::new()
            .encryption(if i % 2 == 1 {
                EncryptionPolicy::Required
            } else {
                EncryptionPolicy::Off
            })
            .compression((i / 2) % 2 == 1)
            // Compress even small messages on compressed connections.
            .compression_min_size(16);
        let (accepted, client) = tokio::join!(
            async {
                let (io, peer) = listener.accept().await.map_err(|e| e.to_string())?;
                io.set_nodelay(true).map_err(|e| e.to_string())?;
                weft::accept_io(io, &server, &server_config, Some(peer.to_string()))
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
        if n.encrypted != (i % 2 == 1) {
            return Err(format!("connection {i}: negotiated {n:?}"));
        }
        server_conns.push(conn);
        clients.push(client);
    }

    let start = Instant::now();
    let end = start + run;
    let counts = Arc::new(Counts::default());
    let mut tasks = tokio::task::JoinSet::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..TASKS_PER_CONNECTION {
            let (client, counts) = (client.clone(), counts.clone());
            let id = (c * TASKS_PER_CONNECTION + t) as u64;
            tasks.spawn(async move { task(client, id, end, counts).await });
        }
    }

    tokio::time::sleep(run / 4).await;
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
    if !failures.is_empty() {
        failures.truncate(10);
        return Err(failures.join("\n"));
    }

    // Every call has ended (or been dropped); resets and closes are
    // asynchronous, so give the tables a moment to drain.
    let all: Vec<&Connection> = server_conns
        .iter()
        .chain(clients.iter().map(Client::connection))
        .collect();
    let drained = async {
        while all
            .iter()
            .any(|c| c.stats().streams != 0 || c.stats().accept_queue != 0)
        {
            tokio::time::sleep(SLOW).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(5), drained)
        .await
        .is_err()
    {
        let left: Vec<String> = all
            .iter()
            .map(|c| format!("{:?}", c.stats()))
            .filter(|s| !s.contains("streams: 0,"))
            .collect();
        return Err(format!("stream tables not empty after 5 s: {left:?}"));
    }

    let c = &counts;
    let (issued, completed, cancelled, expired) = (
        get(&c.issued),
        get(&c.completed),
        get(&c.cancelled),
        get(&c.expired),
    );
    if completed + cancelled + expired != issued {
        return Err(format!(
            "{issued} calls issued, {completed} completed + {cancelled} cancelled + {expired} expired"
        ));
    }
    let served = get(&server_echoes);
    let (echo_issued, echo_done) = (get(&c.echo_issued), get(&c.echo_completed));
    if served < echo_done || served > echo_issued {
        return Err(format!(
            "server handled {served} echo calls; clients completed {echo_done} of {echo_issued}"
        ));
    }
    if completed == 0 || cancelled == 0 || expired == 0 {
        return Err(format!(
            "the run did not exercise every outcome: {completed} completed, {cancelled} cancelled, {expired} expired"
        ));
    }
    let growth = rss_end.saturating_sub(rss_warm);
    let report = format!(
        "  {} s, {CONNECTIONS} connections x {TASKS_PER_CONNECTION} tasks\n  \
         calls: {issued} issued = {completed} completed + {cancelled} cancelled + {expired} deadline exceeded\n  \
         messages checked: {}\n  echo: server handled {served}, clients completed {echo_done} of {echo_issued}\n  \
         RSS: {:.1} MiB after warm-up, {:.1} MiB at the end (growth {:.1} MiB, bound {} MiB)\n  \
         stream tables: all {} connections empty",
        run.as_secs(),
        get(&c.messages),
        rss_warm as f64 / 1048576.0,
        rss_end as f64 / 1048576.0,
        growth as f64 / 1048576.0,
        RSS_GROWTH_BOUND / 1048576,
        all.len(),
    );
    if growth > RSS_GROWTH_BOUND {
        return Err(format!("memory grew after warm-up\n{report}"));
    }
    Ok(report)
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

// ----- the server ---------------------------------------------------------

fn router(echoes: Arc<AtomicU64>) -> Router {
    Router::new()
        .unary("echo", move |_ctx: Context, req: Bytes| {
            echoes.fetch_add(1, Ordering::Relaxed);
            async move { Ok::<_, Status>(req) }
        })
        .unary("slow", |_ctx, req: Bytes| async move {
            tokio::time::sleep(SLOW).await;
            Ok::<_, Status>(req)
        })
        .server_streaming(
            "fan_out",
            |_ctx, req: Bytes, mut sink: ResponseSink| async move {
                // The request is a message header; answer `count` numbered copies.
                let m = Msg::parse(&req)?;
                for i in 0..m.count {
                    sink.send(Msg { index: i, ..m }.encode()).await?;
                }
                Ok(())
            },
        )
        .client_streaming("fan_in", |_ctx, mut rx: RequestStream| async move {
            // Checks the order itself; answers the count and the last header.
            let mut n = 0;
            let mut last = None;
            while let Some(body) = rx.message().await? {
                let m = Msg::parse(&body)?;
                if m.index != n {
                    return Err(Status::invalid_argument("fan_in: message out of order"));
                }
                n += 1;
                last = Some(m);
            }
            let last = last.ok_or_else(|| Status::invalid_argument("fan_in: no message"))?;
            Ok(Msg { count: n, ..last }.encode())
        })
        .bidi("chat", |_ctx, mut s: BidiStream| async move {
            while let Some(body) = s.message().await? {
                s.send(body).await?;
            }
            Ok(())
        })
}

/// A message: task, call sequence, index within the call, count, then
/// `pad` filler bytes (compressible, of varying length).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Msg {
    task: u64,
    call: u64,
    index: u32,
    count: u32,
    pad: u16,
}

impl Msg {
    const HEADER: usize = 26;

    fn encode(self) -> Bytes {
        let mut b = Vec::with_capacity(Self::HEADER + self.pad as usize);
        b.extend_from_slice(&self.task.to_be_bytes());
        b.extend_from_slice(&self.call.to_be_bytes());
        b.extend_from_slice(&self.index.to_be_bytes());
        b.extend_from_slice(&self.count.to_be_bytes());
        b.extend_from_slice(&self.pad.to_be_bytes());
        b.resize(Self::HEADER + self.pad as usize, (self.call % 251) as u8);
        Bytes::from(b)
    }

    fn parse(b: &[u8]) -> Result<Msg, Status> {
        let bad = || Status::invalid_argument("not a soak message");
        if b.len() < Self::HEADER {
            return Err(bad());
        }
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
        let m = Msg {
            task: u64_at(0),
            call: u64_at(8),
            index: u32_at(16),
            count: u32_at(20),
            pad: u16::from_be_bytes([b[24], b[25]]),
        };
        let filler = (m.call % 251) as u8;
        if b.len() != Self::HEADER + m.pad as usize
            || b[Self::HEADER..].iter().any(|&x| x != filler)
        {
            return Err(bad());
        }
        Ok(m)
    }
}

// ----- the clients --------------------------------------------------------

/// xorshift64*: deterministic per task, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// How one call ended, as the client saw it.
enum Outcome {
    Completed(u64),
    Expired,
}

async fn task(client: Client, id: u64, end: Instant, counts: Arc<Counts>) -> Result<(), String> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (id + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut call = 0u64;
    while Instant::now() < end {
        call += 1;
        let m = Msg {
            task: id,
            call,
            index: 0,
            count: 1 + rng.below(8) as u32,
            pad: rng.below(2048) as u16,
        };
        let shape = rng.below(5);
        // One call in eight is dropped after 0 to 2 ms, wherever it is.
        let cancel_after = (rng.below(8) == 0).then(|| Duration::from_micros(rng.below(2000)));
        let short_deadline = rng.below(2) == 0;
        add(&counts.issued, 1);
        if shape == 0 {
            add(&counts.echo_issued, 1);
        }
        let fut = one_call(&client, shape, m, short_deadline);
        let ended =
            match cancel_after {
                Some(after) => tokio::time::timeout(after, fut).await.ok(),
                None => Some(tokio::time::timeout(HANG, fut).await.map_err(|_| {
                    format!("task {id} call {call} (shape {shape}) hung for {HANG:?}")
                })?),
            };
        match ended {
            None => add(&counts.cancelled, 1),
            Some(Ok(Outcome::Completed(messages))) => {
                add(&counts.completed, 1);
                add(&counts.messages, messages);
                if shape == 0 {
                    add(&counts.echo_completed, 1);
                }
            }
            Some(Ok(Outcome::Expired)) => add(&counts.expired, 1),
            Some(Err(e)) => {
                return Err(format!("task {id} call {call} (shape {shape}): {e}"));
            }
        }
    }
    Ok(())
}

fn check(got: &[u8], want: &Msg) -> Result<(), String> {
    let m = Msg::parse(got).map_err(|e| format!("bad message: {e}"))?;
    if m != *want {
        return Err(format!("got {m:?}, want {want:?}"));
    }
    Ok(())
}

fn status(e: Status) -> String {
    format!("unexpected status {e}")
}

/// One call of `shape` carrying `m`; checks every message it gets back.
async fn one_call(client: &Client, shape: u64, m: Msg, short: bool) -> Result<Outcome, String> {
    let opts = CallOptions::new().timeout(Duration::from_secs(5));
    match shape {
        0 => {
            let reply = client.unary("echo", m.encode()).await.map_err(status)?;
            check(&reply, &m)?;
            Ok(Outcome::Completed(1))
        }
        1 => {
            let mut s = client
                .server_streaming("fan_out", m.encode(), &opts)
                .await
                .map_err(status)?;
            for i in 0..m.count {
                let got = s
                    .message()
                    .await
                    .map_err(status)?
                    .ok_or("stream ended early")?;
                check(&got, &Msg { index: i, ..m })?;
            }
            if s.message().await.map_err(status)?.is_some() {
                return Err("a message after the last".into());
            }
            Ok(Outcome::Completed(u64::from(m.count)))
        }
        2 => {
            let mut call = client
                .client_streaming("fan_in", &opts)
                .await
                .map_err(status)?;
            for i in 0..m.count {
                call.send(Msg { index: i, ..m }.encode())
                    .await
                    .map_err(status)?;
            }
            let reply = call.finish().await.map_err(status)?;
            check(
                &reply,
                &Msg {
                    index: m.count - 1,
                    ..m
                },
            )?;
            Ok(Outcome::Completed(u64::from(m.count)))
        }
        3 => {
            let mut call = client.bidi("chat", &opts).await.map_err(status)?;
            for i in 0..m.count {
                let sent = Msg { index: i, ..m };
                call.send(sent.encode()).await.map_err(status)?;
                let got = call
                    .message()
                    .await
                    .map_err(status)?
                    .ok_or("chat ended early")?;
                check(&got, &sent)?;
            }
            call.close_send().await.map_err(status)?;
            if call.message().await.map_err(status)?.is_some() {
                return Err("a message after close".into());
            }
            Ok(Outcome::Completed(u64::from(m.count)))
        }
        _ => {
            // The handler sleeps 20 ms: a 2 ms deadline expires, a 2 s one
            // does not. On a starved runtime the reply and the expired timer
            // can be seen in the same poll, and the reply may win: that is
            // only possible once the handler's 20 ms have passed.
            let deadline = Duration::from_millis(if short { 2 } else { 2000 });
            let opts = CallOptions::new().timeout(deadline);
            let started = Instant::now();
            match client.unary_with("slow", m.encode(), &opts).await {
                Ok(reply) if !short || started.elapsed() >= SLOW => {
                    check(&reply, &m)?;
                    Ok(Outcome::Completed(1))
                }
                Err(e) if short && e.code() == Code::DEADLINE_EXCEEDED => Ok(Outcome::Expired),
                Ok(_) => Err("a 20 ms handler answered a 2 ms deadline in time".into()),
                Err(e) => Err(status(e)),
            }
        }
    }
}
