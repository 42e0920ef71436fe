//! Shared inputs for weft's benches, so every bench and the allocation
//! harness measure the same bytes.
//!
//! - [`targets()`] is the registry: every measured operation with its name
//!   (divan's path for the same measurement,
//!   `<bench file>/<function>[/<argument>]`), a label and a constructor for
//!   its [`Op`].
//! - The allocation harness (`src/bin/alloc.rs`) runs each [`Op`] many times
//!   after a warm-up and prints allocations and bytes per op as JSON;
//!   `cargo xtask bench` compares them with `benches/alloc-baseline.json`.
//! - [`soak`] is the one soak: the test suite runs it for seconds
//!   (`tests/soak.rs`), CI for 60 s (`src/bin/soak.rs`, `cargo xtask soak`).
//! - [`Shape`], [`Runtime`] and [`drive`] are the end-to-end call shapes
//!   (sequential, joined, spawned) on one connection, shared by `weft-peers`
//!   (wall time against other stacks) and [`instr`] (the `weft-instr`
//!   binary: instructions per call for `cargo xtask instr`).
//! - [`split`] runs a measurement's server in a process of its own on one
//!   core and the client on the other (`weft-peers --split`, `weft-bulk
//!   --split`).
//!
//! What it does NOT do: time anything (divan and `weft-peers` do), or decide pass/fail
//! (xtask does). Benches never count towards coverage.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod bulk;
pub mod bulk_latency;
pub mod drive;
pub mod e2e;
pub mod frame;
pub mod instr;
pub mod mux;
mod registry;
mod runtime;
mod shape;
pub mod soak;
pub mod split;
pub mod transform;

pub use registry::{Op, Target, targets};
pub use runtime::Runtime;
pub use shape::Shape;

use bytes::{Bytes, BytesMut};
use weft_frame::{Flags, Frame, FrameCodec, FrameType, Metadata};

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

/// The transform benches' reference payload: about 1.3 KiB of JSON, an array
/// of repeated small objects such as `{"id":1,"name":"task","done":false}`.
pub fn json_payload() -> Bytes {
    let mut s = String::from("[");
    let mut id = 1;
    while s.len() < 1300 {
        if id > 1 {
            s.push(',');
        }
        s.push_str(&format!("{{\"id\":{id},\"name\":\"task\",\"done\":false}}"));
        id += 1;
    }
    s.push(']');
    Bytes::from(s)
}

/// A DATA frame carrying [`json_payload`], no metadata.
pub fn json_frame() -> Frame {
    Frame::new(FrameType::DATA, Flags::NONE, 1, json_payload())
}

/// The two halves of one direction of a connection (the initiator's write
/// half and the responder's read half) after an in-memory handshake with
/// encryption and compression switched as asked.
pub fn transform_halves(
    encryption: bool,
    compression: bool,
) -> (weft_transform::Outbound, weft_transform::Inbound) {
    use weft_transform::{EncryptionPolicy, HandshakeConfig, Offer};
    let config = HandshakeConfig {
        offer: Offer {
            encryption: if encryption {
                EncryptionPolicy::Required
            } else {
                EncryptionPolicy::Off
            },
            compression,
            ..Offer::default()
        },
        ..HandshakeConfig::default()
    };
    let (a, b) = weft_transform::handshake_in_memory(config.clone(), config)
        .expect("in-memory handshake succeeds");
    (a.outbound, b.inbound)
}
