//! Per-call options: deadline, custom metadata and idempotency.

use std::borrow::Cow;
use std::time::Duration;

use tokio::time::Instant;
use weft_frame::Metadata;
use weft_frame::metadata::{InvalidMetadata, Key, Kind};

use crate::deadline;
use crate::status::Status;

/// A custom metadata entry: key and value.
pub(crate) type Entry = (Box<[u8]>, Box<[u8]>);

/// Whether a call may run more than once on the server without harm: what
/// a client that retries (the `weft` facade's `Channel`) reads before
/// sending again a call that failed after it was sent. It stays on the
/// client: nothing of it goes on the wire. (gRPC's `idempotency_level`
/// has one more level, `NO_SIDE_EFFECTS`; hence `non_exhaustive`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Idempotency {
    /// Not declared: sent again only when the server certainly did not
    /// run it (a retry-safe refusal).
    #[default]
    Unknown,
    /// Declared idempotent (`#[weft(idempotent)]` on a service method,
    /// or [`CallOptions::idempotent`]): also sent again when it failed
    /// `UNAVAILABLE` after being sent (its connection died mid-call).
    Idempotent,
}

/// Options for one outgoing call.
///
/// A call's deadline is the earlier of [`deadline`](Self::deadline) and
/// now + [`timeout`](Self::timeout); it travels to the server as the time
/// remaining, and both sides enforce it. Without either, the client's
/// default timeout (if any) applies.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    deadline: Option<Instant>,
    timeout: Option<Duration>,
    metadata: Vec<Entry>,
    idempotency: Idempotency,
}

impl CallOptions {
    /// No deadline, no metadata, not declared idempotent.
    pub const fn new() -> CallOptions {
        CallOptions {
            deadline: None,
            timeout: None,
            metadata: Vec::new(),
            idempotency: Idempotency::Unknown,
        }
    }

    /// The empty options ([`new`](Self::new)) as a shared reference, for
    /// a call whose future may outlive the caller's frame (a temporary
    /// `&CallOptions::new()` could not be returned in it).
    pub fn none() -> &'static CallOptions {
        static NONE: CallOptions = CallOptions::new();
        &NONE
    }

    /// Declares the call idempotent ([`Idempotency::Idempotent`]): a
    /// `Channel` may send it again if it fails `UNAVAILABLE` after being
    /// sent, so the server may run it more than once. A
    /// `#[weft::service]` client sets this itself for a method declared
    /// `#[weft(idempotent)]`.
    #[must_use]
    pub fn idempotent(mut self) -> CallOptions {
        self.idempotency = Idempotency::Idempotent;
        self
    }

    /// Whether the call is declared idempotent.
    pub fn idempotency(&self) -> Idempotency {
        self.idempotency
    }

    /// These options declared idempotent, for a call made now: borrowed
    /// when nothing changes (empty options become a shared static), else a
    /// copy whose timeout is also fixed as a deadline from now, so that it
    /// counts from this call even if the call starts later. What a
    /// `#[weft(idempotent)]` method's generated client calls with.
    pub fn to_idempotent(&self) -> Cow<'_, CallOptions> {
        static IDEMPOTENT: CallOptions = CallOptions::new().const_idempotent();
        match (self.idempotency, self.timeout) {
            (Idempotency::Idempotent, None) => Cow::Borrowed(self),
            (Idempotency::Unknown, None) if self.is_plain() => Cow::Borrowed(&IDEMPOTENT),
            (_, timeout) => {
                let mut o = self.clone().idempotent();
                if let Some(t) = timeout {
                    let at = Instant::now().checked_add(t);
                    o.deadline = match (o.deadline, at) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Cow::Owned(o)
            }
        }
    }

    /// [`idempotent`](Self::idempotent), in a constant.
    const fn const_idempotent(mut self) -> CallOptions {
        self.idempotency = Idempotency::Idempotent;
        self
    }

    /// Give up after `timeout`, counted from when the call starts. Longer
    /// than [`deadline::MAX_TIMEOUT`] fails the call with `INVALID_ARGUMENT`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> CallOptions {
        self.timeout = Some(timeout);
        self
    }

    /// Give up at `at` (e.g. a handler's own deadline; see
    /// `Context::call_options`).
    #[must_use]
    pub fn deadline(mut self, at: Instant) -> CallOptions {
        self.deadline = Some(at);
        self
    }

    /// Adds a custom metadata entry (key 1–255 bytes; an empty key is
    /// skipped), visible to the handler through `Context::metadata`.
    #[must_use]
    pub fn metadata(mut self, key: &[u8], value: &[u8]) -> CallOptions {
        self.metadata.push((key.into(), value.into()));
        self
    }

    /// Adds a custom metadata entry under a typed key, its value checked
    /// against the key's kind: visible ASCII for an [`Ascii`] key, any
    /// bytes for a [`Binary`] (`-bin`) one. A bad value is refused with a
    /// typed error (nothing is sent); a bad name was refused when the key
    /// was made.
    ///
    /// ```
    /// use weft_rpc::{Ascii, Binary, CallOptions, InvalidMetadata, MetadataKey};
    ///
    /// const REQUEST_ID: MetadataKey<Ascii> = MetadataKey::from_static("x-request-id");
    /// const TOKEN: MetadataKey<Binary> = MetadataKey::from_static("token-bin");
    ///
    /// let opts = CallOptions::new()
    ///     .insert(&REQUEST_ID, "r-42")?
    ///     .insert(&TOKEN, &[0, 0xff][..])?;
    /// assert!(matches!(
    ///     CallOptions::new().insert(&REQUEST_ID, "line\nbreak"),
    ///     Err(InvalidMetadata::ValueByte { at: 4, .. })
    /// ));
    /// assert!(MetadataKey::<Ascii>::new("Not Valid").is_err());
    /// # let _ = opts;
    /// # Ok::<(), InvalidMetadata>(())
    /// ```
    ///
    /// [`Ascii`]: crate::Ascii
    /// [`Binary`]: crate::Binary
    pub fn insert<K: Kind>(
        mut self,
        key: &Key<K>,
        value: &K::Value,
    ) -> Result<CallOptions, InvalidMetadata> {
        let value = K::encode(value)?;
        self.metadata.push((key.as_bytes().into(), value.into()));
        Ok(self)
    }

    /// The explicit deadline, if set.
    pub fn deadline_at(&self) -> Option<Instant> {
        self.deadline
    }

    /// The timeout, if set.
    pub fn timeout_value(&self) -> Option<Duration> {
        self.timeout
    }

    /// The value of custom entry `key`, if set.
    pub(crate) fn metadata_value(&self, key: &[u8]) -> Option<&[u8]> {
        self.metadata
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &**v)
    }

    /// Sets custom entry `key`, replacing an earlier one.
    pub(crate) fn set_metadata(&mut self, key: &[u8], value: &[u8]) {
        self.metadata.retain(|(k, _)| &**k != key);
        self.metadata.push((key.into(), value.into()));
    }

    /// Whether the call needs metadata beyond its method name.
    pub(crate) fn is_plain(&self) -> bool {
        self.deadline.is_none() && self.timeout.is_none() && self.metadata.is_empty()
    }

    /// The effective deadline of a call starting at `now`.
    pub(crate) fn effective_deadline(
        &self,
        now: Instant,
        default_timeout: Option<Duration>,
    ) -> Result<Option<Instant>, Status> {
        let timeout = match self.timeout.or(if self.deadline.is_none() {
            default_timeout
        } else {
            None
        }) {
            Some(t) => Some(now + deadline::check_outgoing(t)?),
            None => None,
        };
        Ok(match (self.deadline, timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// The `OPEN` metadata for `method` (canonical) with this deadline,
    /// naming the call's codec if it is typed.
    pub(crate) fn open_metadata(
        &self,
        method: &str,
        deadline: Option<Instant>,
        now: Instant,
        codec: Option<&str>,
    ) -> Result<Metadata, Status> {
        let timeout = match deadline {
            Some(d) => Some(deadline::remaining(d, now)?),
            None => None,
        };
        Ok(crate::codec::metadata_in_arena(|mut b| {
            b = b.method(method);
            if let Some(c) = codec {
                b = b.codec(c);
            }
            if let Some(t) = timeout {
                b = b.timeout(t);
            }
            for (k, v) in &self.metadata {
                b = b.custom(k, v);
            }
            b
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Code;

    #[test]
    fn effective_deadline_is_the_earlier_one() {
        let now = Instant::now();
        let o = CallOptions::new();
        assert!(o.is_plain());
        assert_eq!(o.effective_deadline(now, None).unwrap(), None);
        let s = Duration::from_secs(1);
        assert_eq!(o.effective_deadline(now, Some(s)).unwrap(), Some(now + s));
        let o = CallOptions::new().timeout(2 * s);
        assert!(!o.is_plain());
        assert_eq!(o.timeout_value(), Some(2 * s));
        assert_eq!(
            o.effective_deadline(now, Some(s)).unwrap(),
            Some(now + 2 * s)
        );
        let o = CallOptions::new().timeout(2 * s).deadline(now + s);
        assert_eq!(o.effective_deadline(now, None).unwrap(), Some(now + s));
        let o = CallOptions::new().deadline(now + 3 * s);
        // An explicit deadline replaces the client's default timeout.
        assert_eq!(
            o.effective_deadline(now, Some(s)).unwrap(),
            Some(now + 3 * s)
        );
        let o = CallOptions::new().timeout(deadline::MAX_TIMEOUT + s);
        assert_eq!(
            o.effective_deadline(now, None).unwrap_err().code(),
            Code::INVALID_ARGUMENT
        );
    }

    #[test]
    fn idempotent_options_keep_the_rest_and_their_timeout_counts_from_now() {
        let o = CallOptions::new();
        assert_eq!(o.idempotency(), Idempotency::Unknown);
        let i = o.to_idempotent();
        assert!(matches!(i, Cow::Borrowed(_)) && i.is_plain());
        assert_eq!(i.idempotency(), Idempotency::Idempotent);
        let marked = CallOptions::new().idempotent();
        assert!(matches!(marked.to_idempotent(), Cow::Borrowed(b) if std::ptr::eq(b, &marked)));

        let s = Duration::from_secs(5);
        let before = Instant::now();
        let o = CallOptions::new().metadata(b"k", b"v").timeout(s);
        let i = o.to_idempotent();
        assert_eq!(i.idempotency(), Idempotency::Idempotent);
        assert_eq!(i.metadata_value(b"k"), Some(&b"v"[..]));
        assert_eq!(i.timeout_value(), Some(s));
        let at = i.deadline_at().unwrap();
        assert!(at >= before + s && at <= Instant::now() + s);
        // An earlier explicit deadline stays.
        let early = before + Duration::from_secs(1);
        let o = CallOptions::new().deadline(early).timeout(s);
        assert_eq!(o.to_idempotent().deadline_at(), Some(early));
    }

    #[test]
    fn open_metadata_carries_method_timeout_and_custom_entries() {
        let now = Instant::now();
        let o = CallOptions::new()
            .metadata(b"trace", b"abc")
            .metadata(b"", b"skipped");
        let m = o
            .open_metadata("svc/m", Some(now + Duration::from_millis(1500)), now, None)
            .unwrap();
        assert_eq!(m.method(), Some("svc/m"));
        assert_eq!(m.timeout(), Some(Duration::from_millis(1500)));
        assert_eq!(m.get(b"trace"), Some(&b"abc"[..]));
        assert_eq!(m.iter().count(), 3);
        let late = o.open_metadata("m", Some(now), now, None).unwrap_err();
        assert_eq!(late.code(), Code::DEADLINE_EXCEEDED);
    }
}
