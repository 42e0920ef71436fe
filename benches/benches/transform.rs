//! Transform targets on ~1.3 KiB of JSON, outbound + inbound (encode one
//! frame, decode it back), each beside a baseline that calls the primitive
//! directly on the same bytes at the same settings, so overheads are ratios
//! read from one run:
//!
//! | target | baseline |
//! |---|---|
//! | `passthrough` | `codec_only`: weft-frame's encode + decode |
//! | `deflate` | `direct_deflate`: miniz_oxide reset + compress, init + decompress |
//! | `gcm` | `direct_gcm`: ring seal + open in place, 16-byte AAD |
//! | `deflate_gcm` | `direct_deflate_gcm`: both of the above |
//!
//! `deflate_settings` compares miniz_oxide levels with dynamic and static
//! Huffman blocks on the same bytes (the choice is documented in
//! docs/PROTOCOL.md section 4).

use bytes::BytesMut;
use miniz_oxide::deflate::core::{CompressorOxide, TDEFLFlush, TDEFLStatus, compress};
use miniz_oxide::inflate::TINFLStatus;
use miniz_oxide::inflate::core::{DecompressorOxide, decompress, inflate_flags};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use tokio_util::codec::Decoder;
use weft_benches::{json_frame, json_payload, transform_halves};
use weft_frame::{FrameCodec, Limits};
use weft_transform::{DEFLATE_LEVEL, DEFLATE_STATIC_BLOCKS, deflate_flags, passthrough};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

fn pipeline(bencher: divan::Bencher<'_, '_>, encryption: bool, compression: bool) {
    let (mut out, mut inb) = if encryption || compression {
        transform_halves(encryption, compression)
    } else {
        passthrough(Limits::default())
    };
    let frame = json_frame();
    let mut wire = BytesMut::with_capacity(4096);
    // Warm up: the first frames size the buffers (steady state allocates nothing).
    for _ in 0..4 {
        out.encode(&frame, &mut wire).unwrap();
        inb.decode(&mut wire).unwrap().unwrap();
    }
    // The decoded frame is dropped inside the loop, as a reader would: divan
    // keeps returned values alive until after the sample, which would pin the
    // read buffer and force a fresh allocation per frame.
    bencher.bench_local(|| -> usize {
        out.encode(&frame, &mut wire).unwrap();
        inb.decode(&mut wire).unwrap().unwrap().payload.len()
    });
}

#[divan::bench(name = "passthrough")]
fn passthrough_pipeline(bencher: divan::Bencher<'_, '_>) {
    pipeline(bencher, false, false);
}

#[divan::bench]
fn codec_only(bencher: divan::Bencher<'_, '_>) {
    let mut codec = FrameCodec::default();
    let frame = json_frame();
    let mut wire = BytesMut::with_capacity(4096);
    for _ in 0..4 {
        codec.encode_frame(&frame, &mut wire).unwrap();
        codec.decode(&mut wire).unwrap().unwrap();
    }
    bencher.bench_local(|| -> usize {
        codec.encode_frame(&frame, &mut wire).unwrap();
        codec.decode(&mut wire).unwrap().unwrap().payload.len()
    });
}

#[divan::bench]
fn deflate(bencher: divan::Bencher<'_, '_>) {
    pipeline(bencher, false, true);
}

#[divan::bench]
fn gcm(bencher: divan::Bencher<'_, '_>) {
    pipeline(bencher, true, false);
}

#[divan::bench]
fn deflate_gcm(bencher: divan::Bencher<'_, '_>) {
    pipeline(bencher, true, true);
}

/// miniz_oxide called directly: reset + compress into a buffer, init +
/// decompress into another, as the pipeline does per frame.
struct DirectDeflate {
    comp: Box<CompressorOxide>,
    decomp: Box<DecompressorOxide>,
    packed: Vec<u8>,
    unpacked: Vec<u8>,
}

impl DirectDeflate {
    fn new(flags: u32) -> DirectDeflate {
        DirectDeflate {
            comp: Box::new(CompressorOxide::new(flags)),
            decomp: Box::default(),
            packed: vec![0; 4096],
            unpacked: vec![0; 4096],
        }
    }

    /// Compresses `input` into `packed`; returns the compressed length.
    fn compress(&mut self, input: &[u8]) -> usize {
        self.comp.reset();
        let (status, _, n) = compress(&mut self.comp, input, &mut self.packed, TDEFLFlush::Finish);
        assert_eq!(status, TDEFLStatus::Done);
        n
    }

    /// Decompresses `packed[..n]` into `unpacked`; returns the length.
    fn decompress(&mut self, n: usize) -> usize {
        self.decomp.init();
        let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        let (status, _, out) = decompress(
            &mut self.decomp,
            &self.packed[..n],
            &mut self.unpacked,
            0,
            flags,
        );
        assert_eq!(status, TINFLStatus::Done);
        out
    }
}

/// ring called directly: seal in place with a 16-byte AAD, append the tag,
/// open in place.
struct DirectGcm {
    seal: LessSafeKey,
    open: LessSafeKey,
    n: u64,
    buf: Vec<u8>,
}

impl DirectGcm {
    fn new() -> DirectGcm {
        let key = || LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &[7; 32]).unwrap());
        DirectGcm {
            seal: key(),
            open: key(),
            n: 0,
            buf: Vec::with_capacity(4096),
        }
    }

    fn nonce(&self) -> Nonce {
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&self.n.to_be_bytes());
        Nonce::assume_unique_for_key(n)
    }

    /// Seals `plain` into `buf` and opens it again; returns the length.
    fn round_trip(&mut self, plain: &[u8]) -> usize {
        let aad = [0u8; 16];
        self.buf.clear();
        self.buf.extend_from_slice(plain);
        let tag = self
            .seal
            .seal_in_place_separate_tag(self.nonce(), Aad::from(&aad), &mut self.buf)
            .unwrap();
        self.buf.extend_from_slice(tag.as_ref());
        let n = self
            .open
            .open_in_place(self.nonce(), Aad::from(&aad), &mut self.buf)
            .unwrap()
            .len();
        self.n += 1;
        n
    }
}

#[divan::bench]
fn direct_deflate(bencher: divan::Bencher<'_, '_>) {
    let input = json_payload();
    let mut d = DirectDeflate::new(deflate_flags(DEFLATE_LEVEL, DEFLATE_STATIC_BLOCKS));
    bencher.bench_local(|| {
        let n = d.compress(&input);
        d.decompress(n)
    });
}

#[divan::bench]
fn direct_gcm(bencher: divan::Bencher<'_, '_>) {
    let input = json_payload();
    let mut g = DirectGcm::new();
    bencher.bench_local(|| g.round_trip(&input));
}

#[divan::bench]
fn direct_deflate_gcm(bencher: divan::Bencher<'_, '_>) {
    let input = json_payload();
    let mut d = DirectDeflate::new(deflate_flags(DEFLATE_LEVEL, DEFLATE_STATIC_BLOCKS));
    let mut g = DirectGcm::new();
    bencher.bench_local(|| {
        let n = d.compress(&input);
        g.round_trip(&d.packed[..n]);
        d.decompress(n)
    });
}

/// (level, static Huffman blocks) pairs compared by `deflate_settings`.
const SETTINGS: [(u8, bool); 6] = [
    (1, false),
    (1, true),
    (3, true),
    (6, false),
    (6, true),
    (9, true),
];

#[divan::bench(args = SETTINGS)]
fn deflate_settings(bencher: divan::Bencher<'_, '_>, (level, static_blocks): (u8, bool)) {
    let input = json_payload();
    let mut d = DirectDeflate::new(deflate_flags(level, static_blocks));
    bencher.bench_local(|| {
        let n = d.compress(&input);
        d.decompress(n)
    });
}
