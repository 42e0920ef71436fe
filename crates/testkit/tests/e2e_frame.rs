//! Catalogue items 1-7 (frame codec) end to end: a hostile raw peer that
//! completed the handshake against a real weft-mux server over TCP
//! loopback, while a well-behaved bystander keeps doing round trips.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use weft_frame::preface::PREFACE;
use weft_frame::{Flags, Frame, FrameType, HEADER_LEN, Reason, VERSION};
use weft_mux::pipeline::HandshakeConfig;
use weft_mux::{Config, Metadata, Role};
use weft_testkit::{
    Bystander, EchoServer, Faults, FaultyIo, Mode, PeerRead, RawPeer, ServerOptions, data, open,
    round_trip,
};

/// A server in plain mode: hand-made headers reach the frame decoder as
/// they are (in the encrypted modes they fail authentication first, which
/// the record tests cover).
async fn plain_server() -> EchoServer {
    EchoServer::with(ServerOptions::mode(&Mode::plain())).await
}

async fn peer(server: &EchoServer) -> RawPeer {
    RawPeer::connect(server.addr(), server.client_handshake())
        .await
        .unwrap()
}

/// A raw 16-byte header: version, type, flags, reserved, stream id,
/// metadata length, payload length (docs/PROTOCOL.md section 2).
fn header(ty: FrameType, stream_id: u32, metadata_len: u32, payload_len: u32) -> [u8; HEADER_LEN] {
    let mut h = BytesMut::with_capacity(HEADER_LEN);
    h.put_u8(VERSION);
    h.put_u8(ty.0);
    h.put_u8(0);
    h.put_u8(0);
    h.put_u32(stream_id);
    h.put_u32(metadata_len);
    h.put_u32(payload_len);
    h[..].try_into().unwrap()
}

/// The server's connection `n` closes with `reason`, and no stream of it
/// ever reached a handler.
async fn closed_with(server: &EchoServer, n: usize, reason: Reason) {
    let conn = server.connection(n).await;
    tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .expect("server closes the connection");
    assert_eq!(conn.close_cause().unwrap().reason, reason);
}

#[tokio::test]
async fn item_01_truncated_frame_then_eof_closes_without_a_partial_frame() {
    for mode in Mode::all() {
        truncation_in(&mode).await;
    }
}

async fn truncation_in(mode: &Mode) {
    let server = EchoServer::with(ServerOptions::mode(mode)).await;
    let by = Bystander::start(&server).await;
    let mut probe = peer(&server).await;
    let mut whole = BytesMut::new();
    let mut md = Frame::new(
        FrameType::OPEN,
        Flags::END_STREAM,
        1,
        Bytes::from_static(b"payload"),
    );
    md.metadata = Metadata::builder().method("svc/m").finish();
    probe.encode(&md, &mut whole);
    drop(probe);
    // Connection 1 is the bystander, 2 the probe; each cut is one more.
    // Each connection encodes the frame with its own keys, then cuts it.
    for (i, cut) in (1..whole.len()).enumerate() {
        let mut p = peer(&server).await;
        let mut wire = BytesMut::new();
        p.encode(&md, &mut wire);
        p.send_raw(&wire[..cut]).await.unwrap();
        p.shutdown_write().await.unwrap();
        let (frames, end) = p.rest().await;
        let g = frames
            .iter()
            .find(|f| f.ty == FrameType::GOAWAY)
            .expect("GOAWAY");
        let reason = g.parse_goaway().unwrap().1;
        assert!(
            reason == Reason::PROTOCOL_ERROR || reason == Reason::FRAME_SIZE_ERROR,
            "{}: cut {cut}: {reason:?}",
            mode.name
        );
        assert!(
            matches!(end, PeerRead::Eof | PeerRead::Broken(_)),
            "{end:?}"
        );
        closed_with(&server, i + 3, reason).await;
    }
    assert!(
        server
            .outcomes()
            .iter()
            .all(|o| o.stream_id % 2 == 1 && o.end.is_ok())
    );
    assert_eq!(
        server.peak().inbound,
        1,
        "only bystander streams ever existed"
    );
    by.assert_progress(5).await;
    by.finish().await;
}

#[tokio::test]
async fn item_02_byte_at_a_time_random_chunks_and_all_at_once_echo_identically() {
    let server = EchoServer::start().await;
    let by = Bystander::start(&server).await;
    let body: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut frames = vec![open(1, b"head", false)];
    for (i, piece) in body.chunks(700).enumerate() {
        let last = i == body.len().div_ceil(700) - 1;
        frames.push(data(1, Bytes::copy_from_slice(piece), last));
    }
    let mut want = b"head".to_vec();
    want.extend_from_slice(&body);
    let mut results = Vec::new();
    for mode in 0..3 {
        let mut p = peer(&server).await;
        let mut wire = BytesMut::new();
        for f in &frames {
            p.encode(f, &mut wire);
        }
        match mode {
            0 => p.send_bytewise(&wire).await.unwrap(),
            1 => {
                let mut at = 0;
                let mut n = 1usize;
                while at < wire.len() {
                    n = (n * 31 + 17) % 97 + 1;
                    let end = (at + n).min(wire.len());
                    p.send_raw(&wire[at..end]).await.unwrap();
                    p.io_mut().flush_now().await;
                    at = end;
                }
            }
            _ => p.send_raw(&wire).await.unwrap(),
        }
        let mut got = Vec::new();
        loop {
            match p.recv().await {
                PeerRead::Frame(f) if f.stream_id == 1 => {
                    got.extend_from_slice(&f.payload);
                    if f.is_end_stream() {
                        break;
                    }
                }
                PeerRead::Frame(_) => {}
                other => panic!("mode {mode}: {other:?}"),
            }
        }
        results.push(got);
    }
    assert_eq!(results[0], want);
    assert_eq!(results[1], want);
    assert_eq!(results[2], want);
    by.assert_progress(5).await;
    by.finish().await;
}

/// Extension so the chunked writer yields between pieces (each piece its
/// own segment on the wire, as far as loopback allows).
trait FlushNow {
    async fn flush_now(&mut self);
}

impl FlushNow for tokio::net::TcpStream {
    async fn flush_now(&mut self) {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn item_03_length_fields_at_u32_max_rejected_before_allocation() {
    let server = plain_server().await;
    let by = Bystander::start(&server).await;
    let heads = [
        header(FrameType::DATA, 1, 0, u32::MAX),
        header(FrameType::OPEN, 1, u32::MAX, 0),
        header(FrameType::OPEN, 1, u32::MAX, u32::MAX),
        header(FrameType::OPEN, 1, 100, 10), // metadata longer than the frame body that follows
    ];
    for (i, h) in heads.iter().enumerate() {
        let mut p = peer(&server).await;
        p.send_raw(h).await.unwrap();
        if i == 3 {
            p.send_raw(&[0u8; 10]).await.unwrap();
            p.shutdown_write().await.unwrap();
        }
        let reason = p.goaway().await.expect("GOAWAY");
        assert!(
            reason == Reason::FRAME_SIZE_ERROR || reason == Reason::PROTOCOL_ERROR,
            "{reason:?}"
        );
    }
    // Nothing near a declared length was buffered or granted.
    let peak = server.peak();
    assert!(peak.recv_buffered < 64 * 1024, "{peak:?}");
    by.assert_progress(5).await;
    by.finish().await;
}

#[tokio::test]
async fn item_04_frame_over_the_maximum_rejected_from_the_header_alone() {
    let limits = weft_frame::Limits {
        max_payload: 16 * 1024,
        max_metadata: 1024,
    };
    // The decoder takes its limits from the handshake settings; the mux's
    // own `limits` only shape what it sends. Set both.
    let mut config = Config::default();
    config.limits(limits);
    let mode = Mode::plain();
    let mut options = ServerOptions::mode_with(&mode, config);
    options.config.handshake(HandshakeConfig {
        limits,
        ..mode.server.clone()
    });
    let server = EchoServer::with(options).await;
    let by = Bystander::start(&server).await;
    for h in [
        header(FrameType::DATA, 1, 0, 16 * 1024 + 1),
        header(FrameType::OPEN, 1, 1025, 0),
    ] {
        let mut p = peer(&server).await;
        // Only the header: the server must decide without the body.
        p.send_raw(&h).await.unwrap();
        assert_eq!(p.goaway().await, Some(Reason::FRAME_SIZE_ERROR));
    }
    by.assert_progress(5).await;
    by.finish().await;
}

#[tokio::test]
async fn item_05_unknown_preface_version_closes_before_any_crypto() {
    let server = EchoServer::start().await;
    let by = Bystander::start(&server).await;
    let mut bad = PREFACE;
    bad[4] = VERSION + 1; // the version byte
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tcp.write_all(&bad).await.unwrap();
    server.wait_handshake_failures(1).await;
    // The server answers with at most its own preface, then closes.
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut got)).await;
    assert!(got.len() <= PREFACE.len(), "{got:?}");
    assert!(
        server.connections().len() == 1,
        "only the bystander got through"
    );
    by.assert_progress(5).await;
    by.finish().await;
}

#[tokio::test]
async fn item_05_unknown_types_and_flags_ignored_within_budget_then_goaway() {
    let mut config = Config::default();
    config.unknown_frame_budget(32);
    let server = EchoServer::with(ServerOptions {
        config,
        ..ServerOptions::default()
    })
    .await;
    let by = Bystander::start(&server).await;
    let mut p = peer(&server).await;
    for i in 0..16u8 {
        p.send(&Frame::new(
            FrameType(0x40 + i),
            Flags::NONE,
            0,
            Bytes::from_static(b"?"),
        ))
        .await
        .unwrap();
    }
    // Unknown flag bits on a real frame: ignored, the frame still works.
    let mut f = open(1, b"flags", true);
    f.flags = Flags(0x81);
    p.send(&f).await.unwrap();
    let mut got = Vec::new();
    loop {
        match p.recv().await {
            PeerRead::Frame(f) if f.stream_id == 1 => {
                got.extend_from_slice(&f.payload);
                if f.is_end_stream() {
                    break;
                }
            }
            PeerRead::Frame(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        got, b"flags",
        "ignored within the budget, the connection serves"
    );
    // Now a flood past the budget.
    for i in 0..64u8 {
        if p.send(&Frame::new(
            FrameType(0x80 | i),
            Flags::NONE,
            3,
            Bytes::new(),
        ))
        .await
        .is_err()
        {
            break;
        }
    }
    assert_eq!(p.goaway().await, Some(Reason::ENHANCE_YOUR_CALM));
    by.assert_progress(5).await;
    by.finish().await;
}

#[tokio::test]
async fn item_06_control_frame_on_a_stream_and_stream_frame_on_the_connection() {
    let server = plain_server().await;
    let by = Bystander::start(&server).await;
    let wrong = [
        Frame::new(FrameType::PING, Flags::NONE, 1, Bytes::from_static(&[0; 8])),
        Frame::new(
            FrameType::GOAWAY,
            Flags::NONE,
            1,
            Bytes::from_static(&[0; 8]),
        ),
        Frame::new(FrameType::DATA, Flags::NONE, 0, Bytes::from_static(b"x")),
        Frame::new(FrameType::OPEN, Flags::NONE, 0, Bytes::new()),
        Frame::new(
            FrameType::RESET,
            Flags::NONE,
            0,
            Bytes::from_static(&[0; 4]),
        ),
    ];
    for f in &wrong {
        let mut p = peer(&server).await;
        // Bypass the encoder's own checks: raw header plus body.
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&header(f.ty, f.stream_id, 0, f.payload.len() as u32));
        wire.extend_from_slice(&f.payload);
        p.send_raw(&wire).await.unwrap();
        assert_eq!(p.goaway().await, Some(Reason::PROTOCOL_ERROR), "{f:?}");
    }
    by.assert_progress(5).await;
    by.finish().await;
}

#[tokio::test]
async fn item_07_zero_writes_fail_the_connection_and_short_writes_complete() {
    let server = EchoServer::start().await;
    let by = Bystander::start(&server).await;
    // Short writes: every write passes at most 3 bytes; calls complete.
    let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let io = FaultyIo::new(
        tcp,
        Faults {
            max_write: Some(3),
            ..Faults::default()
        },
    );
    let (conn, _inc) = weft_mux::connect(io, Role::Client, Config::default())
        .await
        .unwrap();
    for seq in 0..20 {
        round_trip(&conn, seq).await.unwrap();
    }
    // Ok(0) from the writer after the handshake: an error, never a spin.
    let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let io = FaultyIo::new(
        tcp,
        Faults {
            zero_writes_after: Some(1024), // past the handshake, before call 50
            ..Faults::default()
        },
    );
    let (conn, _inc) = weft_mux::connect(io, Role::Client, Config::default())
        .await
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), async {
        let mut last = Ok(());
        for seq in 0..50 {
            last = round_trip(&conn, seq).await;
            if last.is_err() {
                break;
            }
        }
        last
    })
    .await
    .expect("a zero write ends the connection promptly");
    assert!(r.is_err(), "calls fail once the writer takes nothing");
    tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .unwrap();
    assert!(conn.is_closed());
    by.assert_progress(5).await;
    by.finish().await;
}
