//! Public errors: opaque structs with predicates, over private kinds.

use std::sync::Arc;

use weft_frame::Reason;

/// Who or what ended a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// This side (its `GOAWAY`, a deadline, a limit, a shutdown).
    Local,
    /// The peer, with a `GOAWAY` carrying the reason.
    Peer,
    /// The transport ended (end of file, reset, read error) with no
    /// `GOAWAY`: the peer gave no reason, so none is reported as its.
    Transport,
}

/// Why a connection ended: who ended it, the wire reason, and a short
/// description. Cheap to clone; every stream of the connection sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseCause {
    /// The wire reason (sent in our `GOAWAY`, or received in the peer's;
    /// for a transport close, the reason this side reports: `NO_ERROR` for
    /// an end of file, `INTERNAL_ERROR` for a read error).
    pub reason: Reason,
    /// Who or what ended it.
    pub origin: Origin,
    /// What happened, for logs.
    pub detail: &'static str,
    /// What the peer's `GOAWAY` said happened (its debug text: printable,
    /// at most 128 characters), when it said anything; e.g.
    /// "closed by the server's idle timeout (30 s)".
    pub peer_text: Option<Arc<str>>,
}

/// The most characters of a peer's `GOAWAY` text kept in a [`CloseCause`].
pub(crate) const PEER_TEXT_MAX: usize = 128;

/// A peer's `GOAWAY` debug text as shown: control characters dropped,
/// cut to [`PEER_TEXT_MAX`] characters; `None` if nothing is left. The
/// text comes from the peer, so it is bounded before it is kept.
pub(crate) fn peer_text(raw: &[u8]) -> Option<Arc<str>> {
    let text: String = String::from_utf8_lossy(raw)
        .chars()
        .filter(|c| !c.is_control())
        .take(PEER_TEXT_MAX)
        .collect();
    let text = text.trim();
    (!text.is_empty()).then(|| text.into())
}

impl CloseCause {
    pub(crate) const fn local(reason: Reason, detail: &'static str) -> CloseCause {
        CloseCause {
            reason,
            origin: Origin::Local,
            detail,
            peer_text: None,
        }
    }

    pub(crate) const fn peer(reason: Reason, detail: &'static str) -> CloseCause {
        CloseCause {
            reason,
            origin: Origin::Peer,
            detail,
            peer_text: None,
        }
    }

    /// This cause with what the peer's `GOAWAY` said.
    pub(crate) fn saying(self, peer_text: Option<Arc<str>>) -> CloseCause {
        CloseCause { peer_text, ..self }
    }

    /// This cause as a transport close (no `GOAWAY` was received).
    pub(crate) fn into_transport(self) -> CloseCause {
        CloseCause {
            origin: Origin::Transport,
            ..self
        }
    }

    /// Whether the peer or the transport ended it (not this side).
    pub fn by_peer(&self) -> bool {
        self.origin != Origin::Local
    }
}

impl std::fmt::Display for CloseCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.origin {
            Origin::Local => write!(f, "{} (local: {})", self.detail, self.reason),
            Origin::Peer => match &self.peer_text {
                Some(said) => write!(f, "{}: {said} (peer: {})", self.detail, self.reason),
                None => write!(f, "{} (peer: {})", self.detail, self.reason),
            },
            Origin::Transport => write!(f, "{} (no GOAWAY: the peer gave no reason)", self.detail),
        }
    }
}

#[derive(Clone, Debug)]
enum MuxKind {
    Handshake(Arc<dyn std::error::Error + Send + Sync>),
    HandshakeTimeout,
    Io(Arc<std::io::Error>),
    Closed(CloseCause),
    Refused(&'static str),
    IdsExhausted,
    MetadataTooLarge,
}

/// A connection-level error: handshake failure, I/O failure, or an `open` on
/// a connection that cannot take new streams.
#[derive(Clone, Debug)]
pub struct MuxError {
    kind: MuxKind,
}

impl MuxError {
    pub(crate) fn handshake(e: impl std::error::Error + Send + Sync + 'static) -> MuxError {
        MuxError {
            kind: MuxKind::Handshake(Arc::new(e)),
        }
    }
    pub(crate) fn handshake_timeout() -> MuxError {
        MuxError {
            kind: MuxKind::HandshakeTimeout,
        }
    }
    pub(crate) fn io(e: std::io::Error) -> MuxError {
        MuxError {
            kind: MuxKind::Io(Arc::new(e)),
        }
    }
    pub(crate) fn closed(cause: CloseCause) -> MuxError {
        MuxError {
            kind: MuxKind::Closed(cause),
        }
    }
    pub(crate) fn refused(why: &'static str) -> MuxError {
        MuxError {
            kind: MuxKind::Refused(why),
        }
    }
    pub(crate) fn metadata_too_large() -> MuxError {
        MuxError {
            kind: MuxKind::MetadataTooLarge,
        }
    }
    pub(crate) fn ids_exhausted() -> MuxError {
        MuxError {
            kind: MuxKind::IdsExhausted,
        }
    }

    /// Retry-safe: the stream was never processed (the connection is going
    /// away or ran out of stream ids), or the server refused the connection
    /// before the handshake saying a retry is safe (busy, at its connection
    /// cap); retry on a new connection, after a backoff.
    pub fn is_refused(&self) -> bool {
        match &self.kind {
            MuxKind::Refused(_) | MuxKind::IdsExhausted => true,
            MuxKind::Handshake(e) => e
                .downcast_ref::<weft_transform::HandshakeError>()
                .is_some_and(weft_transform::HandshakeError::is_retry_safe),
            _ => false,
        }
    }
    /// The connection is gone.
    pub fn is_closed(&self) -> bool {
        matches!(self.kind, MuxKind::Closed(_) | MuxKind::Io(_))
    }
    /// A deadline passed (handshake, keepalive).
    pub fn is_timeout(&self) -> bool {
        match &self.kind {
            MuxKind::HandshakeTimeout => true,
            MuxKind::Closed(c) => c.reason == Reason::TIMEOUT,
            _ => false,
        }
    }
    /// The handshake failed or timed out.
    pub fn is_handshake(&self) -> bool {
        matches!(self.kind, MuxKind::Handshake(_) | MuxKind::HandshakeTimeout)
    }
    /// The `OPEN` metadata exceeds the frame limit (nothing was sent).
    pub fn is_too_large(&self) -> bool {
        matches!(self.kind, MuxKind::MetadataTooLarge)
    }
    /// Stream ids ran out on this connection.
    pub fn is_ids_exhausted(&self) -> bool {
        matches!(self.kind, MuxKind::IdsExhausted)
    }
    /// Why the connection closed, when it did.
    pub fn close_cause(&self) -> Option<&CloseCause> {
        match &self.kind {
            MuxKind::Closed(c) => Some(c),
            _ => None,
        }
    }
}

impl std::fmt::Display for MuxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            // A `HandshakeError` already says "handshake failed: ...".
            MuxKind::Handshake(e) => write!(f, "{e}"),
            MuxKind::HandshakeTimeout => f.write_str("handshake timed out"),
            MuxKind::Io(e) => write!(f, "transport error: {e}"),
            MuxKind::Closed(c) => write!(f, "connection closed: {c}"),
            MuxKind::Refused(why) => write!(f, "stream refused (safe to retry): {why}"),
            MuxKind::IdsExhausted => f.write_str("stream ids exhausted; use a new connection"),
            MuxKind::MetadataTooLarge => f.write_str("metadata larger than the frame limit"),
        }
    }
}

impl std::error::Error for MuxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            MuxKind::Handshake(e) => Some(&**e),
            MuxKind::Io(e) => Some(&**e),
            _ => None,
        }
    }
}

/// Why one stream failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StreamKind {
    /// Reset, by the peer (`remote`) or by us.
    Reset { reason: Reason, remote: bool },
    /// The connection ended.
    Closed(CloseCause),
    /// The connection ended cleanly before the peer's settings frame
    /// arrived: the peer processed nothing (docs/PROTOCOL.md 6.1), so the
    /// stream is safe to retry on another connection.
    Unprocessed(CloseCause),
    /// Refused before processing (REFUSED_STREAM, or above GOAWAY's last id).
    Refused,
    /// Local misuse: sending after `end`.
    SendClosed,
    /// Local misuse: metadata larger than the frame limit (nothing sent).
    MetadataTooLarge,
}

/// A stream-level error. A reset or a dead connection is always an error,
/// never a clean end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamError {
    kind: StreamKind,
}

impl StreamError {
    pub(crate) fn new(kind: StreamKind) -> StreamError {
        StreamError { kind }
    }

    /// Retry-safe: the peer never processed the stream (`REFUSED_STREAM`, or
    /// its id was above the last id of a `GOAWAY`).
    pub fn is_refused(&self) -> bool {
        match &self.kind {
            StreamKind::Refused => true,
            StreamKind::Reset { reason, .. } => *reason == Reason::REFUSED_STREAM,
            _ => false,
        }
    }
    /// The stream was reset (see [`reason`](Self::reason) and
    /// [`is_remote`](Self::is_remote)).
    pub fn is_reset(&self) -> bool {
        matches!(self.kind, StreamKind::Reset { .. })
    }
    /// Whether the peer caused this error (its reset, its `GOAWAY`).
    pub fn is_remote(&self) -> bool {
        match &self.kind {
            StreamKind::Reset { remote, .. } => *remote,
            StreamKind::Closed(c) | StreamKind::Unprocessed(c) => c.by_peer(),
            StreamKind::Refused => true,
            StreamKind::SendClosed | StreamKind::MetadataTooLarge => false,
        }
    }
    /// The connection is gone.
    pub fn is_closed(&self) -> bool {
        matches!(
            self.kind,
            StreamKind::Closed(_) | StreamKind::Unprocessed(_)
        )
    }
    /// The connection ended cleanly before the peer's settings frame
    /// arrived, so the peer processed nothing: safe to retry on a new
    /// connection (a server that evicts a connection whose first record
    /// had not yet come ends it so).
    pub fn is_unprocessed(&self) -> bool {
        matches!(self.kind, StreamKind::Unprocessed(_))
    }
    /// A keepalive or idle deadline closed the connection.
    pub fn is_timeout(&self) -> bool {
        self.reason() == Some(Reason::TIMEOUT)
    }
    /// The stream or connection failed on flow control.
    pub fn is_flow_control(&self) -> bool {
        self.reason() == Some(Reason::FLOW_CONTROL_ERROR)
    }
    /// The metadata passed to a send exceeds the frame limit (nothing was
    /// sent; the stream is unaffected).
    pub fn is_too_large(&self) -> bool {
        matches!(self.kind, StreamKind::MetadataTooLarge)
    }
    /// Sending after this side already ended the stream.
    pub fn is_send_closed(&self) -> bool {
        matches!(self.kind, StreamKind::SendClosed)
    }
    /// The wire reason, for resets and closed connections.
    pub fn reason(&self) -> Option<Reason> {
        match &self.kind {
            StreamKind::Reset { reason, .. } => Some(*reason),
            StreamKind::Closed(c) | StreamKind::Unprocessed(c) => Some(c.reason),
            StreamKind::Refused => Some(Reason::REFUSED_STREAM),
            StreamKind::SendClosed | StreamKind::MetadataTooLarge => None,
        }
    }
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            StreamKind::Reset { reason, remote } => {
                let who = if *remote { "peer" } else { "locally" };
                write!(f, "stream reset {who}: {reason}")
            }
            StreamKind::Closed(c) => write!(f, "connection closed: {c}"),
            StreamKind::Unprocessed(c) => write!(
                f,
                "connection closed before the peer processed anything (safe to retry): {c}"
            ),
            StreamKind::Refused => f.write_str("stream refused (safe to retry)"),
            StreamKind::SendClosed => f.write_str("stream already ended by this side"),
            StreamKind::MetadataTooLarge => f.write_str("metadata larger than the frame limit"),
        }
    }
}

impl std::error::Error for StreamError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_goaway_text_is_bounded_and_printable() {
        assert_eq!(peer_text(b""), None);
        assert_eq!(peer_text(b" \r\n\x07"), None);
        let said = peer_text(b"idle\x1b[31m timeout\n").unwrap();
        assert_eq!(&*said, "idle[31m timeout");
        let long = peer_text(&[b'x'; 10_000]).unwrap();
        assert_eq!(long.chars().count(), PEER_TEXT_MAX);
        assert_eq!(&*peer_text(&[0xff, b'a']).unwrap(), "\u{fffd}a");
        let cause = CloseCause::peer(Reason::NO_ERROR, "peer went away").saying(Some(said));
        assert_eq!(
            cause.to_string(),
            "peer went away: idle[31m timeout (peer: NO_ERROR(0))"
        );
    }
}
