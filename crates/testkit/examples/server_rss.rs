//! Resident memory of a running weft server process under two loads,
//! read from /proc (Linux): idle connections that then close, and calls
//! stalled by a client that grants no credit.
//!
//! ```text
//! cargo build --release -p weft-cli
//! cargo run --release -p weft-testkit --example server_rss -- idle 10000 [waves] -- \
//!     target/release/weft serve --addr 127.0.0.1:0 --idle-timeout off
//! cargo run --release -p weft-testkit --example server_rss -- stalled 128 -- \
//!     target/release/weft serve --addr 127.0.0.1:0
//! ```
//!
//! The server command must print `serving on ADDR` on its standard output
//! (`weft serve` does).
//!
//! `idle N`: N connections with the default client config (encryption and
//! compression negotiated), 200 handshakes at a time; RSS before, warm
//! (after one connection opened and closed), with all open, and after all
//! have closed (the lowest of readings a second apart for
//! `SERVER_RSS_SETTLE` seconds, default 10; `SERVER_RSS_DEBUG` prints
//! each; the "open" reading comes `SERVER_RSS_OPEN_WAIT` seconds after the
//! last connect, default 2), `waves` times over (default 1: a leak grows from wave to wave, a
//! high-water mark does not). Each figure also comes split into anonymous
//! memory (heap, stacks) and file-backed pages (the binary's code,
//! resident once it first runs). Needs a file descriptor limit above 2 N.
//!
//! `stalled N`: one raw connection whose settings grant the minimum
//! windows (64 KiB per stream, 64 KiB for the connection) and never a
//! `WINDOW_UPDATE`, opening N calls of the demo's `count` stream of
//! 100,000 numbers; it reads everything the server sends, and the RSS is
//! read once 5 s pass with nothing more arriving.
//!
//! The server is stopped with SIGINT (as Ctrl-C), so exit-time reports
//! run.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use weft_frame::{Flags, Frame, FrameType, Metadata};
use weft_mux::pipeline::HandshakeConfig;
use weft_mux::session::settings_frame;
use weft_testkit::{PeerRead, RawPeer, resident_bytes};

fn kib(b: u64) -> u64 {
    b / 1024
}

/// Resident memory split as Linux counts it (`/proc/<pid>/status`, KiB):
/// anonymous (the heap, stacks) and file-backed (the binary's code and
/// data pages, which grow as new code runs for the first time).
#[derive(Debug, Clone, Copy, Default)]
struct Split {
    anon: u64,
    file: u64,
}

fn split(pid: u32) -> Split {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Split {
        anon: field("RssAnon:"),
        file: field("RssFile:") + field("RssShmem:"),
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} KiB anonymous + {} KiB file", self.anon, self.file)
    }
}

/// Starts the server command and returns it with the address it printed.
fn spawn(cmd: &[String]) -> (Child, String) {
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the server");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("piped")).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            let rest = l.split("serving on ").nth(1)?;
            rest.split([';', ' ']).next().map(str::to_owned)
        })
        .expect("the server prints `serving on ADDR`");
    // Keep reading, or the server's next line fails on a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

/// Opens `n` connections, 200 handshakes at a time.
async fn open_idle(n: usize, addr: &str, config: &weft::Config) -> Vec<weft::Client> {
    let mut clients = Vec::with_capacity(n);
    while clients.len() < n {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..(n - clients.len()).min(200) {
            let (addr, config) = (addr.to_owned(), config.clone());
            set.spawn(async move { weft::connect(&addr, &config).await.expect("connect") });
        }
        while let Some(c) = set.join_next().await {
            clients.push(c.expect("client task"));
        }
    }
    clients
}

/// The lowest RSS of readings a second apart for `SERVER_RSS_SETTLE`
/// seconds (default 10), with its split; `SERVER_RSS_DEBUG` prints each.
async fn settled(pid: u32) -> (u64, Split) {
    let secs = std::env::var("SERVER_RSS_SETTLE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let (mut low, mut low_split) = (u64::MAX, Split::default());
    for i in 1..=secs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = resident_bytes(pid);
        if std::env::var_os("SERVER_RSS_DEBUG").is_some() {
            eprintln!("{i} s after the close: {} KiB ({})", kib(now), split(pid));
        }
        if now < low {
            (low, low_split) = (now, split(pid));
        }
    }
    (low, low_split)
}

async fn idle(n: usize, waves: usize, addr: &str, pid: u32) {
    let config = weft::Config::new().idle_timeout(None);
    let before = resident_bytes(pid);
    println!("idle: before: {} KiB ({})", kib(before), split(pid));
    // Warm: one connection opened and closed, so the code every connection
    // runs is resident and one-time state is made; what grows beyond this
    // is what many connections leave behind.
    for c in open_idle(1, addr, &config).await {
        c.connection().shutdown(Duration::ZERO).await;
    }
    let (warm, warm_split) = settled(pid).await;
    println!(
        "idle: warm (one connection opened and closed): {} KiB ({warm_split})",
        kib(warm)
    );
    let pct = |after: u64, base: u64| (after as f64 - base as f64) * 100.0 / base as f64;
    let open_wait = Duration::from_secs(
        std::env::var("SERVER_RSS_OPEN_WAIT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2),
    );
    for wave in 1..=waves {
        let clients = open_idle(n, addr, &config).await;
        tokio::time::sleep(open_wait).await;
        let open = resident_bytes(pid);
        let open_split = split(pid);
        for c in &clients {
            c.connection().shutdown(Duration::ZERO).await;
        }
        drop(clients);
        let (after, after_split) = settled(pid).await;
        let per = open.saturating_sub(warm) / n as u64;
        println!(
            "idle: wave {wave}: {n} connections: server RSS {} KiB open ({per} bytes = {:.1} KiB \
             per connection over warm), {} KiB after all closed ({:+.1} % of the RSS before, \
             {:+.1} % of warm)",
            kib(open),
            per as f64 / 1024.0,
            kib(after),
            pct(after, before),
            pct(after, warm),
        );
        println!("idle: wave {wave}: open: {open_split}; after: {after_split}");
    }
}

/// The demo's `count` call for its most numbers (100,000, about 1 MB of
/// small messages: several times what the send buffer may hold).
fn count_call(id: u32) -> Frame {
    let body = 100_000.to_string();
    let mut payload = BytesMut::new();
    payload.put_u32(body.len() as u32);
    payload.put_slice(body.as_bytes());
    let mut f = Frame::new(FrameType::OPEN, Flags::END_STREAM, id, payload.freeze());
    f.metadata = Metadata::builder().method("count").finish();
    f
}

async fn stalled(n: u32, addr: &str, pid: u32) {
    let mut p = RawPeer::handshake(
        addr.parse().expect("an IP address"),
        HandshakeConfig::default(),
    )
    .await
    .expect("handshake");
    // The least credit a peer may grant: the baseline windows, no more.
    p.send(&settings_frame(0, 64 * 1024))
        .await
        .expect("settings");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = resident_bytes(pid);
    for i in 0..n {
        p.send(&count_call(2 * i + 1)).await.expect("open");
    }
    let (mut frames, mut bytes) = (0u64, 0u64);
    let end = loop {
        match p.recv().await {
            PeerRead::Frame(f) => {
                if frames < 3 && std::env::var_os("SERVER_RSS_DEBUG").is_some() {
                    eprintln!("{f:?}");
                }
                frames += 1;
                bytes += f.payload.len() as u64;
            }
            other => break other,
        }
    };
    let stalled = resident_bytes(pid);
    let per = stalled.saturating_sub(before) / u64::from(n);
    println!(
        "stalled: {n} streams, no credit granted: {frames} frames ({bytes} payload bytes) \
         received, then {end:?}; server RSS {} KiB before, {} KiB stalled ({per} bytes = {:.1} \
         KiB per stream)",
        kib(before),
        kib(stalled),
        per as f64 / 1024.0
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sep = args
        .iter()
        .position(|a| a == "--")
        .expect("-- then the server command");
    let mode = args.get(1).map(String::as_str).unwrap_or("idle");
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let waves: usize = args[..sep].get(3).and_then(|a| a.parse().ok()).unwrap_or(1);
    let (mut child, addr) = spawn(&args[sep + 1..]);
    let pid = child.id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        match mode {
            "stalled" => stalled(u32::try_from(n).expect("streams"), &addr, pid).await,
            _ => idle(n, waves, &addr, pid).await,
        }
    });
    stop(&mut child);
}

/// Stops the server as Ctrl-C would (SIGINT), so it exits through its own
/// shutdown (and an allocator's exit-time report, such as jemalloc's
/// `stats_print`, runs); kills it if it is still running 10 s later.
fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    for _ in 0..100 {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
