//! The connection-wide read waker must never be lost: whichever task the
//! socket wakes either reads it or hands the watch on, even when that task
//! finds its own data already queued, stops reading at the per-poll budget,
//! or drops its `recv` half-way.
//!
//! The client's transport trickles (a few bytes per read), so every frame
//! takes more reads than one poll may make and the budget hand-off runs
//! constantly; several tasks share the connection and one `recv` in four is
//! cancelled after a random instant (`recv` is cancel safe: the next call
//! gets the message). The server polls each handler once on its accepting
//! task before spawning it, so a stream's first wait uses another task's
//! waker. A lost wake-up shows as a `recv` that never returns.
//!
//! The accepting task is a socket waiter too: the second test trickles the
//! server's reads, cancels some `accept`s, and makes the accept loop wait
//! for its handlers' progress (which needs someone to read the socket)
//! after a cancelled `accept` and before starting some streams it accepted.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use weft_mux::{Config, Connection, Incoming, Metadata, Stream};
use weft_testkit::{duplex_pair, echo, pair_over};

mod support;
use support::io::TestIo;

/// How long an echo may take before the test calls it lost (see
/// [`ping_pong`]): far beyond any scheduling delay.
const LIVENESS: Duration = Duration::from_secs(60);

/// xorshift, seeded per task.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// One task: `rounds` messages on its own stream, each echoed back before
/// the next is sent; some `recv`s are cancelled part-way and retried.
async fn ping_pong(conn: Connection, seed: u64, rounds: u32) -> Result<u32, String> {
    let mut rng = seed;
    let mut st = conn
        .open(Metadata::new(), Bytes::new(), false)
        .await
        .map_err(|e| e.to_string())?;
    let mut cancelled = 0;
    for round in 0..rounds {
        let msg = Bytes::from(format!(
            "task {seed} round {round} {}",
            "x".repeat(round as usize % 40)
        ));
        st.send(msg.clone(), false)
            .await
            .map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        // Cancelled waits hand the socket back to the connection task, which
        // could hide a lost wake-up: bound the whole echo, not each wait.
        // The bound is a liveness guard, not a speed claim: a lost wake-up
        // never comes back (nothing else reads this socket once the other
        // tasks are done), so it fails here instead of hanging the suite,
        // and no load on the machine makes an echo take this long.
        let stalled = tokio::time::Instant::now() + LIVENESS;
        while got.len() < msg.len() {
            if tokio::time::Instant::now() > stalled {
                return Err(format!("task {seed} round {round}: recv stalled"));
            }
            let chunk = if next(&mut rng).is_multiple_of(4) {
                let after = Duration::from_micros(next(&mut rng) % 300);
                match tokio::time::timeout(after, st.recv()).await {
                    Ok(r) => r,
                    Err(_) => {
                        cancelled += 1;
                        continue;
                    }
                }
            } else {
                match tokio::time::timeout_at(stalled, st.recv()).await {
                    Ok(r) => r,
                    Err(_) => return Err(format!("task {seed} round {round}: recv stalled")),
                }
            };
            let c = chunk
                .map_err(|e| e.to_string())?
                .ok_or("stream ended early")?;
            got.extend_from_slice(&c.data);
        }
        if got != msg {
            return Err(format!("task {seed} round {round}: echo differs"));
        }
    }
    Ok(cancelled)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_wakeup_is_lost_with_trickled_reads_and_cancelled_recvs() {
    // Each run takes a fraction of a second; a lost wake-up shows in a few
    // of them, so run several.
    let mut cancelled = 0;
    for _ in 0..30 {
        cancelled += one_run().await;
    }
    // The test is about cancelled waits: make sure it made some.
    assert!(cancelled > 0, "no recv was cancelled");
}

/// One connection, eight tasks; returns how many `recv`s were cancelled.
async fn one_run() -> u32 {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let client_io = TestIo::new(a).trickle(3);
    let ((client, _client_incoming), (_server, mut incoming)) =
        pair_over(client_io, b, Config::default(), Config::default()).await;
    tokio::spawn(async move {
        while let Some(st) = incoming.accept().await {
            // As the rpc server does: the handler's first poll runs on the
            // accepting task, and only a pending handler moves to its own.
            // Its `recv` first waits with the accepting task's waker.
            let mut call = Box::pin(echo(st));
            let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
            if first.is_pending() {
                tokio::spawn(call);
            }
        }
    });
    // Tasks finish one after another: a task that ends right after taking
    // the socket's wake-up must still pass it on.
    let tasks: Vec<_> = (1..=8u64)
        .map(|i| tokio::spawn(ping_pong(client.clone(), i * 0x9E37_79B9, 60 * i as u32)))
        .collect();
    let mut cancelled = 0;
    for t in tasks {
        cancelled += t.await.unwrap().unwrap();
    }
    cancelled
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_wakeup_is_lost_by_an_accepting_task() {
    let stats = Arc::new(AcceptStats::default());
    for run in 0..150u64 {
        accept_run(run, &stats).await;
    }
    // The test is about cancelled accepts and accept loops that wait on
    // something else: make sure both happened.
    assert!(
        stats.cancelled.load(Ordering::Relaxed) > 0,
        "no accept was cancelled"
    );
    assert!(
        stats.held.load(Ordering::Relaxed) > 0,
        "no accepted stream was held"
    );
}

/// What the accept loops did, across runs.
#[derive(Default)]
struct AcceptStats {
    cancelled: AtomicU32,
    held: AtomicU32,
}

/// The server's handlers still running, and a signal each time one of them
/// gets something from its stream (or ends).
#[derive(Default)]
struct Handlers {
    active: AtomicUsize,
    steps: AtomicU64,
    progress: Notify,
}

impl Handlers {
    /// Waits until some running handler moves on (if any runs): only a read
    /// of the socket by someone else can end this wait.
    async fn progress(&self) {
        let seen = self.steps.load(Ordering::Acquire);
        loop {
            let notified = self.progress.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.active.load(Ordering::Acquire) == 0
                || self.steps.load(Ordering::Acquire) != seen
            {
                return;
            }
            notified.await;
        }
    }

    fn step(&self) {
        self.steps.fetch_add(1, Ordering::AcqRel);
        self.progress.notify_waiters();
    }
}

/// [`echo`], reporting progress to `handlers`.
async fn tracked_echo(mut st: Stream, handlers: Arc<Handlers>) {
    loop {
        let r = st.recv().await;
        handlers.step();
        let Ok(Some(c)) = r else { break };
        let end = c.end;
        if st.send(c.data, end).await.is_err() || end {
            break;
        }
    }
    handlers.active.fetch_sub(1, Ordering::AcqRel);
    handlers.step();
}

/// The server's accept loop. One `accept` in three is polled once and
/// dropped if pending, one in three is bounded by a random timeout (either
/// way cancelled while it may be the socket's waiter), after which the loop
/// waits for a handler's progress instead of accepting; one accepted stream
/// in three is held until a handler progresses before it starts.
async fn accept_loop(mut incoming: Incoming, seed: u64, stats: Arc<AcceptStats>) {
    let handlers = Arc::new(Handlers::default());
    let mut rng = seed | 1;
    loop {
        let accepted = match next(&mut rng) % 3 {
            0 => {
                let mut accept = std::pin::pin!(incoming.accept());
                std::future::poll_fn(|cx| Poll::Ready(accept.as_mut().poll(cx))).await
            }
            1 => {
                let after = Duration::from_micros(next(&mut rng) % 300);
                tokio::time::timeout(after, incoming.accept())
                    .await
                    .map_or(Poll::Pending, Poll::Ready)
            }
            _ => Poll::Ready(incoming.accept().await),
        };
        let Poll::Ready(accepted) = accepted else {
            stats.cancelled.fetch_add(1, Ordering::Relaxed);
            handlers.progress().await;
            continue;
        };
        let Some(st) = accepted else { return };
        if next(&mut rng).is_multiple_of(3) {
            stats.held.fetch_add(1, Ordering::Relaxed);
            handlers.progress().await;
        }
        handlers.active.fetch_add(1, Ordering::AcqRel);
        // The handler's first poll runs here, as in the rpc server.
        let mut call = Box::pin(tracked_echo(st, handlers.clone()));
        let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        if first.is_pending() {
            tokio::spawn(call);
        }
    }
}

/// One connection whose server reads trickle; two client tasks, each
/// opening streams one after another.
async fn accept_run(run: u64, stats: &Arc<AcceptStats>) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let server_io = TestIo::new(b).trickle(3);
    let ((client, _client_incoming), (_server, incoming)) =
        pair_over(a, server_io, Config::default(), Config::default()).await;
    let server = tokio::spawn(accept_loop(incoming, 0x2545_F491 + run, stats.clone()));
    // Few client tasks: the server is often left with nothing to do but
    // wait for the socket, so nobody else would read it for the acceptor.
    let tasks: Vec<_> = (1..=2u64)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                for s in 0..12u64 {
                    ping_pong(client.clone(), i * 0x9E37_79B9 + s, 4 + i as u32).await?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    server.abort();
}

/// The same hand-off, step by step on one thread: a handler waits in `recv`
/// on its own task, an `accept` polled once takes the socket's watch from it
/// and is dropped, and the accepting task then waits on something else. The
/// handler's next message must still reach it.
///
/// The clock is paused and everything is in memory, so time only moves when
/// every task waits: the timeout below fires exactly when nobody will ever
/// deliver `b`, however slow the machine.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_cancelled_accept_hands_the_socket_back() {
    let ((client, _client_incoming), (_server, mut incoming)) =
        duplex_pair(64 * 1024, Config::default(), Config::default()).await;
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel();
    let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel::<()>();
    let (cancelled_tx, cancelled_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut st = incoming.accept().await.unwrap();
        tokio::spawn(async move {
            while let Ok(Some(c)) = st.recv().await {
                got_tx.send(c.data).unwrap();
            }
        });
        cancel_rx.await.unwrap();
        {
            let mut accept = std::pin::pin!(incoming.accept());
            let polled = std::future::poll_fn(|cx| Poll::Ready(accept.as_mut().poll(cx))).await;
            assert!(polled.is_pending());
        }
        cancelled_tx.send(()).unwrap();
        // This task never reads again.
        std::future::pending::<()>().await;
    });
    let mut st = client
        .open(Metadata::new(), Bytes::from_static(b"a"), false)
        .await
        .unwrap();
    assert_eq!(got_rx.recv().await.unwrap(), "a");
    // The handler waits in `recv` again, as the socket's waiter.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    cancel_tx.send(()).unwrap();
    cancelled_rx.await.unwrap();
    st.send(Bytes::from_static(b"b"), false).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), got_rx.recv()).await;
    assert_eq!(
        got.expect("the handler was never woken: the socket's watch was lost"),
        Some(Bytes::from_static(b"b"))
    );
}
