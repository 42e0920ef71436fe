//! The hostile raw-frame peer: completes weft's handshake over a real TCP
//! socket (or any byte stream, e.g. `tokio::io::duplex`), then sends
//! whatever frames (or bytes) a test scripts. The one raw peer of the
//! workspace's tests: weft-mux's driver tests use it too.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::DuplexStream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use weft_frame::{Flags, Frame, FrameType, Reason};
use weft_mux::pipeline::{Handshake, HandshakeConfig, HandshakeRole, Inbound, Outbound};
use weft_mux::session::settings_frame;
use weft_mux::{Config, Connection, Incoming, Role};

use crate::modes::Mode;

/// How long [`RawPeer`] waits for the server before a read counts as
/// "nothing came" (generous: the machine is loaded; tests never assert it).
/// [`RawPeer::patience`] changes it per peer.
pub const PEER_PATIENCE: Duration = Duration::from_secs(5);

/// The per-stream window the raw peer announces in its settings frame.
pub const PEER_STREAM_WINDOW: u32 = 256 * 1024;

/// A misbehaving peer speaking raw frames through the same record pipeline
/// a real endpoint uses (`weft_mux::pipeline`, i.e. weft-transform once the
/// mux is wired to it), so whatever handshake the server runs, the peer
/// completes it and can then break every rule above it.
///
/// `T` is the transport: a [`TcpStream`] by default; any
/// `AsyncRead + AsyncWrite` through [`RawPeer::handshake_on`].
#[derive(Debug)]
pub struct RawPeer<T = TcpStream> {
    io: T,
    buf: BytesMut,
    outbound: Outbound,
    inbound: Inbound,
    patience: Option<Duration>,
}

/// What the peer saw when a read ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerRead {
    /// A whole frame.
    Frame(Frame),
    /// The server closed the connection cleanly (EOF between frames).
    Eof,
    /// The socket failed (reset) or the bytes did not decode.
    Broken(String),
    /// Nothing arrived within the peer's patience ([`PEER_PATIENCE`]).
    Silent,
}

impl PeerRead {
    /// The frame, if the read returned one.
    pub fn frame(self) -> Option<Frame> {
        match self {
            PeerRead::Frame(f) => Some(f),
            _ => None,
        }
    }
}

impl RawPeer<TcpStream> {
    /// Dials `addr` with small socket buffers (so a peer that stops reading
    /// fills them quickly) and runs the handshake as initiator with
    /// `config`. Sends nothing else.
    pub async fn handshake(addr: SocketAddr, config: HandshakeConfig) -> io::Result<RawPeer> {
        let io = dial_small(addr).await?;
        RawPeer::handshake_over(io, HandshakeRole::Initiator, config).await
    }

    /// Runs the handshake over an already connected socket.
    pub async fn handshake_over(
        io: TcpStream,
        role: HandshakeRole,
        config: HandshakeConfig,
    ) -> io::Result<RawPeer> {
        io.set_nodelay(true)?;
        RawPeer::handshake_on(io, role, config).await
    }

    /// Handshake, then the settings frame every endpoint sends first
    /// (default connection window, [`PEER_STREAM_WINDOW`] per stream), then
    /// the server's own settings frame is read and checked.
    pub async fn connect(addr: SocketAddr, config: HandshakeConfig) -> io::Result<RawPeer> {
        let mut peer = RawPeer::handshake(addr, config).await?;
        peer.exchange_settings().await?;
        Ok(peer)
    }
}

impl RawPeer<DuplexStream> {
    /// Connects a mux `role` endpoint with `config` to a raw peer over a
    /// `tokio::io::duplex` of `pipe` bytes ([`RawPeer::facing`]).
    ///
    /// # Panics
    /// If either side's handshake or the settings exchange fails.
    pub async fn start(role: Role, config: Config, pipe: usize) -> (Connection, Incoming, Self) {
        let (a, b) = tokio::io::duplex(pipe);
        let mux = tokio::spawn(weft_mux::connect(a, role, config));
        let peer = RawPeer::facing(b, role).await;
        let (conn, incoming) = mux.await.unwrap().unwrap();
        (conn, incoming, peer)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> RawPeer<T> {
    /// The peer of a mux endpoint in `role` over `io`: plain handshake
    /// ([`Mode::plain`]) in the other role, settings exchanged, and reads
    /// that wait for ever (for paused clocks).
    ///
    /// # Panics
    /// If the handshake or the settings exchange fails.
    pub async fn facing(io: T, role: Role) -> RawPeer<T> {
        let hs_role = match role {
            Role::Client => HandshakeRole::Responder,
            Role::Server => HandshakeRole::Initiator,
        };
        let peer = RawPeer::handshake_on(io, hs_role, Mode::plain().client).await;
        let mut peer = peer.expect("raw peer handshake").patience(None);
        peer.exchange_settings().await.expect("settings");
        peer
    }

    /// Every frame until the connection ends, which must be a clean EOF.
    ///
    /// # Panics
    /// If it ends otherwise (a reset, bytes that do not decode, silence).
    pub async fn frames_to_eof(&mut self) -> Vec<Frame> {
        let (frames, end) = self.rest().await;
        assert_eq!(end, PeerRead::Eof, "after {frames:?}");
        frames
    }

    /// Runs the handshake in `role` over any byte stream (the loop every
    /// raw peer of the tests uses; the endpoint's own is in
    /// `weft_mux::connect`). Sends nothing else.
    pub async fn handshake_on(
        mut io: T,
        role: HandshakeRole,
        config: HandshakeConfig,
    ) -> io::Result<RawPeer<T>> {
        let mut hs = Handshake::new(role, config).map_err(io::Error::other)?;
        let mut buf = BytesMut::new();
        let mut out = BytesMut::new();
        loop {
            hs.poll_transmit(&mut out);
            if !out.is_empty() {
                io.write_all(&out).await?;
                out.clear();
            }
            if hs.is_complete() {
                break;
            }
            hs.handle_input(&mut buf).map_err(io::Error::other)?;
            if hs.is_complete() || hs.has_transmit() {
                continue;
            }
            if io.read_buf(&mut buf).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        let est = hs.into_session().map_err(io::Error::other)?;
        Ok(RawPeer {
            io,
            buf,
            outbound: est.outbound,
            inbound: est.inbound,
            patience: Some(PEER_PATIENCE),
        })
    }

    /// Sends [`settings`] and reads and checks the endpoint's own settings
    /// frame (what every endpoint does first after the handshake).
    pub async fn exchange_settings(&mut self) -> io::Result<()> {
        self.send(&settings()).await?;
        match self.recv().await {
            PeerRead::Frame(f) if f.ty == FrameType::WINDOW_UPDATE && f.stream_id == 0 => Ok(()),
            other => Err(io::Error::other(format!(
                "expected settings, got {other:?}"
            ))),
        }
    }

    /// How long a read waits before it returns [`PeerRead::Silent`]; `None`
    /// waits for ever (for a paused clock, where a timer the endpoint is
    /// waiting for must fire before the peer gives up).
    #[must_use]
    pub fn patience(mut self, patience: Option<Duration>) -> RawPeer<T> {
        self.patience = patience;
        self
    }

    /// Encodes and writes one frame.
    pub async fn send(&mut self, frame: &Frame) -> io::Result<()> {
        let mut out = BytesMut::new();
        self.encode(frame, &mut out);
        self.io.write_all(&out).await
    }

    /// Encodes `n` copies of `frame` (each its own record, so nothing is a
    /// replay) and writes them in one write: a flood.
    pub async fn send_many(&mut self, frame: &Frame, n: usize) -> io::Result<()> {
        let mut out = BytesMut::new();
        for _ in 0..n {
            self.encode(frame, &mut out);
        }
        self.io.write_all(&out).await
    }

    /// Encodes `frame` through the pipeline into `out` (to batch frames or
    /// to cut their bytes).
    ///
    /// # Panics
    /// If the pipeline refuses the frame (only for frames over our limits).
    pub fn encode(&mut self, frame: &Frame, out: &mut BytesMut) {
        self.outbound.encode(frame, out).expect("peer encodes");
    }

    /// Writes raw bytes, bypassing the pipeline.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes).await
    }

    /// Writes raw bytes one at a time, each in its own write.
    pub async fn send_bytewise(&mut self, bytes: &[u8]) -> io::Result<()> {
        for b in bytes {
            self.io.write_all(std::slice::from_ref(b)).await?;
            self.io.flush().await?;
        }
        Ok(())
    }

    /// Half-closes the write side (EOF for the server).
    pub async fn shutdown_write(&mut self) -> io::Result<()> {
        self.io.shutdown().await
    }

    /// The next frame (or how the read ended).
    pub async fn recv(&mut self) -> PeerRead {
        loop {
            match self.inbound.decode(&mut self.buf) {
                Ok(Some(f)) => return PeerRead::Frame(f),
                Ok(None) => {}
                Err(e) => return PeerRead::Broken(e.to_string()),
            }
            let read = self.io.read_buf(&mut self.buf);
            let read = match self.patience {
                Some(p) => tokio::time::timeout(p, read).await,
                None => Ok(read.await),
            };
            match read {
                Err(_) => return PeerRead::Silent,
                Ok(Ok(0)) => {
                    return match self.inbound.decode_eof(&mut self.buf) {
                        Ok(Some(f)) => PeerRead::Frame(f),
                        Ok(None) => PeerRead::Eof,
                        Err(e) => PeerRead::Broken(e.to_string()),
                    };
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return PeerRead::Broken(e.to_string()),
            }
        }
    }

    /// Every frame until the connection ends, and how it ended.
    pub async fn rest(&mut self) -> (Vec<Frame>, PeerRead) {
        let mut frames = Vec::new();
        loop {
            match self.recv().await {
                PeerRead::Frame(f) => frames.push(f),
                end => return (frames, end),
            }
        }
    }

    /// Reads until the server's `GOAWAY` and returns its reason; answers
    /// nothing on the way. `None` if the connection ended without one.
    pub async fn goaway(&mut self) -> Option<Reason> {
        loop {
            match self.recv().await {
                PeerRead::Frame(f) if f.ty == FrameType::GOAWAY => {
                    return f.parse_goaway().ok().map(|g| g.1);
                }
                PeerRead::Frame(_) => {}
                _ => return None,
            }
        }
    }

    /// Reads until a `RESET` for `stream_id` and returns its reason.
    pub async fn reset_of(&mut self, stream_id: u32) -> Option<Reason> {
        loop {
            match self.recv().await {
                PeerRead::Frame(f) if f.ty == FrameType::RESET && f.stream_id == stream_id => {
                    return f.parse_reset().ok();
                }
                PeerRead::Frame(_) => {}
                _ => return None,
            }
        }
    }

    /// A full round trip on this (possibly abused) connection: opens
    /// `stream_id` with `payload` and end, reads the echo until its end.
    /// Proves the connection still serves after the abuse.
    pub async fn echo(
        &mut self,
        stream_id: u32,
        payload: &'static [u8],
    ) -> Result<Vec<u8>, String> {
        self.send(&open(stream_id, payload, true))
            .await
            .map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        loop {
            match self.recv().await {
                PeerRead::Frame(f) if f.stream_id == stream_id => {
                    if f.ty == FrameType::RESET {
                        return Err(format!("reset {:?}", f.parse_reset()));
                    }
                    got.extend_from_slice(&f.payload);
                    if f.is_end_stream() {
                        return Ok(got);
                    }
                }
                PeerRead::Frame(_) => {}
                other => return Err(format!("{other:?}")),
            }
        }
    }

    /// The transport (for raw abuse).
    pub fn io_mut(&mut self) -> &mut T {
        &mut self.io
    }
}

/// Dials `addr` with 4 KiB socket buffers.
pub async fn dial_small(addr: SocketAddr) -> io::Result<TcpStream> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    sock.set_recv_buffer_size(4096)?;
    sock.set_send_buffer_size(4096)?;
    sock.connect(addr).await
}

/// A listener a raw peer can play the *server* role on (for tests where
/// the real endpoint is a client): accept with [`RawPeer::handshake_over`]
/// as responder.
pub async fn raw_listener() -> io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind("127.0.0.1:0").await?;
    let a = l.local_addr()?;
    Ok((l, a))
}

/// The settings frame every endpoint sends first.
pub fn settings() -> Frame {
    settings_frame(1024 * 1024 - 64 * 1024, PEER_STREAM_WINDOW)
}

/// An `OPEN` frame with `payload`.
pub fn open(stream_id: u32, payload: &'static [u8], end: bool) -> Frame {
    let flags = if end { Flags::END_STREAM } else { Flags::NONE };
    Frame::new(
        FrameType::OPEN,
        flags,
        stream_id,
        Bytes::from_static(payload),
    )
}

/// A `DATA` frame with `payload`.
pub fn data(stream_id: u32, payload: Bytes, end: bool) -> Frame {
    let flags = if end { Flags::END_STREAM } else { Flags::NONE };
    Frame::new(FrameType::DATA, flags, stream_id, payload)
}
