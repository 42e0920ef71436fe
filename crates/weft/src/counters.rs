//! Connection-level counters through the `metrics` facade (recorded only
//! if the application installed a recorder, and not at all with
//! [`Metrics::Off`](crate::Metrics::Off)):
//!
//! | metric | labels | counts |
//! |---|---|---|
//! | `weft_handshake_failures_total` | `side` (`client`, `server`), `reason` | handshakes that failed, by [`handshake_reason`] |
//! | `weft_admission_refusals_total` | `reason` (`connection_cap`, `per_address`, `evicted`) | connections the server refused or evicted before they were established (retry-safe while still in the handshake) |
//!
//! With the call metrics (`weft_rpc_*`, including open connections and
//! calls in flight), key updates (`weft_key_updates_total`, from
//! weft-transform) and refused streams (`weft_streams_refused_total`, from
//! weft-mux), these are the whole set; docs/FAQ.md lists them all.

use weft_transform::HandshakeError;

use crate::Error;
use crate::admission::Refusal;

/// Which end of a handshake failed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side {
    Client,
    Server,
}

/// Counts a failed handshake (unless metrics are off).
pub(crate) fn handshake_failed(config: &crate::Config, side: Side, e: &Error) {
    if config.metrics_mode() == crate::Metrics::Off {
        return;
    }
    let side = match side {
        Side::Client => "client",
        Side::Server => "server",
    };
    metrics::counter!("weft_handshake_failures_total", "side" => side, "reason" => handshake_reason(e))
        .increment(1);
}

/// Counts a connection refused by admission (unless metrics are off).
pub(crate) fn refused(config: &crate::Config, why: Refusal) {
    if config.metrics_mode() == crate::Metrics::Off {
        return;
    }
    let reason = match why {
        Refusal::ConnectionCap => "connection_cap",
        Refusal::PerAddress => "per_address",
        Refusal::Evicted => "evicted",
    };
    metrics::counter!("weft_admission_refusals_total", "reason" => reason).increment(1);
}

/// A handshake failure's `reason` label, one of a fixed few so the
/// series stay bounded:
///
/// - `timeout`: the handshake deadline passed;
/// - `refused`: the server refused us before the handshake (retry-safe);
/// - `authentication`: keys did not match (pre-shared key, pinned key);
/// - `key_not_allowed`: a static key not on the allow-list;
/// - `policy`: the two configurations cannot agree (encryption, keys);
/// - `protocol`: the peer does not speak weft (preface, version, framing);
/// - `config`: our own configuration is unusable;
/// - `transport`: the connection failed or ended mid-handshake;
/// - `other`: anything else.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // A server that is not weft: the handshake fails on its first bytes.
/// let (mut a, b) = tokio::io::duplex(1024);
/// tokio::spawn(async move {
///     use tokio::io::AsyncWriteExt;
///     a.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await.unwrap();
/// });
/// let e = weft::connect_io(b, &weft::Config::new()).await.unwrap_err();
/// assert_eq!(weft::handshake_reason(&e), "protocol");
/// # }
/// ```
pub fn handshake_reason(e: &Error) -> &'static str {
    let m = match e {
        Error::Connection(m) => m,
        Error::Io(_) | Error::Connect(_) => return "transport",
        _ => return "other",
    };
    if m.is_timeout() {
        return "timeout";
    }
    let handshake = std::error::Error::source(m).and_then(|s| s.downcast_ref::<HandshakeError>());
    let Some(h) = handshake else {
        return if m.is_closed() { "transport" } else { "other" };
    };
    if h.is_refused() {
        "refused"
    } else if h.is_authentication() {
        "authentication"
    } else if h.rejected_key().is_some() {
        "key_not_allowed"
    } else if h.is_policy_conflict() {
        "policy"
    } else if h.is_protocol() {
        "protocol"
    } else if h.is_config() {
        "config"
    } else {
        "other"
    }
}
