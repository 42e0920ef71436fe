//! Frame decode at 64 B, 1 KiB and 64 KiB: the encoded bytes are prepared
//! outside the timed region and the decoded frame is returned (consumed).

use bytes::BytesMut;
use tokio_util::codec::Decoder;
use weft_frame::{Frame, FrameCodec};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

#[divan::bench(args = weft_benches::FRAME_SIZES)]
fn decode(bencher: divan::Bencher<'_, '_>, size: usize) {
    let encoded = weft_benches::encoded_frame(size);
    let mut codec = FrameCodec::default();
    bencher
        .counter(divan::counter::BytesCount::new(encoded.len()))
        // A connection's read buffer is shared after its first frame: see
        // `read_buffer` for why the inputs are prepared this way.
        .with_inputs(|| -> BytesMut { weft_benches::frame::read_buffer(&encoded) })
        .bench_local_refs(|buf| -> Frame { codec.decode(buf).unwrap().unwrap() });
}
