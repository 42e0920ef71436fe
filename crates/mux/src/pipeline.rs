//! The seam between the mux and the per-frame record pipeline.
//!
//! The driver needs four things from the layer below: a sans-I/O
//! [`Handshake`] that exchanges bytes until it is complete, then an
//! [`Outbound`] half that turns a frame into wire bytes, an [`Inbound`] half
//! that turns wire bytes back into frames, and the [`Negotiated`] result.
//! They are `weft_transform`'s (deflate + AES-256-GCM per frame, Noise
//! handshake), re-exported here so the rest of the crate names them in one
//! place.
//!
//! Sealed batches (one record over the small frames of one write,
//! docs/PROTOCOL.md 5.2) are the writer's (`driver/batch.rs`):
//! [`Outbound::begin_batch`] at the first small frame of a fill,
//! [`Outbound::push`] per frame, [`Outbound::seal_batch`] before a large
//! frame and before the write, and [`Outbound::allow_batches`] once the
//! peer's settings frame carried [`BATCH_SETTING`] with
//! [`BATCH_SETTING_VALUE`]; an encrypted connection announces the same in
//! its own settings (`Session::announce_sealed_batches`).

pub use weft_transform::{
    AllowList, BATCH_SETTING, BATCH_SETTING_VALUE, Batch, EncryptionPolicy, Handshake,
    HandshakeConfig, HandshakeError, Inbound, KeyHex, KeyUpdates, Negotiated, Offer, Outbound,
    RekeyLimits, Role as HandshakeRole, Session as Established, StaticKey, TransformError,
    key_updates, passthrough,
};
