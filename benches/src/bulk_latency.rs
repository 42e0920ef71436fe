//! The small-call side of the large-message target: a small unary call's
//! latency on a connection that carries back-to-back 1 MiB echoes, against
//! the same calls on the same kind of connection alone. The target: the
//! p99 beside the transfer is at most twice the p99 alone.
//!
//! One weft connection (plain, compression off, default windows: what a
//! user who did not tune for bulk has), `transfers` tasks echoing 1 MiB
//! messages back to back on it, and one task making 64-byte echo calls
//! one after another, timing each.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft::{Client, Config, EncryptionPolicy, Listener};

use crate::bulk::{METHOD, message, router};

/// The large message beside the small calls.
pub const LARGE: usize = 1024 * 1024;
/// The small call's request (and response).
pub const SMALL: usize = 64;

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
}

/// Small calls for `length` on a connection with `transfers` tasks echoing
/// 1 MiB messages back to back (0: alone), weft's frames up to `frame`
/// bytes if given (else 64 KiB).
pub fn small_calls(transfers: usize, length: Duration, frame: Option<u32>) -> Latency {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    rt.block_on(async {
        let config = match frame {
            Some(bytes) => Config::new().max_frame_payload(bytes),
            None => Config::new(),
        }
        .encryption(EncryptionPolicy::Off)
        .compression(false);
        let listener = Listener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(weft::serve(
            listener,
            router(LARGE),
            config.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        let client: Client = weft::connect(&addr, &config).await.expect("connect");
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
        let _ = stop_server.send(());
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        Latency {
            calls: times.len(),
            large: large_done,
            p50: at(0.5),
            p99: at(0.99),
        }
    })
}

async fn one(client: &Client, small: &Bytes) -> Duration {
    let t = Instant::now();
    let reply = client.unary(METHOD, small.clone()).await.expect("echo");
    assert_eq!(reply.len(), SMALL);
    t.elapsed()
}
