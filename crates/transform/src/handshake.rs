//! weft's handshake: preface, then one `HANDSHAKE` frame each way carrying
//! a Noise message (or a plain hello) whose payload is the sender's offer.
//! Sans-I/O: bytes in through [`Handshake::handle_input`], bytes out through
//! [`Handshake::poll_transmit`].

use bytes::{Buf, BytesMut};
use weft_frame::preface::{PREFACE, PREFACE_LEN, check_preface, check_preface_prefix};
use weft_frame::{Flags, FrameError, FrameType, HEADER_LEN, Header};

use crate::error::{HandshakeError, HandshakeErrorKind};
use crate::handshake_kind::{self as kind, RejectReason, reject_frame};
use crate::noise::{
    Ephemeral, HandshakeState, NoiseError, Pattern, ReusableEphemeral, RingEphemeral, StaticKeys,
};
use crate::offer::{
    OFFER_LEN, SELECT_COMPRESSED, SELECT_ENCRYPTED, SELECT_REFUSED, WireOffer, select,
};
use crate::pipeline::PipelineParams;
use crate::proof::Proof;
use crate::refusal;
use crate::rekey::{OpenKey, SendKey};
use crate::{EncryptionPolicy, HandshakeConfig, Negotiated, Role, Session};

/// Largest handshake message (the payload of a `HANDSHAKE` frame) accepted.
/// Version 1 messages are at most 118 bytes.
pub const MAX_HANDSHAKE_MESSAGE: u32 = 256;

/// Noise prologue label; the initiator's 8-byte preface follows it.
const PROLOGUE_LABEL: &[u8] = b"weft handshake v1";

fn err(kind: HandshakeErrorKind) -> HandshakeError {
    HandshakeError::new(kind)
}

fn malformed(what: &'static str) -> HandshakeError {
    err(HandshakeErrorKind::Malformed(what))
}

fn from_noise(e: NoiseError) -> HandshakeError {
    match e {
        NoiseError::InvalidKeyShare => err(HandshakeErrorKind::InvalidKeyShare),
        NoiseError::Rng => err(HandshakeErrorKind::Rng),
        NoiseError::ShortMessage => malformed("message too short"),
        _ => err(HandshakeErrorKind::Authentication),
    }
}

/// Where the ephemeral key comes from.
enum KeySource {
    /// ring, generated when first needed.
    Ring,
    /// Supplied by the caller (tests with fixed keys).
    Given(Box<dyn Ephemeral>),
    /// Already used.
    Used,
}

impl KeySource {
    /// The ephemeral key for `pattern`: ring's single-use keys for NN and
    /// NNpsk0, a reusable one for the patterns that use `e` twice.
    fn take(&mut self, pattern: Pattern) -> Result<Box<dyn Ephemeral>, HandshakeError> {
        match std::mem::replace(self, KeySource::Used) {
            KeySource::Ring if pattern.has_static_keys() => ReusableEphemeral::generate()
                .map(|k| Box::new(k) as Box<dyn Ephemeral>)
                .map_err(from_noise),
            KeySource::Ring => RingEphemeral::generate()
                .map(|k| Box::new(k) as Box<dyn Ephemeral>)
                .map_err(from_noise),
            KeySource::Given(k) => Ok(k),
            KeySource::Used => Err(err(HandshakeErrorKind::Incomplete)),
        }
    }
}

/// Progress of the handshake.
enum State {
    /// Waiting for the peer's preface.
    Preface,
    /// Waiting for the peer's handshake message.
    Message,
    /// Done: keys and selection are known.
    Complete,
    /// Failed; the error is returned again on every call.
    Failed(HandshakeError),
    /// The responder queued its refusal or rejection and fails once it is
    /// out.
    Refused(HandshakeError),
}

/// The sans-I/O handshake.
///
/// The driver loops under its deadline: write what
/// [`poll_transmit`](Self::poll_transmit) appends, read socket bytes into a
/// `BytesMut`, call [`handle_input`](Self::handle_input), until
/// [`is_complete`](Self::is_complete). After `handle_input`, write again
/// before reading whenever [`has_transmit`](Self::has_transmit) is true
/// (XX has three messages: the responder's reply comes before it is
/// complete). **When it is complete, call
/// `poll_transmit` once more and write those bytes** (the responder's reply
/// is produced by the input that completes it), then call
/// [`into_session`](Self::into_session). Bytes after the handshake stay in
/// the read buffer for the session.
///
/// Garbage, an HTTP request or a TLS ClientHello is rejected by the first
/// bytes of the preface, before any key agreement; an empty or oversize
/// handshake message by its frame header alone.
pub struct Handshake {
    role: Role,
    config: HandshakeConfig,
    ours: WireOffer,
    keys: KeySource,
    noise: Option<HandshakeState>,
    /// The kind byte of this handshake (the initiator's choice).
    kind: u8,
    /// The initiator's preface as sent or received (the prologue).
    initiator_preface: [u8; PREFACE_LEN],
    transmit: Vec<u8>,
    state: State,
    /// The header of the peer's message, once read.
    header: Option<Header>,
    /// Set when complete.
    result: Option<(u8, WireOffer)>,
}

impl std::fmt::Debug for Handshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Preface => "preface",
            State::Message => "message",
            State::Complete => "complete",
            State::Failed(_) | State::Refused(_) => "failed",
        };
        f.debug_struct("Handshake")
            .field("role", &self.role)
            .field("kind", &self.kind)
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl Handshake {
    /// A handshake for `role`, with ephemeral keys from ring.
    pub fn new(role: Role, config: HandshakeConfig) -> Result<Handshake, HandshakeError> {
        Handshake::build(role, config, KeySource::Ring)
    }

    /// A handshake whose ephemeral key pair is `ephemeral` (tests with fixed
    /// keys, or another X25519 implementation).
    pub fn with_ephemeral(
        role: Role,
        config: HandshakeConfig,
        ephemeral: Box<dyn Ephemeral>,
    ) -> Result<Handshake, HandshakeError> {
        Handshake::build(role, config, KeySource::Given(ephemeral))
    }

    fn build(
        role: Role,
        config: HandshakeConfig,
        keys: KeySource,
    ) -> Result<Handshake, HandshakeError> {
        let config = config.checked(role)?;
        let ours = WireOffer::from_config(&config)?;
        let mut hs = Handshake {
            role,
            ours,
            keys,
            noise: None,
            kind: kind::PLAIN,
            initiator_preface: PREFACE,
            transmit: PREFACE.to_vec(),
            state: State::Preface,
            header: None,
            result: None,
            config,
        };
        if role == Role::Initiator {
            hs.kind = kind::choose(
                hs.config.psk.is_some(),
                hs.config.identity.is_some(),
                hs.config.server_key.is_some(),
                hs.config.offer.encryption == EncryptionPolicy::Off,
            );
            let mut body = Vec::with_capacity(OFFER_LEN);
            hs.ours.encode(&mut body);
            hs.send_message(&body)?;
        }
        Ok(hs)
    }

    /// Appends the bytes to send now (preface and handshake messages) to
    /// `out`; nothing when there is nothing to send.
    pub fn poll_transmit(&mut self, out: &mut BytesMut) {
        out.extend_from_slice(&self.transmit);
        self.transmit.clear();
        // A refusal fails for good once it is out.
        self.state = match std::mem::replace(&mut self.state, State::Preface) {
            State::Refused(e) => State::Failed(e),
            other => other,
        };
    }

    /// Consumes from `src` the bytes of the handshake it can use, and no
    /// more. Errors are final: the same error is returned again after one.
    pub fn handle_input(&mut self, src: &mut BytesMut) -> Result<(), HandshakeError> {
        loop {
            match &self.state {
                State::Failed(e) => return Err(e.clone()),
                State::Complete | State::Refused(_) => return Ok(()),
                State::Preface => {
                    if let Err(e) = self.read_preface(src) {
                        return Err(self.fail(e));
                    }
                    if matches!(self.state, State::Preface) {
                        return Ok(());
                    }
                }
                State::Message => match self.read_message(src) {
                    Ok(true) => {}
                    Ok(false) => return Ok(()),
                    Err(e) => return Err(self.fail(e)),
                },
            }
        }
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) has bytes to send.
    /// A driver sends them before it waits for input: a responder in XX
    /// has its reply to send before the third message can come.
    pub fn has_transmit(&self) -> bool {
        !self.transmit.is_empty()
    }

    /// Whether the handshake finished: successfully, or (responder only)
    /// with a policy refusal whose reply is waiting in
    /// [`poll_transmit`](Self::poll_transmit). Once that reply has been
    /// taken, a refused handshake is failed: `is_complete` turns false and
    /// both [`handle_input`](Self::handle_input) and
    /// [`into_session`](Self::into_session) return the refusal.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete | State::Refused(_))
    }

    /// The pipeline halves the handshake negotiated.
    pub fn into_session(mut self) -> Result<Session, HandshakeError> {
        match std::mem::replace(&mut self.state, State::Preface) {
            State::Complete => {}
            State::Failed(e) | State::Refused(e) => return Err(e),
            _ => return Err(err(HandshakeErrorKind::Incomplete)),
        }
        let (selection, theirs) = self.result.ok_or(err(HandshakeErrorKind::Incomplete))?;
        let encrypted = selection & SELECT_ENCRYPTED != 0;
        let compressed = selection & SELECT_COMPRESSED != 0;
        let initiator = self.role == Role::Initiator;
        let keys = match &self.noise {
            Some(n) => Some(n.split().map_err(from_noise)?),
            None => None,
        };
        let handshake_hash = keys.as_ref().map(|k| k.handshake_hash);
        let (seal, open) = match (keys, encrypted) {
            (Some(k), true) => {
                let (s, o) = k.ciphers(initiator, u64::MAX);
                (
                    Some(SendKey::new(s, self.config.rekey)),
                    Some(OpenKey::new(o)),
                )
            }
            _ => (None, None),
        };
        let pattern = kind::pattern(self.kind);
        let identities = pattern.is_some_and(Pattern::has_static_keys);
        let checked = match self.role {
            Role::Responder => self.config.allow.is_some(),
            Role::Initiator => self.config.server_key.is_some(),
        };
        let peer_key = self.noise.as_ref().and_then(HandshakeState::remote_static);
        let authenticated = pattern.is_some_and(Pattern::has_psk) || (identities && checked);
        // The initiator's only message may be a replay: a responder of a
        // one-message pattern is proven by the first record (crate::proof).
        let proof = match (self.role, self.kind) {
            (Role::Responder, k) if !matches!(k, kind::XX | kind::XX_PSK3) => {
                // Without encryption the first frame is plain and as
                // replayable as the handshake message: it proves no key.
                Proof::FirstRecord {
                    authenticated: authenticated && encrypted,
                }
            }
            _ => Proof::Proven,
        };
        let negotiated = Negotiated {
            encrypted,
            compressed,
            handshake_hash,
            authenticated: authenticated && proof == Proof::Proven,
            peer_key: peer_key.filter(|_| identities),
            peer_limits: theirs.limits,
            peer_max_message: theirs.max_message,
            peer_max_ratio: theirs.max_ratio,
        };
        let (outbound, inbound) = PipelineParams {
            local_limits: self.ours.limits,
            peer_limits: theirs.limits,
            compression: compressed,
            compression_min_size: self.config.compression_min_size,
            local_max_message: self.ours.max_message,
            local_max_ratio: self.ours.max_ratio,
            peer_max_ratio: theirs.max_ratio,
            peer_max_message: theirs.max_message,
            seal,
            open,
        }
        .build();
        let mut inbound = inbound;
        if self.role == Role::Initiator && matches!(self.kind, kind::XX | kind::XX_PSK3) {
            // The server checks our key after our last message: its
            // rejection, if any, is the first frame.
            inbound.watch_for_rejection(self.config.identity.as_ref().map(|k| k.public_key()));
        }
        Ok(Session {
            outbound,
            inbound,
            negotiated,
            proof,
        })
    }

    /// Responder: queue a rejection saying why, and fail once it is out.
    /// Always `Ok`, so the driver sends it (see [`Self::is_complete`]).
    fn reject(&mut self, reason: RejectReason, e: HandshakeError) -> Result<(), HandshakeError> {
        self.transmit.clear();
        self.transmit.extend_from_slice(&reject_frame(reason));
        self.noise = None;
        self.state = State::Refused(e);
        Ok(())
    }

    fn fail(&mut self, e: HandshakeError) -> HandshakeError {
        self.transmit.clear();
        self.noise = None;
        self.state = State::Failed(e.clone());
        e
    }

    fn read_preface(&mut self, src: &mut BytesMut) -> Result<(), HandshakeError> {
        let avail = &src[..src.len().min(PREFACE_LEN)];
        check_preface_prefix(avail).map_err(preface_error)?;
        let Some(raw) = src.first_chunk::<PREFACE_LEN>() else {
            return Ok(());
        };
        check_preface(raw).map_err(preface_error)?;
        if self.role == Role::Responder {
            self.initiator_preface = *raw;
        }
        src.advance(PREFACE_LEN);
        self.state = State::Message;
        Ok(())
    }

    /// Reads one handshake frame if whole; `Ok(true)` when it was processed.
    fn read_message(&mut self, src: &mut BytesMut) -> Result<bool, HandshakeError> {
        let header = match self.header {
            Some(h) => h,
            None => {
                let Some(raw) = src.first_chunk::<HEADER_LEN>() else {
                    return Ok(false);
                };
                let h = match Header::parse(raw) {
                    Ok(h) if self.role == Role::Initiator && refusal::is_refusal_header(&h) => h,
                    _ => check_handshake_header(raw)?,
                };
                src.advance(HEADER_LEN);
                self.header = Some(h);
                h
            }
        };
        let len = header.payload_len as usize;
        if src.len() < len {
            return Ok(false);
        }
        self.header = None;
        let message = src.split_to(len);
        if header.ty == FrameType::GOAWAY {
            return Err(refusal::refused(&message));
        }
        let (&msg_kind, body) = message.split_first().ok_or(malformed("empty message"))?;
        match self.role {
            Role::Responder if self.result.is_some() => self.finish_xx(msg_kind, body)?,
            Role::Responder => self.respond(msg_kind, body)?,
            Role::Initiator => self.conclude(msg_kind, body)?,
        }
        Ok(true)
    }

    /// Frames `body` as this handshake's message and queues it.
    fn send_message(&mut self, offer_and_selection: &[u8]) -> Result<(), HandshakeError> {
        let mut message = vec![self.kind];
        if self.kind != kind::PLAIN {
            self.noise()?
                .write_message(offer_and_selection, &mut message)
                .map_err(from_noise)?;
        } else {
            message.extend_from_slice(offer_and_selection);
        }
        let header = Header {
            ty: FrameType::HANDSHAKE,
            flags: Flags::NONE,
            stream_id: 0,
            metadata_len: 0,
            payload_len: message.len() as u32,
        };
        self.transmit.extend_from_slice(&header.to_bytes());
        self.transmit.extend_from_slice(&message);
        Ok(())
    }

    /// Responder: read the initiator's message, select, reply. Anything
    /// we cannot accept is answered with a rejection saying why.
    fn respond(&mut self, msg_kind: u8, body: &[u8]) -> Result<(), HandshakeError> {
        let ours_psk = self.config.psk.is_some();
        let ours_id = self.config.identity.is_some();
        let pattern = kind::pattern(msg_kind);
        let (theirs_psk, theirs_id) = match (msg_kind, pattern) {
            (kind::PLAIN, _) => (false, false),
            (_, Some(p)) => (p.has_psk(), p.has_static_keys()),
            _ => {
                let e = malformed("unknown handshake kind");
                return self.reject(RejectReason::Malformed, e);
            }
        };
        if ours_id != theirs_id {
            let (reason, e) = if ours_id {
                (
                    RejectReason::IdentityRequired,
                    HandshakeErrorKind::IdentityMismatch { ours: true },
                )
            } else {
                (
                    RejectReason::NoIdentity,
                    HandshakeErrorKind::IdentityMismatch { ours: false },
                )
            };
            return self.reject(reason, err(e));
        }
        if ours_psk != theirs_psk {
            let e = err(HandshakeErrorKind::PskMismatch { ours: ours_psk });
            return self.reject(RejectReason::PskMismatch, e);
        }
        self.kind = msg_kind;
        let payload = match self.open_payload(body) {
            Ok(p) => p,
            Err(e) => return self.reject_unreadable(e),
        };
        let theirs = match WireOffer::decode(&payload) {
            Ok(o) => o,
            Err(e) => return self.reject(RejectReason::Malformed, e),
        };
        if msg_kind == kind::PLAIN && theirs.encryption != EncryptionPolicy::Off {
            let e = malformed("plain hello from a side with encryption on");
            return self.reject(RejectReason::Malformed, e);
        }
        if let Some(e) = self.check_client_key() {
            return self.reject(RejectReason::KeyNotAllowed, e);
        }
        let (selection, refusal) = match select(&self.ours, &theirs) {
            Ok(s) => (s, None),
            Err(e) => (SELECT_REFUSED, Some(e)),
        };
        let mut reply = Vec::with_capacity(OFFER_LEN + 1);
        self.ours.encode(&mut reply);
        reply.push(selection);
        self.send_message(&reply)?;
        match refusal {
            Some(e) => self.state = State::Refused(e),
            // XX: the client's key arrives in a third message.
            None if matches!(msg_kind, kind::XX | kind::XX_PSK3) => {
                self.result = Some((selection, theirs));
            }
            None => {
                self.result = Some((selection, theirs));
                self.state = State::Complete;
            }
        }
        Ok(())
    }

    /// Responder, XX: the initiator's third message (its static key, and
    /// the PSK for XXpsk3); then the allow-list.
    fn finish_xx(&mut self, msg_kind: u8, body: &[u8]) -> Result<(), HandshakeError> {
        if msg_kind != self.kind {
            let e = malformed("third message of another handshake kind");
            return self.reject(RejectReason::Malformed, e);
        }
        match self.open_payload(body) {
            Ok(p) if p.is_empty() => {}
            Ok(_) => {
                return self.reject(RejectReason::Malformed, malformed("third message payload"));
            }
            Err(e) => return self.reject_unreadable(e),
        }
        if let Some(e) = self.check_client_key() {
            return self.reject(RejectReason::KeyNotAllowed, e);
        }
        self.state = State::Complete;
        Ok(())
    }

    /// Rejects a message that did not open: malformed, or not
    /// authenticated (for IK, named after our static key).
    fn reject_unreadable(&mut self, e: HandshakeError) -> Result<(), HandshakeError> {
        if !e.is_authentication() {
            return self.reject(RejectReason::Malformed, e);
        }
        let e = match (&self.config.identity, self.kind) {
            (Some(k), kind::IK | kind::IK_PSK2) => err(HandshakeErrorKind::NotForOurKey {
                ours: k.public_key(),
            }),
            _ => e,
        };
        self.reject(RejectReason::Authentication, e)
    }

    /// The allow-list's verdict on the client's static key, once known:
    /// `Some(error)` when it is not allowed.
    fn check_client_key(&self) -> Option<HandshakeError> {
        let allow = self.config.allow.as_ref()?;
        let key = self.noise.as_ref()?.remote_static()?;
        (!allow.contains(&key)).then(|| err(HandshakeErrorKind::KeyNotAllowed(key)))
    }

    /// Initiator: read the responder's reply and check its selection.
    fn conclude(&mut self, msg_kind: u8, body: &[u8]) -> Result<(), HandshakeError> {
        if msg_kind == kind::REJECT {
            let &[reason] = body else {
                return Err(malformed("rejection length"));
            };
            return Err(err(HandshakeErrorKind::Rejected {
                reason: RejectReason::from_wire(reason),
                our_key: self.config.identity.as_ref().map(|k| k.public_key()),
                pinned: self.config.server_key,
            }));
        }
        if msg_kind != self.kind {
            return Err(malformed("reply of another handshake kind"));
        }
        let payload = match (self.open_payload(body), self.config.server_key) {
            (Ok(p), _) => p,
            (Err(e), Some(pinned)) if e.is_authentication() => {
                return Err(err(HandshakeErrorKind::ServerKeyNotProven { pinned }));
            }
            (Err(e), _) => return Err(e),
        };
        let (offer, selection) = payload
            .split_last()
            .filter(|(_, offer)| offer.len() == OFFER_LEN)
            .map(|(sel, offer)| (offer, *sel))
            .ok_or(malformed("reply length"))?;
        let theirs = WireOffer::decode(offer)?;
        let expected = select(&self.ours, &theirs);
        match expected {
            Err(e) if selection == SELECT_REFUSED => return Err(e),
            Ok(s) if s == selection => {}
            _ => return Err(err(HandshakeErrorKind::SelectionMismatch)),
        }
        if matches!(self.kind, kind::XX | kind::XX_PSK3) {
            // Our static key (and the PSK) go in the third message.
            self.send_message(&[])?;
        }
        self.result = Some((selection, theirs));
        self.state = State::Complete;
        Ok(())
    }

    /// The offer (and selection) inside a message: decrypted through Noise,
    /// or as is for a plain hello.
    fn open_payload(&mut self, body: &[u8]) -> Result<Vec<u8>, HandshakeError> {
        if self.kind == kind::PLAIN {
            return Ok(body.to_vec());
        }
        let mut payload = Vec::with_capacity(OFFER_LEN + 1);
        self.noise()?
            .read_message(body, &mut payload)
            .map_err(from_noise)?;
        Ok(payload)
    }

    /// The Noise state, initialised on first use: only once a well-formed
    /// message has arrived (responder) or is to be sent (initiator) is a key
    /// generated.
    fn noise(&mut self) -> Result<&mut HandshakeState, HandshakeError> {
        if self.noise.is_none() {
            let pattern = kind::pattern(self.kind).ok_or(err(HandshakeErrorKind::Incomplete))?;
            let mut prologue = PROLOGUE_LABEL.to_vec();
            prologue.extend_from_slice(&self.initiator_preface);
            let e = self.keys.take(pattern)?;
            let initiator = self.role == Role::Initiator;
            let keys = StaticKeys {
                local: self.config.identity.clone(),
                remote: self
                    .config
                    .server_key
                    .filter(|_| initiator && pattern.needs_remote_static()),
            };
            let psk = self.config.psk.as_ref().map(|p| *p.as_bytes());
            let state = HandshakeState::with_static(pattern, initiator, &prologue, psk, e, keys)
                .map_err(from_noise)?;
            self.noise = Some(state);
        }
        Ok(self.noise.as_mut().expect("initialised above"))
    }
}

fn preface_error(e: FrameError) -> HandshakeError {
    match e {
        FrameError::UnsupportedVersion(v) => err(HandshakeErrorKind::UnsupportedVersion(v)),
        _ => err(HandshakeErrorKind::BadPreface),
    }
}

/// A handshake frame header: `HANDSHAKE` on stream 0, flags and reserved
/// byte 0, no metadata, a payload of 1 to [`MAX_HANDSHAKE_MESSAGE`] bytes.
fn check_handshake_header(raw: &[u8; HEADER_LEN]) -> Result<Header, HandshakeError> {
    let h = Header::parse(raw).map_err(preface_error)?;
    if h.ty != FrameType::HANDSHAKE {
        return Err(malformed("expected a HANDSHAKE frame"));
    }
    if h.flags != Flags::NONE || raw[3] != 0 || h.stream_id != 0 || h.metadata_len != 0 {
        return Err(malformed("HANDSHAKE frame header"));
    }
    if h.payload_len == 0 {
        return Err(malformed("empty handshake message"));
    }
    if h.payload_len > MAX_HANDSHAKE_MESSAGE {
        return Err(malformed("oversize handshake message"));
    }
    Ok(h)
}
