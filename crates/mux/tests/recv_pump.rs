//! The pump after a receive (issue 28): a receive that returns credit
//! queues a `WINDOW_UPDATE`, and with no frames already left for the
//! connection task (the turn is not `Owed`) nobody else writes it soon.
//! The peer, having filled the stream's window, waits for that credit.
//!
//! Deterministic: a raw peer over an in-memory pipe on a paused clock,
//! with keepalive and the idle clock off. A timer of the connection task
//! would pump in the receive's place seconds later (one does, about 10 s
//! in), so the credit must be on the wire before the clock moves at all.

use std::time::Duration;

use bytes::Bytes;
use weft_frame::{Flags, Frame, FrameType};
use weft_mux::{Config, Role};
use weft_testkit::{PeerRead, RawPeer};

/// The stream window, filled by the peer in pieces of [`PIECE`].
const WINDOW: u32 = 256 * 1024;
const PIECE: usize = 16 * 1024;

#[tokio::test(start_paused = true)]
async fn a_receive_that_returns_credit_writes_the_window_update() {
    let mut cfg = Config::default();
    cfg.stream_window(WINDOW)
        .adaptive_window(None)
        .keepalive_interval(None)
        .idle_timeout(None)
        .progress_timeout(None);
    let (_conn, mut incoming, mut peer) = RawPeer::start(Role::Server, cfg, 1 << 20).await;
    peer.send(&Frame::new(FrameType::OPEN, Flags::NONE, 1, Bytes::new()))
        .await
        .unwrap();
    let piece = Frame::new(
        FrameType::DATA,
        Flags::NONE,
        1,
        Bytes::from(vec![3u8; PIECE]),
    );
    peer.send_many(&piece, WINDOW as usize / PIECE)
        .await
        .unwrap();
    let mut st = incoming.accept().await.expect("the stream");
    // Every task idle: the connection task has read the whole window into
    // the stream's buffer and waits on the socket, with no wake-up owed
    // that would run it (and write for the receives) later.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The application takes every byte of the window, one receive at a
    // time, each ready at once (no task runs in between); the peer has
    // nothing more to send until credit comes back.
    let mut got = 0;
    while got < WINDOW as usize {
        got += st.recv().await.unwrap().expect("more data").data.len();
    }

    // Only the receives' pumps can have written the credit by now.
    let credit = tokio::time::timeout(Duration::from_millis(1), async {
        loop {
            match peer.recv().await {
                PeerRead::Frame(f) if f.ty == FrameType::WINDOW_UPDATE && f.stream_id == 1 => {
                    return f.parse_window_update().unwrap();
                }
                PeerRead::Frame(_) => {}
                end => panic!("the connection ended: {end:?}"),
            }
        }
    })
    .await
    .expect("the receive's pump wrote the stream's WINDOW_UPDATE");
    assert!(credit > 0);
    drop(st);
}
