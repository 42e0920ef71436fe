//! Resident memory of a running weft server process under two loads,
//! read from /proc (Linux): idle connections that then close, and calls
//! stalled by a client that grants no credit.
//!
//! ```text
//! cargo build --release -p weft-cli
//! cargo run --release -p weft-testkit --example server_rss -- idle 10000 -- \
//!     target/release/weft serve --addr 127.0.0.1:0 --idle-timeout off
//! cargo run --release -p weft-testkit --example server_rss -- stalled 128 -- \
//!     target/release/weft serve --addr 127.0.0.1:0
//! ```
//!
//! The server command must print `serving on ADDR` on its standard output
//! (`weft serve` does). `idle N`: N connections with the default client
//! config (encryption and compression negotiated), 200 handshakes at a
//! time; RSS before, with all open, and after all have closed (the lowest
//! of 10 readings a second apart). `stalled N`: one raw connection whose
//! settings grant the minimum windows (64 KiB per stream, 64 KiB for the
//! connection) and never a `WINDOW_UPDATE`, opening N calls of the demo's
//! `count` stream of 100,000 numbers; it reads everything the server sends, and the
//! RSS is read once 5 s pass with nothing more arriving. Needs a file
//! descriptor limit above 2 N for `idle`.

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

async fn idle(n: usize, addr: &str, pid: u32) {
    let config = weft::Config::new().idle_timeout(None);
    let before = resident_bytes(pid);
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
    tokio::time::sleep(Duration::from_secs(2)).await;
    let open = resident_bytes(pid);
    for c in &clients {
        c.connection().shutdown(Duration::ZERO).await;
    }
    drop(clients);
    let mut after = u64::MAX;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        after = after.min(resident_bytes(pid));
    }
    let per = open.saturating_sub(before) / n as u64;
    println!(
        "idle: {n} connections: server RSS {} KiB before, {} KiB open ({per} bytes = {:.1} KiB \
         per connection), {} KiB after all closed ({:+.1} % of the RSS before)",
        kib(before),
        kib(open),
        per as f64 / 1024.0,
        kib(after),
        (after as f64 - before as f64) * 100.0 / before as f64
    );
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
            _ => idle(n, &addr, pid).await,
        }
    });
    let _ = child.kill();
    let _ = child.wait();
}
