//! [`Fixed`]: a call's options as every attempt of it sends them, kept
//! small because every call future holds them from start to end.
//!
//! Most calls set no deadline and pass no interceptor, so their options
//! are the caller's own, borrowed: 8 bytes where a `Result<Cow<CallOptions>,
//! Status>` took 64, in a future that is copied whenever it moves (into a
//! join, a spawn) and whose allocation size decides the allocator's path.

use weft_rpc::{CallOptions, Status};

/// A call's options after the channel's interceptors and deadline, or the
/// interceptor's refusal. 16 bytes.
///
/// The rare cases share one box, so that dropping the common one is a
/// test of the tag and nothing more (two boxes of different types made
/// the drop a call of its own on every call).
#[derive(Debug)]
pub(super) enum Fixed<'o> {
    /// The caller's options, unchanged (the common case: no interceptor,
    /// no deadline to fix).
    Caller(&'o CallOptions),
    /// Options an interceptor or the deadline changed, or the refusal
    /// (the rare cases pay one allocation; the common one stays small).
    Own(Box<Own>),
}

/// What a [`Fixed`] owns.
#[derive(Debug)]
pub(super) enum Own {
    /// Options an interceptor or the deadline changed.
    Changed(CallOptions),
    /// An interceptor refused the call: its error.
    Refused(Status),
}

impl Fixed<'_> {
    /// Options an interceptor or the deadline changed.
    pub(super) fn changed(opts: CallOptions) -> Self {
        Fixed::Own(Box::new(Own::Changed(opts)))
    }

    /// An interceptor's refusal.
    pub(super) fn refused(status: Status) -> Self {
        Fixed::Own(Box::new(Own::Refused(status)))
    }

    /// The options every attempt sends, or the refusal (cloned: rare, and
    /// the call's only clone of it).
    #[inline]
    pub(super) fn options(&self) -> Result<&CallOptions, Status> {
        match self {
            Fixed::Caller(opts) => Ok(opts),
            Fixed::Own(own) => match &**own {
                Own::Changed(opts) => Ok(opts),
                Own::Refused(status) => Err(status.clone()),
            },
        }
    }

    /// Drops these options at the end of a call that succeeded. The
    /// common call's are borrowed and need nothing; left to the future's
    /// end, they would be dropped by a call to the drop of both kinds.
    #[inline]
    pub(super) fn finish(self) {
        match self {
            Fixed::Caller(_) => {}
            Fixed::Own(own) => drop_own(own),
        }
    }

    /// The options every attempt sends, for a call past its start (where
    /// [`options`](Self::options) gave them): read again at each try
    /// rather than kept beside these. A refused call never gets that far;
    /// its options here are empty.
    #[inline]
    pub(super) fn sent(&self) -> &CallOptions {
        match self {
            Fixed::Caller(opts) => opts,
            Fixed::Own(own) => match &**own {
                Own::Changed(opts) => opts,
                Own::Refused(_) => CallOptions::none(),
            },
        }
    }
}

/// Drops what a rare call's options owned, out of the common call's way.
#[cold]
#[inline(never)]
fn drop_own(own: Box<Own>) {
    drop(own);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_call_holds_sixteen_bytes_and_gives_back_what_it_holds() {
        assert_eq!(std::mem::size_of::<Fixed<'_>>(), 16);
        let mine = CallOptions::new().metadata(b"k", b"v");
        let fixed = Fixed::Caller(&mine);
        assert!(std::ptr::eq(fixed.options().unwrap(), &mine));
        assert!(std::ptr::eq(fixed.sent(), &mine));
        let changed = Fixed::changed(mine.clone().idempotent());
        for opts in [changed.options().unwrap(), changed.sent()] {
            assert_eq!(opts.idempotency(), weft_rpc::Idempotency::Idempotent);
        }
        let refused = Fixed::refused(Status::internal("no"));
        assert_eq!(refused.options().unwrap_err().message(), "no");
        assert!(std::ptr::eq(refused.sent(), CallOptions::none()));
    }
}
