//! Flow-control windows (section 6.4 of the protocol), one type per
//! direction: every change to a window goes through these, so the debit,
//! the credit and the grant-back rule are each written once.
//!
//! Both are plain integers with the arithmetic inlined: a debit is one
//! subtraction, a grant one addition and a comparison, exactly as written
//! out before.

use crate::config::MAX_WINDOW;

/// The credit the peer gave us: how many more flow-controlled bytes we may
/// send. Signed, so a credit beyond [`MAX_WINDOW`] is caught before it can
/// wrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendWindow(i64);

/// A credit would take a send window past [`MAX_WINDOW`].
#[derive(Debug)]
pub(crate) struct Overflow;

impl SendWindow {
    pub(crate) fn new(window: u32) -> SendWindow {
        SendWindow(i64::from(window))
    }

    /// The credit left, as announced (for statistics).
    #[inline]
    pub(crate) fn get(self) -> i64 {
        self.0
    }

    /// Whether nothing may be sent.
    #[inline]
    pub(crate) fn is_blocked(self) -> bool {
        self.0 <= 0
    }

    /// How many bytes may go out under both this window and `other` (the
    /// stream's and the connection's).
    #[inline]
    pub(crate) fn room_with(self, other: SendWindow) -> usize {
        self.0.min(other.0).max(0) as usize
    }

    /// Whether `n` bytes fit under both this window and `other`.
    #[inline]
    pub(crate) fn fits_with(self, other: SendWindow, n: usize) -> bool {
        (n as i64) <= self.0.min(other.0)
    }

    /// `n` bytes were sent.
    #[inline]
    pub(crate) fn debit(&mut self, n: usize) {
        self.0 -= n as i64;
    }

    /// `n` bytes were sent on a stream with this window: debited from it
    /// and from the connection's window `conn`.
    #[inline]
    pub(crate) fn debit_with(&mut self, conn: &mut SendWindow, n: usize) {
        self.debit(n);
        conn.debit(n);
    }

    /// The peer's settings moved the initial stream window by `delta`
    /// (from the baseline to the announced window: at most [`MAX_WINDOW`]
    /// in all, so this cannot overflow).
    #[inline]
    pub(crate) fn resize(&mut self, delta: i64) {
        self.0 += delta;
    }

    /// The peer's `WINDOW_UPDATE` added `inc`.
    #[inline]
    pub(crate) fn credit(&mut self, inc: i64) -> Result<(), Overflow> {
        self.0 += inc;
        if self.0 > i64::from(MAX_WINDOW) {
            return Err(Overflow);
        }
        Ok(())
    }
}

/// A receive window's consumed bytes are granted back once they reach
/// this fraction of it: a quarter, as grpc-go (`inFlow`). The sender then
/// never has more than a quarter of the window waiting for credit that
/// its bytes have earned, so a window about the bandwidth-delay product
/// keeps the link busy; at a half (h2's rule) a window must be about
/// twice that, and what it lets the sender queue ahead of a small call on
/// a link whose buffers take it (loopback) doubles too. A grant is one
/// `WINDOW_UPDATE` per quarter window of a transfer; small calls never
/// consume a quarter of a window and send none.
pub(crate) const GRANT_FRACTION: u32 = 4;

/// The credit we gave the peer, and what it spent that the application
/// has consumed but we have not granted back yet.
///
/// `size` is the window granted so far (credit + bytes buffered + bytes
/// unacked). It starts at the announced window and grows when the
/// session's window target does (bandwidth-delay estimates, `bdp.rs`):
/// the growth is granted with the next `WINDOW_UPDATE`, as extra credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecvWindow {
    /// Bytes the peer may still send.
    credit: u32,
    /// Bytes consumed locally and not yet granted back.
    unacked: u32,
    /// The window granted so far.
    size: u32,
}

/// The peer sent more than its credit.
#[derive(Debug)]
pub(crate) struct Exceeded;

impl RecvWindow {
    pub(crate) fn new(window: u32) -> RecvWindow {
        RecvWindow {
            credit: window,
            unacked: 0,
            size: window,
        }
    }

    /// Bytes the peer may still send.
    #[inline]
    pub(crate) fn credit(self) -> u32 {
        self.credit
    }

    /// Bytes consumed and not yet granted back.
    #[inline]
    pub(crate) fn unacked(self) -> u32 {
        self.unacked
    }

    /// The window granted so far.
    #[inline]
    pub(crate) fn size(self) -> u32 {
        self.size
    }

    /// Whether the peer holds less than half the window in credit: it is
    /// using the window (what a bandwidth probe waits for).
    #[inline]
    pub(crate) fn under_pressure(self) -> bool {
        self.credit < self.size / 2
    }

    /// The peer sent `n` bytes: taken from its credit, or refused whole if
    /// they are more than it has.
    #[inline]
    pub(crate) fn debit(&mut self, n: u32) -> Result<(), Exceeded> {
        if n > self.credit {
            return Err(Exceeded);
        }
        self.credit -= n;
        Ok(())
    }

    /// The application consumed `n` bytes: once a quarter of the window
    /// is consumed ([`GRANT_FRACTION`]), all of it is granted back at once, with the window raised
    /// to `target` if that is larger, and the increment to announce in a
    /// `WINDOW_UPDATE` is returned.
    #[inline]
    pub(crate) fn consume(&mut self, n: u32, target: u32) -> Option<u32> {
        if self.hold(n) {
            return None;
        }
        Some(self.grant(target))
    }

    /// [`consume`](Self::consume)'s first half: counts `n` consumed bytes
    /// and says whether they stay unannounced (less than a quarter of the window
    /// is consumed), so a caller can test that before it works out the
    /// `target` of a [`grant`](Self::grant).
    #[inline(always)]
    pub(crate) fn hold(&mut self, n: u32) -> bool {
        self.unacked += n;
        self.unacked < self.size / GRANT_FRACTION
    }

    /// [`consume`](Self::consume)'s second half, once [`hold`](Self::hold)
    /// said no: everything consumed is granted back, with the window
    /// raised to `target` if that is larger; returns the increment.
    #[inline]
    pub(crate) fn grant(&mut self, target: u32) -> u32 {
        let growth = target.saturating_sub(self.size);
        self.size += growth;
        let inc = std::mem::take(&mut self.unacked) + growth;
        self.credit += inc;
        inc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recv_window_refuses_beyond_credit_and_grants_back_at_a_quarter() {
        let mut w = RecvWindow::new(100);
        assert!(w.debit(101).is_err());
        assert_eq!(w.credit(), 100, "a refused debit takes nothing");
        w.debit(100).unwrap();
        assert_eq!(w.credit(), 0);
        assert_eq!(w.consume(24, 100), None);
        assert_eq!((w.credit(), w.unacked()), (0, 24));
        assert_eq!(w.consume(1, 100), Some(25), "exactly a quarter grants");
        assert_eq!((w.credit(), w.unacked()), (25, 0));
    }

    #[test]
    fn a_larger_target_is_granted_with_the_next_grant_back() {
        let mut w = RecvWindow::new(100);
        w.debit(100).unwrap();
        // A target above the window does not move the quarter-window rule
        // (small streams send no extra update) ...
        assert_eq!(w.consume(24, 300), None);
        // ... and the grant then carries the growth: 25 back + 200 more.
        assert_eq!(w.consume(1, 300), Some(225));
        assert_eq!((w.credit(), w.size()), (225, 300));
        // The next grant uses the grown window's quarter.
        w.debit(225).unwrap();
        assert_eq!(w.consume(74, 300), None);
        assert_eq!(w.consume(1, 300), Some(75));
        assert_eq!(w.consume(75, 300), Some(75));
        assert!(!w.under_pressure(), "150 of 300 left is not under half");
        w.debit(1).unwrap();
        assert!(w.under_pressure());
    }

    #[test]
    fn send_window_room_is_the_smaller_and_never_negative() {
        let (mut a, b) = (SendWindow::new(10), SendWindow::new(4));
        assert_eq!(a.room_with(b), 4);
        assert!(a.fits_with(b, 4) && !a.fits_with(b, 5));
        a.debit(12);
        assert_eq!((a.get(), a.room_with(b)), (-2, 0));
        assert!(a.is_blocked());
        a.credit(3).unwrap();
        assert!(!a.is_blocked());
        let mut w = SendWindow::new(MAX_WINDOW);
        assert!(w.credit(0).is_ok());
        assert!(w.credit(1).is_err(), "one past the maximum");
    }
}
