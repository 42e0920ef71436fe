//! The security modes a hostile test can run a server in.

use weft_mux::pipeline::{EncryptionPolicy, HandshakeConfig, Offer};

/// One security mode: the server's and a client's handshake settings.
#[derive(Clone, Debug)]
pub struct Mode {
    /// A short name for messages.
    pub name: &'static str,
    /// The server's handshake settings.
    pub server: HandshakeConfig,
    /// What a client (the bystander, a raw peer) uses against it.
    pub client: HandshakeConfig,
}

/// The key the pre-shared-key modes use (test only).
pub const TEST_PSK: [u8; 32] = [0x42; 32];

fn hs(encryption: EncryptionPolicy, compression: bool, psk: Option<[u8; 32]>) -> HandshakeConfig {
    HandshakeConfig {
        offer: Offer {
            encryption,
            compression,
            ..Offer::default()
        },
        psk: psk.map(Into::into),
        ..HandshakeConfig::default()
    }
}

impl Mode {
    fn same(name: &'static str, config: HandshakeConfig) -> Mode {
        Mode {
            name,
            server: config.clone(),
            client: config,
        }
    }

    /// Plain hello: no key, no encryption, no compression (raw frames on
    /// the wire, so hand-made headers mean what they say).
    pub fn plain() -> Mode {
        Mode::same("plain", hs(EncryptionPolicy::Off, false, None))
    }

    /// Plain hello with deflate.
    pub fn deflate() -> Mode {
        Mode::same("deflate", hs(EncryptionPolicy::Off, true, None))
    }

    /// `Noise_NN` with deflate: the default settings.
    pub fn noise_nn() -> Mode {
        Mode::same("noise-nn", HandshakeConfig::default())
    }

    /// `Noise_NNpsk0`, encryption required, with deflate.
    pub fn psk() -> Mode {
        Mode::same("psk", hs(EncryptionPolicy::Required, true, Some(TEST_PSK)))
    }

    /// Pre-shared key with encryption off (authenticated handshake, clear
    /// records).
    pub fn psk_clear() -> Mode {
        Mode::same(
            "psk-clear",
            hs(EncryptionPolicy::Off, false, Some(TEST_PSK)),
        )
    }

    /// Every mode, for tests that must hold in each.
    pub fn all() -> Vec<Mode> {
        vec![
            Mode::plain(),
            Mode::deflate(),
            Mode::noise_nn(),
            Mode::psk(),
            Mode::psk_clear(),
        ]
    }
}
