//! Peak heap under attack, measured with a counting global allocator
//! (harness = false: this process runs nothing else). A real server over
//! TCP loopback; the figure is the growth of live heap bytes over the
//! baseline of an idle connected server, and each bound is far below what
//! the attack would cost if a limit were missing.
#![allow(unsafe_code)] // reason: a global allocator is an unsafe trait; it only counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use miniz_oxide::deflate::compress_to_vec;
use weft_frame::{Flags, Frame, FrameCodec, FrameType};
use weft_mux::Config;
use weft_testkit::{EchoServer, Mode, PeerRead, RawPeer, ServerOptions, data, open};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` unchanged; only counters move.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new) };
        if !p.is_null() {
            if new >= layout.size() {
                let now =
                    LIVE.fetch_add(new - layout.size(), Ordering::Relaxed) + new - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `attack` and returns the peak growth of live heap over the live
/// heap just before it.
async fn peak_growth<F: std::future::Future<Output = ()>>(attack: F) -> usize {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    attack.await;
    PEAK.load(Ordering::Relaxed).saturating_sub(base)
}

const MIB: usize = 1024 * 1024;

async fn bomb(server: &EchoServer) {
    let mut p = RawPeer::connect(server.addr(), server.client_handshake())
        .await
        .unwrap();
    let bomb = compress_to_vec(&vec![0u8; 64 * MIB], 9);
    let growth = peak_growth(async {
        for i in 0..8u32 {
            let id = 2 * i + 1;
            p.send(&open(id, b"", false)).await.unwrap();
            let mut wire = BytesMut::new();
            FrameCodec::default()
                .encode_frame(
                    &Frame::new(
                        FrameType::DATA,
                        Flags::COMPRESSED,
                        id,
                        Bytes::from(bomb.clone()),
                    ),
                    &mut wire,
                )
                .unwrap();
            p.send_raw(&wire).await.unwrap();
            assert!(p.reset_of(id).await.is_some());
        }
    })
    .await;
    // 8 bombs of 64 MiB each; the limit is one 64 KiB payload at a time.
    println!("bomb: peak heap growth {growth} bytes (8 x 64 MiB bombs)");
    assert!(growth < 4 * MIB, "bomb: {growth} bytes");
}

async fn window_flood(server: &EchoServer) {
    let mut p = RawPeer::connect(server.addr(), server.client_handshake())
        .await
        .unwrap();
    let chunk = Bytes::from(vec![7u8; 60 * 1024]);
    let growth = peak_growth(async {
        // Bounded: once the server has closed, its socket (kept open while
        // the test holds the connection handle) stops taking our writes.
        let _ = tokio::time::timeout(Duration::from_secs(3), async {
            // 64 streams whose handlers do not read, each pushed to its window:
            // 16 MiB offered, 1 MiB connection window.
            let mut ended = false;
            'outer: for i in 0..64u32 {
                let id = 2 * i + 1;
                if p.send(&open(id, b"", false)).await.is_err() {
                    break;
                }
                for _ in 0..4 {
                    if p.send(&data(id, chunk.clone(), false)).await.is_err() {
                        ended = true;
                        break 'outer;
                    }
                }
            }
            // The server answers beyond the window with FLOW_CONTROL_ERROR.
            if !ended {
                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                    loop {
                        match p.recv().await {
                            PeerRead::Frame(f) if f.ty == FrameType::GOAWAY => return,
                            PeerRead::Frame(_) => {}
                            _ => return,
                        }
                    }
                })
                .await;
            }
        })
        .await;
    })
    .await;
    // The server holds the writes off with its window, then closes.
    assert_eq!(
        server.close_reason(1).await,
        weft_frame::Reason::FLOW_CONTROL_ERROR
    );
    println!("window flood: peak heap growth {growth} bytes (16 MiB offered)");
    assert!(growth < 6 * MIB, "window flood: {growth} bytes");
}

/// Reads until nothing arrives for 300 ms (every stream stalled); returns
/// the frames read.
async fn settle(p: &mut RawPeer) -> usize {
    let mut frames = 0;
    while let Ok(PeerRead::Frame(_)) =
        tokio::time::timeout(Duration::from_millis(300), p.recv()).await
    {
        frames += 1;
    }
    frames
}

/// Hostile catalogue item 45 over real TCP: a client that never grants
/// credit (the baseline 64 KiB windows, no `WINDOW_UPDATE`) opens 128
/// server-streaming calls whose handler sends 8-byte messages for ever.
/// The facade server (send buffer 256 KiB per stream, the default) must
/// hold at most 2 x (buffer + 4 KiB) per stream; before the send buffer
/// counted each message's overhead it held about 2.4 MiB per stream.
async fn stalled_streams() {
    const STREAMS: u32 = 128;
    const SEND_BUFFER: usize = 256 * 1024;
    let router = weft::Router::new().server_streaming("tick", |_c, _b, mut sink| async move {
        loop {
            sink.send(Bytes::from_static(b"8 bytes!")).await?;
        }
    });
    let listener = weft::Listener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = weft::Config::new().idle_timeout(None);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(weft::serve(listener, router, config.clone(), async {
        let _ = stopped.await;
    }));
    let mut p = RawPeer::handshake(addr.parse().unwrap(), config.handshake_config().clone())
        .await
        .unwrap();
    p.send(&weft_mux::session::settings_frame(0, 64 * 1024))
        .await
        .unwrap();
    settle(&mut p).await;
    let base = LIVE.load(Ordering::Relaxed);
    let mut call = Frame::new(
        FrameType::OPEN,
        Flags::END_STREAM,
        0,
        Bytes::from_static(&[0, 0, 0, 0]),
    );
    call.metadata = weft_frame::Metadata::builder().method("tick").finish();
    for i in 0..STREAMS {
        call.stream_id = 2 * i + 1;
        p.send(&call).await.unwrap();
    }
    let frames = settle(&mut p).await;
    let per_stream = LIVE.load(Ordering::Relaxed).saturating_sub(base) / STREAMS as usize;
    println!(
        "stalled streams: {per_stream} bytes held per stream ({STREAMS} streams, {frames} frames \
         received before the stall)"
    );
    assert!(frames > 0, "the calls started");
    assert!(
        per_stream <= 2 * (SEND_BUFFER + 4096),
        "stalled streams: {per_stream} bytes per stream"
    );
    drop(p);
    let _ = stop.send(());
    let _ = server.await;
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = EchoServer::with(ServerOptions::mode(&Mode::deflate())).await;
        bomb(&server).await;
        // Streams of 256 KiB (set here, not the 64 KiB default): the flood
        // fills each with four 60 KiB chunks, 16 MiB offered in all, and
        // overruns the 1 MiB connection window.
        let mut config = Config::default();
        config.stream_window(256 * 1024);
        let mut slow = ServerOptions::mode_with(&Mode::plain(), config);
        slow.handler_delay = Duration::from_secs(30);
        let server = EchoServer::with(slow).await;
        window_flood(&server).await;
        stalled_streams().await;
    });
    println!("memory: ok");
}
