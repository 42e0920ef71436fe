//! The end of the handshake phase: a server's connection exists only once
//! the client's first record has opened (its handshake message alone may be
//! a replay), and a client whose connection ends cleanly before the
//! server's settings frame knows nothing it sent was processed.

use std::time::Duration;

use bytes::Bytes;
use weft_mux::pipeline::HandshakeRole;
use weft_mux::session::settings_frame;
use weft_mux::{Config, Metadata, connect};
use weft_testkit::{Mode, RawPeer};

fn config(mode: &Mode, handshake_timeout: Duration) -> Config {
    let mut c = Config::default();
    c.handshake_timeout(handshake_timeout)
        .handshake(mode.server.clone());
    c
}

#[tokio::test(start_paused = true)]
async fn a_server_waits_for_the_first_record_within_the_handshake_deadline() {
    for mode in [Mode::plain(), Mode::psk()] {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let cfg = config(&mode, Duration::from_secs(3));
        let mux = tokio::spawn(connect(a, weft_mux::Role::Server, cfg));
        // The handshake messages complete; then the client says nothing.
        let peer = RawPeer::handshake_on(b, HandshakeRole::Initiator, mode.client)
            .await
            .unwrap();
        let e = mux.await.unwrap().unwrap_err();
        assert!(e.is_timeout() && e.is_handshake(), "{e}");
        drop(peer);
    }
}

#[tokio::test]
async fn a_server_connection_starts_with_the_clients_first_frame() {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let cfg = config(&Mode::psk(), Duration::from_secs(30));
    let mux = tokio::spawn(connect(a, weft_mux::Role::Server, cfg));
    let mut peer = RawPeer::handshake_on(b, HandshakeRole::Initiator, Mode::psk().client)
        .await
        .unwrap();
    tokio::task::yield_now().await;
    assert!(
        !mux.is_finished(),
        "a connection before the client's first record"
    );
    peer.send(&settings_frame(0, 256 * 1024)).await.unwrap();
    let (conn, _incoming) = mux.await.unwrap().unwrap();
    assert!(conn.negotiated().authenticated);
}

#[tokio::test]
async fn a_first_record_over_the_bound_fails_before_it_is_buffered() {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let cfg = config(&Mode::plain(), Duration::from_secs(30));
    let mux = tokio::spawn(connect(a, weft_mux::Role::Server, cfg));
    let mut peer = RawPeer::handshake_on(b, HandshakeRole::Initiator, Mode::plain().client)
        .await
        .unwrap();
    let big = weft_frame::Frame::new(
        weft_frame::FrameType::DATA,
        weft_frame::Flags::NONE,
        1,
        Bytes::from(vec![0; weft_mux::MAX_FIRST_RECORD]),
    );
    peer.send(&big).await.unwrap();
    let e = mux.await.unwrap().unwrap_err();
    assert!(
        e.is_handshake() && e.to_string().contains("first record"),
        "{e}"
    );
}

#[tokio::test]
async fn a_clean_close_before_the_servers_settings_fails_streams_retry_safe() {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let mut cfg = config(&Mode::plain(), Duration::from_secs(30));
    cfg.handshake(Mode::plain().client);
    let client = tokio::spawn(connect(a, weft_mux::Role::Client, cfg));
    let peer = RawPeer::handshake_on(b, HandshakeRole::Responder, Mode::plain().server)
        .await
        .unwrap();
    let (conn, _incoming) = client.await.unwrap().unwrap();
    let mut stream = conn
        .open(
            Metadata::builder().method("m").finish(),
            Bytes::from_static(b"x"),
            true,
        )
        .await
        .unwrap();
    // The server ends the connection cleanly without its settings frame
    // (as a server does when it evicts a connection whose first record it
    // had not read): it processed nothing.
    drop(peer);
    let e = stream.recv().await.unwrap_err();
    assert!(e.is_unprocessed() && e.is_closed(), "{e}");
    assert!(e.to_string().contains("safe to retry"), "{e}");
}
