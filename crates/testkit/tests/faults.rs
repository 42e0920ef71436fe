//! Fault injection under real connections: a weft-mux client over
//! `FaultyIo<TcpStream>` doing sequential checked round trips against the
//! echo server. For every fault (drop, delay, truncate, corrupt, reset) at
//! several byte offsets: no completed round trip is lost or duplicated
//! (each echo matches its own request exactly once), and every incomplete
//! one fails with a definite error (connection closed, timed out, or
//! refused retry-safe) within a bound — never a hang, never a false success.

use std::time::Duration;

use tokio::net::TcpStream;
use weft_mux::{Config, Role};
use weft_testkit::{EchoServer, Faults, FaultyIo, Mode, STALL_LIMIT, ServerOptions, round_trip};

const CALLS: u64 = 40;

#[derive(Debug, Default)]
struct Tally {
    ok: Vec<u64>,
    failed: Vec<(u64, String)>,
}

/// Runs `CALLS` sequential round trips through a client whose socket
/// misbehaves as `faults` says. Keepalive (and the handshake timeout)
/// detect a peer that went silent (a black hole, a corrupted length that
/// leaves the client waiting for bytes that never come): runs whose
/// faults only slow or split the bytes get long timeouts instead, so that
/// a pong late on a loaded machine cannot fail a call that must succeed.
async fn run(server: &EchoServer, faults: Faults) -> Tally {
    let tcp = TcpStream::connect(server.addr()).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let lossless = Faults {
        delay_reads_after: None,
        max_write: None,
        ..faults.clone()
    } == Faults::default();
    let (keepalive, handshake) = if lossless {
        (STALL_LIMIT, STALL_LIMIT)
    } else {
        (Duration::from_millis(300), Duration::from_secs(2))
    };
    let mut config = Config::default();
    config
        .handshake(server.client_handshake())
        .keepalive_interval(Some(Duration::from_millis(200)))
        .keepalive_timeout(keepalive)
        .handshake_timeout(handshake);
    let mut tally = Tally::default();
    let conn = match weft_mux::connect(FaultyIo::new(tcp, faults), Role::Client, config).await {
        Ok((conn, _incoming)) => conn,
        Err(e) => {
            // The fault hit the handshake: a definite error, nothing ran.
            assert!(e.is_handshake() || e.is_timeout() || e.is_closed(), "{e}");
            tally.failed.push((0, e.to_string()));
            return tally;
        }
    };
    for seq in 1..=CALLS {
        // A hang catcher, not a speed bound: every failure here is
        // definite (a close, a reset, the keepalive) long before it.
        match tokio::time::timeout(STALL_LIMIT, round_trip(&conn, seq)).await {
            Err(_) => panic!("round trip {seq} hung"),
            Ok(Ok(())) => tally.ok.push(seq),
            Ok(Err(e)) => tally.failed.push((seq, e)),
        }
    }
    tally
}

/// The properties every faulty run must have.
fn check(t: &Tally, transport_detects: bool) {
    // Completed calls form a prefix 1..=k (sequential calls: once the
    // connection breaks nothing after it completes), each exactly once.
    // (With no transport integrity a corrupted payload fails only its own
    // call, caught by the caller's check; later calls go on.)
    let k = t.ok.len() as u64;
    if transport_detects {
        assert_eq!(t.ok, (1..=k).collect::<Vec<_>>(), "{t:?}");
    }
    let mut all: Vec<u64> =
        t.ok.iter()
            .copied()
            .chain(t.failed.iter().map(|f| f.0))
            .collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        t.ok.len() + t.failed.len(),
        "a call counted twice: {t:?}"
    );
    for (seq, e) in &t.failed {
        assert!(*seq == 0 || *seq > k || !transport_detects, "{t:?}");
        let definite = e.contains("closed")
            || e.contains("timed out")
            || e.contains("timeout")
            || e.contains("refused")
            || e.contains("reset");
        // Without encryption a flipped payload bit is not detected by the
        // transport; the caller's own check catches it (never counted ok).
        let app_detected = !transport_detects && e.contains("echo mismatch");
        // seq 0: connect itself failed, already checked by predicate.
        assert!(
            *seq == 0 || definite || app_detected,
            "indefinite failure: {e}"
        );
    }
    // Every call has exactly one result (or connect failed and none ran).
    if t.failed.first().is_some_and(|f| f.0 == 0) {
        assert!(t.ok.is_empty() && t.failed.len() == 1, "{t:?}");
    } else {
        assert_eq!(t.ok.len() + t.failed.len(), CALLS as usize, "{t:?}");
    }
}

#[tokio::test]
async fn drop_writes_black_hole_fails_calls_by_keepalive_not_a_hang() {
    let server = EchoServer::start().await;
    for at in [100, 700, 1500] {
        let t = run(
            &server,
            Faults {
                drop_writes_after: Some(at),
                ..Faults::default()
            },
        )
        .await;
        check(&t, true);
        assert!(!t.failed.is_empty(), "a black hole must fail calls: {t:?}");
    }
}

#[tokio::test]
async fn reset_writes_fail_calls_with_closed() {
    let server = EchoServer::start().await;
    for at in [8, 64, 500, 1300] {
        let t = run(
            &server,
            Faults {
                reset_writes_after: Some(at),
                ..Faults::default()
            },
        )
        .await;
        check(&t, true);
        assert!(t.ok.len() < CALLS as usize, "{t:?}");
    }
}

#[tokio::test]
async fn truncated_reads_fail_calls_never_a_clean_end() {
    let server = EchoServer::start().await;
    for at in [4, 30, 200, 900, 1601] {
        let t = run(
            &server,
            Faults {
                truncate_reads_after: Some(at),
                ..Faults::default()
            },
        )
        .await;
        check(&t, true);
        assert!(t.ok.len() < CALLS as usize, "{t:?}");
    }
}

#[tokio::test]
async fn corrupted_reads_are_detected_never_counted_as_success() {
    // Encrypted modes: any flipped bit closes the connection (the
    // transport detects it). Clear modes have no integrity check on payload
    // bytes; the caller's own check must catch it, never a false success.
    for (mode, transport_detects) in [
        (Mode::plain(), false),
        (Mode::noise_nn(), true),
        (Mode::psk(), true),
    ] {
        let server = EchoServer::with(ServerOptions::mode(&mode)).await;
        for at in [2, 12, 40, 333, 1000] {
            let t = run(
                &server,
                Faults {
                    corrupt_read_at: Some(at),
                    ..Faults::default()
                },
            )
            .await;
            check(&t, transport_detects);
            if transport_detects {
                assert!(t.ok.len() < CALLS as usize, "{}: {t:?}", mode.name);
            }
        }
    }
}

#[tokio::test]
async fn delayed_reads_complete_every_call_exactly_once() {
    let server = EchoServer::start().await;
    let t = run(
        &server,
        Faults {
            delay_reads_after: Some((100, Duration::from_millis(3))),
            ..Faults::default()
        },
    )
    .await;
    check(&t, true);
    assert_eq!(t.ok.len(), CALLS as usize, "{t:?}");
}

#[tokio::test]
async fn short_writes_complete_every_call_exactly_once() {
    let server = EchoServer::start().await;
    let t = run(
        &server,
        Faults {
            max_write: Some(5),
            ..Faults::default()
        },
    )
    .await;
    check(&t, true);
    assert_eq!(t.ok.len(), CALLS as usize, "{t:?}");
}
