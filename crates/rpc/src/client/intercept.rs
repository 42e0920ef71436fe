//! Client interceptors: closures every call of a caller passes before it
//! is sent, to add metadata (a token, a request id) or refuse the call.
//! [`ClientInterceptors`] is the stack a [`Client`](crate::client::Client) or a
//! `Channel` holds; [`Outgoing`] is what one interceptor sees.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::options::CallOptions;
use crate::status::Status;

type Hook = dyn Fn(&mut Outgoing<'_>) -> Result<(), Status> + Send + Sync;

/// A call about to be sent, as a client interceptor sees it: its method
/// and its options, whose metadata the interceptor may change.
#[derive(Debug)]
pub struct Outgoing<'a> {
    method: &'a str,
    options: &'a mut CallOptions,
}

impl Outgoing<'_> {
    /// The method, as the caller spelled it.
    pub fn method(&self) -> &str {
        self.method
    }

    /// The call's options (deadline, timeout, metadata).
    pub fn options(&self) -> &CallOptions {
        self.options
    }

    /// The value of metadata entry `key`, if the call has one.
    pub fn metadata(&self, key: &[u8]) -> Option<&[u8]> {
        self.options.metadata_value(key)
    }

    /// Sets metadata entry `key` (replacing the call's own), sent to the
    /// server like an entry of [`CallOptions::metadata`].
    pub fn set_metadata(&mut self, key: &[u8], value: &[u8]) {
        self.options.set_metadata(key, value);
    }
}

/// The client interceptors of a caller, run in the order they were added.
/// Cheap to clone (one shared list); empty by default, which costs a call
/// one branch.
#[derive(Clone, Default)]
pub struct ClientInterceptors(Option<Arc<Hook>>);

impl fmt::Debug for ClientInterceptors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientInterceptors")
            .field("any", &self.0.is_some())
            .finish()
    }
}

impl ClientInterceptors {
    /// No interceptor.
    pub fn new() -> ClientInterceptors {
        ClientInterceptors::default()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Adds `hook`, run after the ones already here. The list is shared
    /// copy-on-add: clones made before keep the old list.
    pub fn push<F>(&mut self, hook: F)
    where
        F: Fn(&mut Outgoing<'_>) -> Result<(), Status> + Send + Sync + 'static,
    {
        let hook: Arc<Hook> = match self.0.take() {
            None => Arc::new(hook),
            Some(before) => Arc::new(move |call: &mut Outgoing<'_>| {
                before(call)?;
                hook(call)
            }),
        };
        self.0 = Some(hook);
    }

    /// Runs every interceptor on a call of `method` with `options`: the
    /// options to send, or the status that refuses the call. Without
    /// interceptors, `options` as they are.
    ///
    /// Inlined: a client without interceptors (the usual one) pays a
    /// branch per call, not a call moving the options in and out.
    #[inline]
    pub fn apply<'o>(
        &self,
        method: &str,
        options: Cow<'o, CallOptions>,
    ) -> Result<Cow<'o, CallOptions>, Status> {
        match &self.0 {
            None => Ok(options),
            Some(hook) => run(hook.as_ref(), method, options),
        }
    }
}

/// [`ClientInterceptors::apply`] with interceptors: `hook` runs on an
/// owned copy of the options.
#[inline(never)]
fn run<'o>(
    hook: &Hook,
    method: &str,
    options: Cow<'o, CallOptions>,
) -> Result<Cow<'o, CallOptions>, Status> {
    let mut options = options.into_owned();
    hook(&mut Outgoing {
        method,
        options: &mut options,
    })?;
    Ok(Cow::Owned(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interceptors_run_in_order_and_a_refusal_stops_the_rest() {
        let mut stack = ClientInterceptors::new();
        assert!(stack.is_empty());
        let plain = CallOptions::new();
        assert!(matches!(
            stack.apply("m", Cow::Borrowed(&plain)),
            Ok(Cow::Borrowed(_))
        ));
        stack.push(|c| {
            c.set_metadata(b"k", b"1");
            Ok(())
        });
        let before = stack.clone();
        stack.push(|c| {
            assert_eq!(c.metadata(b"k"), Some(&b"1"[..]));
            c.set_metadata(b"k", b"2");
            if c.method() == "no" {
                return Err(Status::new(
                    crate::status::Code::UNAUTHENTICATED,
                    "no token",
                ));
            }
            Ok(())
        });
        let out = stack.apply("m", Cow::Borrowed(&plain)).unwrap();
        assert_eq!(out.metadata_value(b"k"), Some(&b"2"[..]));
        let out = before.apply("m", Cow::Borrowed(&plain)).unwrap();
        assert_eq!(
            out.metadata_value(b"k"),
            Some(&b"1"[..]),
            "clones keep theirs"
        );
        let e = stack.apply("no", Cow::Borrowed(&plain)).unwrap_err();
        assert_eq!(e.message(), "no token");
    }
}
