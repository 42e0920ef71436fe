//! Catalogue items 12, 13 and 21 end to end over TCP loopback against a
//! real weft-mux server (or, for 21, a real client against a raw server),
//! with a bystander proving the server keeps serving.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use weft_frame::FrameType;
use weft_mux::pipeline::{HandshakeConfig, HandshakeRole};
use weft_mux::{Config, Metadata, Role};
use weft_testkit::{
    Bystander, EchoServer, PeerRead, RawPeer, ServerOptions, data, raw_listener, settings,
};

/// Sends `bytes` and returns what the server sent back before closing, and
/// whether it closed (EOF or reset) within 5 s.
async fn poke(server: &EchoServer, bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 1024];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    (got, closed)
}

#[tokio::test]
async fn item_12_garbage_http_tls_empty_and_oversize_closed_within_one_read() {
    let server = EchoServer::start().await;
    let by = Bystander::start(&server).await;
    let tls_client_hello = [
        0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03,
    ];
    let oversize = vec![0x41u8; 64 * 1024];
    let inputs: [&[u8]; 4] = [
        b"\x00\xff garbage \x13\x37",
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        &tls_client_hello,
        &oversize,
    ];
    for (i, input) in inputs.iter().enumerate() {
        let (got, closed) = poke(&server, input).await;
        assert!(closed, "input {i}: closed at once");
        // At most the server's own preface went out: no key agreement.
        assert!(got.len() <= 8, "input {i}: {got:?}");
        server.wait_handshake_failures(i + 1).await;
    }
    // Empty: connect and close at once.
    drop(TcpStream::connect(server.addr()).await.unwrap());
    server.wait_handshake_failures(5).await;
    assert_eq!(server.connections().len(), 1, "only the bystander got in");
    by.assert_progress(5).await;
    by.finish().await;
}

#[tokio::test]
async fn item_13_silent_and_trickling_peers_closed_at_the_handshake_deadline() {
    let mut config = Config::default();
    config.handshake_timeout(Duration::from_millis(400));
    let server = EchoServer::with(ServerOptions {
        config,
        ..ServerOptions::default()
    })
    .await;
    let by = Bystander::start(&server).await;
    let started = std::time::Instant::now();
    // Twenty silent connections at once, and one that trickles the preface
    // a byte every 150 ms (it would need 1.2 s).
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(TcpStream::connect(server.addr()).await.unwrap());
    }
    let mut slow = TcpStream::connect(server.addr()).await.unwrap();
    let trickle = async {
        for b in weft_frame::preface::PREFACE {
            if slow.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    };
    let (_, ()) = tokio::join!(by.assert_progress(10), trickle);
    server.wait_handshake_failures(21).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    let mut buf = [0u8; 16];
    for mut s in silent {
        // Closed: EOF after at most the preface.
        let mut total = 0;
        loop {
            match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => total += n,
                Err(_) => panic!("a silent connection stayed open"),
            }
        }
        assert!(total <= 8);
    }
    assert!(server.last_handshake_error().unwrap().contains("tim"));
    by.finish().await;
}

/// A raw server that completes the handshake, answers the client's first
/// stream with part of a response, then cuts the connection (`mid_frame`:
/// in the middle of a frame).
async fn cut_mid_response(mid_frame: bool) {
    let (listener, addr) = raw_listener().await.unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut p =
            RawPeer::handshake_over(tcp, HandshakeRole::Responder, HandshakeConfig::default())
                .await
                .unwrap();
        p.send(&settings()).await.unwrap();
        let id = loop {
            match p.recv().await {
                PeerRead::Frame(f) if f.ty == FrameType::OPEN => break f.stream_id,
                PeerRead::Frame(_) => {}
                other => panic!("{other:?}"),
            }
        };
        p.send(&data(id, Bytes::from_static(b"part one"), false))
            .await
            .unwrap();
        if mid_frame {
            let mut wire = bytes::BytesMut::new();
            p.encode(
                &data(id, Bytes::from_static(b"part two, never whole"), true),
                &mut wire,
            );
            p.send_raw(&wire[..wire.len() - 5]).await.unwrap();
        }
        p.shutdown_write().await.unwrap();
        // Held open (a close with unread input would be a reset) until the
        // client has seen the cut and closed its side.
        let _ = p.rest().await;
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (conn, _inc) = weft_mux::connect(tcp, Role::Client, Config::default())
        .await
        .unwrap();
    let mut s = conn
        .open(Metadata::new(), Bytes::from_static(b"call"), true)
        .await
        .unwrap();
    let first = s.recv().await.unwrap().unwrap();
    assert_eq!(&first.data[..], b"part one");
    let end = tokio::time::timeout(Duration::from_secs(5), s.recv())
        .await
        .expect("the cut is noticed");
    let err = end.expect_err("a cut is an error, never a clean end");
    assert!(err.is_closed(), "{err}");
    drop((s, conn));
    server.await.unwrap();
}

#[tokio::test]
async fn item_21_cut_mid_response_fails_the_call_never_a_clean_end() {
    cut_mid_response(false).await;
}

#[tokio::test]
async fn item_21_cut_mid_frame_fails_the_call_never_a_clean_end() {
    cut_mid_response(true).await;
}
