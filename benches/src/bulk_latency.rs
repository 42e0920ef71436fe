//! The small-call side of the large-message target: a small unary call's
//! latency on a connection that carries back-to-back 1 MiB echoes, against
//! the same calls on the same kind of connection alone. The target: the
//! p99 beside the transfer is at most twice the p99 alone.
//!
//! One weft connection (plain, compression off, default windows: what a
//! user who did not tune for bulk has), `transfers` tasks echoing 1 MiB
//! messages back to back on it, and one task making 64-byte echo calls
//! one after another, timing each. The server's handler answers with the
//! system clock's time it ran at (the same clock in either layout, see
//! [`Layout`]), so a round trip splits into its two legs: request (the
//! client's writer, the kernel, the server's reader and dispatch) and
//! reply (the handler's answer through the server's writer, the kernel and
//! the client's reader back to the caller).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use weft::{Client, Config, EncryptionPolicy, Listener, Status};

use crate::bulk::{Layout, METHOD, Server, message, router};

/// The large message beside the small calls.
pub const LARGE: usize = 1024 * 1024;
/// The small call's request (and response).
pub const SMALL: usize = 64;
/// The small call's method: an echo whose first [`STAMP`] bytes say when
/// it ran.
const STAMPED: &str = "stamped";

/// What the small calls measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Small calls timed.
    pub calls: usize,
    /// Large echoes completed meanwhile.
    pub large: u64,
    /// Median and 99th percentile of the small calls' round trips.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The 99th percentile of the request leg: from the call to the
    /// server's handler.
    pub request_p99: Duration,
    /// The 99th percentile of the reply leg: from the server's handler
    /// back to the caller.
    pub reply_p99: Duration,
}

/// What a latency run's connections change from the defaults, both ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tuning {
    /// weft's largest frame payload, if not the default 64 KiB.
    pub frame: Option<u32>,
    /// The stream window, if not the default 64 KiB (not grown on
    /// loopback, whose round trips are under 1 ms): on loopback a
    /// small call waits behind up to one window of a transfer's bytes in
    /// the kernel on each leg (`crates/mux/tests/bulk_fairness.rs`), so
    /// this is the lever to look at.
    pub window: Option<u32>,
}

/// The bytes of a stamp: nanoseconds since the Unix epoch, big-endian.
const STAMP: usize = 16;

/// The system clock's time in nanoseconds since the Unix epoch: one clock
/// for both processes of the split layout (`Instant` cannot cross them).
fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// One small call's round trip and legs.
#[derive(Clone, Copy)]
struct Legs {
    whole: Duration,
    request: Duration,
    reply: Duration,
}

/// Starts the latency run's server on the current runtime (`echo` of
/// 1 MiB and the stamped small echo, defaults but for `tuning`) and
/// returns its address.
pub async fn start(tuning: Tuning) -> SocketAddr {
    let listener = Listener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let routes = router(LARGE).unary(STAMPED, |_ctx, req: Bytes| async move {
        let mut reply = BytesMut::from(&req[..]);
        if let Some(stamp) = reply.get_mut(..STAMP) {
            stamp.copy_from_slice(&nanos().to_be_bytes());
        }
        Ok::<_, Status>(reply.freeze())
    });
    tokio::spawn(weft::serve(
        listener,
        routes,
        config(tuning),
        std::future::pending(),
    ));
    addr.parse().expect("a TCP address")
}

/// What the latency run's connections use: plain, compression off, the
/// defaults otherwise (what a user who did not tune for bulk has) but for
/// `tuning`.
fn config(tuning: Tuning) -> Config {
    let mut config = Config::new()
        .encryption(EncryptionPolicy::Off)
        .compression(false);
    if let Some(bytes) = tuning.frame {
        config = config.max_frame_payload(bytes);
    }
    if let Some(bytes) = tuning.window {
        config = config.stream_window(bytes);
    }
    config
}

/// Small calls for `length` on a connection with `transfers` tasks echoing
/// 1 MiB messages back to back (0: alone), both ends configured with
/// `tuning`, client and server laid out as `layout` says.
pub fn small_calls(transfers: usize, length: Duration, tuning: Tuning, layout: Layout) -> Latency {
    layout.run(Server::Latency { tuning }, async |addr| {
        measure(addr, transfers, length, tuning).await
    })
}

/// The client side of [`small_calls`], against the server at `addr`.
async fn measure(addr: SocketAddr, transfers: usize, length: Duration, tuning: Tuning) -> Latency {
    let client: Client = weft::connect(&addr.to_string(), &config(tuning))
        .await
        .expect("connect");
    let (large, small) = (message(LARGE), message(SMALL));
    // Warm both message sizes up, not timed.
    for m in [&large, &small] {
        client.unary(METHOD, m.clone()).await.expect("echo");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let bulk: Vec<_> = (0..transfers)
        .map(|_| {
            let (client, large, stop) = (client.clone(), large.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let reply = client.unary(METHOD, large.clone()).await.expect("echo");
                    assert_eq!(reply.len(), LARGE);
                    n += 1;
                }
                n
            })
        })
        .collect();
    if transfers > 0 {
        // Let the transfers get going first.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut times = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < length {
        times.push(one(&client, &small).await);
    }
    stop.store(true, Ordering::Relaxed);
    let mut large_done = 0;
    for b in bulk {
        large_done += b.await.expect("a transfer panicked");
    }
    let quantile = |mut v: Vec<Duration>, q: f64| {
        v.sort();
        v[((v.len() - 1) as f64 * q).round() as usize]
    };
    Latency {
        calls: times.len(),
        large: large_done,
        p50: quantile(times.iter().map(|l| l.whole).collect(), 0.5),
        p99: quantile(times.iter().map(|l| l.whole).collect(), 0.99),
        request_p99: quantile(times.iter().map(|l| l.request).collect(), 0.99),
        reply_p99: quantile(times.iter().map(|l| l.reply).collect(), 0.99),
    }
}

/// One small call: its round trip (monotonic clock) and its legs (the
/// system clock, which the server's stamp is in).
async fn one(client: &Client, small: &Bytes) -> Legs {
    let (t, sent) = (Instant::now(), nanos());
    let reply = client.unary(STAMPED, small.clone()).await.expect("echo");
    let (whole, back) = (t.elapsed(), nanos());
    assert_eq!(reply.len(), SMALL);
    let ran = u128::from_be_bytes(reply[..STAMP].try_into().expect("a stamp"));
    let leg = |from: u128, to: u128| {
        Duration::from_nanos(u64::try_from(to.saturating_sub(from)).unwrap_or(u64::MAX))
    };
    Legs {
        whole,
        request: leg(sent, ran),
        reply: leg(ran, back),
    }
}
