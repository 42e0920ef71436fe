//! A well-behaved client with more callers than the server's stream cap:
//! every call either completes or is refused retry-safe and completes on a
//! retry, and the connection stays up — though each call streams many
//! `DATA` frames after its `OPEN` (the soak shape that once closed
//! connections with "late frame flood"). The session-level tests pin the
//! rule underneath: what a peer sends on a stream before it reads our
//! refusal is dropped for free, within the window it had.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use support::{Scripted, goaway, resets};
use weft_mux::{Config, Connection, Incoming, Metadata, Reason, Stream, StreamError};
use weft_testkit::duplex_pair;

/// The server's stream cap, and the client's callers (more than the cap).
const CAP: usize = 3;
const CALLERS: usize = 5;
const CALLS: usize = 20;
/// `DATA` frames each call sends after its `OPEN`, and their size.
const FRAMES: usize = 16;
const FRAME: usize = 512;

/// The server: every stream read to its end, then answered with the byte
/// count, like a client-streaming handler. A handler whose stream failed
/// (the caller cancelled) holds its slot a moment longer before it lets
/// go, as a handler does until it notices.
async fn serve(mut incoming: Incoming) {
    while let Some(stream) = incoming.accept().await {
        tokio::spawn(async move {
            if let Err(held) = answer(stream).await {
                tokio::time::sleep(Duration::from_millis(1)).await;
                drop(held);
            }
        });
    }
}

/// Answers `stream`; on failure the stream is handed back (still held).
async fn answer(mut stream: Stream) -> Result<(), Stream> {
    let mut n = 0u64;
    loop {
        match stream.recv().await {
            Ok(Some(chunk)) => n += chunk.data.len() as u64,
            Ok(None) => break,
            Err(_) => return Err(stream),
        }
    }
    let answer = Bytes::copy_from_slice(&n.to_be_bytes());
    stream.send(answer, true).await.map_err(|_| stream)
}

/// How one attempt ended.
enum Attempt {
    /// Answered with this byte count.
    Answered(u64),
    /// Refused, retry-safe.
    Refused,
    /// Dropped by the caller half-way.
    Cancelled,
}

/// One client-streaming call, dropped after half its frames if `cancel`.
async fn call(client: &Connection, cancel: bool) -> Result<Attempt, String> {
    let refused = |e: StreamError| {
        if e.is_refused() {
            Ok(Attempt::Refused)
        } else {
            Err(format!("call failed: {e}"))
        }
    };
    let mut stream = match client.open(Metadata::new(), Bytes::new(), false).await {
        Ok(s) => s,
        Err(e) if e.is_refused() => return Ok(Attempt::Refused),
        Err(e) => return Err(format!("open failed: {e}")),
    };
    for i in 0..FRAMES {
        if cancel && i == FRAMES / 2 {
            return Ok(Attempt::Cancelled); // the drop resets it (CANCEL)
        }
        let data = Bytes::from(vec![i as u8; FRAME]);
        if let Err(e) = stream.send(data, i + 1 == FRAMES).await {
            return refused(e);
        }
    }
    match stream.recv().await {
        Ok(Some(c)) => Ok(Attempt::Answered(u64::from_be_bytes(
            c.data[..].try_into().map_err(|_| "bad answer")?,
        ))),
        Ok(None) => Err("no answer".into()),
        Err(e) => refused(e),
    }
}

/// [`CALLERS`] tasks of [`CALLS`] calls each (every other one cancelled
/// if `cancelling`) on one connection to a server with [`CAP`] slots and
/// a late-frame budget low enough that a refused call's frames, were each
/// charged as a late frame, would exhaust it within a few refusals.
/// Returns how many attempts were refused (and retried).
async fn callers_over_the_cap(cancelling: bool) -> u64 {
    let mut server_config = Config::default();
    server_config
        .max_concurrent_streams(CAP)
        .late_frame_budget(64);
    let ((client, _ci), (server, incoming)) =
        duplex_pair(256 * 1024, Config::default(), server_config).await;
    tokio::spawn(serve(incoming));
    // One call first, so the server's settings (its cap) have arrived.
    let first = call(&client, false).await.unwrap();
    assert!(matches!(first, Attempt::Answered(_)));
    let retries = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CALLERS {
        let (client, retries) = (client.clone(), retries.clone());
        tasks.spawn(async move {
            for i in 0..CALLS {
                loop {
                    match call(&client, cancelling && i % 2 == 0).await? {
                        Attempt::Answered(n) if n == (FRAMES * FRAME) as u64 => break,
                        Attempt::Answered(n) => return Err(format!("answer {n}")),
                        Attempt::Cancelled => break,
                        Attempt::Refused => retries.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }
            Ok::<(), String>(())
        });
    }
    let all = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(r) = tasks.join_next().await {
            r.unwrap()?;
        }
        Ok::<(), String>(())
    })
    .await
    .expect("the calls end");
    let retries = retries.load(Ordering::Relaxed);
    assert_eq!(
        all,
        Ok(()),
        "client: {:?}, server: {:?}, {retries} retries",
        client.close_cause(),
        server.close_cause(),
    );
    assert!(!client.is_closed(), "{:?}", client.close_cause());
    assert!(!server.is_closed(), "{:?}", server.close_cause());
    retries
}

#[tokio::test]
async fn more_callers_than_the_cap_wait_for_a_slot_and_are_never_refused() {
    assert_eq!(
        callers_over_the_cap(false).await,
        0,
        "the client holds back to the server's cap"
    );
}

#[tokio::test]
async fn refusals_after_cancelled_calls_are_retried_and_the_connection_lives() {
    // A cancelled call's slot is free at the client at once, at the server
    // only when its handler lets go: the next call may be refused, and its
    // frames sent before the refusal arrived must not close the connection.
    let retries = callers_over_the_cap(true).await;
    assert!(retries > 0, "no refusal happened: the test tests nothing");
}

/// The server's window per stream (the default).
const WINDOW: usize = 64 * 1024;

/// A server session with a cap of one, its one slot taken, and no late
/// frame allowed at all.
fn full_server() -> Scripted {
    let mut cfg = Config::default();
    cfg.max_concurrent_streams(1).late_frame_budget(0);
    let mut t = Scripted::server(cfg);
    t.open(1, b"held", false);
    assert_eq!(t.s.accept(), Some(1));
    t
}

#[test]
fn data_sent_before_the_refusal_arrived_costs_no_late_frame() {
    let mut t = full_server();
    t.open(3, b"x", false);
    assert_eq!(resets(&t.out()), [(3, Reason::REFUSED_STREAM)]);
    // The client streams on until it reads the refusal: all of its window.
    let frame = 16 * 1024;
    for _ in 0..WINDOW / frame - 1 {
        t.data(3, Bytes::from(vec![7; frame]), false);
    }
    t.data(3, Bytes::from(vec![7; frame - 1]), true);
    assert!(!t.s.is_closed(), "{:?}", t.s.close_cause());
    // Their bytes went back to the connection window (all but the held
    // stream's unread request).
    let st = t.s.stats();
    assert_eq!(
        st.conn_recv_window + st.conn_recv_unacked,
        1024 * 1024 - b"held".len() as u32
    );
    // Its end came: anything more on it is a late frame (budget 0).
    t.data(3, Bytes::from_static(b"late"), false);
    assert_eq!(goaway(&t.out()), Some(Reason::ENHANCE_YOUR_CALM));
}

#[test]
fn a_refused_streams_reset_is_free_once() {
    let mut t = full_server();
    t.open(3, b"x", false);
    t.data(3, Bytes::from_static(b"more"), false);
    // The client gave up on it before it read the refusal.
    t.feed(weft_frame::Frame::reset(3, Reason::CANCEL));
    assert!(!t.s.is_closed(), "{:?}", t.s.close_cause());
    t.feed(weft_frame::Frame::reset(3, Reason::CANCEL));
    assert_eq!(goaway(&t.out()), Some(Reason::ENHANCE_YOUR_CALM));
}

#[test]
fn data_beyond_a_refused_streams_window_is_a_late_frame() {
    let mut t = full_server();
    t.open(3, b"", false);
    t.data(3, Bytes::from(vec![7; WINDOW]), false);
    assert!(
        !t.s.is_closed(),
        "exactly its window: {:?}",
        t.s.close_cause()
    );
    t.data(3, Bytes::from_static(b"x"), false);
    assert_eq!(goaway(&t.out()), Some(Reason::ENHANCE_YOUR_CALM));
}

#[tokio::test]
async fn a_caller_waiting_for_the_only_slot_gets_it_before_a_busy_one_takes_it_again() {
    let mut one = Config::default();
    one.max_concurrent_streams(1);
    let ((client, _ci), (_server, incoming)) = duplex_pair(64 * 1024, Config::default(), one).await;
    tokio::spawn(serve(incoming));
    let first = call(&client, false).await.unwrap();
    assert!(matches!(first, Attempt::Answered(_)), "the cap has arrived");
    // A busy caller: each call ends and the next opens in the same poll,
    // just as its own stream frees the slot.
    let busy_calls = Arc::new(AtomicU64::new(0));
    let busy = {
        let (client, n) = (client.clone(), busy_calls.clone());
        tokio::spawn(async move {
            for _ in 0..100 {
                let mut s = client
                    .open(Metadata::new(), Bytes::new(), true)
                    .await
                    .unwrap();
                match s.recv().await {
                    Ok(answer) => assert!(answer.is_some()),
                    // The waiting caller's stream, reset at the client, may
                    // still hold the server's slot.
                    Err(e) => assert!(e.is_refused(), "{e}"),
                }
                n.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    while busy_calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let before = busy_calls.load(Ordering::SeqCst);
    let s = client
        .open(Metadata::new(), Bytes::new(), true)
        .await
        .unwrap();
    let waited = busy_calls.load(Ordering::SeqCst) - before;
    drop(s);
    busy.await.unwrap();
    assert!(
        waited <= 1,
        "the waiting caller let {waited} calls of the busy one go first"
    );
}
