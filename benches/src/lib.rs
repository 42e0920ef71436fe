//! Shared inputs for weft's benches, so every bench and the allocation
//! harness measure the same bytes.
#![forbid(unsafe_code)]

use bytes::{Bytes, BytesMut};
use weft_frame::{Flags, Frame, FrameCodec, FrameType, Metadata};

/// The payload sizes of the three frame-decode targets.
pub const FRAME_SIZES: [usize; 3] = [64, 1024, 64 * 1024];

/// A representative DATA frame with `size` payload bytes and a method entry.
pub fn sample_frame(size: usize) -> Frame {
    Frame {
        ty: FrameType::DATA,
        flags: Flags::END_STREAM,
        stream_id: 1,
        metadata: Metadata::builder().method("bench/echo").finish(),
        payload: Bytes::from(vec![0xA5; size]),
    }
}

/// `sample_frame(size)` encoded.
pub fn encoded_frame(size: usize) -> BytesMut {
    let mut out = BytesMut::new();
    FrameCodec::default()
        .encode_frame(&sample_frame(size), &mut out)
        .expect("sample frame fits the default limits");
    out
}
