//! A decoder that remembers its last valid metadata block answers exactly
//! as a fresh validation would, whatever sequence of blocks it sees: a
//! kept block's one-byte mutations, the kept block again, and arbitrary
//! bytes.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use tokio_util::codec::Decoder;
use weft_frame::metadata::LastValid;
use weft_frame::{Flags, Frame, FrameCodec, FrameError, FrameType, Header, Metadata};

/// A few valid blocks a client would repeat.
fn valid_blocks() -> Vec<Vec<u8>> {
    [
        Metadata::builder().method("svc/a").finish(),
        Metadata::builder().method("svc/a").codec("json").finish(),
        Metadata::builder()
            .method("instr.Count/one")
            .codec("json")
            .finish(),
        Metadata::builder()
            .custom(b"k", b"v")
            .method("svc/b")
            .finish(),
    ]
    .iter()
    .map(|m| m.as_bytes().to_vec())
    .collect()
}

/// One step of a peer's sequence: a valid block, that block with one
/// byte replaced, or arbitrary bytes.
fn arb_block() -> impl Strategy<Value = Vec<u8>> {
    let n = valid_blocks().len();
    prop_oneof![
        (0..n).prop_map(|i| valid_blocks()[i].clone()),
        (0..n, any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, at, byte)| {
            let mut b = valid_blocks()[i].clone();
            let at = at.index(b.len());
            b[at] = byte;
            b
        }),
        proptest::collection::vec(any::<u8>(), 0..80),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn same_answer_as_a_fresh_check(blocks in proptest::collection::vec(arb_block(), 1..24)) {
        let mut last = LastValid::new();
        for raw in blocks {
            let raw = Bytes::from(raw);
            prop_assert_eq!(last.metadata(raw.clone()), Metadata::from_bytes(raw));
        }
    }

    /// Through the decoder, over the wire: each `OPEN` decodes, or fails
    /// with the typed error a fresh check gives.
    #[test]
    fn the_decoder_answers_as_a_fresh_check(
        blocks in proptest::collection::vec(arb_block(), 1..24),
    ) {
        let mut dec = FrameCodec::default();
        for raw in blocks {
            let fresh = Metadata::from_bytes(Bytes::copy_from_slice(&raw));
            let header = Header {
                ty: FrameType::OPEN,
                flags: Flags::NONE,
                stream_id: 1,
                metadata_len: raw.len() as u32,
                payload_len: 0,
            };
            let mut wire = BytesMut::from(&header.to_bytes()[..]);
            wire.extend_from_slice(&raw);
            match (dec.decode(&mut wire), fresh) {
                (Ok(Some(f)), Ok(m)) => prop_assert_eq!(f.metadata, m),
                (Err(FrameError::BadMetadata(got)), Err(want)) => prop_assert_eq!(got, want),
                (got, want) => prop_assert!(false, "decoder {:?}, fresh check {:?}", got, want),
            }
            // Taken whole either way, so the next frame starts clean.
            prop_assert!(wire.is_empty());
        }
    }

    /// The record layer's split and check of a block off an opened body
    /// (`split_metadata`, one decoder over the sequence) answers as a
    /// fresh check too, and the frame it builds from the parts
    /// (`Frame::from_header`) is the one the decoder gives for the same
    /// bytes.
    #[test]
    fn the_record_layers_check_answers_as_a_fresh_check(
        blocks in proptest::collection::vec(arb_block(), 1..24),
    ) {
        let mut records = FrameCodec::default();
        let mut dec = FrameCodec::default();
        let payload = Bytes::from_static(b"payload");
        for raw in blocks {
            let raw = Bytes::from(raw);
            let header = Header {
                ty: FrameType::OPEN,
                flags: Flags::END_STREAM,
                stream_id: 3,
                metadata_len: raw.len() as u32,
                payload_len: payload.len() as u32,
            };
            let mut wire = BytesMut::from(&header.to_bytes()[..]);
            wire.extend_from_slice(&raw);
            wire.extend_from_slice(&payload);
            let decoded = dec.decode(&mut wire);
            let mut body = Bytes::from([&raw[..], &payload[..]].concat());
            match (records.split_metadata(&mut body, raw.len()), Metadata::from_bytes(raw)) {
                (Ok(m), Ok(want)) => {
                    prop_assert_eq!(&m, &want);
                    prop_assert_eq!(&body, &payload);
                    let built = Frame::from_header(&header, m, payload.clone());
                    prop_assert_eq!(Some(built), decoded.ok().flatten());
                }
                (Err(FrameError::BadMetadata(got)), Err(want)) => prop_assert_eq!(got, want),
                (got, want) => prop_assert!(false, "record check {:?}, fresh check {:?}", got, want),
            }
        }
    }
}
