//! Metadata parser fuzz target: `Metadata::from_bytes` on arbitrary bytes,
//! then every accessor. Accepted input must iterate without error, agree
//! with `validate`, and survive a rebuild through the builder unchanged.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use weft_frame::metadata::validate;
use weft_frame::{Metadata, MetadataBuilder};

fuzz_target!(|input: &[u8]| {
    let parsed = Metadata::from_bytes(Bytes::copy_from_slice(input));
    assert_eq!(parsed.is_ok(), validate(input).is_ok());
    let Ok(md) = parsed else { return };
    assert_eq!(md.len(), input.len());
    let _ = (md.method(), md.timeout(), md.timeout_micros(), md.status(), md.message());
    let _ = md.get(b"");
    let mut rebuilt = MetadataBuilder::new(BytesMut::new());
    for e in md.iter() {
        let _ = md.get(e.key);
        rebuilt = rebuilt.raw(e.tag, e.key, e.value);
    }
    assert_eq!(rebuilt.finish().as_bytes(), md.as_bytes());
});
