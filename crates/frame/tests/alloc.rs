//! Decoding a buffered frame allocates nothing: counted with a global
//! allocator, so this test fails if a single allocation creeps in.
#![allow(unsafe_code)] // reason: a GlobalAlloc impl is unsafe by definition; it only delegates to System.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::BytesMut;
use tokio_util::codec::Decoder;
use weft_frame::{Flags, Frame, FrameCodec, FrameType, Metadata};

struct Counting;

thread_local! {
    // Per thread, so the test harness's other threads do not count.
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn bump() {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method delegates to System with the caller's arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs_during<R>(f: impl FnOnce() -> R) -> (usize, R) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (ALLOCS.with(Cell::get) - before, r)
}

fn frame(size: usize) -> Frame {
    Frame {
        ty: FrameType::DATA,
        flags: Flags::END_STREAM,
        stream_id: 1,
        metadata: Metadata::builder().method("svc/echo").status(0).finish(),
        payload: vec![7u8; size].into(),
    }
}

#[test]
fn decoding_buffered_frames_allocates_nothing() {
    for size in [0, 64, 1024, 64 * 1024] {
        let mut codec = FrameCodec::default();
        let n = 32;
        let mut buf = BytesMut::with_capacity(n * frame(size).encoded_len());
        for _ in 0..n {
            codec.encode_frame(&frame(size), &mut buf).unwrap();
        }
        // The first split turns the Vec-backed buffer into a shared one: a
        // one-off per read buffer, not per frame.
        let first = codec.decode(&mut buf).unwrap().unwrap();
        drop(first);
        let (count, frames) = allocs_during(|| {
            let mut decoded = 0;
            while let Some(f) = codec.decode(&mut buf).unwrap() {
                assert_eq!(f.payload.len(), size);
                assert_eq!(f.metadata.method(), Some("svc/echo"));
                decoded += 1;
                drop(f);
            }
            decoded
        });
        assert_eq!(frames, n - 1);
        assert_eq!(
            count,
            0,
            "{count} allocations decoding {} frames of {size} B",
            n - 1
        );
    }
}

#[test]
fn decoded_payload_is_a_slice_of_the_read_buffer() {
    let mut codec = FrameCodec::default();
    let mut buf = BytesMut::new();
    codec.encode_frame(&frame(4096), &mut buf).unwrap();
    let start = buf.as_ptr() as usize;
    let end = start + buf.len();
    let f = codec.decode(&mut buf).unwrap().unwrap();
    let p = f.payload.as_ptr() as usize;
    assert!(
        p >= start && p + f.payload.len() <= end,
        "payload was copied"
    );
}

#[test]
fn encoding_into_a_buffer_with_room_allocates_nothing() {
    let mut codec = FrameCodec::default();
    let f = frame(1024);
    let mut buf = BytesMut::with_capacity(16 * f.encoded_len());
    let (count, ()) = allocs_during(|| {
        for _ in 0..16 {
            codec.encode_frame(&f, &mut buf).unwrap();
        }
    });
    assert_eq!(count, 0);
    assert_eq!(buf.len(), 16 * f.encoded_len());
}
