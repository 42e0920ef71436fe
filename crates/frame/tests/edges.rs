//! Boundaries a mutation run (cargo-mutants, see docs/TESTING.md) showed no
//! other test would notice if they moved: one behaviour per test.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;
use weft_frame::preface::check_preface_prefix;
use weft_frame::{
    CHAIN_THRESHOLD, DEFAULT_MAX_METADATA, DEFAULT_MAX_PAYLOAD, Flags, Frame, FrameCodec,
    FrameError, FrameType, HEADER_LEN, Limits, MAX_MAX_PAYLOAD, MIN_MAX_PAYLOAD, Reason,
};

fn data(payload_len: usize) -> Frame {
    Frame::new(
        FrameType::DATA,
        Flags::NONE,
        1,
        Bytes::from(vec![7u8; payload_len]),
    )
}

#[test]
fn goaway_without_debug_text_parses() {
    let frame = Frame::goaway(9, Reason::PROTOCOL_ERROR, b"");
    assert_eq!(frame.payload.len(), 8);
    let (last, reason, debug) = frame.parse_goaway().unwrap();
    assert_eq!((last, reason, debug.len()), (9, Reason::PROTOCOL_ERROR, 0));
}

#[test]
fn preface_prefix_of_exactly_the_magic_is_consistent() {
    // Four bytes: the magic, no version byte yet (peer input, must not index past it).
    assert!(check_preface_prefix(b"WEFT").is_ok());
    assert!(matches!(
        check_preface_prefix(b"WEFX"),
        Err(FrameError::BadPreface)
    ));
}

#[test]
fn flags_with_sets_and_without_clears_only_the_named_bits() {
    let end_ack = Flags::END_STREAM.with(Flags::ACK);
    // Setting a bit that is already set keeps it set.
    assert_eq!(end_ack.with(Flags::END_STREAM), end_ack);
    // Clearing one bit keeps the others.
    assert_eq!(end_ack.without(Flags::ACK), Flags::END_STREAM);
    assert_eq!(end_ack.without(Flags::COMPRESSED), end_ack);
}

#[test]
fn end_stream_is_reported_only_when_set() {
    let mut frame = data(1);
    assert!(!frame.is_end_stream());
    frame.flags = Flags::ACK;
    assert!(!frame.is_end_stream());
    frame.flags = Flags::END_STREAM.with(Flags::ACK);
    assert!(frame.is_end_stream());
}

#[test]
fn payload_limits_are_the_protocol_documents_numbers() {
    // docs/PROTOCOL.md: default payload 64 KiB, metadata 16 KiB; a peer may
    // configure a payload limit from 16 KiB to 1 MiB. Changing one is a wire change.
    assert_eq!(DEFAULT_MAX_PAYLOAD, 65_536);
    assert_eq!(DEFAULT_MAX_METADATA, 16_384);
    assert_eq!(MIN_MAX_PAYLOAD, 16_384);
    assert_eq!(MAX_MAX_PAYLOAD, 1_048_576);
}

#[test]
fn codec_reports_the_limits_it_was_built_with() {
    let limits = Limits {
        max_payload: 20_000,
        max_metadata: 100,
    };
    assert_eq!(FrameCodec::new(limits).limits(), &limits);
}

#[test]
fn a_payload_of_exactly_the_chain_threshold_is_chained() {
    let mut codec = FrameCodec::default();
    let mut dst = BytesMut::new();
    let chained = codec.encode_head(&data(CHAIN_THRESHOLD), &mut dst).unwrap();
    assert_eq!(chained.map(|p| p.len()), Some(CHAIN_THRESHOLD));
    assert_eq!(
        dst.len(),
        weft_frame::HEADER_LEN,
        "header only, payload not copied"
    );
    dst.clear();
    let copied = codec
        .encode_head(&data(CHAIN_THRESHOLD - 1), &mut dst)
        .unwrap();
    assert_eq!(copied, None);
    assert_eq!(dst.len(), weft_frame::HEADER_LEN + CHAIN_THRESHOLD - 1);
}

#[test]
fn a_frame_arriving_in_pieces_never_grows_the_buffer_past_one_frame() {
    // Limits documents the bound: the read buffer holds at most one frame of
    // 16 + max_metadata + max_payload bytes. Feed a largest frame 4 KiB at a time.
    let limits = Limits::default();
    let mut wire = BytesMut::new();
    let big = data(limits.max_payload as usize);
    FrameCodec::new(limits)
        .encode_frame(&big, &mut wire)
        .unwrap();
    let mut codec = FrameCodec::new(limits);
    let mut src = BytesMut::new();
    let mut largest = 0;
    let mut decoded = None;
    for chunk in wire.chunks(4096) {
        src.extend_from_slice(chunk);
        largest = largest.max(src.capacity());
        decoded = codec.decode(&mut src).unwrap();
        largest = largest.max(src.capacity());
    }
    assert_eq!(decoded, Some(big));
    assert!(
        largest <= limits.max_frame_len(0),
        "read buffer grew to {largest} bytes for a {}-byte frame",
        wire.len()
    );
}

#[test]
fn a_cut_frame_stays_whole_in_the_buffer_and_leaves_it_in_one_piece() {
    // The header is not consumed on its own: until the frame is whole the
    // buffer holds every byte of it, and once whole, the body `decode_raw`
    // (or `decode_body`, frozen) returns ends where the buffer's remainder
    // starts (the record layer puts an opened batch back in front of the
    // buffer without a copy).
    let frame = data(40);
    let mut wire = BytesMut::new();
    FrameCodec::default()
        .encode_frame(&frame, &mut wire)
        .unwrap();
    wire.extend_from_slice(b"next");
    for cut in [1, HEADER_LEN, HEADER_LEN + 1, wire.len() - 5] {
        for way in ["raw", "body", "frame"] {
            let mut codec = FrameCodec::default();
            let mut src = BytesMut::from(&wire[..cut]);
            let got = match way {
                "raw" => codec.decode_raw(&mut src).unwrap().map(|_| ()),
                "body" => codec.decode_body(&mut src).unwrap().map(|_| ()),
                _ => codec.decode(&mut src).unwrap().map(|_| ()),
            };
            assert!(got.is_none(), "{way}, cut at {cut}");
            assert_eq!(src.len(), cut, "{way}, cut at {cut}: bytes left the buffer");
            // The rest arrives: the frame comes out, parsed from the header
            // the codec kept, and the buffer keeps what follows it.
            src.extend_from_slice(&wire[cut..]);
            let (header, end) = match way {
                "raw" => {
                    let (header, body) = codec.decode_raw(&mut src).unwrap().unwrap();
                    assert_eq!(&body[..], &frame.payload[..]);
                    (header, body.as_ptr().wrapping_add(body.len()))
                }
                "body" => {
                    let (header, body) = codec.decode_body(&mut src).unwrap().unwrap();
                    assert_eq!(&body[..], &frame.payload[..]);
                    (header, body.as_ptr().wrapping_add(body.len()))
                }
                _ => {
                    assert_eq!(codec.decode(&mut src).unwrap(), Some(frame.clone()));
                    (frame.header(), src.as_ptr())
                }
            };
            assert_eq!(header, frame.header());
            assert_eq!(
                end,
                src.as_ptr(),
                "{way}: the body ends where the rest starts"
            );
            assert_eq!(&src[..], b"next");
        }
    }
}
