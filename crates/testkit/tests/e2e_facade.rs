//! Catalogue items 13 (half-open handshake cap) and 36-41 (calls) end to
//! end against the `weft` facade's real TCP server (`weft::serve`): a raw
//! hostile peer sends crafted call frames, while a well-behaved
//! `weft::connect` client keeps completing calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, oneshot};
use weft::{Bytes as WBytes, Client, Code, Config, Listener, Metadata, Router, Status};
use weft_frame::metadata::tag;
use weft_frame::{Flags, Frame, FrameType};
use weft_testkit::{Changes, PeerRead, RawPeer, eventually};

struct Facade {
    addr: String,
    /// A permit for every `svc/work` call that has started.
    work_started: Arc<Semaphore>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Facade {
    async fn start(config: Config) -> Facade {
        let work_started = Arc::new(Semaphore::new(0));
        let started = work_started.clone();
        #[allow(unreachable_code)]
        let router = Router::new()
            .unary("svc/echo", |_c, b| async move { Ok(b) })
            .unary("svc/slow", |_c, _b| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(WBytes::from_static(b"late"))
            })
            .unary("svc/work", move |_c, _b| {
                started.add_permits(1);
                async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Ok(WBytes::from_static(b"done"))
                }
            })
            .unary("svc/boom", |_c, _b| async move {
                panic!("handler bug");
                Ok(WBytes::new())
            });
        let listener = Listener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            weft::serve(listener, router, config, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Facade {
            addr,
            work_started,
            stop: Some(tx),
            task,
        }
    }

    /// A raw-frame peer connected with `config`'s handshake settings.
    async fn raw_peer(&self, config: &Config) -> RawPeer {
        RawPeer::connect(
            self.addr.parse().unwrap(),
            config.handshake_config().clone(),
        )
        .await
        .unwrap()
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.task).await;
    }
}

/// A well-behaved client doing echo calls in the background.
struct Bystander {
    done: Arc<AtomicU64>,
    /// Bumped after each call and when the task ends.
    changes: Arc<Changes>,
    task: tokio::task::JoinHandle<Result<(), Status>>,
}

impl Bystander {
    async fn start(addr: &str, config: &Config) -> Bystander {
        let client = weft::connect(addr, config).await.unwrap();
        let done = Arc::new(AtomicU64::new(0));
        let changes = Arc::new(Changes::default());
        let (d, ch) = (done.clone(), changes.clone());
        let task = tokio::spawn(async move {
            let mut i = 0u64;
            let ended = loop {
                i += 1;
                let body = Bytes::from(i.to_string());
                let got = match client.unary("svc/echo", body.clone()).await {
                    Ok(got) => got,
                    Err(e) => break Err(e),
                };
                assert_eq!(got, body);
                d.fetch_add(1, Ordering::Relaxed);
                ch.bump();
                tokio::task::yield_now().await;
            };
            ch.bump();
            ended
        });
        let b = Bystander {
            done,
            changes,
            task,
        };
        b.progress(1).await;
        b
    }

    async fn progress(&self, more: u64) {
        let goal = self.done.load(Ordering::Relaxed) + more;
        let done = || {
            assert!(!self.task.is_finished(), "the bystander's call failed");
            (self.done.load(Ordering::Relaxed) >= goal).then_some(())
        };
        self.changes.until(done, || "bystander stalled").await;
    }
}

/// One raw call: `OPEN` with `meta` and an empty length-prefixed message,
/// then the final status code from the trailers (None if none came).
/// A whole call's `OPEN`: `meta`, one empty message, `END_STREAM`.
fn call_frame(id: u32, meta: Metadata) -> Frame {
    let mut f = Frame::new(
        FrameType::OPEN,
        Flags::END_STREAM,
        id,
        Bytes::from_static(&[0, 0, 0, 0]),
    );
    f.metadata = meta;
    f
}

async fn raw_call(p: &mut RawPeer, id: u32, meta: Metadata) -> Option<u32> {
    p.send(&call_frame(id, meta)).await.unwrap();
    loop {
        match p.recv().await {
            PeerRead::Frame(f) if f.stream_id == id && f.is_end_stream() => {
                return f.metadata.status();
            }
            PeerRead::Frame(f) if f.stream_id == id && f.ty == FrameType::RESET => return None,
            PeerRead::Frame(_) => {}
            _ => return None,
        }
    }
}

#[tokio::test]
async fn item_13_half_open_handshakes_are_capped_by_the_facade() {
    let config = Config::new()
        .max_pending_handshakes(4)
        .handshake_timeout(Duration::from_secs(3));
    let server = Facade::start(config.clone()).await;
    let by = Bystander::start(&server.addr, &config).await;
    // Four silent connections take every handshake slot (admitted first:
    // the server takes connections in the order they were made and admits
    // each before it accepts the next).
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(TcpStream::connect(&server.addr).await.unwrap());
    }
    // However young they are, each newcomer takes the slot of the one
    // without progress for longest: nothing piles up, and each evicted one
    // reads the retry-safe refusal (the server's preface and a
    // GOAWAY(REFUSED_STREAM)), not a bare close.
    let mut extras = Vec::new();
    for _ in 0..4 {
        extras.push(TcpStream::connect(&server.addr).await.unwrap());
    }
    for s in &mut silent {
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut got))
            .await
            .expect("a silent connection kept its slot")
            .unwrap();
        assert_eq!(&got[..4], b"WEFT", "{got:?}");
        assert_eq!(got[8 + 1], FrameType::GOAWAY.0, "{got:?}");
        assert_eq!(
            &got[8 + 16 + 4..8 + 16 + 8],
            &4u32.to_be_bytes(),
            "REFUSED_STREAM"
        );
    }
    // The established client is unaffected.
    by.progress(10).await;
    // A real client gets in at once, long before their handshake deadline.
    let client = weft::connect(&server.addr, &config).await.unwrap();
    assert_eq!(
        client
            .unary("svc/echo", Bytes::from_static(b"in"))
            .await
            .unwrap(),
        "in"
    );
    drop(extras);
    drop(silent);
    server.stop().await;
}

#[tokio::test]
async fn item_36_malformed_negative_and_huge_deadlines_rejected_per_call() {
    let config = Config::new();
    let server = Facade::start(config.clone()).await;
    let by = Bystander::start(&server.addr, &config).await;
    let mut p = server.raw_peer(&config).await;
    let mut id = 1;
    for micros in [u64::MAX, 1u64 << 63, 8 * 24 * 3600 * 1_000_000] {
        let meta = Metadata::builder()
            .method("svc/echo")
            .raw(tag::TIMEOUT, &[], &micros.to_be_bytes())
            .finish();
        assert_eq!(
            raw_call(&mut p, id, meta).await,
            Some(Code::INVALID_ARGUMENT.0),
            "{micros}"
        );
        id += 2;
    }
    // Already expired: the handler never runs.
    let meta = Metadata::builder()
        .method("svc/slow")
        .timeout(Duration::ZERO)
        .finish();
    assert_eq!(
        raw_call(&mut p, id, meta).await,
        Some(Code::DEADLINE_EXCEEDED.0)
    );
    id += 2;
    // A short deadline on a slow handler: DEADLINE_EXCEEDED at the deadline.
    let meta = Metadata::builder()
        .method("svc/slow")
        .timeout(Duration::from_millis(100))
        .finish();
    let t = std::time::Instant::now();
    assert_eq!(
        raw_call(&mut p, id, meta).await,
        Some(Code::DEADLINE_EXCEEDED.0)
    );
    assert!(t.elapsed() >= Duration::from_millis(100));
    id += 2;
    // The connection lives.
    let meta = Metadata::builder().method("svc/echo").finish();
    assert_eq!(raw_call(&mut p, id, meta).await, Some(Code::OK.0));
    by.progress(5).await;
    server.stop().await;
}

#[tokio::test]
async fn item_40_unknown_and_odd_method_names_fail_that_call_only() {
    let config = Config::new();
    let server = Facade::start(config.clone()).await;
    let by = Bystander::start(&server.addr, &config).await;
    let mut p = server.raw_peer(&config).await;
    let cases: [(&str, Code); 8] = [
        ("svc/nope", Code::UNIMPLEMENTED),
        ("svc/../echo", Code::INVALID_ARGUMENT),
        ("a b", Code::INVALID_ARGUMENT),
        ("", Code::INVALID_ARGUMENT),
        ("é", Code::INVALID_ARGUMENT),
        ("/svc/echo", Code::OK),
        ("SVC/Echo", Code::OK),
        ("//svc//echo/", Code::OK),
    ];
    let mut id = 1;
    for (name, code) in cases {
        let meta = Metadata::builder().method(name).finish();
        assert_eq!(raw_call(&mut p, id, meta).await, Some(code.0), "{name:?}");
        id += 2;
    }
    assert_eq!(
        raw_call(&mut p, id, Metadata::new()).await,
        Some(Code::INVALID_ARGUMENT.0)
    );
    // Oversize message: over the server's 4 MiB limit (declared in the
    // length prefix), that call only.
    let client = weft::connect(&server.addr, &config).await.unwrap();
    let e = client
        .unary("svc/echo", Bytes::from(vec![0u8; 5 * 1024 * 1024]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::RESOURCE_EXHAUSTED, "{e}");
    assert_eq!(
        client
            .unary("svc/echo", Bytes::from_static(b"ok"))
            .await
            .unwrap(),
        "ok"
    );
    by.progress(5).await;
    server.stop().await;
}

#[tokio::test]
async fn item_41_handler_panic_is_internal_and_the_connection_lives() {
    let config = Config::new();
    let server = Facade::start(config.clone()).await;
    let by = Bystander::start(&server.addr, &config).await;
    let client: Client = weft::connect(&server.addr, &config).await.unwrap();
    for _ in 0..3 {
        let e = client.unary("svc/boom", Bytes::new()).await.unwrap_err();
        assert_eq!(e.code(), Code::INTERNAL);
    }
    assert_eq!(
        client
            .unary("svc/echo", Bytes::from_static(b"alive"))
            .await
            .unwrap(),
        "alive"
    );
    by.progress(5).await;
    server.stop().await;
}

#[tokio::test]
async fn item_39_shutdown_finishes_calls_in_flight_and_refuses_new_ones() {
    let config = Config::new().shutdown_drain(Duration::from_secs(2));
    let server = Facade::start(config.clone()).await;
    let client = weft::connect(&server.addr, &config).await.unwrap();
    // A call in flight when the shutdown starts (300 ms of work).
    let c2 = client.clone();
    let in_flight = tokio::spawn(async move { c2.unary("svc/work", Bytes::new()).await });
    // Its handler runs before the shutdown starts.
    server.work_started.acquire().await.unwrap().forget();
    let stop = tokio::spawn(server.stop());
    // It finishes during the drain, with its real answer.
    assert_eq!(in_flight.await.unwrap().unwrap(), "done");
    // New calls fail retry-safe (UNAVAILABLE) or find the connection gone
    // (once the shutdown is done: before, a call could still beat its
    // GOAWAY to the server).
    stop.await.unwrap();
    let e = client.unary("svc/echo", Bytes::new()).await.unwrap_err();
    assert!(
        e.code() == Code::UNAVAILABLE || e.code() == Code::CANCELLED,
        "{e}"
    );
}

/// Polls `fut` `n` times (other tasks run between polls), then drops it.
async fn poll_n_then_drop<F: std::future::Future>(fut: F, n: usize) {
    let mut fut = std::pin::pin!(fut);
    for _ in 0..n {
        let ready =
            std::future::poll_fn(|cx| std::task::Poll::Ready(fut.as_mut().poll(cx).is_ready()))
                .await;
        if ready {
            return;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn item_37_dropping_calls_at_every_await_point_leaks_nothing() {
    let config = Config::new();
    let server = Facade::start(config.clone()).await;
    let by = Bystander::start(&server.addr, &config).await;
    let client = weft::connect(&server.addr, &config).await.unwrap();
    let body = Bytes::from(vec![5u8; 20_000]);
    for n in 0..40 {
        poll_n_then_drop(client.unary("svc/echo", body.clone()), n).await;
        poll_n_then_drop(client.unary("svc/work", Bytes::new()), n).await;
    }
    // The connection still works, and once the cancellations have been
    // exchanged nothing is left: no stream, no credit outstanding.
    assert_eq!(client.unary("svc/echo", body.clone()).await.unwrap(), body);
    let conn = client.connection();
    let quiet = || {
        let st = conn.stats();
        (st.streams == 0 && st.control_queued == 0).then_some(st)
    };
    let st = eventually(quiet, || format!("{:?}", conn.stats())).await;
    assert_eq!(st.streams, 0, "{st:?}");
    assert_eq!(
        st.conn_recv_window + st.conn_recv_unacked,
        1024 * 1024,
        "{st:?}"
    );
    by.progress(5).await;
    server.stop().await;
}

#[tokio::test]
async fn item_52_a_request_followed_by_a_tcp_half_close_gets_its_reply() {
    let config = Config::new(); // encrypted and compressed, as deployed
    let server = Facade::start(config.clone()).await;
    let by = Bystander::start(&server.addr, &config).await;
    let mut p = server.raw_peer(&config).await;
    // svc/work answers after 300 ms: long after the half-close is read.
    let meta = Metadata::builder().method("svc/work").finish();
    p.send(&call_frame(1, meta)).await.unwrap();
    p.shutdown_write().await.unwrap();
    let (frames, end) = p.rest().await;
    assert_eq!(end, PeerRead::Eof, "{frames:?}");
    let body: Vec<u8> = frames
        .iter()
        .filter(|f| f.stream_id == 1 && f.ty == FrameType::DATA)
        .flat_map(|f| f.payload.iter().copied())
        .collect();
    assert!(body.ends_with(b"done"), "{frames:?}");
    let last = frames.iter().rfind(|f| f.stream_id == 1).unwrap();
    assert!(last.is_end_stream(), "{frames:?}");
    assert_eq!(last.metadata.status(), Some(Code::OK.0), "{frames:?}");
    by.progress(3).await;
    server.stop().await;
}
