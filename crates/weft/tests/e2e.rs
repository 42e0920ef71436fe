//! End to end over real sockets, encryption and compression on: one test
//! per call shape, plus transports, policies and graceful shutdown.
#![cfg(feature = "json")]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;
use weft::{CallOptions, Client, Code, Config, EncryptionPolicy, Listener, Router, Status};

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Add {
    a: i64,
    b: i64,
}

fn router() -> Router {
    support::streaming_shapes(Router::new())
        .unary("echo", |ctx, req| async move {
            // The handler sees what the connection negotiated.
            if !(ctx.peer().encrypted && ctx.peer().compressed) {
                return Err(Status::new(
                    Code::FAILED_PRECONDITION,
                    "connection not encrypted and compressed",
                ));
            }
            Ok(req)
        })
        .unary_json("add", |_c, r: Add| async move { Ok(r.a + r.b) })
        .server_streaming_json("count", |_c, n: u32, mut sink| async move {
            for i in 0..n {
                sink.send_json(&i).await?;
            }
            Ok(())
        })
}

fn secure() -> Config {
    Config::new()
        .encryption(EncryptionPolicy::Required)
        .compression(true)
        .psk([42; 32])
}

/// A server on a loopback port; returns its address and shutdown trigger.
async fn start(
    config: Config,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let h = tokio::spawn(async move {
        weft::serve(listener, router(), config, async {
            let _ = rx.await;
        })
        .await
        .unwrap()
    });
    (addr, tx, h)
}

async fn client() -> (
    Client,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (addr, stop, h) = start(secure()).await;
    let c = weft::connect(&addr, &secure()).await.unwrap();
    let n = c.connection().negotiated();
    assert!(n.encrypted && n.compressed && n.authenticated, "{n:?}");
    (c, stop, h)
}

#[tokio::test]
async fn tcp_unary_encrypted_compressed() {
    let (c, _stop, _h) = client().await;
    // Compressible, beyond the compression threshold.
    let body = Bytes::from("weft ".repeat(2000));
    assert_eq!(c.unary("echo", body.clone()).await.unwrap(), body);
    let n: i64 = c.unary_json("add", &Add { a: 1, b: 2 }).await.unwrap();
    assert_eq!(n, 3);
}

#[tokio::test]
async fn tcp_server_streaming_encrypted_compressed() {
    let (c, _stop, _h) = client().await;
    let mut s = c
        .server_streaming_json("count", &500u32, &CallOptions::new())
        .await
        .unwrap();
    let mut n = 0;
    while let Some(v) = s.message_json::<u32>().await.unwrap() {
        assert_eq!(v, n);
        n += 1;
    }
    assert_eq!(n, 500);
}

#[tokio::test]
async fn tcp_client_streaming_encrypted_compressed() {
    let (c, _stop, _h) = client().await;
    let mut call = c
        .client_streaming("concat", &CallOptions::new())
        .await
        .unwrap();
    for i in 0..50u8 {
        call.send(Bytes::from(vec![b'a' + i % 26; 1000]))
            .await
            .unwrap();
    }
    assert_eq!(call.finish().await.unwrap().len(), 50_000);
}

#[tokio::test]
async fn tcp_bidi_encrypted_compressed() {
    let (c, _stop, _h) = client().await;
    let mut call = c.bidi("upper", &CallOptions::new()).await.unwrap();
    for w in ["abc", &"x".repeat(5000)] {
        call.send(Bytes::from(w.to_owned())).await.unwrap();
        assert_eq!(
            call.message().await.unwrap().unwrap(),
            w.to_ascii_uppercase()
        );
    }
    call.close_send().await.unwrap();
    assert_eq!(call.message().await.unwrap(), None);
}

#[tokio::test]
async fn required_against_off_fails_clearly() {
    let (addr, _stop, _h) = start(Config::new().encryption(EncryptionPolicy::Off)).await;
    let e = weft::connect(&addr, &Config::new().encryption(EncryptionPolicy::Required))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, weft::Error::Connection(m) if m.is_handshake()),
        "{e}"
    );
    // A wrong key fails too.
    let (addr, _stop2, _h2) = start(secure()).await;
    let wrong = secure().psk([1; 32]);
    assert!(weft::connect(&addr, &wrong).await.is_err());
}

#[tokio::test]
async fn graceful_shutdown_lets_calls_finish() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r2 = runs.clone();
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let router = Router::new().unary("slow", move |_c, b| {
        r2.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(b)
        }
    });
    let server = tokio::spawn(weft::serve(
        listener,
        router,
        Config::new().shutdown_drain(Duration::from_secs(5)),
        async {
            let _ = rx.await;
        },
    ));
    let c = weft::connect(&addr, &Config::new()).await.unwrap();
    let c2 = c.clone();
    let call = tokio::spawn(async move { c2.unary("slow", Bytes::from_static(b"done")).await });
    while runs.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.send(()).unwrap();
    assert_eq!(call.await.unwrap().unwrap(), "done");
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // The listener is gone and the connection closed.
    let e = c.unary("slow", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UNAVAILABLE);
    assert!(weft::connect(&addr, &Config::new()).await.is_err());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[cfg(unix)]
#[tokio::test]
async fn unix_socket() {
    let dir = std::env::temp_dir().join(format!("weft-test-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("s.sock");
    let _ = std::fs::remove_file(&path);
    let addr = format!("unix:{}", path.display());
    let listener = Listener::bind(&addr).await.unwrap();
    assert_eq!(listener.local_addr().unwrap(), addr);
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let h = tokio::spawn(weft::serve(listener, router(), secure(), async {
        let _ = rx.await;
    }));
    let c = weft::connect(&addr, &secure()).await.unwrap();
    let n: i64 = c.unary_json("add", &Add { a: 20, b: 22 }).await.unwrap();
    assert_eq!(n, 42);
    stop.send(()).unwrap();
    h.await.unwrap().unwrap();
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn in_memory_pair() {
    let c = weft::memory(router(), &secure()).await.unwrap();
    assert_eq!(
        c.unary("echo", Bytes::from_static(b"mem")).await.unwrap(),
        "mem"
    );
    assert!(c.connection().negotiated().encrypted);
}

#[tokio::test]
async fn bad_addresses() {
    assert!(matches!(
        weft::connect("nope", &Config::new()).await,
        Err(weft::Error::Address(_))
    ));
    assert!(matches!(
        Listener::bind("unix:").await,
        Err(weft::Error::Address(_))
    ));
    let e = weft::connect("127.0.0.1:1", &Config::new())
        .await
        .unwrap_err();
    assert!(matches!(e, weft::Error::Connect(_)), "{e}");
    assert!(e.is_retry_safe(), "nothing was sent");
    assert!(std::error::Error::source(&e).is_some());
}

#[tokio::test]
async fn half_open_handshakes_are_capped() {
    let config = Config::new()
        .max_pending_handshakes(1)
        .handshake_timeout(Duration::from_secs(30));
    let (addr, _stop, _h) = start(config).await;
    // A peer that connects and sends nothing holds the only handshake slot
    // (it is admitted first: the server takes connections in the order they
    // were made and admits each before it accepts the next)...
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // ...but however young it is, a real client takes the slot from it at
    // once, long before its handshake deadline...
    let client_cfg = Config::new().handshake_timeout(Duration::from_secs(5));
    let c = weft::connect(&addr, &client_cfg).await.unwrap();
    let n: i64 = c.unary_json("add", &Add { a: 1, b: 1 }).await.unwrap();
    assert_eq!(n, 2);
    // ...and the silent peer reads the retry-safe refusal (the server's
    // preface, then a GOAWAY with REFUSED_STREAM), not a bare close.
    let mut got = Vec::new();
    tokio::time::timeout(weft_testkit::STALL_LIMIT, silent.read_to_end(&mut got))
        .await
        .expect("the silent peer was not evicted")
        .unwrap();
    assert_eq!(&got[..4], b"WEFT", "{got:?}");
    assert_eq!(got[8 + 1], 0x05, "a GOAWAY: {got:?}");
    assert_eq!(&got[8 + 16 + 4..8 + 16 + 8], &4u32.to_be_bytes(), "{got:?}");
}
