//! Stateful mux fuzz target: one `weft_mux::session::Session` (server or
//! client, picked by the first byte) driven by a sequence of operations
//! decoded from the input: inbound frames of every type (known or not, any
//! flags, any stream id, optional metadata), application commands (open,
//! send, recv, reset, release, accept, shutdown, stop accepting) and time
//! advances. Like the real driver it only feeds frames while the session
//! `wants_read`.
//!
//! Invariants checked after every op: no panic; the peer's streams never
//! exceed the concurrency cap; the stream table holds at most the cap plus
//! the streams the application opened and still holds; the control queue
//! stays within its bound (plus the few frames one input can add); buffered
//! inbound bytes never exceed the connection window.
#![no_main]

use std::time::{Duration, Instant};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use weft_frame::{Flags, Frame, FrameType, Metadata, MetadataBuilder, Reason};
use weft_mux::Config;
use weft_mux::session::{Recv, Role, Session, settings_frame};

const CAP: usize = 8;
const CONTROL: usize = 16;
const CONN_WINDOW: u32 = 128 * 1024;

/// Reads bytes off the front of the input; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// A stream id: mostly small (so ids collide with live streams), at
    /// times anything.
    fn stream_id(&mut self) -> u32 {
        match self.u8() {
            0..=239 => u32::from(self.u8() % 24),
            _ => self.u32(),
        }
    }
    fn payload(&mut self) -> Bytes {
        let n = match self.u8() {
            0..=200 => usize::from(self.u8() % 64),
            _ => usize::from(self.u16()) * 4,
        };
        Bytes::from(vec![0x5a; n])
    }
}

fn config() -> Config {
    let mut c = Config::default();
    c.max_concurrent_streams(CAP)
        .max_control_queue(CONTROL)
        .connection_window(CONN_WINDOW)
        .stream_window(64 * 1024)
        .max_send_buffer(32 * 1024)
        .pending_accept_reset_budget(4)
        .local_reset_budget(16)
        .ping_budget(8)
        .empty_frame_budget(16)
        .unknown_frame_budget(16)
        .late_frame_budget(32)
        .keepalive_interval(Some(Duration::from_secs(5)))
        .max_stream_id(64);
    c
}

fn inbound_frame(input: &mut Input<'_>) -> Frame {
    let ty = match input.u8() {
        b @ 0..=7 => FrameType(b),
        b @ 8..=15 => FrameType(b % 6), // favour the frames the mux handles
        b => FrameType(b),
    };
    let flags = Flags(input.u8());
    let stream_id = input.stream_id();
    let mut frame = match (ty, input.u8() % 4) {
        (FrameType::WINDOW_UPDATE, 0) => Frame::window_update(stream_id, input.u32()),
        (FrameType::RESET, 0) => Frame::reset(stream_id, Reason(input.u32())),
        (FrameType::PING, 0) => Frame::ping([input.u8(); 8], input.u8() & 1 == 1),
        (FrameType::GOAWAY, 0) => Frame::goaway(input.u32(), Reason(input.u32()), b"fuzz"),
        _ => Frame::new(ty, flags, stream_id, input.payload()),
    };
    frame.stream_id = stream_id;
    if input.u8() & 3 == 0 {
        frame.metadata = MetadataBuilder::new(Default::default())
            .custom(b"stream-window", &input.u32().to_be_bytes())
            .status(input.u32())
            .finish();
    }
    frame
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let role = if input.u8() & 1 == 0 { Role::Server } else { Role::Client };
    let cfg = config();
    let mut now = Instant::now();
    let mut s = Session::new(role, &cfg, now);
    // Most runs start past the settings exchange, so the fuzzer reaches
    // the stream rules; the rest fuzz the settings frame itself.
    if input.u8() < 224 {
        s.handle_frame(settings_frame(CONN_WINDOW - 64 * 1024, 64 * 1024), now);
    }
    let mut held: Vec<u32> = Vec::new(); // ids the "application" holds
    // Application commands since the socket last drained: each may queue a
    // control frame of its own (an OPEN, a RESET), which the peer's bound
    // does not cover.
    let mut app_since_drain = 0usize;
    let mut ops = 0;
    while !input.0.is_empty() && ops < 4096 {
        ops += 1;
        let op = input.u8() % 12;
        if (4..=9).contains(&op) || op == 11 {
            app_since_drain += 1;
        }
        match op {
            0..=3 => {
                if s.wants_read() {
                    let f = inbound_frame(&mut input);
                    s.handle_frame(f, now);
                }
            }
            4 => {
                let payload = input.payload();
                let end = input.u8() & 1 == 1;
                if let Ok(id) = s.open(Metadata::new(), payload, end, now) {
                    held.push(id);
                }
            }
            5 => {
                if let Some(&id) = pick(&mut input, &held) {
                    let payload = input.payload();
                    if let Ok(room) = s.send_room(id) {
                        let piece = payload.slice(..payload.len().min(room));
                        let _ = s.send(id, Metadata::new(), piece, input.u8() & 1 == 1);
                    }
                }
            }
            6 => {
                if let Some(&id) = pick(&mut input, &held) {
                    while let Recv::Chunk(_) = s.recv(id) {}
                }
            }
            7 => {
                if let Some(&id) = pick(&mut input, &held) {
                    s.reset(id, Reason(u32::from(input.u8())));
                }
            }
            8 => {
                if !held.is_empty() {
                    let i = usize::from(input.u8()) % held.len();
                    s.release(held.swap_remove(i), now);
                }
            }
            9 => {
                while let Some(id) = s.accept() {
                    held.push(id);
                }
            }
            10 => {
                now += Duration::from_millis(u64::from(input.u16()) * 8);
                s.handle_timeout(now);
            }
            _ => match input.u8() % 3 {
                0 => s.shutdown(now, Duration::from_secs(1)),
                1 => s.set_accepting(input.u8() & 1 == 1),
                _ => {
                    // The socket drains: everything queued goes out.
                    while s.poll_transmit().is_some() {}
                    app_since_drain = 0;
                }
            },
        }
        while s.poll_event().is_some() {}
        check(&s, held.len(), app_since_drain);
    }
    // At the end the writer drains the socket fully; poll_transmit must
    // terminate (no frame is produced forever).
    let mut sent = 0usize;
    while s.poll_transmit().is_some() {
        sent += 1;
        assert!(sent < 1_000_000, "poll_transmit never ends");
    }
});

fn pick<'a>(input: &mut Input<'_>, held: &'a [u32]) -> Option<&'a u32> {
    if held.is_empty() {
        return None;
    }
    held.get(usize::from(input.u8()) % held.len())
}

fn check(s: &Session, held: usize, app_since_drain: usize) {
    let st = s.stats();
    assert!(st.inbound <= CAP, "inbound streams over the cap: {st:?}");
    assert!(st.streams <= CAP + held + 1, "stream table unbounded: {st:?} held {held}");
    // One inbound frame may queue a few control frames after the check
    // that let it in (a reset, a window update, a pong, GOAWAY); stopping
    // accepting refuses up to the cap at once; application commands add
    // their own.
    let bound = CONTROL + 8 + CAP + 2 * app_since_drain;
    assert!(st.control_queued <= bound, "control queue unbounded: {st:?} bound {bound}");
    // Credit the peer has plus what we consumed and not granted back never
    // exceeds the window: buffered data is bounded by it.
    assert!(
        u64::from(st.conn_recv_window) + u64::from(st.conn_recv_unacked) <= u64::from(CONN_WINDOW),
        "connection window accounting: {st:?}"
    );
}
