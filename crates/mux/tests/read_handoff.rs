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

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use weft_mux::{Config, Connection, Metadata, Role, Stream, connect};

mod support;
use support::io::TestIo;

/// Echoes every chunk of one stream back, then the end.
async fn echo(mut st: Stream) {
    while let Ok(Some(c)) = st.recv().await {
        let end = c.end;
        if st.send(c.data, end).await.is_err() || end {
            return;
        }
    }
}

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
        let stalled = tokio::time::Instant::now() + Duration::from_secs(5);
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
    for _ in 0..12 {
        cancelled += one_run().await;
    }
    // The test is about cancelled waits: make sure it made some.
    assert!(cancelled > 0, "no recv was cancelled");
}

/// One connection, eight tasks; returns how many `recv`s were cancelled.
async fn one_run() -> u32 {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let (client, server) = tokio::join!(
        connect(TestIo::new(a).trickle(3), Role::Client, Config::default()),
        connect(b, Role::Server, Config::default())
    );
    let (client, _client_incoming) = client.unwrap();
    let (_server, mut incoming) = server.unwrap();
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
