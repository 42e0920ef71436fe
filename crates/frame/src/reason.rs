//! Wire error codes carried by `RESET` and `GOAWAY`.

/// An error code on the wire: an open newtype, so a code from a newer peer
/// survives and is shown as a number.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    /// Not an error: graceful close.
    pub const NO_ERROR: Reason = Reason(0);
    /// The peer broke the protocol.
    pub const PROTOCOL_ERROR: Reason = Reason(1);
    /// Something went wrong inside the sender.
    pub const INTERNAL_ERROR: Reason = Reason(2);
    /// The peer sent more than its flow-control window allowed.
    pub const FLOW_CONTROL_ERROR: Reason = Reason(3);
    /// The stream was refused before any processing: safe to retry.
    pub const REFUSED_STREAM: Reason = Reason(4);
    /// The stream is no longer wanted (e.g. the caller gave up).
    pub const CANCEL: Reason = Reason(5);
    /// Frame or message larger than allowed.
    pub const FRAME_SIZE_ERROR: Reason = Reason(6);
    /// The peer exceeded a budget (resets, pings, unknown frames...).
    pub const ENHANCE_YOUR_CALM: Reason = Reason(7);
    /// Compression failed (bomb, corrupt data, compressed when not negotiated).
    pub const COMPRESSION_ERROR: Reason = Reason(8);
    /// The connection is idle or a keepalive went unanswered.
    pub const TIMEOUT: Reason = Reason(9);
    /// Stream ids are exhausted; open a new connection.
    pub const STREAM_IDS_EXHAUSTED: Reason = Reason(10);
    /// A stream frame arrived after the stream was closed by its sender.
    pub const STREAM_CLOSED: Reason = Reason(11);

    /// A short upper-case name, or `"UNKNOWN"`.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "NO_ERROR",
            1 => "PROTOCOL_ERROR",
            2 => "INTERNAL_ERROR",
            3 => "FLOW_CONTROL_ERROR",
            4 => "REFUSED_STREAM",
            5 => "CANCEL",
            6 => "FRAME_SIZE_ERROR",
            7 => "ENHANCE_YOUR_CALM",
            8 => "COMPRESSION_ERROR",
            9 => "TIMEOUT",
            10 => "STREAM_IDS_EXHAUSTED",
            11 => "STREAM_CLOSED",
            _ => "UNKNOWN",
        }
    }
}

impl std::fmt::Debug for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}
