//! The settings frame each side sends first (section 6.4 of the
//! protocol): a connection `WINDOW_UPDATE` whose metadata announces the
//! sender's per-stream window and, optionally, its cap on the peer's
//! streams. Read by `Session::on_settings`.

use weft_frame::{Frame, Metadata};

use super::CONNECTION_ID;

/// The metadata key of the settings frame that announces a side's
/// per-stream receive window (section 6.4 of the protocol).
pub const STREAM_WINDOW_KEY: &[u8] = b"stream-window";
/// Settings key: how many concurrent streams the sender accepts from its
/// peer (a u32, big-endian). Optional: a peer that does not announce it is
/// treated as unlimited.
pub const MAX_STREAMS_KEY: &[u8] = b"max-streams";

/// The settings frame each side sends first: a connection `WINDOW_UPDATE`
/// (increment may be 0 here only) announcing the per-stream window, and no
/// stream cap.
pub fn settings_frame(conn_increment: u32, stream_window: u32) -> Frame {
    settings(conn_increment, stream_window, None)
}

/// Like [`settings_frame`], also announcing `max_streams`: how many
/// concurrent streams its sender accepts from the peer.
pub fn settings_frame_with_cap(conn_increment: u32, stream_window: u32, max_streams: u32) -> Frame {
    settings(conn_increment, stream_window, Some(max_streams))
}

fn settings(conn_increment: u32, stream_window: u32, max_streams: Option<u32>) -> Frame {
    let mut b = Metadata::builder().custom(STREAM_WINDOW_KEY, &stream_window.to_be_bytes());
    if let Some(n) = max_streams {
        b = b.custom(MAX_STREAMS_KEY, &n.to_be_bytes());
    }
    let mut f = Frame::window_update(CONNECTION_ID, conn_increment);
    f.metadata = b.finish();
    f
}
