//! The small-call side of the large-message target: a small unary call's
//! latency on a connection that carries back-to-back 1 MiB echoes, against
//! the same calls on the same kind of connection alone. The target: the
//! p99 beside the transfer is at most twice the p99 alone.
//!
//! One weft connection (plain, compression off, default windows: what a
//! user who did not tune for bulk has), `transfers` tasks echoing 1 MiB
//! messages back to back on it, and one task making 64-byte echo calls
//! one after another, timing each. Client and server share the process,
//! so the server's handler notes when each small call reached it, and a
//! round trip splits into its two legs: request (the client's writer, the
//! kernel, the server's reader and dispatch) and reply (the handler's
//! answer through the server's writer, the kernel and the client's
//! reader back to the caller).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft::{Client, Config, EncryptionPolicy, Listener, Status};

use crate::bulk::{METHOD, message, router};

/// The large message beside the small calls.
pub const LARGE: usize = 1024 * 1024;
/// The small call's request (and response).
pub const SMALL: usize = 64;
/// The small call's method: an echo that notes when it ran.
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

/// When the server's handler last ran (the small calls go one at a time).
type Stamp = Arc<Mutex<Option<Instant>>>;

/// One small call's legs.
#[derive(Clone, Copy)]
struct Legs {
    request: Duration,
    reply: Duration,
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
        let stamp = Stamp::default();
        let noted = stamp.clone();
        let routes = router(LARGE).unary(STAMPED, move |_ctx, req: Bytes| {
            *noted.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
            async move { Ok::<_, Status>(req) }
        });
        tokio::spawn(weft::serve(listener, routes, config.clone(), async {
            let _ = stopped.await;
        }));
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
            times.push(one(&client, &small, &stamp).await);
        }
        stop.store(true, Ordering::Relaxed);
        let mut large_done = 0;
        for b in bulk {
            large_done += b.await.expect("a transfer panicked");
        }
        let _ = stop_server.send(());
        let quantile = |mut v: Vec<Duration>, q: f64| {
            v.sort();
            v[((v.len() - 1) as f64 * q).round() as usize]
        };
        let whole: Vec<Duration> = times.iter().map(|l| l.request + l.reply).collect();
        Latency {
            calls: times.len(),
            large: large_done,
            p50: quantile(whole.clone(), 0.5),
            p99: quantile(whole, 0.99),
            request_p99: quantile(times.iter().map(|l| l.request).collect(), 0.99),
            reply_p99: quantile(times.iter().map(|l| l.reply).collect(), 0.99),
        }
    })
}

async fn one(client: &Client, small: &Bytes, stamp: &Stamp) -> Legs {
    let t = Instant::now();
    let reply = client.unary(STAMPED, small.clone()).await.expect("echo");
    let end = Instant::now();
    assert_eq!(reply.len(), SMALL);
    let ran = stamp
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .expect("the handler ran");
    Legs {
        request: ran - t,
        reply: end - ran,
    }
}
