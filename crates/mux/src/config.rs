//! Connection configuration: every knob with its default, unit and memory cost.

use std::time::Duration;

use weft_frame::Limits;

use crate::pipeline::HandshakeConfig;

/// The per-stream receive window every peer may assume before it learns the
/// other side's setting (section 6.4 of the protocol): 64 KiB. Windows can
/// only be announced at or above it.
pub const BASELINE_WINDOW: u32 = 64 * 1024;

/// Largest window a peer may announce or reach: 2^31 - 1 bytes.
pub const MAX_WINDOW: u32 = i32::MAX as u32;

/// Default cap on receive windows grown from bandwidth-delay estimates
/// ([`Config::adaptive_window`]): 16 MiB, as grpc-go's `bdpLimit`.
pub const DEFAULT_WINDOW_CAP: u32 = 16 << 20;

/// Configuration of one connection. `Default` gives the documented defaults;
/// each setter states its default, unit and memory cost.
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) limits: Limits,
    pub(crate) handshake: HandshakeConfig,
    pub(crate) handshake_timeout: Duration,
    pub(crate) max_concurrent_streams: usize,
    pub(crate) stream_window: u32,
    pub(crate) connection_window: u32,
    pub(crate) max_send_buffer: usize,
    pub(crate) keepalive_interval: Option<Duration>,
    pub(crate) keepalive_timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) progress_timeout: Option<Duration>,
    pub(crate) half_close_drain: Duration,
    pub(crate) pending_accept_reset_budget: usize,
    pub(crate) local_reset_budget: u32,
    pub(crate) ping_budget: u32,
    pub(crate) empty_frame_budget: u32,
    pub(crate) unknown_frame_budget: u32,
    pub(crate) late_frame_budget: u32,
    pub(crate) budget_window: Duration,
    pub(crate) max_control_queue: usize,
    pub(crate) max_stream_id: u32,
    pub(crate) write_coalesce: usize,
    pub(crate) adaptive_window: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limits: Limits::default(),
            handshake: HandshakeConfig::default(),
            handshake_timeout: Duration::from_secs(10),
            max_concurrent_streams: 128,
            stream_window: BASELINE_WINDOW,
            connection_window: 1024 * 1024,
            max_send_buffer: 256 * 1024,
            keepalive_interval: None,
            keepalive_timeout: Duration::from_secs(20),
            idle_timeout: Some(Duration::from_secs(30)),
            progress_timeout: None,
            half_close_drain: Duration::from_secs(10),
            pending_accept_reset_budget: 20,
            local_reset_budget: 1024,
            ping_budget: 64,
            empty_frame_budget: 1024,
            unknown_frame_budget: 1024,
            late_frame_budget: 4096,
            budget_window: Duration::from_secs(10),
            max_control_queue: 4096,
            max_stream_id: u32::MAX,
            write_coalesce: 64 * 1024,
            adaptive_window: Some(DEFAULT_WINDOW_CAP),
        }
    }
}

impl Config {
    /// Frame size limits (weft-frame [`Limits`]), offered in the handshake
    /// (they override `HandshakeConfig::limits` and `offer.max_payload`).
    /// Default: 64 KiB payload (h2 and grpc-go use 16 KiB: weft's larger
    /// frames cost less per byte, and the writer cuts them to what a
    /// congested transport takes; see docs/FAQ.md), 16 KiB metadata.
    /// Memory: the read buffer may grow to one whole frame.
    pub fn limits(&mut self, limits: Limits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// The handshake settings: encryption policy (default `Preferred`),
    /// compression (default on), pre-shared key (default none). Default:
    /// `HandshakeConfig::default()`. Memory: none beyond the handshake and
    /// the (de)compressor state when compression is negotiated.
    pub fn handshake(&mut self, handshake: HandshakeConfig) -> &mut Self {
        self.handshake = handshake;
        self
    }

    /// How long the handshake may take before the connection is dropped.
    /// Default 10 s. Memory: none.
    pub fn handshake_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Cap on streams the *peer* has open at once; opens beyond it are
    /// refused with `RESET(REFUSED_STREAM)` (safe to retry). A stream counts
    /// until it is closed both ways and its local handle is dropped. Default
    /// 128 streams. Memory: up to `stream_window` of buffered data plus one
    /// metadata block per stream.
    pub fn max_concurrent_streams(&mut self, n: usize) -> &mut Self {
        self.max_concurrent_streams = n;
        self
    }

    /// Receive window per stream, in bytes, announced to the peer; clamped
    /// to [`BASELINE_WINDOW`]..=[`MAX_WINDOW`]. Default 64 KiB (grpc-go's
    /// first window), grown from bandwidth-delay estimates where the link
    /// needs more ([`adaptive_window`](Self::adaptive_window)): a larger
    /// first window lets a transfer put more ahead of a small call on the
    /// same connection in a transport that takes it all (loopback), see
    /// docs/FAQ.md. Memory: this much data (or the grown window) may be
    /// buffered per stream the application does not read.
    pub fn stream_window(&mut self, bytes: u32) -> &mut Self {
        self.stream_window = bytes.clamp(BASELINE_WINDOW, MAX_WINDOW);
        self
    }

    /// Receive window for the whole connection, in bytes; clamped to
    /// [`BASELINE_WINDOW`]..=[`MAX_WINDOW`]. Default 1 MiB. Memory: bounds
    /// all buffered received data together.
    pub fn connection_window(&mut self, bytes: u32) -> &mut Self {
        self.connection_window = bytes.clamp(BASELINE_WINDOW, MAX_WINDOW);
        self
    }

    /// Memory a stream may hold in data queued but not yet sent (waiting
    /// for flow-control credit or the socket); `send` waits beyond it. It
    /// counts each queued message's real cost (bytes, metadata and about
    /// 280 bytes of queue and allocator overhead), so a peer that grants no
    /// credit holds at most this per stream however small the messages.
    /// Default 256 KiB. Memory: this much per stream with a slow peer.
    pub fn max_send_buffer(&mut self, bytes: usize) -> &mut Self {
        self.max_send_buffer = bytes.max(1);
        self
    }

    /// Send a `PING` after this long without receiving anything; `None`
    /// turns keepalive off. Default `None`. Memory: none.
    pub fn keepalive_interval(&mut self, interval: Option<Duration>) -> &mut Self {
        self.keepalive_interval = interval;
        self
    }

    /// How long a keepalive `PING` may go unanswered before the connection
    /// is closed (`TIMEOUT`). Default 20 s. Memory: none.
    pub fn keepalive_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.keepalive_timeout = timeout;
        self
    }

    /// Close the connection (`GOAWAY(NO_ERROR)`) after it has had no open
    /// stream and no `PING` from the peer for this long; `None` never.
    /// Default 30 s. A peer with keepalive on (a `PING` more often than
    /// this) is therefore never closed while healthy; answers to our own
    /// pings do not count. Memory: none.
    pub fn idle_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.idle_timeout = timeout;
        self
    }

    /// Reset a stream with `RESET(TIMEOUT)` when it waits on the peer (the
    /// peer's half open and everything received read, or our data held
    /// back by its credit) and no frame goes either way on it for this
    /// long (checked every half timeout: the reset comes 1 to 1.5 times
    /// this after the last frame). Streams waiting on the local
    /// application are never reset by it. `None` (default) never: long
    /// quiet streams (subscriptions, chats) are legitimate, so a server
    /// that must shed half-open streams opts in. Memory: none.
    pub fn progress_timeout(&mut self, timeout: Option<Duration>) -> &mut Self {
        self.progress_timeout = timeout.map(|t| t.max(Duration::from_millis(2)));
        self
    }

    /// After the peer half-closes the transport (a clean end of file
    /// between frames: it sends nothing more but still reads), how long
    /// the streams it ended may take to be answered. The connection then
    /// sends `GOAWAY(NO_ERROR)` and closes once they are done or this
    /// passes; streams the peer left open fail at once. Default 10 s.
    /// Memory: the answered streams' state for at most this long.
    pub fn half_close_drain(&mut self, drain: Duration) -> &mut Self {
        self.half_close_drain = drain;
        self
    }

    /// How many streams the peer may reset while they still wait in the
    /// accept queue before the connection is closed with
    /// `GOAWAY(ENHANCE_YOUR_CALM)` (rapid reset, CVE-2023-44487). Default 20
    /// streams. Memory: those streams' metadata until accepted.
    pub fn pending_accept_reset_budget(&mut self, n: usize) -> &mut Self {
        self.pending_accept_reset_budget = n;
        self
    }

    /// How many resets the peer may *cause us to send* (window overflow,
    /// data after end, zero window update...) before the connection is
    /// closed with `GOAWAY(ENHANCE_YOUR_CALM)` (MadeYouReset,
    /// CVE-2025-8671). Counted over the connection's life. Default 1024
    /// resets. Memory: none.
    pub fn local_reset_budget(&mut self, n: u32) -> &mut Self {
        self.local_reset_budget = n;
        self
    }

    /// Pings the peer may send per [`budget_window`](Self::budget_window)
    /// before `GOAWAY(ENHANCE_YOUR_CALM)`. Default 64 pings. Memory: none
    /// (answers are coalesced; at most one pong per ping in the control
    /// queue, itself bounded).
    pub fn ping_budget(&mut self, n: u32) -> &mut Self {
        self.ping_budget = n;
        self
    }

    /// Empty `DATA` frames (no payload, no metadata, no `END_STREAM`) and
    /// tiny (< 64 bytes increment) stream `WINDOW_UPDATE`s the peer may send
    /// per budget window. Default 1024 frames. Memory: none.
    pub fn empty_frame_budget(&mut self, n: u32) -> &mut Self {
        self.empty_frame_budget = n;
        self
    }

    /// Frames of unknown type or with unknown flag bits the peer may send
    /// per budget window; they are ignored until then. Default 1024 frames.
    /// Memory: none.
    pub fn unknown_frame_budget(&mut self, n: u32) -> &mut Self {
        self.unknown_frame_budget = n;
        self
    }

    /// Frames for streams that are already closed (late frames after a
    /// reset, or a `WINDOW_UPDATE` that crossed the stream's end) the peer
    /// may send per budget window beyond one per stream opened in it; they
    /// are ignored until then. Default 4096 frames. Memory: none.
    pub fn late_frame_budget(&mut self, n: u32) -> &mut Self {
        self.late_frame_budget = n;
        self
    }

    /// The period over which the ping, empty, unknown and late frame budgets
    /// count; counters restart at each period. Default 10 s. Memory: none.
    pub fn budget_window(&mut self, window: Duration) -> &mut Self {
        self.budget_window = window.max(Duration::from_millis(1));
        self
    }

    /// Control frames (pongs, resets, window updates) that may wait for the
    /// socket before we stop reading from the peer, so a peer that does not
    /// read cannot grow our queues (CVE-2024-32984). Default 4096 frames.
    /// Memory: about 64 bytes per frame.
    pub fn max_control_queue(&mut self, frames: usize) -> &mut Self {
        self.max_control_queue = frames.max(1);
        self
    }

    /// Highest stream id this side will open; past it `open` fails and a
    /// `GOAWAY(STREAM_IDS_EXHAUSTED)` tells the peer to use a new
    /// connection. Default `u32::MAX` (lower it only to test exhaustion).
    /// Memory: none.
    pub fn max_stream_id(&mut self, id: u32) -> &mut Self {
        self.max_stream_id = id.max(2);
        self
    }

    /// Bytes the writer copies into its buffer for one write call before
    /// writing (small frames; every frame of an encrypted or compressed
    /// connection). Large payloads on a plain connection are chained from
    /// the caller's buffers instead, and one vectored write carries up to
    /// what the transport took lately (at most 1 MiB). Default 64 KiB.
    /// Memory: the write buffer grows to about this size.
    pub fn write_coalesce(&mut self, bytes: usize) -> &mut Self {
        self.write_coalesce = bytes.max(1024);
        self
    }

    /// Grow the receive windows from bandwidth-delay estimates, up to this
    /// many bytes (clamped to [`MAX_WINDOW`]), so a link with a long round
    /// trip is not window-bound (as grpc-go's BDP estimation and tonic's
    /// `http2_adaptive_window`). While the peer fills more than half a
    /// window, a `PING` at most every 250 ms measures the bytes received
    /// in one round trip; when they reach 2/3 of the window and the
    /// bandwidth is the highest seen, the connection and stream windows
    /// become twice that. Not on links whose shortest round trip is under
    /// 1 ms (loopback, LANs): on loopback growth made nothing faster, and a
    /// grown window is what a small call on the connection waits behind; a
    /// fast LAN that needs more than the stream window per round trip sets
    /// it with [`stream_window`](Self::stream_window). Windows never shrink. `None` turns it off: the
    /// configured windows stay fixed. Default `Some(16 MiB)`. Memory: up
    /// to the cap of unread data per connection (and per stream), instead
    /// of the configured windows.
    pub fn adaptive_window(&mut self, cap: Option<u32>) -> &mut Self {
        self.adaptive_window = cap.map(|c| c.min(MAX_WINDOW));
        self
    }
}
