//! Frame decoder fuzz target. The first byte picks a chunking seed, so the
//! fuzzer explores read sizes as well as contents; the same bytes decoded
//! all at once must give the same frames and the same error-or-not.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;
use weft_frame::{Frame, FrameCodec, Limits};

fn decode_all(data: &[u8], chunk: impl Fn(usize) -> usize) -> (Vec<Frame>, bool) {
    let limits = Limits { max_payload: 16 * 1024, max_metadata: 1024 };
    let mut codec = FrameCodec::new(limits);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < data.len() {
        let n = chunk(i).clamp(1, data.len() - at);
        i += 1;
        buf.extend_from_slice(&data[at..at + n]);
        at += n;
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(f)) => {
                    // Exercise the lazy metadata view on every frame.
                    let _ = (f.metadata.method(), f.metadata.timeout(), f.metadata.status());
                    frames.push(f);
                }
                Ok(None) => break,
                Err(_) => return (frames, false),
            }
        }
    }
    let ok = codec.decode_eof(&mut buf).is_ok();
    (frames, ok)
}

fuzz_target!(|input: &[u8]| {
    let Some((&seed, data)) = input.split_first() else { return };
    let chunked = decode_all(data, |i| 1 + ((seed as usize).wrapping_mul(i + 7) % 97));
    let whole = decode_all(data, |_| usize::MAX);
    assert_eq!(chunked, whole);
});
