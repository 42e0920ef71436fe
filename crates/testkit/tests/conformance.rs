//! Conformance of the server with docs/PROTOCOL.md, checked from a raw
//! peer (the behaviours an independent client found wrong, issue 18): a
//! streaming call past its deadline ends with `DEADLINE_EXCEEDED` (7.4),
//! whatever the handler was doing; a bad deflate stream on an `OPEN`
//! resets that stream with `COMPRESSION_ERROR` and the connection lives
//! (4).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use weft::{Code, Config, Listener, Metadata, Router, Status};
use weft_frame::FrameCodec;
use weft_frame::{Flags, Frame, FrameType, Reason};
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
    let (d1, d2, d3, d4) = (
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

/// A server-streaming handler blocked on flow control when its deadline
/// passes: the call still ends with `DEADLINE_EXCEEDED` (after the part of
/// the response already queued), not with `RESET(CANCEL)` (which 7.5 maps
/// to `CANCELLED`).
#[tokio::test]
async fn server_streaming_blocked_in_a_send_ends_with_deadline_exceeded() {
    let dropped = Arc::new(Notify::new());
    let mut p = serve_and_connect(router(&dropped)).await;
    p.send(&open_call(1, "svc/flood", true)).await.unwrap();
    dropped.notified().await;
    grant(&mut p, 1).await;
    assert_eq!(
        end_of(&mut p, 1).await,
        End::Status(Some(Code::DEADLINE_EXCEEDED.0))
    );
}

/// A client-streaming handler waiting for a request message.
#[tokio::test]
async fn client_streaming_waiting_for_requests_ends_with_deadline_exceeded() {
    let dropped = Arc::new(Notify::new());
    let mut p = serve_and_connect(router(&dropped)).await;
    p.send(&open_call(1, "svc/sink", false)).await.unwrap();
    dropped.notified().await;
    assert_eq!(
        end_of(&mut p, 1).await,
        End::Status(Some(Code::DEADLINE_EXCEEDED.0))
    );
}

/// A bidirectional handler blocked in a send (the caller has ended its
/// half), and one that is idle with the caller's half open: both end with
/// `DEADLINE_EXCEEDED` before any reset.
#[tokio::test]
async fn bidi_past_its_deadline_ends_with_deadline_exceeded() {
    let dropped = Arc::new(Notify::new());
    let mut p = serve_and_connect(router(&dropped)).await;
    p.send(&open_call(1, "svc/bidi-flood", true)).await.unwrap();
    dropped.notified().await;
    grant(&mut p, 1).await;
    assert_eq!(
        end_of(&mut p, 1).await,
        End::Status(Some(Code::DEADLINE_EXCEEDED.0))
    );
    p.send(&open_call(3, "svc/bidi-idle", false)).await.unwrap();
    dropped.notified().await;
    assert_eq!(
        end_of(&mut p, 3).await,
        End::Status(Some(Code::DEADLINE_EXCEEDED.0))
    );
}

/// The caller's side of the same rule: a raw server that ends a
/// server-streaming call inside a message with `DEADLINE_EXCEEDED` (what
/// weft sends when the deadline passes mid-send) makes the call fail with
/// that status, not with the `INTERNAL` of a cut message.
#[tokio::test]
async fn a_status_after_a_cut_message_is_the_callers_error() {
    use weft_mux::pipeline::HandshakeRole;
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
