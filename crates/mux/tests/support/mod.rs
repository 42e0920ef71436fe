//! Test support: an in-memory pair of sessions with a virtual clock, and a
//! scripted raw-frame peer.
#![allow(dead_code, unreachable_pub)]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};
use weft_frame::{Frame, FrameCodec};
use weft_mux::Config;
use weft_mux::session::{Event, Recv, Role, Session};

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
    pub fn drive(&mut self) -> usize {
        let mut moved = 0;
        loop {
            let mut any = false;
            while let Some(f) = self.client.poll_transmit() {
                let f = self.roundtrip(f);
                self.server.handle_frame(f, self.now);
                any = true;
                moved += 1;
            }
            while let Some(f) = self.server.poll_transmit() {
                let f = self.roundtrip(f);
                self.client.handle_frame(f, self.now);
                any = true;
                moved += 1;
            }
            if !any {
                return moved;
            }
        }
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
