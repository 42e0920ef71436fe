//! What crosses the network between a weft client and server is
//! ciphertext: a relay between them over TCP records every byte, and a
//! marker sent both ways never appears. CI runs this file with
//! `--all-features` too, so no feature of this crate (or one it unifies
//! below it) can swap the cipher for the fuzz-only null cipher
//! (docs/SECURITY.md, "The fuzz-only null cipher").

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weft::{Config, EncryptionPolicy, Listener, Router};

const MARKER: &[u8] = b"plaintext marker: this must never cross the wire as it is";

/// Copies `from` to `to`, appending what passes to `seen`.
async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    seen: Arc<Mutex<Vec<u8>>>,
) {
    let mut buf = vec![0; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        seen.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// A relay on loopback to `server`, recording both directions; returns its
/// address and the recording.
async fn relay(server: String) -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = TcpStream::connect(&server).await.unwrap();
            let (cr, cw) = client.into_split();
            let (ur, uw) = upstream.into_split();
            tokio::spawn(copy(cr, uw, record.clone()));
            tokio::spawn(copy(ur, cw, record.clone()));
        }
    });
    (addr, seen)
}

/// Runs one echo call of `MARKER` through the relay with `policy` on both
/// sides; returns whether the session encrypted and every byte relayed.
async fn echo_through_relay(policy: EncryptionPolicy) -> (bool, Vec<u8>) {
    let config = Config::new().encryption(policy).compression(false);
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let server_addr = listener.local_addr().unwrap();
    let router = Router::new().unary("echo", |_ctx, req| async move { Ok(req) });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(weft::serve(listener, router, config.clone(), async {
        let _ = stopped.await;
    }));
    let (addr, seen) = relay(server_addr).await;
    let client = weft::connect(&addr, &config).await.unwrap();
    let got = client
        .unary("echo", Bytes::from_static(MARKER))
        .await
        .unwrap();
    assert_eq!(got, MARKER);
    let encrypted = client.connection().negotiated().encrypted;
    drop(client);
    let _ = stop.send(());
    server.await.unwrap().unwrap();
    let bytes = seen.lock().unwrap().clone();
    (encrypted, bytes)
}

fn shows_marker(wire: &[u8]) -> bool {
    wire.windows(16).any(|w| MARKER.windows(16).any(|m| m == w))
}

#[tokio::test]
async fn an_encrypted_session_puts_no_plaintext_on_the_wire() {
    let (encrypted, wire) = echo_through_relay(EncryptionPolicy::Required).await;
    assert!(encrypted);
    assert!(wire.len() > 2 * MARKER.len(), "the call crossed the relay");
    assert!(!shows_marker(&wire), "plaintext on the wire: {wire:x?}");
    // The check sees plaintext when there is some: with encryption off the
    // marker crosses as it is (both ways).
    let (encrypted, wire) = echo_through_relay(EncryptionPolicy::Off).await;
    assert!(!encrypted && shows_marker(&wire));
}
