//! Metadata encoding and validation, control payloads, names and messages.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};
use weft_frame::metadata::{Entry, tag, validate};
use weft_frame::{
    CONNECTION_ID, Flags, Frame, FrameCodec, FrameError, FrameType, Header, Limits, Metadata,
    MetadataBuilder, MetadataError, Reason, Scope,
};

#[test]
fn metadata_typed_view_reads_what_the_builder_wrote() {
    let m = Metadata::builder()
        .method("pkg.Svc/Get")
        .timeout(Duration::from_millis(1500))
        .status(5)
        .message("not found")
        .custom(b"trace-id", b"abc")
        .custom(b"trace-id", b"second")
        .custom(b"", b"skipped")
        .raw(200, b"ignored-key", b"future")
        .raw(tag::CUSTOM, b"via-raw", b"1")
        .finish();
    assert_eq!(m.method(), Some("pkg.Svc/Get"));
    assert_eq!(m.timeout(), Some(Duration::from_millis(1500)));
    assert_eq!(m.timeout_micros(), Some(1_500_000));
    assert_eq!(m.status(), Some(5));
    assert_eq!(m.message(), Some("not found"));
    assert_eq!(m.get(b"trace-id"), Some(&b"abc"[..]));
    assert_eq!(m.get(b"via-raw"), Some(&b"1"[..]));
    assert_eq!(m.get(b"missing"), None);
    let entries: Vec<Entry<'_>> = m.iter().collect();
    assert_eq!(entries.len(), 8);
    assert_eq!(
        entries[6],
        Entry {
            tag: 200,
            key: b"",
            value: b"future"
        }
    );
    assert!(Metadata::from_bytes(m.as_bytes().clone()).is_ok());
    assert!(!m.is_empty());
    assert!(format!("{m:?}").contains("trace-id") || format!("{m:?}").contains("116"));

    let empty = Metadata::new();
    assert!(empty.is_empty());
    assert_eq!(empty.len(), 0);
    assert_eq!(empty.method(), None);
    assert_eq!(empty.timeout(), None);
    assert_eq!(empty.status(), None);
    assert_eq!(empty.message(), None);
}

#[test]
fn metadata_builder_reuses_the_callers_buffer_and_clamps() {
    let buf = BytesMut::with_capacity(256);
    let m = MetadataBuilder::new(buf).method("a").finish();
    assert_eq!(m.method(), Some("a"));
    let long_key = vec![b'k'; 300];
    let long_value = vec![b'v'; 70_000];
    let m = Metadata::builder().custom(&long_key, &long_value).finish();
    let e = m.iter().next().unwrap();
    assert_eq!(e.key.len(), 255);
    assert_eq!(e.value.len(), u16::MAX as usize);
    let huge = Metadata::builder().timeout(Duration::MAX).finish();
    assert_eq!(huge.timeout_micros(), Some(u64::MAX));
}

#[test]
fn blocks_built_one_after_another_share_the_callers_buffer() {
    let mut buf = BytesMut::with_capacity(256);
    let start = buf.as_ptr();
    let mut blocks = Vec::new();
    for name in ["svc/a", "svc/bb", "svc/ccc"] {
        let (block, rest) = MetadataBuilder::new(buf)
            .method(name)
            .timeout(Duration::from_millis(5))
            .finish_keeping();
        blocks.push(block);
        buf = rest;
        assert!(buf.is_empty(), "the rest starts empty, after the block");
    }
    // Each block lies where the previous one ended: no new buffer was made.
    let mut at = start;
    for (block, name) in blocks.iter().zip(["svc/a", "svc/bb", "svc/ccc"]) {
        assert_eq!(block.as_bytes().as_ptr(), at, "{name}");
        assert_eq!(
            (block.method(), block.timeout()),
            (Some(name), Some(Duration::from_millis(5)))
        );
        at = at.wrapping_add(block.as_bytes().len());
    }
    assert_eq!(
        buf.capacity(),
        256 - blocks.iter().map(|b| b.as_bytes().len()).sum::<usize>()
    );
}

#[test]
fn metadata_validation_names_each_fault() {
    let cases: [(&[u8], MetadataError); 7] = [
        (&[tag::METHOD, 0], MetadataError::Truncated),
        (&[tag::METHOD, 0, 5, b'a'], MetadataError::Truncated),
        (&[tag::CUSTOM], MetadataError::Truncated),
        (&[tag::CUSTOM, 0, 0, 0], MetadataError::EmptyKey),
        (&[tag::CUSTOM, 3, b'a'], MetadataError::Truncated),
        (&[tag::TIMEOUT, 0, 2, 0, 0], MetadataError::BadLength),
        (&[tag::METHOD, 0, 1, 0xff], MetadataError::NotUtf8),
    ];
    for (raw, want) in cases {
        assert_eq!(validate(raw), Err(want), "{raw:?}");
        assert!(Metadata::from_bytes(Bytes::copy_from_slice(raw)).is_err());
    }
    assert_eq!(
        validate(&[tag::STATUS, 0, 1, 0]),
        Err(MetadataError::BadLength)
    );
    assert_eq!(
        validate(&[tag::MESSAGE, 0, 1, 0xfe]),
        Err(MetadataError::NotUtf8)
    );
    let dup = [tag::STATUS, 0, 4, 0, 0, 0, 1, tag::STATUS, 0, 4, 0, 0, 0, 2];
    assert_eq!(validate(&dup), Err(MetadataError::Duplicate));
    // Unknown tags and repeated custom keys are fine.
    assert_eq!(validate(&[9, 0, 1, 0xff, 9, 0, 0]), Ok(()));
    // The ok status, which `from_bytes` takes without the walk, is valid.
    let ok = Metadata::ok_status();
    assert_eq!(validate(ok.as_bytes()), Ok(()));
    assert_eq!(Metadata::from_bytes(ok.as_bytes().clone()), Ok(ok));
    // Text need not be ASCII, only UTF-8 (a multi-byte method name, and a
    // sequence cut in half after ASCII bytes).
    let accented = "/svc/café".as_bytes();
    let mut raw = vec![tag::METHOD, 0, accented.len() as u8];
    raw.extend_from_slice(accented);
    assert_eq!(validate(&raw), Ok(()));
    assert_eq!(
        validate(&[tag::MESSAGE, 0, 3, b'o', b'k', 0xc3]),
        Err(MetadataError::NotUtf8)
    );
    for e in [
        MetadataError::Truncated,
        MetadataError::EmptyKey,
        MetadataError::BadLength,
        MetadataError::NotUtf8,
        MetadataError::Duplicate,
    ] {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn control_frames_round_trip_their_payloads() {
    let wu = Frame::window_update(3, 65_535);
    assert_eq!(wu.parse_window_update().unwrap(), 65_535);
    let rs = Frame::reset(3, Reason::CANCEL);
    assert_eq!(rs.parse_reset().unwrap(), Reason::CANCEL);
    let ping = Frame::ping(*b"12345678", true);
    assert!(ping.flags.contains(Flags::ACK));
    assert_eq!(&ping.parse_ping().unwrap(), b"12345678");
    assert!(!Frame::ping([0; 8], false).flags.contains(Flags::ACK));
    let ga = Frame::goaway(41, Reason::ENHANCE_YOUR_CALM, b"too many resets");
    let (last, reason, debug) = ga.parse_goaway().unwrap();
    assert_eq!(
        (last, reason, &debug[..]),
        (41, Reason::ENHANCE_YOUR_CALM, &b"too many resets"[..])
    );
    // Each survives the codec.
    let mut codec = FrameCodec::default();
    let mut wire = BytesMut::new();
    for f in [&wu, &rs, &ping, &ga] {
        codec.encode(f, &mut wire).unwrap();
    }
    for f in [wu, rs, ping, ga] {
        assert_eq!(codec.decode(&mut wire).unwrap().unwrap(), f);
    }
}

#[test]
fn names_flags_and_scopes() {
    let known = [
        (FrameType::DATA, "DATA", Scope::Stream),
        (FrameType::OPEN, "OPEN", Scope::Stream),
        (FrameType::RESET, "RESET", Scope::Stream),
        (FrameType::WINDOW_UPDATE, "WINDOW_UPDATE", Scope::Either),
        (FrameType::PING, "PING", Scope::Connection),
        (FrameType::GOAWAY, "GOAWAY", Scope::Connection),
        (FrameType::HANDSHAKE, "HANDSHAKE", Scope::Connection),
        (FrameType::KEY_UPDATE, "KEY_UPDATE", Scope::Connection),
    ];
    for (ty, name, scope) in known {
        assert!(ty.is_known());
        assert_eq!(ty.name(), name);
        assert_eq!(ty.scope(), Some(scope));
        assert!(format!("{ty:?}").starts_with(name));
    }
    assert_eq!(FrameType(0x99).name(), "UNKNOWN");
    assert_eq!(FrameType(0x99).scope(), None);

    let f = Flags::NONE.with(Flags::END_STREAM).with(Flags::COMPRESSED);
    assert!(f.contains(Flags::END_STREAM) && f.contains(Flags::COMPRESSED));
    assert!(!f.without(Flags::COMPRESSED).contains(Flags::COMPRESSED));
    assert_eq!(f.unknown_bits(), 0);
    assert_eq!(format!("{f:?}"), "Flags(0x05)");

    for code in 0..=12 {
        let r = Reason(code);
        assert_eq!(r.name() == "UNKNOWN", code == 12, "{code}");
        assert!(r.to_string().contains(&code.to_string()));
    }
}

#[test]
fn header_writes_and_parses_every_field() {
    let h = Header {
        ty: FrameType::GOAWAY,
        flags: Flags(0x80),
        stream_id: 0,
        metadata_len: 0x0102_0304,
        payload_len: 0x0a0b_0c0d,
    };
    let raw = h.to_bytes();
    assert_eq!(
        raw,
        [
            1, 5, 0x80, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d
        ]
    );
    assert_eq!(Header::parse(&raw).unwrap(), h);
    assert_eq!(h.body_len(), 0x0102_0304 + 0x0a0b_0c0d);
    // The reserved byte is ignored on receipt.
    let mut odd = raw;
    odd[3] = 0xee;
    assert_eq!(Header::parse(&odd).unwrap(), h);
    let limits = Limits::default();
    assert_eq!(limits.max_frame_len(16), 16 + 16 * 1024 + 64 * 1024 + 16);
}

#[test]
fn errors_display_their_cause() {
    let errs = [
        FrameError::UnsupportedVersion(3),
        FrameError::BadPreface,
        FrameError::MetadataTooLarge { len: 9, max: 8 },
        FrameError::PayloadTooLarge { len: 9, max: 8 },
        FrameError::WrongScope {
            ty: FrameType::PING,
            stream_id: 3,
        },
        FrameError::BadMetadata(MetadataError::Duplicate),
        FrameError::BadControlPayload {
            ty: FrameType::PING,
            len: 2,
        },
        FrameError::Truncated { buffered: 4 },
        FrameError::from(std::io::Error::other("boom")),
    ];
    let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert!(texts[0].contains('3') && texts[2].contains('9') && texts[8].contains("boom"));
    use std::error::Error;
    assert!(errs[5].source().is_some() && errs[8].source().is_some() && errs[0].source().is_none());
    let from_meta: FrameError = MetadataError::EmptyKey.into();
    assert!(matches!(
        from_meta,
        FrameError::BadMetadata(MetadataError::EmptyKey)
    ));
}

#[test]
fn metadata_on_the_wire_must_be_valid() {
    // A DATA frame whose metadata block has a duplicate status entry.
    let meta = [tag::STATUS, 0, 4, 0, 0, 0, 1, tag::STATUS, 0, 4, 0, 0, 0, 2];
    let mut wire = BytesMut::new();
    let h = Header {
        ty: FrameType::DATA,
        flags: Flags::NONE,
        stream_id: 1,
        metadata_len: meta.len() as u32,
        payload_len: 0,
    };
    wire.extend_from_slice(&h.to_bytes());
    wire.extend_from_slice(&meta);
    let err = FrameCodec::default().decode(&mut wire).unwrap_err();
    assert!(matches!(
        err,
        FrameError::BadMetadata(MetadataError::Duplicate)
    ));
    assert_eq!(FrameCodec::default().limits(), &Limits::default());
}

#[test]
fn a_frame_from_a_checked_header_and_its_body() {
    // What a record layer does with an opened body: the metadata split
    // off and validated, the rest the payload.
    let meta = Metadata::builder().method("svc/m").finish();
    let mut body = BytesMut::from(meta.as_bytes().as_ref());
    body.extend_from_slice(b"payload");
    let h = Header {
        ty: FrameType::OPEN,
        flags: Flags::END_STREAM,
        stream_id: 7,
        metadata_len: meta.len() as u32,
        payload_len: 7,
    };
    let frame = Frame::from_body(&h, body.freeze()).unwrap();
    assert_eq!(
        (frame.ty, frame.flags, frame.stream_id),
        (FrameType::OPEN, Flags::END_STREAM, 7)
    );
    assert_eq!(frame.metadata.method(), Some("svc/m"));
    assert_eq!(&frame.payload[..], b"payload");
    // A duplicate entry in the block is the metadata's typed error.
    let dup = [tag::STATUS, 0, 4, 0, 0, 0, 1, tag::STATUS, 0, 4, 0, 0, 0, 2];
    let h = Header {
        metadata_len: dup.len() as u32,
        payload_len: 0,
        ..h
    };
    let err = Frame::from_body(&h, Bytes::copy_from_slice(&dup)).unwrap_err();
    assert!(matches!(
        err,
        FrameError::BadMetadata(MetadataError::Duplicate)
    ));
}

/// `Header::check` tests the stream id against the type's code directly;
/// it must agree with [`FrameType::scope`] for every type, known or not.
#[test]
fn a_headers_scope_follows_its_type() {
    let limits = Limits::default();
    for code in 0..=u8::MAX {
        let ty = FrameType(code);
        for stream_id in [0, 1, u32::MAX] {
            let h = Header {
                ty,
                flags: Flags::NONE,
                stream_id,
                metadata_len: 0,
                payload_len: 0,
            };
            let allowed = match ty.scope() {
                Some(Scope::Connection) => stream_id == CONNECTION_ID,
                Some(Scope::Stream) => stream_id != CONNECTION_ID,
                Some(Scope::Either) | None => true,
            };
            let got = h.check(&limits, 0);
            assert_eq!(
                got.is_ok(),
                allowed,
                "{ty:?} on stream {stream_id}: {got:?}"
            );
            if !allowed {
                assert!(matches!(got, Err(FrameError::WrongScope { .. })));
            }
        }
    }
}
