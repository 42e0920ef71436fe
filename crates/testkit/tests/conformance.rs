//! Conformance of the server with docs/PROTOCOL.md, checked from a raw
//! peer (the behaviours an independent client written from the document
//! found wrong): a streaming call past its deadline ends with
//! `DEADLINE_EXCEEDED` (7.4), whatever the handler was doing; a bad
//! deflate stream on an `OPEN` resets that stream with `COMPRESSION_ERROR`
//! and the connection lives (4); flow-control windows count inflated
//! payload bytes, never wire bytes or the record tag (6.4); an offer below
//! the smallest max metadata is rejected in the handshake (3.4); no frame
//! inflates beyond the peer's offered max message (4).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use weft::{Code, Config, Listener, Metadata, Router, Status};
use weft_frame::FrameCodec;
use weft_frame::{Flags, Frame, FrameType, Reason};
use weft_mux::pipeline::{Handshake, HandshakeConfig, HandshakeRole};
use weft_testkit::{EchoServer, Mode, PeerRead, RawPeer, ServerOptions};

/// The deadline every call here carries.
const DEADLINE: Duration = Duration::from_millis(150);

/// Fires its notify when dropped: the server drops a handler's future at
/// the call's deadline, so this is the event "the deadline has passed".
struct DropSignal(Arc<Notify>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

/// A 16 KiB message body.
fn chunk() -> Bytes {
    Bytes::from(vec![7u8; 16 * 1024])
}

/// Handlers that never finish by themselves: each holds a [`DropSignal`].
fn router(dropped: &Arc<Notify>) -> Router {
    let (d1, d2, d3, d4, d5) = (
        dropped.clone(),
        dropped.clone(),
        dropped.clone(),
        dropped.clone(),
        dropped.clone(),
    );
    Router::new()
        // Sends until the peer's window is full, then waits for credit.
        .server_streaming("svc/flood", move |_c, _req, mut sink| {
            let signal = DropSignal(d1.clone());
            async move {
                let _signal = signal;
                loop {
                    sink.send(chunk()).await?;
                }
            }
        })
        // Waits for request messages that never come.
        .client_streaming("svc/sink", move |_c, mut rx| {
            let signal = DropSignal(d2.clone());
            async move {
                let _signal = signal;
                while rx.message().await?.is_some() {}
                std::future::pending::<Result<Bytes, Status>>().await
            }
        })
        // Sends without reading, until the window is full.
        .bidi("svc/bidi-flood", move |_c, mut s| {
            let signal = DropSignal(d3.clone());
            async move {
                let _signal = signal;
                loop {
                    s.send(chunk()).await?;
                }
            }
        })
        // Reads the caller's messages to their end while its sending half,
        // on a task of its own, sends until the window is full (what
        // `BidiStream::split` is for).
        .bidi("svc/bidi-spawned", move |_c, s| {
            let signal = DropSignal(d5.clone());
            async move {
                let _signal = signal;
                let (mut requests, mut responses) = s.split();
                let sending = tokio::spawn(async move {
                    loop {
                        responses.send(chunk()).await?;
                    }
                });
                while requests.message().await?.is_some() {}
                sending
                    .await
                    .unwrap_or_else(|_| Err(Status::internal("send task")))
            }
        })
        // Does nothing at all (the caller's half stays open).
        .bidi("svc/bidi-idle", move |_c, _s| {
            let signal = DropSignal(d4.clone());
            async move {
                let _signal = signal;
                std::future::pending::<Result<(), Status>>().await
            }
        })
}

/// A facade server on loopback and a raw peer connected to it.
async fn serve_and_connect(router: Router) -> RawPeer {
    let config = Config::new();
    let listener = Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = weft::serve(listener, router, Config::new(), std::future::pending()).await;
    });
    RawPeer::connect(addr.parse().unwrap(), config.handshake_config().clone())
        .await
        .unwrap()
}

/// An `OPEN` for `method` with [`DEADLINE`] and one empty message.
fn open_call(id: u32, method: &str, end: bool) -> Frame {
    let flags = if end { Flags::END_STREAM } else { Flags::NONE };
    let mut f = Frame::new(FrameType::OPEN, flags, id, Bytes::from_static(&[0; 4]));
    f.metadata = Metadata::builder()
        .method(method)
        .timeout(DEADLINE)
        .finish();
    f
}

/// How a stream ended for the peer.
#[derive(Debug, PartialEq)]
enum End {
    /// `END_STREAM` with this status code (None: no status entry).
    Status(Option<u32>),
    /// `RESET` with this reason.
    Reset(Reason),
    /// The connection ended first.
    Gone(PeerRead),
}

/// Reads until stream `id` ends, granting credit for everything it reads.
async fn end_of(p: &mut RawPeer, id: u32) -> End {
    loop {
        match p.recv().await {
            PeerRead::Frame(f) if f.stream_id == id && f.ty == FrameType::RESET => {
                return End::Reset(f.parse_reset().unwrap());
            }
            PeerRead::Frame(f) if f.stream_id == id => {
                if f.is_end_stream() {
                    return End::Status(f.metadata.status());
                }
            }
            PeerRead::Frame(_) => {}
            other => return End::Gone(other),
        }
    }
}

/// Lets a sender blocked on flow control go on: a large grant on the
/// stream and on the connection.
async fn grant(p: &mut RawPeer, id: u32) {
    let big = 1u32 << 30;
    p.send(&Frame::window_update(id, big)).await.unwrap();
    p.send(&Frame::window_update(0, big)).await.unwrap();
}

/// Calls `method` on stream `id` (ending the caller's half if `end`),
/// waits for the handler to be dropped at its deadline, grants credit if
/// `blocked` (the handler was waiting for it) and returns how the stream
/// ended for the caller.
async fn past_deadline(
    p: &mut RawPeer,
    dropped: &Notify,
    call: (u32, &str, bool),
    blocked: bool,
) -> End {
    let (id, method, end) = call;
    p.send(&open_call(id, method, end)).await.unwrap();
    dropped.notified().await;
    if blocked {
        grant(p, id).await;
    }
    end_of(p, id).await
}

const DEADLINE_EXCEEDED: End = End::Status(Some(Code::DEADLINE_EXCEEDED.0));

/// A server-streaming handler blocked on flow control when its deadline
/// passes: the call still ends with `DEADLINE_EXCEEDED` (after the part of
/// the response already queued), not with `RESET(CANCEL)` (which 7.5 maps
/// to `CANCELLED`).
#[tokio::test]
async fn server_streaming_blocked_in_a_send_ends_with_deadline_exceeded() {
    let dropped = Arc::new(Notify::new());
    let mut p = serve_and_connect(router(&dropped)).await;
    let call = (1, "svc/flood", true);
    assert_eq!(
        past_deadline(&mut p, &dropped, call, true).await,
        DEADLINE_EXCEEDED
    );
}

/// A client-streaming handler waiting for a request message.
#[tokio::test]
async fn client_streaming_waiting_for_requests_ends_with_deadline_exceeded() {
    let dropped = Arc::new(Notify::new());
    let mut p = serve_and_connect(router(&dropped)).await;
    let call = (1, "svc/sink", false);
    assert_eq!(
        past_deadline(&mut p, &dropped, call, false).await,
        DEADLINE_EXCEEDED
    );
}

/// A bidirectional handler blocked in a send (the caller has ended its
/// half), and one that is idle with the caller's half open: both end with
/// `DEADLINE_EXCEEDED` before any reset.
#[tokio::test]
async fn bidi_past_its_deadline_ends_with_deadline_exceeded() {
    let dropped = Arc::new(Notify::new());
    let mut p = serve_and_connect(router(&dropped)).await;
    let call = (1, "svc/bidi-flood", true);
    assert_eq!(
        past_deadline(&mut p, &dropped, call, true).await,
        DEADLINE_EXCEEDED
    );
    let call = (3, "svc/bidi-idle", false);
    assert_eq!(
        past_deadline(&mut p, &dropped, call, false).await,
        DEADLINE_EXCEEDED
    );
}

/// A bidirectional handler whose sending half runs on a task of its own,
/// blocked in a send when the deadline passes, after the caller has ended
/// its half: the handler is dropped but the spawned send still holds the
/// stream; the call still ends with `DEADLINE_EXCEEDED` once that send
/// is through, not with `RESET(CANCEL)` when its task lets go.
#[tokio::test]
async fn bidi_with_a_spawned_sender_past_its_deadline_ends_with_deadline_exceeded() {
    let dropped = Arc::new(Notify::new());
    let mut p = serve_and_connect(router(&dropped)).await;
    let call = (1, "svc/bidi-spawned", true);
    assert_eq!(
        past_deadline(&mut p, &dropped, call, true).await,
        DEADLINE_EXCEEDED
    );
}

/// The caller's side of the same rule: a raw server that ends a
/// server-streaming call inside a message with `DEADLINE_EXCEEDED` (what
/// weft sends when the deadline passes mid-send) makes the call fail with
/// that status, not with the `INTERNAL` of a cut message.
#[tokio::test]
async fn a_status_after_a_cut_message_is_the_callers_error() {
    let (listener, addr) = weft_testkit::raw_listener().await.unwrap();
    let config = Config::new();
    let hs = config.handshake_config().clone();
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut p = RawPeer::handshake_over(tcp, HandshakeRole::Responder, hs)
            .await
            .unwrap();
        p.send(&weft_testkit::settings()).await.unwrap();
        // The client's settings, then its OPEN.
        let open = loop {
            match p.recv().await {
                PeerRead::Frame(f) if f.ty == FrameType::OPEN => break f,
                PeerRead::Frame(_) => {}
                other => panic!("no OPEN: {other:?}"),
            }
        };
        // One whole message, then 3 bytes of a 10-byte one, then the end.
        let body = Bytes::from_static(&[0, 0, 0, 1, b'a', 0, 0, 0, 10, b'x', b'y', b'z']);
        p.send(&weft_testkit::data(open.stream_id, body, false))
            .await
            .unwrap();
        let mut end = weft_testkit::data(open.stream_id, Bytes::new(), true);
        end.metadata = Metadata::builder()
            .status(Code::DEADLINE_EXCEEDED.0)
            .message("deadline exceeded in the handler")
            .finish();
        p.send(&end).await.unwrap();
        let _ = finished.await;
    });
    let client = weft::connect(&addr.to_string(), &config).await.unwrap();
    let mut s = client
        .server_streaming("svc/flood", Bytes::new(), &weft::CallOptions::new())
        .await
        .unwrap();
    assert_eq!(s.message().await.unwrap().unwrap(), "a");
    let e = s.message().await.unwrap_err();
    assert_eq!(e.code(), Code::DEADLINE_EXCEEDED, "{e}");
    done.send(()).unwrap();
    server.await.unwrap();
}

/// A frame of type `ty` with `COMPRESSED` set and `payload` as its claimed
/// deflate data, encoded by hand (the peer's pipeline owns that flag).
fn claimed_compressed(ty: FrameType, stream_id: u32, payload: &[u8]) -> bytes::BytesMut {
    let mut wire = bytes::BytesMut::new();
    let f = Frame::new(
        ty,
        Flags::COMPRESSED,
        stream_id,
        Bytes::copy_from_slice(payload),
    );
    FrameCodec::default().encode_frame(&f, &mut wire).unwrap();
    wire
}

/// Not a deflate stream (block type 3 is reserved).
const NOT_DEFLATE: &[u8] = b"\xff\xfe not deflate at all";

/// An `OPEN` whose payload does not inflate is reset with
/// `COMPRESSION_ERROR`, like a `DATA` frame (section 4); the id counts as
/// opened, so a later `DATA` on it is a late frame, not a frame for a
/// stream never opened: the connection serves on.
#[tokio::test]
async fn a_bad_deflate_open_resets_only_its_stream() {
    let server = EchoServer::with(ServerOptions::mode(&Mode::deflate())).await;
    let mut p = RawPeer::connect(server.addr(), server.client_handshake())
        .await
        .unwrap();
    p.send_raw(&claimed_compressed(FrameType::OPEN, 1, NOT_DEFLATE))
        .await
        .unwrap();
    assert_eq!(p.reset_of(1).await, Some(Reason::COMPRESSION_ERROR));
    p.send(&weft_testkit::data(1, Bytes::from_static(b"late"), true))
        .await
        .unwrap();
    p.send_raw(&claimed_compressed(FrameType::DATA, 1, NOT_DEFLATE))
        .await
        .unwrap();
    assert_eq!(p.echo(3, b"still serving").await.unwrap(), b"still serving");
    // The id rules still hold for a bad OPEN: one with our parity is a
    // protocol error, as any OPEN with it.
    p.send_raw(&claimed_compressed(FrameType::OPEN, 4, NOT_DEFLATE))
        .await
        .unwrap();
    assert_eq!(p.goaway().await, Some(Reason::PROTOCOL_ERROR));
}

/// The window the receiving peer grants below, per stream and for the
/// connection: the smallest a settings frame may announce (6.1).
const WINDOW: usize = 65_536;

/// Three windows of very compressible bytes.
fn compressible() -> Bytes {
    let text = b"weft counts inflated bytes against its windows. ".repeat(4 * WINDOW / 48);
    Bytes::copy_from_slice(&text[..3 * WINDOW])
}

/// The server's own stream window in these tests (fixed here, not the
/// default: the peer sends a whole body of three [`WINDOW`]s before any
/// credit, and the receive-window test sends one byte past it).
const SERVER_WINDOW: u32 = 256 * 1024;

/// `mode`'s server options with the stream window fixed at
/// [`SERVER_WINDOW`].
fn fixed_window(mode: &Mode) -> ServerOptions {
    let mut options = ServerOptions::mode(mode);
    options.config.stream_window(SERVER_WINDOW);
    options
}

/// A raw peer that announces [`WINDOW`] for streams and adds nothing to
/// the connection's baseline (also [`WINDOW`]), then sends `body` to the
/// echo server on stream 1 (within the server's own windows).
async fn echo_through_a_small_window(server: &EchoServer, body: &Bytes) -> RawPeer {
    let mut p = RawPeer::handshake(server.addr(), server.client_handshake())
        .await
        .unwrap();
    p.send(&weft_mux::session::settings_frame(0, WINDOW as u32))
        .await
        .unwrap();
    match p.recv().await {
        PeerRead::Frame(f) if f.ty == FrameType::WINDOW_UPDATE && f.stream_id == 0 => {}
        other => panic!("expected settings, got {other:?}"),
    }
    p.send(&Frame::new(FrameType::OPEN, Flags::NONE, 1, Bytes::new()))
        .await
        .unwrap();
    for piece in body.chunks(24_000) {
        let piece = Bytes::copy_from_slice(piece);
        p.send(&weft_testkit::data(1, piece, false)).await.unwrap();
    }
    p.send(&weft_testkit::data(1, Bytes::new(), true))
        .await
        .unwrap();
    p
}

/// One frame as it is on the wire (no record protection): type, flags,
/// stream id, metadata and payload as sent.
struct Wire {
    ty: u8,
    flags: u8,
    stream_id: u32,
    metadata: usize,
    payload: Vec<u8>,
}

/// Reads the next frame's raw bytes from the socket (plain mode only).
async fn wire_frame(p: &mut RawPeer, buf: &mut Vec<u8>) -> Wire {
    use tokio::io::AsyncReadExt;
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    loop {
        if buf.len() >= 16 {
            let (meta, len) = (be(&buf[8..12]) as usize, be(&buf[12..16]) as usize);
            if buf.len() >= 16 + meta + len {
                let f = Wire {
                    ty: buf[1],
                    flags: buf[2],
                    stream_id: be(&buf[4..8]),
                    metadata: meta,
                    payload: buf[16 + meta..16 + meta + len].to_vec(),
                };
                buf.drain(..16 + meta + len);
                return f;
            }
        }
        let mut chunk = [0u8; 8192];
        let n = tokio::time::timeout(weft_testkit::PEER_PATIENCE, p.io_mut().read(&mut chunk))
            .await
            .expect("the server stalled")
            .unwrap();
        assert_ne!(n, 0, "the server closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The server, as a sender, counts a compressed frame at its inflated
/// size: before any credit it sends exactly one window of inflated bytes,
/// in far fewer wire bytes, and stops; a peer that grants credit for what
/// it inflated receives the whole transfer, three windows.
#[tokio::test]
async fn windows_count_inflated_bytes_not_wire_bytes() {
    let server = EchoServer::with(fixed_window(&Mode::deflate())).await;
    let body = compressible();
    let mut p = echo_through_a_small_window(&server, &body).await;
    let (mut buf, mut got, mut wire) = (Vec::new(), Vec::new(), 0);
    let mut granted = false;
    loop {
        let f = wire_frame(&mut p, &mut buf).await;
        if f.stream_id != 1 || f.ty != FrameType::DATA.0 {
            continue;
        }
        wire += f.payload.len();
        if f.flags & Flags::COMPRESSED.0 != 0 {
            got.extend(miniz_oxide::inflate::decompress_to_vec(&f.payload).unwrap());
        } else {
            got.extend_from_slice(&f.payload);
        }
        assert_eq!(f.metadata, 0);
        if !granted && got.len() >= WINDOW {
            // One window exactly, then nothing without credit.
            assert_eq!(got.len(), WINDOW, "inflated bytes before any credit");
            assert!(wire < WINDOW / 4, "{wire} wire bytes: not compressed");
            grant(&mut p, 1).await;
            granted = true;
        }
        if f.flags & Flags::END_STREAM.0 != 0 {
            break;
        }
    }
    assert_eq!(got, body);
}

/// With records on (Noise NN with deflate), neither the record tag nor
/// compression counts: the peer, through its own record pipeline, reads
/// exactly one window of payload before it grants credit, then the rest.
#[tokio::test]
async fn windows_do_not_count_the_record_tag() {
    let server = EchoServer::with(fixed_window(&Mode::noise_nn())).await;
    let body = compressible();
    let mut p = echo_through_a_small_window(&server, &body).await;
    let mut got = Vec::new();
    let mut granted = false;
    loop {
        let f = match p.recv().await {
            PeerRead::Frame(f) if f.stream_id == 1 && f.ty == FrameType::DATA => f,
            PeerRead::Frame(_) => continue,
            other => panic!("after {} bytes: {other:?}", got.len()),
        };
        got.extend_from_slice(&f.payload);
        if !granted && got.len() >= WINDOW {
            assert_eq!(got.len(), WINDOW, "payload bytes before any credit");
            grant(&mut p, 1).await;
            granted = true;
        }
        if f.is_end_stream() {
            break;
        }
    }
    assert_eq!(got, body);
}

/// The server, as a receiver, also counts inflated bytes: a peer that
/// sends one byte more than the stream window ([`SERVER_WINDOW`]) to a handler that
/// does not read, in a few kilobytes of deflate, gets
/// `RESET(FLOW_CONTROL_ERROR)` on that stream; exactly the window is fine.
#[tokio::test]
async fn the_receive_window_counts_inflated_bytes() {
    let mut options = fixed_window(&Mode::deflate());
    options.handler_delay = Duration::from_secs(3600);
    let server = EchoServer::with(options).await;
    let mut p = RawPeer::connect(server.addr(), server.client_handshake())
        .await
        .unwrap();
    let window = SERVER_WINDOW as usize;
    for (id, len) in [(1, window), (3, window + 1)] {
        p.send(&Frame::new(FrameType::OPEN, Flags::NONE, id, Bytes::new()))
            .await
            .unwrap();
        let body = Bytes::from(vec![b'w'; len]);
        for piece in body.chunks(60_000) {
            let piece = Bytes::copy_from_slice(piece);
            p.send(&weft_testkit::data(id, piece, false)).await.unwrap();
        }
    }
    // Stream 3's reset, and none for stream 1 before it.
    loop {
        match p.recv().await {
            PeerRead::Frame(f) if f.ty == FrameType::RESET => {
                assert_eq!(f.stream_id, 3, "{f:?}");
                assert_eq!(f.parse_reset().unwrap(), Reason::FLOW_CONTROL_ERROR);
                break;
            }
            PeerRead::Frame(_) => {}
            other => panic!("{other:?}"),
        }
    }
}

/// Everything the server sends a raw initiator whose first handshake
/// message is made with `client`, until it closes (what section 3.9 and
/// the pre-shared key text of section 3 describe).
async fn handshake_reply(server: &EchoServer, client: HandshakeConfig) -> Vec<u8> {
    let mut hs = Handshake::new(HandshakeRole::Initiator, client).unwrap();
    let mut out = bytes::BytesMut::new();
    hs.poll_transmit(&mut out);
    reply_to(server, &out).await
}

/// Everything the server sends after reading `sent`, until it closes.
async fn reply_to(server: &EchoServer, sent: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(sent).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(weft_testkit::PEER_PATIENCE, tcp.read_to_end(&mut got))
        .await
        .expect("the server closes")
        .unwrap();
    got
}

/// A wrong pre-shared key, or one on one side only, gets the server's
/// preface, then one rejection frame (3.9: `ff 01` authentication, `ff 05`
/// a key on one side only), then the end of the stream: nothing else.
#[tokio::test]
async fn wrong_or_one_sided_psk_gets_the_preface_a_rejection_and_a_close() {
    let server = EchoServer::with(ServerOptions::mode(&Mode::psk())).await;
    let mut wrong = Mode::psk().client;
    wrong.psk = Some([0x43; 32].into());
    let mut none = Mode::psk().client;
    none.psk = None;
    let preface = "5745465401000000";
    let rejection = |reason: &str| format!("{preface}01060000000000000000000000000002ff{reason}");
    assert_eq!(hex(&handshake_reply(&server, wrong).await), rejection("01"));
    assert_eq!(hex(&handshake_reply(&server, none).await), rejection("05"));
    // A server without a key, and a client with one.
    let server = EchoServer::with(ServerOptions::mode(&Mode::noise_nn())).await;
    let one_sided = Mode::psk().client;
    assert_eq!(
        hex(&handshake_reply(&server, one_sided).await),
        rejection("05")
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An offer whose max metadata cannot hold the server's 40-byte settings
/// frame (0, 39 bytes) is refused in the handshake with a rejection
/// (`ff 06`, malformed: 3.4 gives each field's range), not accepted and
/// then closed with a bare end of file when the settings do not fit.
#[tokio::test]
async fn an_offer_below_the_minimum_max_metadata_is_rejected_in_the_handshake() {
    let server = EchoServer::with(ServerOptions::mode(&Mode::plain())).await;
    let hello = |max_metadata: u32| {
        // A plain hello (kind 00): the offer in clear, 3.2 and 3.4.
        let mut message = vec![0x00, 0x01, 0x00, 0x00, 0x00];
        message.extend_from_slice(&65_536u32.to_be_bytes());
        message.extend_from_slice(&max_metadata.to_be_bytes());
        message.extend_from_slice(&(4u32 << 20).to_be_bytes());
        message.extend_from_slice(&100u32.to_be_bytes());
        let mut sent = weft_frame::preface::PREFACE.to_vec();
        sent.extend_from_slice(&[1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 21]);
        sent.extend_from_slice(&message);
        sent
    };
    let rejection = "574546540100000001060000000000000000000000000002ff06";
    for max_metadata in [0, 39] {
        let got = hex(&reply_to(&server, &hello(max_metadata)).await);
        assert_eq!(got, rejection, "max metadata {max_metadata}");
    }
}

/// A client offering max message 300 (3.4) that asks for an echo of 1,000
/// compressible bytes never gets a `DATA` frame inflating beyond 300: the
/// server sends such a payload uncompressed (4, a sender's rules).
#[tokio::test]
async fn no_frame_inflates_beyond_the_peers_max_message() {
    let server = EchoServer::with(ServerOptions::mode(&Mode::deflate())).await;
    let mut client = server.client_handshake();
    client.offer.max_message = 300;
    let mut p = RawPeer::connect(server.addr(), client).await.unwrap();
    let body = compressible().slice(..1_000);
    p.send(&Frame::new(
        FrameType::OPEN,
        Flags::END_STREAM,
        1,
        body.clone(),
    ))
    .await
    .unwrap();
    let (mut buf, mut got) = (Vec::new(), Vec::new());
    loop {
        let f = wire_frame(&mut p, &mut buf).await;
        if f.stream_id != 1 || f.ty != FrameType::DATA.0 {
            continue;
        }
        if f.flags & Flags::COMPRESSED.0 != 0 {
            let inflated = miniz_oxide::inflate::decompress_to_vec(&f.payload).unwrap();
            assert!(inflated.len() <= 300, "inflates to {}", inflated.len());
            got.extend(inflated);
        } else {
            got.extend_from_slice(&f.payload);
        }
        if f.flags & Flags::END_STREAM.0 != 0 {
            break;
        }
    }
    assert_eq!(got, body);
}
