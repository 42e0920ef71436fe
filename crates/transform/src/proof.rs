//! When a responder's peer has shown it holds the session's keys.
//!
//! In NN, NNpsk0, IK and IKpsk2 the responder completes on the
//! initiator's only handshake message, and that message can be replayed:
//! it proves nothing about who sent it now. The responder's fresh
//! ephemeral key is in every transport key, so the initiator's first
//! record under those keys is the proof. Until it has opened, the session
//! reports `authenticated` as false and [`Session::awaits_first_record`]
//! is true; [`Session::read_first_frame`] reads that record. XX's third
//! message is already such a proof, and an initiator is proven by the
//! responder's reply.
//!
//! A plain hello (or a session with encryption off) is treated the same
//! way, so one rule holds for every responder: the initiator's first frame
//! ends the handshake phase. Without encryption that frame shows only that
//! the peer speaks the protocol, not that it holds a key.

use bytes::BytesMut;
use weft_frame::Frame;

use crate::Session;
use crate::error::TransformError;

/// What a [`Session`] still waits for before its peer counts as proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proof {
    /// Nothing: the handshake itself proved the peer (or this side is the
    /// initiator).
    Proven,
    /// The initiator's first record; `authenticated` is what
    /// `Negotiated::authenticated` becomes once it has opened.
    FirstRecord {
        /// The value to report once proven.
        authenticated: bool,
    },
}

impl Session {
    /// Whether this side is a responder still waiting for the initiator's
    /// first record (see the module docs of `weft_transform::proof`): until
    /// [`read_first_frame`](Self::read_first_frame) returns a frame, treat
    /// the peer as unproven: not `authenticated`, not yet a connection.
    pub fn awaits_first_record(&self) -> bool {
        matches!(self.proof, Proof::FirstRecord { .. })
    }

    /// Decodes the peer's first frame from `src` like
    /// [`Inbound::decode`](crate::Inbound::decode); once it returns a frame
    /// (the record opened, when encrypted) the peer is proven and
    /// `negotiated.authenticated` takes its final value. `Ok(None)` until
    /// the record is whole. Errors are fatal, as from `decode`.
    pub fn read_first_frame(
        &mut self,
        src: &mut BytesMut,
    ) -> Result<Option<Frame>, TransformError> {
        let frame = self.inbound.decode(src)?;
        if frame.is_some()
            && let Proof::FirstRecord { authenticated } = self.proof
        {
            self.negotiated.authenticated = authenticated;
            self.proof = Proof::Proven;
        }
        Ok(frame)
    }
}
