//! One builder for every knob a user is likely to turn: limits,
//! compression, encryption policy, pre-shared key and timeouts.

use std::time::Duration;

use weft_frame::Limits;
use weft_transform::{EncryptionPolicy, HandshakeConfig};

/// Configuration of a weft endpoint (client or server). `Config::new()`
/// gives the documented defaults; each setter states its default and unit.
///
/// ```
/// use std::time::Duration;
/// use weft::{Config, EncryptionPolicy};
///
/// let config = Config::new()
///     .encryption(EncryptionPolicy::Required)
///     .psk([7; 32])
///     .compression(true)
///     .max_message(1 << 20)
///     .call_timeout(Some(Duration::from_secs(5)));
/// # let _ = config;
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    handshake: HandshakeConfig,
    max_message: u32,
    handshake_timeout: Duration,
    idle_timeout: Option<Duration>,
    progress_timeout: Option<Duration>,
    keepalive_interval: Option<Duration>,
    keepalive_timeout: Duration,
    max_concurrent_streams: usize,
    stream_window: u32,
    connection_window: u32,
    call_timeout: Option<Duration>,
    shutdown_drain: Duration,
    max_pending_handshakes: usize,
    max_connections: Option<usize>,
    max_connections_per_address: Option<usize>,
    nodelay: bool,
    metrics: crate::Metrics,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            handshake: HandshakeConfig::default(),
            max_message: weft_transform::DEFAULT_MAX_MESSAGE,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(30)),
            progress_timeout: None,
            keepalive_interval: None,
            keepalive_timeout: Duration::from_secs(20),
            max_concurrent_streams: 128,
            stream_window: 64 * 1024,
            connection_window: 1024 * 1024,
            call_timeout: None,
            shutdown_drain: Duration::from_secs(10),
            max_pending_handshakes: 256,
            max_connections: None,
            max_connections_per_address: None,
            nodelay: true,
            metrics: crate::Metrics::Auto,
        }
    }
}

impl Config {
    /// The defaults: encryption preferred, compression on, no key, 64 KiB
    /// frames, 4 MiB messages, 10 s handshake, 30 s idle, no keepalive.
    pub fn new() -> Config {
        Config::default()
    }

    /// Encryption policy. Default `Preferred` (on when the peer agrees).
    /// `Required` fails the handshake against a peer with encryption off;
    /// nothing ever falls back to weaker settings by itself.
    #[must_use]
    pub fn encryption(mut self, policy: EncryptionPolicy) -> Config {
        self.handshake.offer.encryption = policy;
        self
    }

    /// A 32-byte pre-shared key: both peers must hold it (the handshake
    /// authenticates them as key holders). Default none: opportunistic
    /// encryption that stops passive eavesdroppers only.
    #[must_use]
    pub fn psk(mut self, key: [u8; 32]) -> Config {
        self.handshake.psk = Some(key.into());
        self
    }

    /// This side's static key pair (its identity): the handshake becomes
    /// `Noise_XX` or `Noise_IK` (with the PSK, if one is set, mixed in),
    /// the peer must have a key pair too, and nothing falls back to NN.
    /// Load one with [`StaticKey::from_private`](crate::transform::StaticKey::from_private).
    /// Default none.
    #[must_use]
    pub fn identity(mut self, key: weft_transform::StaticKey) -> Config {
        self.handshake.identity = Some(key);
        self
    }

    /// Client: the server's public key, pinned (kept in its canonical
    /// encoding, [`canonical_key`](crate::transform::canonical_key)). Needs an
    /// [`identity`](Self::identity); runs `Noise_IK` (one round trip) and
    /// fails, naming the key, unless the server proves it holds it.
    /// Ignored by servers. Default none (XX: the server's key is learnt,
    /// not checked).
    #[must_use]
    pub fn server_key(mut self, key: [u8; 32]) -> Config {
        self.handshake.server_key = Some(weft_transform::canonical_key(key));
        self
    }

    /// Server: the client public keys accepted. A client with another key
    /// fails its handshake with an error naming the key, on both sides;
    /// an empty list accepts nobody. Needs an [`identity`](Self::identity):
    /// without one no client proves a key, so [`serve`](crate::serve)
    /// refuses to start ([`Error::Config`](crate::Error::Config)). A client
    /// with an allow-list fails to connect with a config error (it would
    /// ignore it; a client checks its server with
    /// [`server_key`](Self::server_key)). The list is shared:
    /// [`AllowList::replace`](crate::transform::AllowList::replace)
    /// changes it for every later handshake, without a restart. Default
    /// none: any client key pair is accepted (handlers see it in
    /// `ctx.peer().public_key`).
    #[must_use]
    pub fn allow(mut self, list: weft_transform::AllowList) -> Config {
        self.handshake.allow = Some(list);
        self
    }

    /// When this side replaces its record key: after `records` records or
    /// `bytes` plaintext bytes under one key, whichever comes first.
    /// Default 2^20 records or 1 GiB (docs/SECURITY.md, "Key updates");
    /// records 2 to 2^24, bytes 1 to 2^37, checked at connect. Lower it
    /// only to test key updates: the connection never closes for a key
    /// limit either way.
    #[must_use]
    pub fn rekey_after(mut self, records: u64, bytes: u64) -> Config {
        self.handshake.rekey = weft_transform::RekeyLimits { records, bytes };
        self
    }

    /// Per-frame deflate, on when both peers enable it. Default on.
    #[must_use]
    pub fn compression(mut self, on: bool) -> Config {
        self.handshake.offer.compression = on;
        self
    }

    /// Payloads shorter than this are never compressed. Default 256 bytes.
    #[must_use]
    pub fn compression_min_size(mut self, bytes: usize) -> Config {
        self.handshake.compression_min_size = bytes;
        self
    }

    /// Largest frame payload accepted, bytes (16 KiB–1 MiB). Default 64 KiB;
    /// memory cost: the read buffer may grow to it per connection.
    #[must_use]
    pub fn max_frame_payload(mut self, bytes: u32) -> Config {
        self.handshake.limits.max_payload = bytes;
        self.handshake.offer.max_payload = bytes;
        self
    }

    /// Largest message (after decompression), bytes, both directions.
    /// Default 4 MiB; a call over it fails with `RESOURCE_EXHAUSTED`.
    #[must_use]
    pub fn max_message(mut self, bytes: u32) -> Config {
        self.max_message = bytes;
        self.handshake.offer.max_message = bytes;
        self
    }

    /// Streams the peer may have open at once. Default 128; more are
    /// refused retry-safe.
    #[must_use]
    pub fn max_concurrent_streams(mut self, n: usize) -> Config {
        self.max_concurrent_streams = n;
        self
    }

    /// Receive window per stream, bytes. Default 64 KiB, grown from
    /// bandwidth-delay estimates where the link needs more (memory per
    /// stream the peer can make us buffer; see weft-mux's
    /// `Config::stream_window`).
    #[must_use]
    pub fn stream_window(mut self, bytes: u32) -> Config {
        self.stream_window = bytes;
        self
    }

    /// Receive window per connection, bytes. Default 1 MiB.
    #[must_use]
    pub fn connection_window(mut self, bytes: u32) -> Config {
        self.connection_window = bytes;
        self
    }

    /// Deadline for the handshake. Default 10 s.
    #[must_use]
    pub fn handshake_timeout(mut self, timeout: Duration) -> Config {
        self.handshake_timeout = timeout;
        self
    }

    /// Close a connection with no call and no `PING` from the peer for this
    /// long. Default 30 s; `None` never closes an idle connection. A peer
    /// with [`keepalive`](Self::keepalive) on (interval below this) is never
    /// closed while it answers; answers to our own pings do not count.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Config {
        self.idle_timeout = timeout;
        self
    }

    /// Reset a call's stream (`RESET(TIMEOUT)`) that waits on the peer (a
    /// request or message half sent, or our replies held back by its flow
    /// control) with nothing going either way for this long (the reset
    /// comes 1 to 1.5 times this after the last frame). Calls waiting on a
    /// slow handler are never reset by it. Default `None`: long quiet
    /// streams are legitimate; a server exposed to half-open streams sets it.
    #[must_use]
    pub fn progress_timeout(mut self, timeout: Option<Duration>) -> Config {
        self.progress_timeout = timeout;
        self
    }

    /// Ping the peer this often, and close the connection if an answer
    /// takes longer than `timeout`. Default off.
    #[must_use]
    pub fn keepalive(mut self, interval: Option<Duration>, timeout: Duration) -> Config {
        self.keepalive_interval = interval;
        self.keepalive_timeout = timeout;
        self
    }

    /// Deadline for client calls that set none. Default none.
    #[must_use]
    pub fn call_timeout(mut self, timeout: Option<Duration>) -> Config {
        self.call_timeout = timeout;
        self
    }

    /// How long a graceful server shutdown lets calls in flight finish;
    /// also how long calls a peer sent before half-closing its connection
    /// may take to be answered (weft-mux `Config::half_close_drain`).
    /// Default 10 s.
    #[must_use]
    pub fn shutdown_drain(mut self, drain: Duration) -> Config {
        self.shutdown_drain = drain;
        self
    }

    /// Accepted connections allowed at once before they are established:
    /// in their handshake, or waiting for the client's first record (which
    /// a replayed handshake message never sends). Default 256. When the
    /// set is full a pending connection is always evicted for the
    /// newcomer, whatever its age: one whose first record is overdue, else
    /// the one in its handshake without progress for longest, so silent,
    /// trickling or replaying connections cannot lock real clients out at
    /// any rate. A client evicted in its handshake gets a retry-safe refusal
    /// ([`Error::is_retry_safe`](crate::Error::is_retry_safe)); one evicted
    /// after it (the rarest case) sees its first calls fail retry-safe.
    /// Memory: about 20 KiB per pending handshake.
    #[must_use]
    pub fn max_pending_handshakes(mut self, n: usize) -> Config {
        self.max_pending_handshakes = n.max(1);
        self
    }

    /// Connections a server holds at once, pending or established. Default
    /// `None` (no cap: the file descriptor limit is the cap, and at it new
    /// clients wait in the listen backlog). Past the cap a pending
    /// connection is evicted as above; when every one is established the
    /// newcomer gets a retry-safe refusal saying the server is at its
    /// connection limit.
    #[must_use]
    pub fn max_connections(mut self, n: Option<usize>) -> Config {
        self.max_connections = n.map(|n| n.max(1));
        self
    }

    /// Connections a server holds at once from one source IP address.
    /// Default `None` (no limit: many clients may share a NAT address).
    /// Past it the newcomer gets a retry-safe refusal.
    #[must_use]
    pub fn max_connections_per_address(mut self, n: Option<usize>) -> Config {
        self.max_connections_per_address = n.map(|n| n.max(1));
        self
    }

    /// Set `TCP_NODELAY` on TCP sockets. Default on (the writer already
    /// coalesces frames; Nagle would delay small calls by a round trip).
    #[must_use]
    pub fn tcp_nodelay(mut self, on: bool) -> Config {
        self.nodelay = on;
        self
    }

    /// Whether clients and server connections record call metrics through
    /// the `metrics` facade. Default [`Metrics::Auto`](crate::Metrics::Auto):
    /// on when a recorder is installed as the client is made or the
    /// connection opens, and then free of clock reads when none is.
    #[must_use]
    pub fn metrics(mut self, metrics: crate::Metrics) -> Config {
        self.metrics = metrics;
        self
    }

    /// Whether calls are metered (see [`metrics`](Self::metrics)).
    pub fn metrics_mode(&self) -> crate::Metrics {
        self.metrics
    }

    /// The message limit in bytes.
    pub fn message_limit(&self) -> usize {
        self.max_message as usize
    }

    /// The client's default call timeout.
    pub fn default_call_timeout(&self) -> Option<Duration> {
        self.call_timeout
    }

    /// The shutdown drain.
    pub fn drain(&self) -> Duration {
        self.shutdown_drain
    }

    #[cfg(test)]
    fn pending_handshakes(&self) -> usize {
        self.max_pending_handshakes
    }

    /// The handshake deadline.
    pub fn handshake_deadline(&self) -> Duration {
        self.handshake_timeout
    }

    pub(crate) fn admission_limits(&self) -> crate::admission::Limits {
        crate::admission::Limits {
            pending: self.max_pending_handshakes,
            connections: self.max_connections,
            per_address: self.max_connections_per_address,
        }
    }

    pub(crate) fn nodelay(&self) -> bool {
        self.nodelay
    }

    /// The handshake settings this config produces.
    pub fn handshake_config(&self) -> &HandshakeConfig {
        &self.handshake
    }

    /// The multiplexer settings this config produces.
    pub fn mux_config(&self) -> weft_mux::Config {
        let mut c = weft_mux::Config::default();
        let limits = Limits {
            max_payload: self.handshake.limits.max_payload,
            max_metadata: self.handshake.limits.max_metadata,
        };
        c.limits(limits)
            .handshake(self.handshake.clone())
            .handshake_timeout(self.handshake_timeout)
            .max_concurrent_streams(self.max_concurrent_streams)
            .stream_window(self.stream_window)
            .connection_window(self.connection_window)
            .keepalive_interval(self.keepalive_interval)
            .keepalive_timeout(self.keepalive_timeout)
            .idle_timeout(self.idle_timeout)
            .progress_timeout(self.progress_timeout)
            .half_close_drain(self.shutdown_drain);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters_reach_the_layers() {
        let c = Config::new()
            .encryption(EncryptionPolicy::Required)
            .psk([1; 32])
            .compression(false)
            .compression_min_size(1000)
            .max_frame_payload(32 * 1024)
            .max_message(1 << 20)
            .call_timeout(Some(Duration::from_secs(3)))
            .shutdown_drain(Duration::from_secs(1))
            .max_pending_handshakes(0)
            .max_connections(Some(0))
            .max_connections_per_address(Some(3))
            .tcp_nodelay(false)
            .idle_timeout(None)
            .progress_timeout(Some(Duration::from_secs(7)))
            .keepalive(Some(Duration::from_secs(5)), Duration::from_secs(2))
            .handshake_timeout(Duration::from_secs(3))
            .max_concurrent_streams(10)
            .stream_window(128 * 1024)
            .connection_window(2 << 20);
        let h = c.handshake_config();
        assert_eq!(h.offer.encryption, EncryptionPolicy::Required);
        assert_eq!(h.psk, Some([1; 32].into()));
        assert!(!h.offer.compression);
        assert_eq!(h.compression_min_size, 1000);
        assert_eq!(
            (h.limits.max_payload, h.offer.max_payload),
            (32 * 1024, 32 * 1024)
        );
        assert_eq!(h.offer.max_message, 1 << 20);
        assert_eq!(c.message_limit(), 1 << 20);
        assert_eq!(c.default_call_timeout(), Some(Duration::from_secs(3)));
        assert_eq!(c.drain(), Duration::from_secs(1));
        assert_eq!(c.pending_handshakes(), 1);
        let l = c.admission_limits();
        assert_eq!(
            (l.pending, l.connections, l.per_address),
            (1, Some(1), Some(3))
        );
        assert_eq!(c.handshake_deadline(), Duration::from_secs(3));
        assert!(!c.nodelay());
        let _ = c.mux_config();
        // The key never shows in Debug output.
        assert!(!format!("{c:?}").contains("[1, 1"));
        let d = Config::new();
        assert_eq!(
            d.handshake_config().offer.encryption,
            EncryptionPolicy::Preferred
        );
        assert!(d.handshake_config().offer.compression && d.nodelay());
    }
}
