//! What one side offers and configures, and what the handshake agreed.

use weft_frame::Limits;

use crate::identity::KeyHex;
use crate::noise::StaticKey;
use crate::{AllowList, Psk, RekeyLimits};

/// Which side of the connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The side that dialled (the client). It speaks first.
    Initiator,
    /// The side that accepted (the server).
    Responder,
}

/// How much this side wants record encryption.
///
/// Encryption is on iff neither side is [`Off`](EncryptionPolicy::Off).
/// [`Required`](EncryptionPolicy::Required) against `Off` fails the
/// handshake with a clear error on both sides; nothing ever falls back to
/// weaker settings by itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EncryptionPolicy {
    /// Never encrypt. With no pre-shared key on either side the handshake
    /// is a plain hello with no key agreement.
    Off,
    /// Encrypt when the peer is willing (default).
    #[default]
    Preferred,
    /// Encrypt or fail the handshake.
    Required,
}

impl EncryptionPolicy {
    /// The byte this policy has on the wire (docs/PROTOCOL.md section 3.4).
    pub(crate) fn to_wire(self) -> u8 {
        match self {
            EncryptionPolicy::Off => 0,
            EncryptionPolicy::Preferred => 1,
            EncryptionPolicy::Required => 2,
        }
    }

    pub(crate) fn from_wire(b: u8) -> Option<EncryptionPolicy> {
        match b {
            0 => Some(EncryptionPolicy::Off),
            1 => Some(EncryptionPolicy::Preferred),
            2 => Some(EncryptionPolicy::Required),
            _ => None,
        }
    }
}

/// Default decompressed message limit: 4 MiB.
pub const DEFAULT_MAX_MESSAGE: u32 = 4 * 1024 * 1024;
/// Default decompression ratio limit: 100:1.
pub const DEFAULT_MAX_RATIO: u32 = 100;
/// Default size below which payloads are never compressed: 256 bytes.
pub const DEFAULT_COMPRESSION_MIN_SIZE: usize = 256;

/// What one side offers in the handshake. It travels inside the handshake
/// and is bound into the transcript hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offer {
    /// Encryption policy. Default [`EncryptionPolicy::Preferred`].
    pub encryption: EncryptionPolicy,
    /// Whether this side is willing to compress. Compression is on iff both
    /// sides offer it. Default `true`; memory cost when on: none while a
    /// connection is idle (the deflate states come from a small process-wide
    /// pool for each frame), at most an 8 KiB output buffer after calls.
    pub compression: bool,
    /// Largest frame payload this side accepts, in bytes. Default 64 KiB.
    /// The effective value is the smaller of this and
    /// [`HandshakeConfig::limits`]`.max_payload`; it is what the peer is told
    /// and what our decoder enforces.
    pub max_payload: u32,
    /// Largest payload after decompression, in bytes. Default 4 MiB.
    pub max_message: u32,
}

impl Default for Offer {
    fn default() -> Self {
        Offer {
            encryption: EncryptionPolicy::Preferred,
            compression: true,
            max_payload: weft_frame::DEFAULT_MAX_PAYLOAD,
            max_message: DEFAULT_MAX_MESSAGE,
        }
    }
}

/// Everything the handshake and the pipeline it sets up need.
#[derive(Clone, PartialEq, Eq)]
pub struct HandshakeConfig {
    /// What this side offers.
    pub offer: Offer,
    /// A 32-byte pre-shared key. `Some` runs `Noise_NNpsk0_25519_AESGCM_SHA256`
    /// (both sides prove they hold the key); `None` runs `Noise_NN`
    /// (opportunistic encryption, stops passive eavesdroppers only) or, when
    /// this side's encryption is off, a plain hello. With an
    /// [`identity`](Self::identity) it is mixed into XX or IK
    /// (`XXpsk3`/`IKpsk2`). Default `None`.
    pub psk: Option<Psk>,
    /// This side's static key pair. `Some` makes this side an identity
    /// peer: it only runs `Noise_XX` or `Noise_IK` (never NN or NNpsk0, so
    /// nothing can downgrade it), and the peer must have a key pair too.
    /// Default `None`.
    pub identity: Option<StaticKey>,
    /// Initiator only: the responder's public key, pinned. With an
    /// identity it runs `Noise_IK` (one round trip, the server must prove
    /// it holds this key); without one it is a configuration error.
    /// Default `None` (XX: the server's key is learnt, not checked).
    pub server_key: Option<[u8; 32]>,
    /// Responder only: the client public keys accepted. `None` accepts any
    /// client key pair (the handler still sees which); `Some` rejects every
    /// key not on the list with an error naming it. Shared and reloadable
    /// ([`AllowList::replace`]). Default `None`.
    pub allow: Option<AllowList>,
    /// Frame limits our decoder enforces. Default [`Limits::default`].
    pub limits: Limits,
    /// Payloads shorter than this many bytes are never compressed.
    /// Default [`DEFAULT_COMPRESSION_MIN_SIZE`] (256).
    pub compression_min_size: usize,
    /// Decompression ratio limit: a compressed payload may inflate to at most
    /// `max_ratio` times its size. Default [`DEFAULT_MAX_RATIO`] (100). It
    /// is sent to the peer, whose compressor then never exceeds it.
    pub max_ratio: u32,
    /// When our send key is replaced (by records and by bytes under one
    /// key). Default [`RekeyLimits::default`]: 2^20 records or 1 GiB.
    /// Lower it only to test key updates.
    pub rekey: RekeyLimits,
}

impl Default for HandshakeConfig {
    fn default() -> Self {
        HandshakeConfig {
            offer: Offer::default(),
            psk: None,
            identity: None,
            server_key: None,
            allow: None,
            limits: Limits::default(),
            compression_min_size: DEFAULT_COMPRESSION_MIN_SIZE,
            max_ratio: DEFAULT_MAX_RATIO,
            rekey: RekeyLimits::default(),
        }
    }
}

impl std::fmt::Debug for HandshakeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeConfig")
            .field("offer", &self.offer)
            .field("psk", &self.psk.as_ref().map(|_| "<redacted>"))
            .field("identity", &self.identity)
            .field("server_key", &self.server_key.as_ref().map(KeyHex))
            .field("allow", &self.allow)
            .field("limits", &self.limits)
            .field("compression_min_size", &self.compression_min_size)
            .field("max_ratio", &self.max_ratio)
            .field("rekey", &self.rekey)
            .finish()
    }
}

/// What the handshake agreed, and the peer's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Records are sealed with AES-256-GCM.
    pub encrypted: bool,
    /// Payloads may be deflate-compressed (each frame says whether it is).
    pub compressed: bool,
    /// The Noise handshake hash (channel binding); `None` after a plain hello.
    pub handshake_hash: Option<[u8; 32]>,
    /// The peer is authenticated: it proved it holds our pre-shared key, or
    /// a static key that our allow-list (server) or pin (client) accepted.
    pub authenticated: bool,
    /// The peer's static public key, which it proved to hold (XX and IK);
    /// `None` without identities.
    pub peer_key: Option<[u8; 32]>,
    /// The peer's frame limits: never send it a frame beyond them.
    pub peer_limits: Limits,
    /// The peer's decompressed message limit.
    pub peer_max_message: u32,
    /// The peer's decompression ratio limit.
    pub peer_max_ratio: u32,
}

impl Default for Negotiated {
    /// What a [`passthrough`](crate::passthrough) connection has: nothing
    /// negotiated, default limits assumed for the peer.
    fn default() -> Self {
        Negotiated {
            encrypted: false,
            compressed: false,
            handshake_hash: None,
            authenticated: false,
            peer_key: None,
            peer_limits: Limits::default(),
            peer_max_message: DEFAULT_MAX_MESSAGE,
            peer_max_ratio: DEFAULT_MAX_RATIO,
        }
    }
}
