//! What `weft::connect` reports when a connection cannot be had: a server
//! that never answers the handshake (a timeout, not retry-safe: the bytes
//! went out), and a full server on a Unix socket (a clear retry-safe
//! refusal, as over TCP). Wall-clock timeouts here are the thing under
//! test or a failure condition, never a speed bound.

use std::error::Error as _;
use std::time::Duration;

use bytes::Bytes;
use weft::{Config, Error, Listener, Router};

/// A handshake that never gets a reply ends at the client's handshake
/// timeout with a typed timeout, whatever the machine's speed (the peer
/// never answers at all).
#[tokio::test]
async fn a_silent_server_is_a_handshake_timeout() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        // Accept and hold the socket, reading nothing.
        let (sock, _) = silent.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(sock);
    });
    let timeout = Duration::from_millis(200);
    let started = std::time::Instant::now();
    let e = weft::connect(&addr, &Config::new().handshake_timeout(timeout))
        .await
        .unwrap_err();
    assert!(started.elapsed() >= timeout, "gave up early: {e}");
    assert!(matches!(e, Error::Connection(_)), "{e:?}");
    assert!(e.is_timeout(), "{e}");
    assert!(!e.is_retry_safe(), "the preface went out: {e}");
    assert!(e.source().is_some(), "{e}");
    held.abort();
}

/// A malformed address is neither a timeout nor worth a retry.
#[tokio::test]
async fn a_bad_address_is_neither_a_timeout_nor_retry_safe() {
    let e = weft::connect("no-port", &Config::new()).await.unwrap_err();
    assert!(matches!(e, Error::Address(_)), "{e:?}");
    assert!(!e.is_timeout() && !e.is_retry_safe(), "{e}");
}

/// The connection cap on a Unix socket refuses the newcomer clearly and
/// retry-safe, and the admitted connection keeps working.
#[cfg(unix)]
#[tokio::test]
async fn a_full_server_on_a_unix_socket_refuses_retry_safe() {
    let dir = std::env::temp_dir().join(format!("weft-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sock");
    let _ = std::fs::remove_file(&path);
    let addr = format!("unix:{}", path.display());
    let listener = Listener::bind(&addr).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let router = Router::new().unary("echo", |_c, req: Bytes| async move { Ok(req) });
    let config = Config::new().max_connections(Some(1));
    let serving = tokio::spawn(weft::serve(listener, router, config, async {
        let _ = stopped.await;
    }));
    let first = weft::connect(&addr, &Config::new()).await.unwrap();
    assert_eq!(
        first.unary("echo", Bytes::from_static(b"a")).await.unwrap(),
        "a"
    );
    let e = weft::connect(&addr, &Config::new())
        .await
        .expect_err("over the cap");
    assert!(e.is_retry_safe(), "{e}");
    assert!(e.to_string().contains("connection limit"), "{e}");
    assert_eq!(
        first.unary("echo", Bytes::from_static(b"b")).await.unwrap(),
        "b"
    );
    drop(first);
    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
