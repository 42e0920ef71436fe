//! The far end of a mux connection speaking raw frames (plain pipeline),
//! over an in-memory pipe or a real socket.

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use weft_frame::{Frame, FrameType};
use weft_mux::pipeline::{HandshakeRole, Inbound, Outbound};
use weft_mux::session::settings_frame;
use weft_mux::{Config, Connection, Incoming, Role, connect};

/// A raw-frame peer over `T`.
pub struct RawPeer<T = DuplexStream> {
    pub io: T,
    pub outbound: Outbound,
    pub inbound: Inbound,
    pub buf: BytesMut,
}

impl RawPeer<DuplexStream> {
    /// Connects a mux `role` endpoint with `config` to a raw peer that has
    /// done the handshake and sent its settings, over a pipe of `pipe` bytes.
    pub async fn start(role: Role, config: Config, pipe: usize) -> (Connection, Incoming, RawPeer) {
        let (a, b) = tokio::io::duplex(pipe);
        let mux = tokio::spawn(connect(a, role, config));
        let peer = RawPeer::over(b, role).await;
        let (conn, incoming) = mux.await.unwrap().unwrap();
        (conn, incoming, peer)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> RawPeer<T> {
    /// Runs the handshake over `io` against a mux endpoint of `role`, sends
    /// the settings frame and reads the endpoint's.
    pub async fn over(mut io: T, role: Role) -> RawPeer<T> {
        let hs_role = match role {
            Role::Client => HandshakeRole::Responder,
            Role::Server => HandshakeRole::Initiator,
        };
        let (est, buf) = super::raw_handshake(&mut io, hs_role).await;
        assert!(!est.negotiated.encrypted);
        let mut peer = RawPeer {
            io,
            outbound: est.outbound,
            inbound: est.inbound,
            buf,
        };
        peer.send(settings_frame(1024 * 1024 - 64 * 1024, 256 * 1024))
            .await;
        let first = peer.recv().await.unwrap();
        assert_eq!(first.ty, FrameType::WINDOW_UPDATE, "settings first");
        peer
    }

    pub fn encode(&mut self, f: &Frame) -> BytesMut {
        let mut out = BytesMut::new();
        self.outbound.encode(f, &mut out).unwrap();
        out
    }

    pub async fn send(&mut self, f: Frame) {
        let out = self.encode(&f);
        self.io.write_all(&out).await.unwrap();
    }

    /// The next frame, or `None` at EOF.
    pub async fn recv(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.inbound.decode(&mut self.buf).unwrap() {
                return Some(f);
            }
            if self.io.read_buf(&mut self.buf).await.unwrap() == 0 {
                return None;
            }
        }
    }

    /// Frames until EOF.
    pub async fn rest(&mut self) -> Vec<Frame> {
        let mut v = Vec::new();
        while let Some(f) = self.recv().await {
            v.push(f);
        }
        v
    }
}
