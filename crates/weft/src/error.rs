//! Errors of connecting and serving (calls fail with a `Status` instead).

use std::fmt;
use std::io;

use weft_mux::MuxError;

/// Why a connection could not be set up or served.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The transport failed (bind, accept, or during the handshake).
    Io(io::Error),
    /// The transport connect failed (refused, unreachable, timed out):
    /// nothing was sent, so a retry is safe.
    Connect(io::Error),
    /// The handshake or the connection failed (see
    /// [`MuxError::is_handshake`], [`MuxError::is_timeout`]).
    Connection(MuxError),
    /// The address is not `host:port` or `unix:/path`.
    Address(String),
    /// The configuration cannot run in this role (for example an allow-list
    /// without a key pair of our own); the text says what to add. Found
    /// before anything is sent or accepted.
    Config(weft_transform::HandshakeError),
}

impl Error {
    /// Whether retrying (after a backoff) is safe and may succeed: the
    /// transport connect failed (nothing was sent), or the server refused
    /// the connection before the handshake because it is busy or at a
    /// connection limit. Nothing was processed either way. Key, policy and
    /// protocol failures are not: the same attempt would fail the same way.
    pub fn is_retry_safe(&self) -> bool {
        match self {
            Error::Connection(e) => e.is_refused(),
            Error::Connect(_) => true,
            Error::Io(_) | Error::Address(_) | Error::Config(_) => false,
        }
    }

    /// Whether a deadline passed (connect or handshake).
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Connection(e) => e.is_timeout(),
            Error::Io(e) | Error::Connect(e) => e.kind() == io::ErrorKind::TimedOut,
            Error::Address(_) | Error::Config(_) => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "transport error: {e}"),
            Error::Connect(e) => write!(f, "could not connect: {e}"),
            Error::Connection(e) => write!(f, "{e}"),
            Error::Address(a) => write!(f, "bad address {a:?}: use host:port or unix:/path"),
            Error::Config(e) => match e.config_problem() {
                Some(what) => write!(f, "invalid configuration: {what}"),
                None => write!(f, "{e}"),
            },
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) | Error::Connect(e) => Some(e),
            Error::Connection(e) => Some(e),
            Error::Address(_) => None,
            Error::Config(e) => Some(e),
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<MuxError> for Error {
    fn from(e: MuxError) -> Self {
        Error::Connection(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn display_and_sources() {
        let io = Error::from(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
        assert_eq!(io.to_string(), "transport error: refused");
        assert!(io.source().is_some());
        assert!(!io.is_retry_safe() && !io.is_timeout());
        let late = Error::from(io::Error::from(io::ErrorKind::TimedOut));
        assert!(late.is_timeout() && !late.is_retry_safe());
        let down = Error::Connect(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert!(down.is_retry_safe() && !down.is_timeout());
        assert!(down.to_string().starts_with("could not connect"), "{down}");
        let a = Error::Address("x".into());
        assert!(a.to_string().contains("host:port or unix:/path"));
        assert!(a.source().is_none());
    }
}
