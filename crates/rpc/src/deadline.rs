//! Deadlines on the wire: the caller's remaining time travels as a duration
//! (the `timeout` metadata entry, u64 microseconds), never as a wall-clock
//! instant, so the two clocks need not agree.
//!
//! The receiver turns it back into a local [`Instant`] the moment the call
//! arrives. Values that cannot be a sensible remaining time are refused with
//! `INVALID_ARGUMENT` on that call only: anything above [`MAX_TIMEOUT`], and
//! in particular values with the top bit set (what a peer that encoded a
//! negative signed number would send).

use std::time::Duration;

use tokio::time::Instant;
use weft_frame::Metadata;

use crate::status::Status;

/// The longest timeout a call may carry: 7 days. Longer values are refused
/// (`INVALID_ARGUMENT`), on both the sending and the receiving side.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Checks a timeout a caller wants to send.
pub fn check_outgoing(timeout: Duration) -> Result<Duration, Status> {
    if timeout > MAX_TIMEOUT {
        return Err(Status::invalid_argument(
            "timeout longer than the 7-day maximum",
        ));
    }
    Ok(timeout)
}

/// Reads and validates the timeout of an incoming call, in microseconds.
pub fn from_micros(micros: u64) -> Result<Duration, Status> {
    if micros > i64::MAX as u64 {
        return Err(Status::invalid_argument("negative timeout"));
    }
    let d = Duration::from_micros(micros);
    check_outgoing(d).map_err(|_| Status::invalid_argument("timeout longer than the 7-day maximum"))
}

/// The deadline of an incoming call whose metadata arrived at `now`:
/// `Ok(None)` when it carries no timeout.
pub fn incoming(metadata: &Metadata, now: Instant) -> Result<Option<Instant>, Status> {
    from_timeout(metadata.timeout_micros(), now)
}

/// [`incoming`] for a timeout already read from the metadata.
pub(crate) fn from_timeout(micros: Option<u64>, now: Instant) -> Result<Option<Instant>, Status> {
    match micros {
        None => Ok(None),
        Some(micros) => Ok(Some(now + from_micros(micros)?)),
    }
}

/// When the calls of one batch arrived. The server reads the clock at
/// most once per batch, the calls it accepts one after another without
/// waiting for the socket (what one read brought in), and only for a call
/// that carries a timeout; every call of the batch counts its deadline
/// from that instant. A call queued behind a slow handler of its batch
/// so counts the time it waited, as its caller's clock does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// A new batch: the clock has not been read for it yet.
    Unread,
    /// The batch arrived at this instant.
    At(Instant),
}

impl Arrival {
    /// The batch's instant, reading the clock if no call of it has.
    pub(crate) fn now(&mut self) -> Instant {
        match *self {
            Arrival::At(t) => t,
            Arrival::Unread => {
                let t = Instant::now();
                *self = Arrival::At(t);
                t
            }
        }
    }
}

/// The timeout to send for a call whose deadline is `deadline`, seen at
/// `now`: the remaining time, or `DEADLINE_EXCEEDED` if none is left.
pub fn remaining(deadline: Instant, now: Instant) -> Result<Duration, Status> {
    let left = deadline.saturating_duration_since(now);
    if left.is_zero() {
        return Err(Status::deadline_exceeded(
            "deadline passed before the call was sent",
        ));
    }
    check_outgoing(left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Code;

    fn meta_with(micros: u64) -> Metadata {
        // The builder takes a Duration; build the raw entry so any u64 fits.
        Metadata::builder()
            .raw(
                weft_frame::metadata::tag::TIMEOUT,
                &[],
                &micros.to_be_bytes(),
            )
            .finish()
    }

    #[test]
    fn no_timeout_means_no_deadline() {
        let now = Instant::now();
        assert_eq!(incoming(&Metadata::new(), now).unwrap(), None);
    }

    #[test]
    fn sane_timeouts_become_local_deadlines() {
        let now = Instant::now();
        let d = incoming(&meta_with(1_500_000), now).unwrap().unwrap();
        assert_eq!(d - now, Duration::from_millis(1500));
        let max = MAX_TIMEOUT.as_micros() as u64;
        assert_eq!(
            incoming(&meta_with(max), now).unwrap().unwrap() - now,
            MAX_TIMEOUT
        );
        // Zero is a valid value: the call is already late.
        assert_eq!(incoming(&meta_with(0), now).unwrap(), Some(now));
    }

    #[test]
    fn negative_and_huge_timeouts_are_invalid_argument() {
        let now = Instant::now();
        let max = MAX_TIMEOUT.as_micros() as u64;
        for bad in [max + 1, u64::MAX, 1 << 63, (-1i64) as u64, i64::MAX as u64] {
            let e = incoming(&meta_with(bad), now).unwrap_err();
            assert_eq!(e.code(), Code::INVALID_ARGUMENT, "{bad}");
        }
        assert!(
            from_micros(u64::MAX)
                .unwrap_err()
                .message()
                .contains("negative")
        );
        assert!(check_outgoing(MAX_TIMEOUT + Duration::from_micros(1)).is_err());
        assert_eq!(check_outgoing(MAX_TIMEOUT).unwrap(), MAX_TIMEOUT);
    }

    #[test]
    fn remaining_time_is_propagated_or_already_exceeded() {
        let now = Instant::now();
        let later = now + Duration::from_millis(250);
        assert_eq!(remaining(later, now).unwrap(), Duration::from_millis(250));
        let e = remaining(now, later).unwrap_err();
        assert_eq!(e.code(), Code::DEADLINE_EXCEEDED);
        assert_eq!(
            remaining(now, now).unwrap_err().code(),
            Code::DEADLINE_EXCEEDED
        );
    }
}
