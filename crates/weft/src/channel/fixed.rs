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
#[derive(Debug)]
pub(super) enum Fixed<'o> {
    /// The caller's options, unchanged (the common case: no interceptor,
    /// no deadline to fix).
    Caller(&'o CallOptions),
    /// Options an interceptor or the deadline changed, boxed (the rare
    /// case pays one allocation; the common one stays small).
    Changed(Box<CallOptions>),
    /// An interceptor refused the call: its error, boxed as rare.
    Refused(Box<Status>),
}

impl Fixed<'_> {
    /// The options every attempt sends, or the refusal (cloned: rare, and
    /// the call's only clone of it).
    #[inline]
    pub(super) fn options(&self) -> Result<&CallOptions, Status> {
        match self {
            Fixed::Caller(opts) => Ok(opts),
            Fixed::Changed(opts) => Ok(opts),
            Fixed::Refused(status) => Err((**status).clone()),
        }
    }
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
        let changed = Fixed::Changed(Box::new(mine.clone().idempotent()));
        assert_eq!(
            changed.options().unwrap().idempotency(),
            weft_rpc::Idempotency::Idempotent
        );
        let refused = Fixed::Refused(Box::new(Status::internal("no")));
        assert_eq!(refused.options().unwrap_err().message(), "no");
    }
}
