//! Hostile-catalogue items 1–7 (frame codec), one named test each.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::SinkExt;
use tokio::io::AsyncWrite;
use tokio_util::codec::{Decoder, FramedWrite};
use weft_frame::{
    Flags, Frame, FrameCodec, FrameError, FrameType, HEADER_LEN, Header, Limits, Metadata,
};

fn sample() -> Frame {
    Frame {
        ty: FrameType::DATA,
        flags: Flags::END_STREAM,
        stream_id: 7,
        metadata: Metadata::builder()
            .method("svc/m")
            .custom(b"k", b"v")
            .finish(),
        payload: Bytes::from_static(b"hello, weft"),
    }
}

fn encode(f: &Frame) -> BytesMut {
    let mut out = BytesMut::new();
    FrameCodec::default().encode_frame(f, &mut out).unwrap();
    out
}

fn header(ty: FrameType, stream_id: u32, metadata_len: u32, payload_len: u32) -> [u8; HEADER_LEN] {
    Header {
        ty,
        flags: Flags::NONE,
        stream_id,
        metadata_len,
        payload_len,
    }
    .to_bytes()
}

#[test]
fn item_01_truncation_at_every_offset_is_a_typed_error() {
    let wire = encode(&sample());
    for cut in 1..wire.len() {
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::from(&wire[..cut]);
        assert!(
            codec.decode(&mut buf).unwrap().is_none(),
            "no partial frame at {cut}"
        );
        match codec.decode_eof(&mut buf) {
            Err(FrameError::Truncated { buffered }) => assert_eq!(buffered, cut),
            other => panic!("cut at {cut}: expected Truncated, got {other:?}"),
        }
    }
    // A whole frame left in the buffer at EOF is still delivered.
    let mut buf = wire.clone();
    let mut codec = FrameCodec::default();
    assert_eq!(codec.decode_eof(&mut buf).unwrap(), Some(sample()));
    // Nothing at all is a clean end, not an error.
    let mut codec = FrameCodec::default();
    assert!(codec.decode_eof(&mut BytesMut::new()).unwrap().is_none());
}

#[test]
fn item_02_byte_at_a_time_random_chunks_and_all_at_once_agree() {
    let frames = [
        sample(),
        Frame::ping([1; 8], false),
        Frame::window_update(0, 99),
    ];
    let mut wire = BytesMut::new();
    for f in &frames {
        wire.extend_from_slice(&encode(f));
    }
    for chunk in [1, 2, 3, 5, 16, 17, 64, wire.len()] {
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for piece in wire.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(f) = codec.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, frames, "chunk size {chunk}");
    }
}

/// A decoder fed `head` must fail without growing the buffer's capacity
/// toward the declared length.
fn assert_rejected_before_allocating(head: [u8; HEADER_LEN]) -> FrameError {
    let mut codec = FrameCodec::default();
    let mut buf = BytesMut::with_capacity(64);
    buf.extend_from_slice(&head);
    let before = buf.capacity();
    let err = codec.decode(&mut buf).expect_err("must be rejected");
    assert_eq!(
        buf.capacity(),
        before,
        "no room reserved for a rejected frame"
    );
    err
}

#[test]
fn item_03_huge_and_overflowing_lengths_rejected_before_allocation() {
    let err = assert_rejected_before_allocating(header(FrameType::DATA, 1, 0, u32::MAX));
    assert!(
        matches!(err, FrameError::PayloadTooLarge { len: u32::MAX, .. }),
        "{err:?}"
    );
    let err = assert_rejected_before_allocating(header(FrameType::DATA, 1, u32::MAX, 0));
    assert!(
        matches!(err, FrameError::MetadataTooLarge { len: u32::MAX, .. }),
        "{err:?}"
    );
    let err = assert_rejected_before_allocating(header(FrameType::DATA, 1, u32::MAX, u32::MAX));
    assert!(
        matches!(err, FrameError::MetadataTooLarge { .. }),
        "{err:?}"
    );

    // Metadata whose entries claim more than the block holds.
    let mut wire = BytesMut::new();
    let meta = [0x01, 0xff, 0xff, b'x']; // method, value_len 65535, 1 byte present
    wire.extend_from_slice(&header(FrameType::OPEN, 1, meta.len() as u32, 0));
    wire.extend_from_slice(&meta);
    let err = FrameCodec::default()
        .decode(&mut wire)
        .expect_err("bad metadata");
    assert!(
        matches!(
            err,
            FrameError::BadMetadata(weft_frame::MetadataError::Truncated)
        ),
        "{err:?}"
    );
}

#[test]
fn item_04_oversize_frame_rejected_from_the_header_alone() {
    let limits = Limits {
        max_payload: 16 * 1024,
        max_metadata: 1024,
    };
    let mut codec = FrameCodec::new(limits);
    // Only the 16 header bytes are present: the decision needs nothing more.
    let mut buf = BytesMut::from(&header(FrameType::DATA, 1, 0, 16 * 1024 + 1)[..]);
    let err = codec.decode(&mut buf).expect_err("over the limit");
    assert!(
        matches!(err, FrameError::PayloadTooLarge { len, max } if len == 16 * 1024 + 1 && max == 16 * 1024)
    );
    // Exactly at the limit is fine.
    let mut buf = BytesMut::from(&header(FrameType::DATA, 1, 1024, 16 * 1024)[..]);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    // Record overhead raises the wire limit by exactly that much.
    let mut codec = FrameCodec::new(limits);
    codec.set_overhead(16);
    let mut buf = BytesMut::from(&header(FrameType::DATA, 1, 0, 16 * 1024 + 16)[..]);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    let mut codec = FrameCodec::new(limits);
    codec.set_overhead(16);
    let mut buf = BytesMut::from(&header(FrameType::DATA, 1, 0, 16 * 1024 + 17)[..]);
    assert!(codec.decode(&mut buf).is_err());
    // And outbound frames are checked too.
    let big = Frame::new(
        FrameType::DATA,
        Flags::NONE,
        1,
        Bytes::from(vec![0; 16 * 1024 + 1]),
    );
    let err = FrameCodec::new(limits).encode_frame(&big, &mut BytesMut::new());
    assert!(matches!(err, Err(FrameError::PayloadTooLarge { .. })));
}

#[test]
fn item_05_unknown_version_rejected_unknown_types_and_flags_passed_up() {
    use weft_frame::preface::{PREFACE, check_preface, check_preface_prefix};
    assert!(check_preface(&PREFACE).is_ok());
    let mut v2 = PREFACE;
    v2[4] = 2;
    assert!(matches!(
        check_preface(&v2),
        Err(FrameError::UnsupportedVersion(2))
    ));
    assert!(matches!(
        check_preface_prefix(&v2[..5]),
        Err(FrameError::UnsupportedVersion(2))
    ));
    assert!(matches!(
        check_preface_prefix(b"GET / HTTP/1.1"),
        Err(FrameError::BadPreface)
    ));
    assert!(matches!(
        check_preface_prefix(&[0x16, 0x03, 0x01]),
        Err(FrameError::BadPreface)
    ));
    assert!(matches!(
        check_preface(b"WEFX\x01\0\0\0"),
        Err(FrameError::BadPreface)
    ));
    assert!(check_preface_prefix(b"WE").is_ok());
    assert!(check_preface_prefix(b"").is_ok());

    // A frame header with another version.
    let mut head = header(FrameType::DATA, 1, 0, 0);
    head[0] = 9;
    let mut buf = BytesMut::from(&head[..]);
    let err = FrameCodec::default()
        .decode(&mut buf)
        .expect_err("version 9");
    assert!(matches!(err, FrameError::UnsupportedVersion(9)));

    // Unknown type and unknown flag bits survive decoding unchanged.
    let odd = Frame::new(FrameType(0x42), Flags(0xf1), 3, Bytes::from_static(b"?"));
    let mut wire = encode(&odd);
    let got = FrameCodec::default().decode(&mut wire).unwrap().unwrap();
    assert_eq!(got, odd);
    assert!(!got.ty.is_known());
    assert_eq!(got.flags.unknown_bits(), 0xf0);
    assert!(got.is_end_stream());
}

#[test]
fn item_06_control_frame_on_stream_and_stream_frame_on_connection_rejected() {
    for (ty, id) in [
        (FrameType::PING, 1),
        (FrameType::GOAWAY, 2),
        (FrameType::HANDSHAKE, 5),
        (FrameType::DATA, 0),
        (FrameType::OPEN, 0),
        (FrameType::RESET, 0),
    ] {
        let mut buf = BytesMut::from(&header(ty, id, 0, 0)[..]);
        let err = FrameCodec::default()
            .decode(&mut buf)
            .expect_err("wrong scope");
        assert!(
            matches!(err, FrameError::WrongScope { ty: t, stream_id } if t == ty && stream_id == id),
            "{ty:?} on {id}: {err:?}"
        );
    }
    // WINDOW_UPDATE is allowed on both.
    for id in [0, 1] {
        let mut buf = BytesMut::from(&header(FrameType::WINDOW_UPDATE, id, 0, 4)[..]);
        buf.extend_from_slice(&[0, 0, 0, 1]);
        assert!(FrameCodec::default().decode(&mut buf).unwrap().is_some());
    }
    // Control payloads of the wrong size are typed errors.
    let bad = Frame::new(
        FrameType::PING,
        Flags::NONE,
        0,
        Bytes::from_static(b"short"),
    );
    assert!(matches!(
        bad.parse_ping(),
        Err(FrameError::BadControlPayload { len: 5, .. })
    ));
    let bad = Frame::new(
        FrameType::GOAWAY,
        Flags::NONE,
        0,
        Bytes::from_static(b"1234567"),
    );
    assert!(bad.parse_goaway().is_err());
    let bad = Frame::new(FrameType::RESET, Flags::NONE, 1, Bytes::new());
    assert!(bad.parse_reset().is_err());
    let bad = Frame::new(
        FrameType::WINDOW_UPDATE,
        Flags::NONE,
        1,
        Bytes::from_static(b"12345"),
    );
    assert!(bad.parse_window_update().is_err());
}

/// A writer that accepts `limit` bytes per call, or nothing at all.
struct ScriptedWriter {
    limit: usize,
    written: Vec<u8>,
    calls: usize,
}

impl AsyncWrite for ScriptedWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.calls += 1;
        assert!(
            self.calls < 10_000,
            "busy loop on a writer that makes no progress"
        );
        let n = buf.len().min(self.limit);
        self.written.extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn item_07_zero_writes_are_an_error_and_short_writes_complete() {
    let zero = ScriptedWriter {
        limit: 0,
        written: Vec::new(),
        calls: 0,
    };
    let mut sink = FramedWrite::new(zero, FrameCodec::default());
    let err = sink.send(sample()).await.expect_err("Ok(0) must fail");
    match err {
        FrameError::Io(e) => assert_eq!(e.kind(), std::io::ErrorKind::WriteZero),
        other => panic!("expected WriteZero, got {other:?}"),
    }
    assert_eq!(sink.get_ref().calls, 1, "gave up at the first zero write");

    let short = ScriptedWriter {
        limit: 3,
        written: Vec::new(),
        calls: 0,
    };
    let mut sink = FramedWrite::new(short, FrameCodec::default());
    sink.send(sample()).await.unwrap();
    assert_eq!(sink.get_ref().written, &encode(&sample())[..]);
}
