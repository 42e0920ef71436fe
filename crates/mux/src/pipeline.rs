//! The seam between the mux and the per-frame record pipeline.
//!
//! The driver needs four things from the layer below: a sans-I/O
//! [`Handshake`] that exchanges bytes until it is complete, then an
//! [`Outbound`] half that turns a frame into wire bytes, an [`Inbound`] half
//! that turns wire bytes back into frames, and the [`Negotiated`] result.
//! They are `weft_transform`'s (deflate + AES-256-GCM per frame, Noise
//! handshake), re-exported here so the rest of the crate names them in one
//! place.

pub use weft_transform::{
    AllowList, EncryptionPolicy, Handshake, HandshakeConfig, HandshakeError, Inbound, KeyHex,
    KeyUpdates, Negotiated, Offer, Outbound, RekeyLimits, Role as HandshakeRole,
    Session as Established, StaticKey, TransformError, key_updates, passthrough,
};
