//! Frame-decode inputs and the decode [`Op`].

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;
use weft_frame::{Flags, Frame, FrameCodec, FrameType, Metadata};

use crate::Op;

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

/// A copy of `encoded` in the state a read loop's buffer is in after its
/// first frame: already shared, so splitting a frame off it only bumps a
/// reference count. (A freshly cloned `BytesMut` would allocate its shared
/// header on the first split, which is the benchmark's cost, not the codec's.)
pub fn read_buffer(encoded: &BytesMut) -> BytesMut {
    let mut buf = encoded.clone();
    drop(buf.split_to(0));
    buf
}

/// Decodes one buffered frame and drops it.
#[derive(Debug)]
pub struct Decode {
    encoded: BytesMut,
    input: BytesMut,
    codec: FrameCodec,
}

impl Decode {
    /// A decode of `sample_frame(size)`.
    pub fn new(size: usize) -> Self {
        Self {
            encoded: encoded_frame(size),
            input: BytesMut::new(),
            codec: FrameCodec::default(),
        }
    }
}

impl Op for Decode {
    fn prepare(&mut self) {
        self.input = read_buffer(&self.encoded);
    }

    fn run(&mut self) {
        let frame = self.codec.decode(&mut self.input).unwrap().unwrap();
        black_box(frame);
    }

    fn bytes(&self) -> Option<u64> {
        Some(self.encoded.len() as u64)
    }
}
