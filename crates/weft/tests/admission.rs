//! Server admission over real loopback sockets (hostile catalogue items 42,
//! 43 and 46): silent connections holding every handshake slot, a burst of
//! connects, the connection cap and the per-address limit. Wall-clock
//! timeouts here are failure conditions only, never the thing measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncReadExt;
use weft::{Client, Config, EncryptionPolicy};

mod support;
use support::{connect_and_echo_within_retries, serve_with as start};

fn secure() -> Config {
    Config::new()
        .encryption(EncryptionPolicy::Required)
        .psk([9; 32])
}

/// Connects, retrying only on retry-safe refusals, with exponential backoff
/// from 5 ms to 500 ms plus a little jitter; returns the client and the
/// refusals seen. Any other error fails.
async fn connect_retrying(addr: &str, config: &Config, salt: u64) -> (Client, usize) {
    let mut refusals = 0;
    let mut backoff = Duration::from_millis(5);
    loop {
        match weft::connect(addr, config).await {
            Ok(c) => return (c, refusals),
            Err(e) if e.is_retry_safe() => {
                refusals += 1;
                let jitter =
                    Duration::from_micros((salt * 7919 + refusals as u64 * 104_729) % 5000);
                tokio::time::sleep(backoff + jitter).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
            Err(e) => panic!("connect failed without a retry-safe refusal: {e}"),
        }
    }
}

/// [`connect_retrying`], then one echo call, both retried after a
/// retry-safe failure: a client evicted after the handshake (its first
/// record not yet read by the server) sees its first call fail so.
async fn connect_and_echo_retrying(addr: &str, config: &Config, salt: u64) -> (Client, usize) {
    let mut refusals = 0;
    loop {
        let (c, refused) = connect_retrying(addr, config, salt + refusals as u64).await;
        refusals += refused;
        match c.unary("echo", Bytes::from_static(b"hi")).await {
            Ok(r) => {
                assert_eq!(r, "hi");
                return (c, refusals);
            }
            Err(s) if s.is_retry_safe() => refusals += 1,
            Err(s) => panic!("the call failed without a retry-safe status: {s}"),
        }
    }
}

/// Clients in a burst test: WEFT_BURST_CLIENTS, else `default`.
fn burst_clients(default: usize) -> usize {
    std::env::var("WEFT_BURST_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn echo(c: &Client) {
    let r = c.unary("echo", Bytes::from_static(b"hi")).await.unwrap();
    assert_eq!(r, "hi");
}

/// Item 42: as many silent TCP connections as there are handshake slots,
/// each re-opened as soon as the server drops it. A good client's single
/// connect attempt still succeeds: the slot of the silent connection
/// without progress for longest is given to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_42_silent_connections_in_every_handshake_slot_do_not_lock_out_a_good_client() {
    const SLOTS: usize = 16;
    let config = secure().max_pending_handshakes(SLOTS);
    let (addr, _stop) = start(config).await;
    let reopened = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let connected = Arc::new(tokio::sync::Semaphore::new(0));
    let mut attackers = Vec::new();
    for _ in 0..SLOTS {
        let (addr, reopened, stop) = (addr.clone(), reopened.clone(), stop.clone());
        let connected = connected.clone();
        attackers.push(tokio::spawn(async move {
            loop {
                let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
                connected.add_permits(1);
                let mut sink = Vec::new();
                // Send nothing; wait for the server to give up on us.
                tokio::select! {
                    _ = s.read_to_end(&mut sink) => {}
                    () = stop.notified() => return,
                }
                reopened.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Every silent connection made (so admitted before the good client:
    // the server admits connections in the order they were made). Their
    // age does not matter: the one without progress for longest is evicted.
    let all = u32::try_from(SLOTS).unwrap();
    connected.acquire_many(all).await.unwrap().forget();
    // It may meet a retry-safe refusal or two while the silent connections
    // it displaces re-open (each evicts the stalest handshake left, and a
    // busy server may not have read the good client's yet); it must get in
    // and call within support::RETRIES of them.
    let config = secure();
    let connecting =
        connect_and_echo_within_retries(&addr, &config, "the good client was turned away");
    tokio::time::timeout(Duration::from_secs(30), connecting)
        .await
        .expect("the good client's handshake never finished");
    // The evicted one sees its EOF on its own task: wait for it (a good
    // client given a free slot instead would never produce one).
    let evicted = || (reopened.load(Ordering::Relaxed) >= 1).then_some(());
    let what = || "no silent connection was evicted for the good client";
    weft_testkit::eventually(evicted, what).await;
    for _ in 0..SLOTS {
        stop.notify_waiters();
    }
    for a in attackers {
        a.abort();
    }
}

/// Item 43: 1,000 clients (5,000 with WEFT_BURST_CLIENTS=5000) connect at
/// once (encrypted, the default
/// handshake set of 256). Every one ends up connected and served; those
/// refused or evicted see a retry-safe failure and back off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_43_a_burst_of_simultaneous_connects_all_connect() {
    // WEFT_BURST_CLIENTS=5000 runs the full storm (needs a file
    // descriptor limit above 10,000).
    let clients_n = burst_clients(1000);
    let (addr, _stop) = start(Config::new()).await;
    let all_in = Arc::new(tokio::sync::Barrier::new(clients_n + 1));
    let mut clients = Vec::new();
    for i in 0..clients_n {
        let (addr, all_in) = (addr.clone(), all_in.clone());
        clients.push(tokio::spawn(async move {
            let (c, refusals) = connect_and_echo_retrying(&addr, &Config::new(), i as u64).await;
            echo(&c).await;
            // Hold the connection until every client is in.
            all_in.wait().await;
            refusals
        }));
    }
    let done = tokio::time::timeout(Duration::from_secs(300), async {
        all_in.wait().await;
        let mut refusals = 0;
        for c in clients {
            refusals += c.await.unwrap();
        }
        refusals
    })
    .await
    .expect("not every client connected");
    println!("{clients_n} clients connected; {done} retry-safe refusals on the way");
}

/// Item 43 through `weft::Channel`: the same burst of clients, each a
/// Channel with its default (gRPC) reconnect backoff making one call,
/// against a server with 64 handshake slots. The server refuses most of
/// the burst (retry-safe); every Channel backs off,
/// reconnects and gets its answer. 500 here, WEFT_BURST_CLIENTS=5000 for
/// the storm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_43_a_burst_of_channels_all_connect_with_the_channel_backoff() {
    let clients_n = burst_clients(500);
    // 64 handshake slots: most of the burst is surely refused at first.
    let (addr, _stop) = start(Config::new().max_pending_handshakes(64)).await;
    let all_in = Arc::new(tokio::sync::Barrier::new(clients_n + 1));
    let mut calls = Vec::new();
    for _ in 0..clients_n {
        let (addr, all_in) = (addr.clone(), all_in.clone());
        calls.push(tokio::spawn(async move {
            let ch = weft::Channel::new(&addr, &Config::new()).unwrap();
            let r = ch.unary("echo", Bytes::from_static(b"hi")).await;
            // Hold the connection until every client is in.
            all_in.wait().await;
            r
        }));
    }
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(300), async {
        all_in.wait().await;
        for c in calls {
            assert_eq!(c.await.unwrap().expect("the call succeeds"), "hi");
        }
    })
    .await
    .expect("not every channel connected");
    println!(
        "{clients_n} channels connected and answered in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Item 46 (the cap): at the connection limit a newcomer gets a clear,
/// retry-safe refusal; once a connection closes it gets in.
#[tokio::test]
async fn item_46_the_connection_cap_refuses_clearly_and_admits_after_a_close() {
    let (addr, _stop) = start(secure().max_connections(Some(2))).await;
    let a = weft::connect(&addr, &secure()).await.unwrap();
    let b = weft::connect(&addr, &secure()).await.unwrap();
    echo(&a).await;
    echo(&b).await;
    let e = weft::connect(&addr, &secure())
        .await
        .expect_err("over the cap");
    assert!(e.is_retry_safe(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("connection limit") && text.contains("safe to retry"),
        "{text}"
    );
    a.connection().shutdown(Duration::ZERO).await;
    drop(a);
    let (c, _) = tokio::time::timeout(
        Duration::from_secs(30),
        connect_retrying(&addr, &secure(), 1),
    )
    .await
    .expect("a slot freed by a close is reused");
    echo(&c).await;
    echo(&b).await;
}

/// The per-address limit: a second connection from 127.0.0.1 is refused
/// (retry-safe) while the first is open.
#[tokio::test]
async fn a_per_address_limit_refuses_the_extra_connection() {
    let (addr, _stop) = start(secure().max_connections_per_address(Some(1))).await;
    let a = weft::connect(&addr, &secure()).await.unwrap();
    let e = weft::connect(&addr, &secure())
        .await
        .expect_err("over the share");
    assert!(e.is_retry_safe(), "{e}");
    assert!(e.to_string().contains("from this address"), "{e}");
    echo(&a).await;
}
