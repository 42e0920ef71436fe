//! The frame-decode [`Op`] and its read buffer.

use std::hint::black_box;

use bytes::BytesMut;
use tokio_util::codec::Decoder;
use weft_frame::FrameCodec;

use crate::{Op, encoded_frame};

/// A copy of `encoded` in the state a read loop's buffer is in after its
/// first frame: already shared, so splitting a frame off it only bumps a
/// reference count. (A freshly cloned `BytesMut` would allocate its shared
/// header on the first split, which is the benchmark's cost, not the codec's.)
/// `benches/frame.rs` prepares its inputs the same way.
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
