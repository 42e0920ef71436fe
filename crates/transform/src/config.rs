//! What one side offers and configures, and what the handshake agreed.

use weft_frame::Limits;

use crate::error::{HandshakeError, HandshakeErrorKind};
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
    /// key not on the list with an error naming it, and needs an
    /// [`identity`](Self::identity) (so every client must prove a key; see
    /// [`check`](Self::check)). An initiator with one is a configuration
    /// error. Shared and reloadable ([`AllowList::replace`]). Default `None`.
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

/// Why a configuration cannot run: texts that say what to add or remove.
const PIN_NEEDS_IDENTITY: &str = "a pinned server key needs a key pair of our own (identity)";
const ALLOW_ON_A_CLIENT: &str = "an allow-list is for servers and a client would ignore it: \
     to check the server, pin its public key (server_key, with an identity of our own)";
const ALLOW_NEEDS_IDENTITY: &str = "an allow-list needs a key pair of our own (identity): \
     without one no client proves a key and the list would check nothing";

impl HandshakeConfig {
    /// Whether this configuration can run in `role`; every handshake checks
    /// it first, and `weft::serve` before it accepts anything. Refused: a
    /// pinned [`server_key`](Self::server_key) without an
    /// [`identity`](Self::identity); an [`allow`](Self::allow)-list on an
    /// initiator (it would be ignored); an allow-list on a responder
    /// without an identity (no client would prove a key, so the list would
    /// admit everyone). Limits are checked as the handshake starts.
    pub fn check(&self, role: Role) -> Result<(), HandshakeError> {
        let what = match role {
            Role::Initiator if self.allow.is_some() => ALLOW_ON_A_CLIENT,
            Role::Initiator if self.server_key.is_some() && self.identity.is_none() => {
                PIN_NEEDS_IDENTITY
            }
            Role::Responder if self.allow.is_some() && self.identity.is_none() => {
                ALLOW_NEEDS_IDENTITY
            }
            _ => return Ok(()),
        };
        Err(HandshakeError::new(HandshakeErrorKind::Config(what)))
    }

    /// The configuration a handshake runs with: checked for `role`, and the
    /// pinned key in its canonical encoding ([`crate::canonical_key`]), so
    /// the transcript hashes the key the server hashes for itself.
    pub(crate) fn checked(mut self, role: Role) -> Result<HandshakeConfig, HandshakeError> {
        self.check(role)?;
        self.server_key = self.server_key.map(crate::canonical_key);
        Ok(self)
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
    /// The peer proved, in the handshake, that it holds our pre-shared key,
    /// or a static key that our allow-list (server) or pin (client)
    /// accepted. It says who finished the handshake, not what protects the
    /// records after it: with [`encrypted`](Self::encrypted) false (a PSK
    /// session with encryption off) records are plain frames, which an
    /// active attacker can read, change or inject undetected, so
    /// `authenticated` holds while nothing after the handshake is
    /// authenticated. Only [`records_authenticated`](Self::records_authenticated)
    /// (both true) means every record comes from the authenticated peer.
    /// A server without an allow-list (XX, IK) is not authenticated by this
    /// flag, though it sees the client's proven key in
    /// [`peer_key`](Self::peer_key).
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

impl Negotiated {
    /// Every record is sealed under keys only the authenticated peer shares
    /// with us: [`authenticated`](Self::authenticated) and
    /// [`encrypted`](Self::encrypted) both. False for a PSK session with
    /// encryption off (the handshake was authenticated, its records are
    /// not) and for `Noise_NN` (records sealed, peer unknown).
    pub fn records_authenticated(&self) -> bool {
        self.authenticated && self.encrypted
    }
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
