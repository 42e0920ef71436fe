//! Test support: an in-memory pair of sessions with a virtual clock, and a
//! session fed by scripted frames (sans-I/O). The raw peer over a real
//! transport, the driver pair and the echo service are weft-testkit's.
#![allow(dead_code, unreachable_pub)]

pub mod io;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};
use weft_frame::{Flags, Frame, FrameCodec, FrameType, Reason};
use weft_mux::Config;
use weft_mux::session::{Event, Recv, Role, Session};

/// The most frames one [`Pair::drive`] moves before it panics: far above
/// any test's exchange (the largest moves 16 frames).
pub const DRIVE_LIMIT: usize = 10_000;

/// Two sessions wired back to back; frames go through the real codec.
pub struct Pair {
    pub client: Session,
    pub server: Session,
    pub now: Instant,
    codec: FrameCodec,
}

impl Pair {
    pub fn new() -> Pair {
        Pair::with(Config::default(), Config::default())
    }

    pub fn with(client: Config, server: Config) -> Pair {
        let now = Instant::now();
        let mut p = Pair {
            client: Session::new(Role::Client, &client, now),
            server: Session::new(Role::Server, &server, now),
            now,
            codec: FrameCodec::default(),
        };
        p.drive();
        p
    }

    /// Moves frames both ways until neither side has anything to send.
    /// Returns the number of frames moved.
    ///
    /// # Panics
    /// After [`DRIVE_LIMIT`] frames: two sessions that never go quiet
    /// (a ping-pong of control frames, say) are a bug to see, not a hang.
    pub fn drive(&mut self) -> usize {
        let mut moved = 0;
        loop {
            let before = moved;
            while let Some(f) = self.client.poll_transmit() {
                moved = Pair::step(moved);
                let f = self.roundtrip(f);
                self.server.handle_frame(f, self.now);
            }
            while let Some(f) = self.server.poll_transmit() {
                moved = Pair::step(moved);
                let f = self.roundtrip(f);
                self.client.handle_frame(f, self.now);
            }
            if moved == before {
                return moved;
            }
        }
    }

    fn step(moved: usize) -> usize {
        assert!(
            moved < DRIVE_LIMIT,
            "Pair::drive moved {DRIVE_LIMIT} frames and the sessions are still not quiet: \
             they keep answering each other (a livelock)"
        );
        moved + 1
    }

    fn roundtrip(&mut self, f: Frame) -> Frame {
        let mut buf = BytesMut::new();
        self.codec.encode(&f, &mut buf).unwrap();
        self.codec.decode(&mut buf).unwrap().unwrap()
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
    }
}

/// Drains a session's events.
pub fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// Receives everything buffered on a stream: (bytes, ended, error).
pub fn drain(s: &mut Session, id: u32) -> (Vec<u8>, bool, Option<weft_mux::StreamError>) {
    let mut out = Vec::new();
    loop {
        match s.recv(id) {
            Recv::Chunk(c) => out.extend_from_slice(&c.data),
            Recv::End => return (out, true, None),
            Recv::Pending => return (out, false, None),
            Recv::Failed(e) => return (out, false, Some(e)),
        }
    }
}

pub fn bytes(n: usize) -> Bytes {
    Bytes::from((0..n).map(|i| i as u8).collect::<Vec<u8>>())
}

/// A session under test fed by a scripted raw-frame peer.
pub struct Scripted {
    pub s: Session,
    pub now: Instant,
}

impl Scripted {
    /// A session in `role` that has already received the peer's settings
    /// (default windows) and sent its own.
    pub fn new(role: Role, config: Config) -> Scripted {
        let now = Instant::now();
        let mut s = Session::new(role, &config, now);
        s.handle_frame(
            weft_mux::session::settings_frame(1024 * 1024 - 64 * 1024, 256 * 1024),
            now,
        );
        let mut me = Scripted { s, now };
        me.out();
        me
    }

    pub fn server(config: Config) -> Scripted {
        Scripted::new(Role::Server, config)
    }

    pub fn feed(&mut self, f: Frame) {
        self.s.handle_frame(f, self.now);
    }

    /// Everything the session wants to send now.
    pub fn out(&mut self) -> Vec<Frame> {
        std::iter::from_fn(|| self.s.poll_transmit()).collect()
    }

    pub fn open(&mut self, id: u32, payload: &'static [u8], end: bool) {
        let flags = if end { Flags::END_STREAM } else { Flags::NONE };
        self.feed(Frame::new(
            FrameType::OPEN,
            flags,
            id,
            Bytes::from_static(payload),
        ));
    }

    pub fn data(&mut self, id: u32, payload: Bytes, end: bool) {
        let flags = if end { Flags::END_STREAM } else { Flags::NONE };
        self.feed(Frame::new(FrameType::DATA, flags, id, payload));
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.s.handle_timeout(self.now);
    }
}

/// The reason of the first GOAWAY among `frames`.
pub fn goaway(frames: &[Frame]) -> Option<Reason> {
    frames
        .iter()
        .find(|f| f.ty == FrameType::GOAWAY)
        .map(|f| f.parse_goaway().unwrap().1)
}

/// `(stream id, reason)` of every RESET among `frames`.
pub fn resets(frames: &[Frame]) -> Vec<(u32, Reason)> {
    frames
        .iter()
        .filter(|f| f.ty == FrameType::RESET)
        .map(|f| (f.stream_id, f.parse_reset().unwrap()))
        .collect()
}
