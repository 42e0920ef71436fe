//! `decode(encode(x)) == x` for arbitrary frames delivered over arbitrary
//! split points: all at once, one byte at a time, and random chunks.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use tokio_util::codec::{Decoder, Encoder};
use weft_frame::metadata::tag;
use weft_frame::{Flags, Frame, FrameCodec, FrameType, Metadata};

fn arb_metadata() -> impl Strategy<Value = Metadata> {
    (
        proptest::option::of("[a-z/._]{0,40}"),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(".{0,20}"),
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<u8>(), 1..20),
                proptest::collection::vec(any::<u8>(), 0..64),
            ),
            0..4,
        ),
        proptest::collection::vec(
            (5u8..=255, proptest::collection::vec(any::<u8>(), 0..16)),
            0..2,
        ),
    )
        .prop_map(|(method, timeout, status, message, custom, unknown)| {
            let mut b = Metadata::builder();
            if let Some(m) = method {
                b = b.method(&m);
            }
            if let Some(t) = timeout {
                b = b.raw(tag::TIMEOUT, &[], &t.to_be_bytes());
            }
            if let Some(s) = status {
                b = b.status(s);
            }
            if let Some(m) = message {
                b = b.message(&m);
            }
            for (k, v) in custom {
                b = b.custom(&k, &v);
            }
            for (t, v) in unknown {
                b = b.raw(t, &[], &v);
            }
            b.finish()
        })
}

fn arb_frame() -> impl Strategy<Value = Frame> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u32>(),
        arb_metadata(),
        proptest::collection::vec(any::<u8>(), 0..3000),
    )
        .prop_map(|(ty, flags, id, metadata, payload)| {
            let ty = FrameType(ty);
            // Respect the scope rule so that the frame is valid.
            let stream_id = match ty.scope() {
                Some(weft_frame::Scope::Connection) => 0,
                Some(weft_frame::Scope::Stream) => id.max(1),
                _ => id,
            };
            Frame {
                ty,
                flags: Flags(flags),
                stream_id,
                metadata,
                payload: Bytes::from(payload),
            }
        })
}

/// Feeds `wire` to a fresh decoder in chunks of the given sizes (cycled) and
/// collects every frame, then checks EOF is clean.
fn decode_chunked(wire: &[u8], chunks: &[usize]) -> Vec<Frame> {
    let mut codec = FrameCodec::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < wire.len() {
        let n = chunks[i % chunks.len()].max(1).min(wire.len() - at);
        i += 1;
        buf.extend_from_slice(&wire[at..at + n]);
        at += n;
        while let Some(f) = codec.decode(&mut buf).expect("valid stream") {
            out.push(f);
        }
    }
    assert_eq!(codec.decode_eof(&mut buf).expect("clean end"), None);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_any_chunking(
        frames in proptest::collection::vec(arb_frame(), 1..6),
        chunks in proptest::collection::vec(1usize..200, 1..8),
    ) {
        let mut codec = FrameCodec::default();
        let mut wire = BytesMut::new();
        for f in &frames {
            codec.encode(f.clone(), &mut wire).unwrap();
        }
        let all_at_once = decode_chunked(&wire, &[wire.len()]);
        let byte_at_a_time = decode_chunked(&wire, &[1]);
        let random = decode_chunked(&wire, &chunks);
        prop_assert_eq!(&all_at_once, &frames);
        prop_assert_eq!(&byte_at_a_time, &frames);
        prop_assert_eq!(&random, &frames);
    }

    #[test]
    fn encode_head_plus_chain_equals_copy(frame in arb_frame()) {
        let mut codec = FrameCodec::default();
        let mut copied = BytesMut::new();
        codec.encode_frame(&frame, &mut copied).unwrap();
        let mut head = BytesMut::new();
        let chained = codec.encode_head(&frame, &mut head).unwrap();
        if let Some(tail) = chained {
            prop_assert!(tail.len() >= weft_frame::CHAIN_THRESHOLD);
            head.extend_from_slice(&tail);
        }
        prop_assert_eq!(&head[..], &copied[..]);
    }
}
