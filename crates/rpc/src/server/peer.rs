//! [`PeerInfo`]: what the server knows about the other end of a
//! connection. A leaf, so spans can name the peer without importing the
//! handler's [`Context`](super::context::Context).

/// What the server knows about the other end of a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerInfo {
    /// The peer's address as text (`ip:port`, a socket path, `memory`), when known.
    pub addr: Option<String>,
    /// Whether frames are encrypted on this connection.
    pub encrypted: bool,
    /// Whether frames may be compressed on this connection.
    pub compressed: bool,
    /// The peer's static public key (Noise XX or IK), which it proved to
    /// hold; on a server with an allow-list, one of the allowed keys.
    pub public_key: Option<[u8; 32]>,
}

impl PeerInfo {
    /// Peer info with an address and the negotiated switches.
    pub fn new(addr: Option<String>, encrypted: bool, compressed: bool) -> PeerInfo {
        PeerInfo {
            addr,
            encrypted,
            compressed,
            public_key: None,
        }
    }

    /// The same, with the peer's static public key.
    #[must_use]
    pub fn with_public_key(mut self, key: Option<[u8; 32]>) -> PeerInfo {
        self.public_key = key;
        self
    }
}
