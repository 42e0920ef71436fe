//! The transform pipeline [`Op`]: one frame of the ~1.3 KiB JSON payload
//! out (`Outbound::encode`) and back in (`Inbound::decode`), as
//! `benches/transform.rs` times it.

use std::hint::black_box;

use bytes::BytesMut;
use weft_frame::{Frame, Limits};
use weft_transform::{Inbound, Outbound, passthrough};

use crate::{Op, json_frame, transform_halves};

/// Encodes then decodes one frame through a negotiated pipeline.
#[derive(Debug)]
pub struct Pipeline {
    out: Outbound,
    inb: Inbound,
    frame: Frame,
    wire: BytesMut,
}

impl Pipeline {
    /// A pipeline with encryption and compression as asked; neither is the
    /// plain passthrough.
    pub fn new(encryption: bool, compression: bool) -> Self {
        let (out, inb) = if encryption || compression {
            transform_halves(encryption, compression)
        } else {
            passthrough(Limits::default())
        };
        Self {
            out,
            inb,
            frame: json_frame(),
            wire: BytesMut::with_capacity(4096),
        }
    }
}

impl Op for Pipeline {
    fn run(&mut self) {
        self.out.encode(&self.frame, &mut self.wire).unwrap();
        black_box(self.inb.decode(&mut self.wire).unwrap().unwrap());
    }

    fn bytes(&self) -> Option<u64> {
        Some(self.frame.payload.len() as u64)
    }
}
