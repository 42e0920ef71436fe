//! The outcome of a call: a [`Code`] from a gRPC-like set and a message.

use std::borrow::Cow;
use std::fmt;

/// A status code: an open newtype, so a code from a newer peer survives and
/// is shown as a number. The values are gRPC's, so they read familiarly in
/// logs and map one-to-one onto a gRPC gateway.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Code(pub u32);

impl Code {
    /// Success.
    pub const OK: Code = Code(0);
    /// The caller cancelled the call (dropped its future, or the handler saw
    /// the caller go away).
    pub const CANCELLED: Code = Code(1);
    /// An error with no better code.
    pub const UNKNOWN: Code = Code(2);
    /// The request was malformed: bad method name, bad deadline, bad JSON.
    pub const INVALID_ARGUMENT: Code = Code(3);
    /// The deadline passed before the call finished.
    pub const DEADLINE_EXCEEDED: Code = Code(4);
    /// The thing asked for does not exist.
    pub const NOT_FOUND: Code = Code(5);
    /// The thing to be created already exists.
    pub const ALREADY_EXISTS: Code = Code(6);
    /// The caller may not do this.
    pub const PERMISSION_DENIED: Code = Code(7);
    /// A limit was hit: message too large, too many streams, a budget.
    pub const RESOURCE_EXHAUSTED: Code = Code(8);
    /// The system is not in a state to do this.
    pub const FAILED_PRECONDITION: Code = Code(9);
    /// The operation was aborted (a conflict).
    pub const ABORTED: Code = Code(10);
    /// A value is outside its valid range.
    pub const OUT_OF_RANGE: Code = Code(11);
    /// No handler for this method.
    pub const UNIMPLEMENTED: Code = Code(12);
    /// A bug: a handler panicked, or an invariant broke.
    pub const INTERNAL: Code = Code(13);
    /// The service cannot be reached now (connection gone, shutting down).
    /// Retry-safe only when [`Status::is_retry_safe`] says so.
    pub const UNAVAILABLE: Code = Code(14);
    /// Data was lost or corrupted.
    pub const DATA_LOSS: Code = Code(15);
    /// The caller is not authenticated.
    pub const UNAUTHENTICATED: Code = Code(16);

    /// The upper-case name, or `"UNKNOWN_CODE"` for a number this crate does
    /// not know.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 17] = [
            "OK",
            "CANCELLED",
            "UNKNOWN",
            "INVALID_ARGUMENT",
            "DEADLINE_EXCEEDED",
            "NOT_FOUND",
            "ALREADY_EXISTS",
            "PERMISSION_DENIED",
            "RESOURCE_EXHAUSTED",
            "FAILED_PRECONDITION",
            "ABORTED",
            "OUT_OF_RANGE",
            "UNIMPLEMENTED",
            "INTERNAL",
            "UNAVAILABLE",
            "DATA_LOSS",
            "UNAUTHENTICATED",
        ];
        NAMES
            .get(self.0 as usize)
            .copied()
            .unwrap_or("UNKNOWN_CODE")
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The outcome of a failed call (or, with [`Code::OK`], of a successful
/// one): a code and a human-readable message.
///
/// `Status` is the error type of every call. A status built locally (a
/// deadline that passed here, a connection that died) is marked as such and
/// may be *retry-safe*: the peer provably did not process the call (the
/// stream was refused, or it was above the peer's `GOAWAY` id).
#[derive(Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    message: Cow<'static, str>,
    retry: Retry,
    /// Machine-readable details, boxed so a `Status` stays small.
    details: Option<Box<bytes::Bytes>>,
}

/// Whether a failed call may be sent again (see [`Status::is_retry_safe`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retry {
    /// The peer may have processed it.
    No,
    /// It provably was not processed.
    Safe,
    /// The peer refused this one stream; the connection is fine.
    StreamRefused,
}

/// One constructor per code: `Status::not_found("no user 7")` is
/// `Status::new(Code::NOT_FOUND, "no user 7")`.
macro_rules! constructors {
    ($($(#[$doc:meta])* $name:ident => $code:ident;)*) => {
        $(
            $(#[$doc])*
            ///
            /// ```
            /// # use weft_rpc::{Code, Status};
            #[doc = concat!("let s = Status::", stringify!($name), "(\"why\");")]
            #[doc = concat!("assert_eq!(s.code(), Code::", stringify!($code), ");")]
            /// assert_eq!(s.message(), "why");
            /// ```
            pub fn $name(message: impl Into<Cow<'static, str>>) -> Status {
                Status::new(Code::$code, message)
            }
        )*
    };
}

impl Status {
    /// A status with this code and message.
    pub fn new(code: Code, message: impl Into<Cow<'static, str>>) -> Status {
        Status {
            code,
            message: message.into(),
            retry: Retry::No,
            details: None,
        }
    }

    /// Success, with an empty message.
    pub const fn ok() -> Status {
        Status {
            code: Code::OK,
            message: Cow::Borrowed(""),
            retry: Retry::No,
            details: None,
        }
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message (may be empty).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the code is [`Code::OK`].
    pub fn is_ok(&self) -> bool {
        self.code == Code::OK
    }

    /// Whether the peer provably did not process the call, so sending it
    /// again cannot run it twice (the stream was refused, or opened above
    /// the id of the peer's `GOAWAY`).
    pub fn is_retry_safe(&self) -> bool {
        self.retry != Retry::No
    }

    /// Whether the peer refused this one stream (`REFUSED_STREAM`, e.g. at
    /// its concurrent-stream cap, or a stream above its `GOAWAY`'s last
    /// id), as opposed to a connection that could not open any: a channel
    /// then waits for room on the same connection instead of replacing it.
    /// Implies [`is_retry_safe`](Self::is_retry_safe).
    ///
    /// ```
    /// let s = weft_rpc::Status::unavailable("no connection").retry_safe();
    /// assert!(s.is_retry_safe() && !s.is_stream_refused());
    /// ```
    pub fn is_stream_refused(&self) -> bool {
        self.retry == Retry::StreamRefused
    }

    /// Marks this status retry-safe (see [`Status::is_retry_safe`]), for
    /// a failure built locally where the call provably was not sent (e.g.
    /// a channel with no connection). The mark is not carried on the wire:
    /// a handler returning it reaches the caller unmarked.
    #[must_use]
    pub fn retry_safe(mut self) -> Status {
        if self.retry == Retry::No {
            self.retry = Retry::Safe;
        }
        self
    }

    /// Marks this status as the refusal of one stream (see
    /// [`Status::is_stream_refused`]).
    #[must_use]
    pub(crate) fn stream_refused(mut self) -> Status {
        self.retry = Retry::StreamRefused;
        self
    }

    /// Attaches machine-readable details (bytes the caller decodes; e.g. a
    /// retry delay or a field violation). They travel in the trailers
    /// (docs/PROTOCOL.md 7.5.1), at most [`MAX_DETAILS`] bytes: larger
    /// details are dropped on the wire (the code and message still go).
    #[must_use]
    pub fn with_details(mut self, details: bytes::Bytes) -> Status {
        self.details = Some(Box::new(details));
        self
    }

    /// The details, if any.
    pub fn details(&self) -> Option<&bytes::Bytes> {
        self.details.as_deref()
    }

    constructors! {
        /// [`Code::CANCELLED`]: the caller gave up on the call.
        cancelled => CANCELLED;
        /// [`Code::UNKNOWN`]: an error with no better code (e.g. from another error space).
        unknown => UNKNOWN;
        /// [`Code::INVALID_ARGUMENT`]: the request is wrong whatever the server's state.
        invalid_argument => INVALID_ARGUMENT;
        /// [`Code::DEADLINE_EXCEEDED`]: the deadline passed before the call ended.
        deadline_exceeded => DEADLINE_EXCEEDED;
        /// [`Code::NOT_FOUND`]: the requested entity does not exist.
        not_found => NOT_FOUND;
        /// [`Code::ALREADY_EXISTS`]: the entity the caller tried to create exists.
        already_exists => ALREADY_EXISTS;
        /// [`Code::PERMISSION_DENIED`]: the caller is known but may not do this.
        permission_denied => PERMISSION_DENIED;
        /// [`Code::RESOURCE_EXHAUSTED`]: a quota or limit ran out.
        resource_exhausted => RESOURCE_EXHAUSTED;
        /// [`Code::FAILED_PRECONDITION`]: the system is not in a state that allows this.
        failed_precondition => FAILED_PRECONDITION;
        /// [`Code::ABORTED`]: aborted by a concurrency conflict; retry at a higher level.
        aborted => ABORTED;
        /// [`Code::OUT_OF_RANGE`]: past the valid range (e.g. reading past the end).
        out_of_range => OUT_OF_RANGE;
        /// [`Code::UNIMPLEMENTED`]: the method is not implemented or not supported.
        unimplemented => UNIMPLEMENTED;
        /// [`Code::INTERNAL`]: an invariant broke inside the server.
        internal => INTERNAL;
        /// [`Code::UNAVAILABLE`]: the service cannot be reached now; often transient.
        unavailable => UNAVAILABLE;
        /// [`Code::DATA_LOSS`]: unrecoverable data loss or corruption.
        data_loss => DATA_LOSS;
        /// [`Code::UNAUTHENTICATED`]: the caller has no valid credentials.
        unauthenticated => UNAUTHENTICATED;
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Status");
        d.field("code", &self.code).field("message", &self.message);
        if self.retry != Retry::No {
            d.field("retry", &self.retry);
        }
        if let Some(x) = &self.details {
            d.field("details", x);
        }
        d.finish()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code.name())
        } else {
            write!(f, "{}: {}", self.code.name(), self.message)
        }
    }
}

impl std::error::Error for Status {}

/// A metadata key or value refused locally is the caller's mistake:
/// `INVALID_ARGUMENT`, so `?` works in handlers and call sites alike.
impl From<weft_frame::metadata::InvalidMetadata> for Status {
    fn from(e: weft_frame::metadata::InvalidMetadata) -> Status {
        Status::invalid_argument(e.to_string())
    }
}

/// Largest status details sent, in bytes (the trailers must fit the 16 KiB
/// metadata limit next to an 8 KiB message).
pub const MAX_DETAILS: usize = 4 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_the_known_set_and_keep_unknown_numbers() {
        assert_eq!(Code::OK.name(), "OK");
        assert_eq!(Code::UNAUTHENTICATED.name(), "UNAUTHENTICATED");
        assert_eq!(Code::RESOURCE_EXHAUSTED.name(), "RESOURCE_EXHAUSTED");
        assert_eq!(Code(99).name(), "UNKNOWN_CODE");
        assert_eq!(format!("{:?}", Code(99)), "UNKNOWN_CODE(99)");
        assert_eq!(Code::INTERNAL.to_string(), "INTERNAL(13)");
    }

    #[test]
    fn display_and_predicates() {
        let s = Status::unimplemented("no method \"x\"");
        assert_eq!(s.code(), Code::UNIMPLEMENTED);
        assert_eq!(s.to_string(), "UNIMPLEMENTED: no method \"x\"");
        assert!(!s.is_ok() && !s.is_retry_safe());
        assert_eq!(Status::ok().to_string(), "OK");
        assert!(Status::ok().is_ok());
        let r = Status::unavailable("refused").retry_safe();
        assert!(r.is_retry_safe());
        assert!(!r.is_stream_refused());
        assert!(format!("{r:?}").contains("retry: Safe"));
        assert!(!format!("{s:?}").contains("retry"));
        let refused = Status::unavailable("refused").stream_refused().retry_safe();
        assert!(refused.is_retry_safe() && refused.is_stream_refused());
    }

    #[test]
    fn every_grpc_code_but_ok_has_a_constructor_with_its_name() {
        let all = [
            Status::cancelled("m"),
            Status::unknown("m"),
            Status::invalid_argument("m"),
            Status::deadline_exceeded("m"),
            Status::not_found("m"),
            Status::already_exists("m"),
            Status::permission_denied("m"),
            Status::resource_exhausted("m"),
            Status::failed_precondition("m"),
            Status::aborted("m"),
            Status::out_of_range("m"),
            Status::unimplemented("m"),
            Status::internal("m"),
            Status::unavailable("m"),
            Status::data_loss("m"),
            Status::unauthenticated("m"),
        ];
        let codes: Vec<u32> = all.iter().map(|s| s.code().0).collect();
        assert_eq!(codes, (1..=16).collect::<Vec<u32>>());
        for s in &all {
            assert_eq!(s.message(), "m");
            assert!(
                !s.is_retry_safe(),
                "{s:?}: retry safety is the caller's call"
            );
        }
    }
}
