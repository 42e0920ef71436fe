//! Hostile clients that hold server slots without ever proving a key, over
//! real loopback sockets (docs/SECURITY.md, "Replayed first messages" and "Admission"):
//!
//! - a captured first flight (preface and handshake message) of NN, NNpsk0
//!   or IK replayed again and again: the server completes its side of the
//!   handshake on it, but the replayer holds none of the keys, so its
//!   connection must stay pending (evictable, under the handshake deadline)
//!   instead of taking one of `max_connections` for the idle timeout;
//! - silent and slow connections opened at five times the handshake slots
//!   every 200 ms, faster than any age-based protection allows.
//!
//! Wall-clock bounds here are failure conditions, never the thing measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weft::transform::StaticKey;
use weft::{Client, Config, EncryptionPolicy};

mod support;
use support::{connect_and_echo_within_retries, serve_with as start};

/// The servers' handshake deadline: every replay must be gone by then.
const DEADLINE: Duration = Duration::from_secs(1);

async fn echo(c: &Client) {
    let r = c.unary("echo", Bytes::from_static(b"hi")).await.unwrap();
    assert_eq!(r, "hi");
}

/// What a real client with `config` sends first (its preface and its
/// handshake message), read off the wire by a listener that then hangs up.
async fn capture_first_flight(config: &Config) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let config = config.clone();
    let client = tokio::spawn(async move { weft::connect(&addr, &config).await.map(drop) });
    let (mut s, _) = listener.accept().await.unwrap();
    let mut flight = vec![0u8; 8 + 16];
    s.read_exact(&mut flight).await.unwrap();
    assert_eq!(&flight[..4], b"WEFT");
    let len = u32::from_be_bytes(flight[8 + 12..8 + 16].try_into().unwrap()) as usize;
    let mut message = vec![0u8; len];
    s.read_exact(&mut message).await.unwrap();
    flight.extend_from_slice(&message);
    drop(s);
    let _ = client.await;
    flight
}

/// Replays `flight` against `addr` until `stop`, `replayers` connections
/// at a time, each re-opened 20 ms after the server drops it. Returns each
/// replayed connection's lifetime once stopped.
fn replay(
    addr: &str,
    flight: Vec<u8>,
    replayers: usize,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Duration>> {
    let flight = Arc::new(flight);
    let tasks: Vec<_> = (0..replayers)
        .map(|_| {
            let (addr, flight, stop) = (addr.to_owned(), flight.clone(), stop.clone());
            tokio::spawn(async move {
                let mut lives = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let mut s = TcpStream::connect(&addr).await.unwrap();
                    s.write_all(&flight).await.unwrap();
                    let mut sink = Vec::new();
                    // The server's reply, then nothing from us: it must
                    // hang up by its handshake deadline (the bound only
                    // catches a server that never does).
                    let ended = tokio::time::timeout(
                        DEADLINE + Duration::from_secs(10),
                        s.read_to_end(&mut sink),
                    )
                    .await;
                    lives.push(started.elapsed());
                    if ended.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                lives
            })
        })
        .collect();
    tokio::spawn(async move {
        let mut lives = Vec::new();
        for t in tasks {
            lives.extend(t.await.unwrap());
        }
        lives
    })
}

/// The replay scenario for one handshake: a server with
/// `max_connections(4)`, as many replayers of one captured first flight
/// (each re-opened 20 ms after the server drops it, so every real connect
/// sets off a chain of replays evicting one another), and a real client
/// that must connect and call every time, on its first attempt or after
/// at most `support::RETRIES` retry-safe refusals 50 ms apart (what a `Channel`
/// does). A replay holding a slot would refuse it for the whole handshake
/// deadline (1 s); the admission policy may still evict a real client
/// whose handshake the server has not yet read when a newcomer arrives
/// (docs/SECURITY.md, "Admission"), which a loaded machine makes likely.
async fn replayed_first_flights_hold_no_connection_slot(server: Config, client: Config) {
    const TRIES: usize = 10;
    let server = server.max_connections(Some(4)).handshake_timeout(DEADLINE);
    let (addr, _stop) = start(server).await;
    let flight = capture_first_flight(&client).await;
    let stop = Arc::new(AtomicBool::new(false));
    let replays = replay(&addr, flight, 4, stop.clone());
    // Let the replays fill the cap first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut retried = 0;
    for i in 0..TRIES {
        let (c, refusals) = connect_and_echo_within_retries(
            &addr,
            &client,
            &format!("try {i}: the real client was turned away"),
        )
        .await;
        retried += refusals;
        c.connection().shutdown(Duration::ZERO).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Past the deadline, so replays that nobody evicted have met it.
    tokio::time::sleep((DEADLINE + Duration::from_millis(200)).saturating_sub(started.elapsed()))
        .await;
    stop.store(true, Ordering::Relaxed);
    let lives = replays.await.unwrap();
    let longest = lives.iter().max().copied().unwrap_or_default();
    println!(
        "{TRIES} of {TRIES} real connects admitted ({retried} retries); {} replays, the longest held {longest:?}",
        lives.len()
    );
    assert!(lives.len() >= 4, "{lives:?}");
    // The deadline, plus room for a loaded machine's scheduling.
    assert!(
        longest <= DEADLINE + Duration::from_millis(1500),
        "a replay was held {longest:?}, past the handshake deadline of {DEADLINE:?}"
    );
}

/// NN: anyone may connect, but a replayed NN message still must
/// not count as a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_replayed_nn_first_flights_hold_no_connection_slot() {
    replayed_first_flights_hold_no_connection_slot(Config::new(), Config::new()).await;
}

/// NNpsk0: the replayed message is under the right pre-shared key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_replayed_nnpsk0_first_flights_hold_no_connection_slot() {
    let secure = || {
        Config::new()
            .encryption(EncryptionPolicy::Required)
            .psk([9; 32])
    };
    replayed_first_flights_hold_no_connection_slot(secure(), secure()).await;
}

/// IK: the replayed message carries an allowed client's static
/// key and is addressed to the server's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_replayed_ik_first_flights_hold_no_connection_slot() {
    let (server_key, client_key) = (
        StaticKey::generate().unwrap(),
        StaticKey::generate().unwrap(),
    );
    let server = Config::new()
        .encryption(EncryptionPolicy::Required)
        .identity(server_key.clone());
    let client = Config::new()
        .identity(client_key)
        .server_key(server_key.public_key());
    replayed_first_flights_hold_no_connection_slot(server, client).await;
}

/// One attacking connection: silent, or slow (a handshake header announcing
/// the largest message, then one byte short of it: more bytes than any real
/// first flight). Held until the server hangs up.
async fn attack(addr: String, slow: bool, done: Arc<AtomicUsize>) {
    let Ok(mut s) = TcpStream::connect(&addr).await else {
        return;
    };
    if slow {
        let mut bytes = b"WEFT\x00\x01\x00\x00".to_vec();
        bytes.extend_from_slice(&[1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
        bytes.push(0x02);
        bytes.extend_from_slice(&[0; 254]);
        let _ = s.write_all(&bytes).await;
    }
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut sink)).await;
    done.fetch_add(1, Ordering::Relaxed);
}

/// Silent and slow connections opened at five times the handshake
/// slots every 200 ms (faster than any connection can age) beside a real
/// client, which gets in on at least 95 % of its single attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_silent_and_slow_connections_at_5x_the_slots_per_200ms_do_not_keep_a_client_out() {
    const SLOTS: usize = 8;
    const TRIES: usize = 40;
    let (addr, _stop) = start(Config::new().max_pending_handshakes(SLOTS)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (opened, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let attacker = {
        let (addr, stop, opened, done) = (addr.clone(), stop.clone(), opened.clone(), done.clone());
        tokio::spawn(async move {
            // 5 x SLOTS per 200 ms.
            let every = Duration::from_millis(200) / (5 * SLOTS as u32);
            let mut tick = tokio::time::interval(every);
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let n = opened.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(attack(addr.clone(), n % 2 == 1, done.clone()));
            }
        })
    };
    // Every slot taken before the first try.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut admitted = 0;
    let mut refusals = Vec::new();
    for _ in 0..TRIES {
        match weft::connect(&addr, &Config::new()).await {
            Ok(c) => {
                echo(&c).await;
                admitted += 1;
            }
            Err(e) => refusals.push(e.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    attacker.await.unwrap();
    let opened = opened.load(Ordering::Relaxed);
    println!(
        "{admitted} of {TRIES} tries admitted in {elapsed:?} beside {opened} attacking connections \
         ({} already dropped by the server); refusals: {refusals:?}",
        done.load(Ordering::Relaxed)
    );
    assert!(
        opened as f64 >= 0.5 * (5 * SLOTS) as f64 * elapsed.as_secs_f64() / 0.2,
        "the attacker fell short of its rate: {opened} in {elapsed:?}"
    );
    assert!(
        admitted * 100 >= TRIES * 95,
        "{admitted} of {TRIES}: {refusals:?}"
    );
}

/// A replay evicted after the server's reply (its first record is what is
/// missing) ends with a clean end of file and nothing after the reply: no
/// refusal in clear that a client holding keys could not read, and no
/// reset (a real client evicted there reports its calls retry-safe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_a_replay_evicted_after_the_reply_ends_cleanly_with_nothing_more() {
    let secure = || {
        Config::new()
            .encryption(EncryptionPolicy::Required)
            .psk([9; 32])
    };
    let (addr, _stop) = start(secure().max_pending_handshakes(1)).await;
    let flight = capture_first_flight(&secure()).await;
    let mut replay = TcpStream::connect(&addr).await.unwrap();
    replay.write_all(&flight).await.unwrap();
    // The server's preface and its reply (header, then the message).
    let mut head = [0u8; 8 + 16];
    replay.read_exact(&mut head).await.unwrap();
    let len = u32::from_be_bytes(head[8 + 12..].try_into().unwrap()) as usize;
    let mut reply = vec![0u8; len];
    replay.read_exact(&mut reply).await.unwrap();
    // A real client takes the only slot.
    let c = weft::connect(&addr, &secure()).await.unwrap();
    echo(&c).await;
    let mut rest = Vec::new();
    let end = tokio::time::timeout(Duration::from_secs(5), replay.read_to_end(&mut rest))
        .await
        .expect("the replay kept its slot");
    assert!(end.is_ok(), "a reset, not a clean end: {end:?}");
    assert!(rest.is_empty(), "bytes after the reply: {rest:?}");
}
