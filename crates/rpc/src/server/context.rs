//! What a handler knows about its call: method, deadline, peer, metadata,
//! and a cancellation signal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use weft_frame::Metadata;
use weft_frame::metadata::{InvalidMetadata, Key, Kind};

use crate::observe::TraceContext;
use crate::options::CallOptions;
use crate::options::Entry;
use crate::server::peer::PeerInfo;

/// The context of one incoming call, handed to its handler.
///
/// The deadline is the caller's: the server cancels the handler (drops its
/// future) when it passes, and answers `DEADLINE_EXCEEDED`. Pass
/// [`Context::call_options`] to calls the handler makes so they inherit it.
#[derive(Debug)]
pub struct Context {
    method: Arc<str>,
    deadline: Option<Instant>,
    peer: Arc<PeerInfo>,
    metadata: Metadata,
    cancel: CancelSlot,
    /// The trace context nested calls continue (see `observe`): this
    /// call's own when its span is enabled; `None` passes on the caller's,
    /// read from [`metadata`](Self::metadata) only when asked for.
    trace: Option<TraceContext>,
}

impl Context {
    /// A context for calling a handler directly, e.g. in a unit test: no
    /// connection, and a cancellation signal that never fires.
    pub fn new(
        method: &str,
        deadline: Option<Instant>,
        metadata: Metadata,
        peer: PeerInfo,
    ) -> Context {
        Context {
            method: Arc::from(method),
            deadline,
            peer: Arc::new(peer),
            metadata,
            cancel: CancelSlot::Detached,
            trace: None,
        }
    }

    /// A context for a test's call `key` in `calls`: method `m`, no
    /// deadline, an unknown peer, no metadata, no trace context.
    #[cfg(test)]
    pub(crate) fn for_test(calls: &Arc<Calls>, key: CallKey) -> Context {
        Context::for_call(
            Arc::from("m"),
            None,
            Arc::new(PeerInfo::default()),
            Metadata::new(),
            calls.clone(),
            key,
            None,
        )
    }

    pub(crate) fn for_call(
        method: Arc<str>,
        deadline: Option<Instant>,
        peer: Arc<PeerInfo>,
        metadata: Metadata,
        calls: Arc<Calls>,
        key: CallKey,
        trace: Option<TraceContext>,
    ) -> Context {
        // Built whole here: a builder step taking and returning the
        // context copied all of it once more per call.
        Context {
            method,
            deadline,
            peer,
            metadata,
            cancel: CancelSlot::Call(calls, key),
            trace,
        }
    }

    /// This call continues `trace`: nested calls carry it.
    #[cfg(test)]
    pub(crate) fn with_trace(mut self, trace: Option<TraceContext>) -> Context {
        self.trace = trace;
        self
    }

    /// The W3C trace context of this call (this call's span as the parent),
    /// when the caller sent one or this call is traced.
    pub fn trace_context(&self) -> Option<TraceContext> {
        self.trace
            .or_else(|| crate::observe::incoming(&self.metadata))
    }

    /// The canonical method name.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// When the caller stops waiting, if it said.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before the deadline (zero once it passed), if there is one.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The peer.
    pub fn peer(&self) -> &PeerInfo {
        &self.peer
    }

    /// The call's metadata (the `OPEN` frame's block: method, timeout and
    /// custom entries; read custom ones with [`Metadata::get`]).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Options for a call made on behalf of this one: they carry this
    /// call's deadline, so a nested call gives up when the caller does; its
    /// trace context (`traceparent`), so the nested call joins its trace;
    /// and the caller's metadata that [`propagates`]: `tracestate` and
    /// every custom key starting with `weft-propagate-`. Nothing else is
    /// copied: credentials meant for this server must not leak to the next.
    pub fn call_options(&self) -> CallOptions {
        let mut o = CallOptions::new();
        if let Some(t) = self.trace_context() {
            o = o.metadata(crate::observe::TRACEPARENT, &t.encode());
        }
        if let Some(d) = self.deadline {
            o = o.deadline(d);
        }
        for e in self.metadata.iter() {
            if e.tag == weft_frame::metadata::tag::CUSTOM && propagates(e.key) {
                o = o.metadata(e.key, e.value);
            }
        }
        o
    }

    /// Adds a response header: a custom entry the caller sees before the
    /// call's first message (`Streaming::headers`, `Response::headers`),
    /// e.g. a server id or a rate-limit budget (an `Interceptor` may set
    /// them too, for every call it passes). Headers go out with the
    /// handler's first message, or with its end if it sends none; a header
    /// set after that is dropped (logged at debug level), as grpc-go
    /// refuses `SetHeader` once headers were sent.
    ///
    /// The value is checked against the key's kind (ASCII text, or bytes
    /// for a `-bin` key); a bad one is refused and nothing is set. Set on a
    /// context made with [`Context::new`], it is dropped.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use weft_rpc::{Ascii, MetadataKey, Router, Status};
    ///
    /// const SERVED_BY: MetadataKey<Ascii> = MetadataKey::from_static("x-served-by");
    /// let router = Router::new().unary("echo", |ctx, req: Bytes| async move {
    ///     ctx.set_header(&SERVED_BY, "node-1")?;
    ///     Ok::<_, Status>(req)
    /// });
    /// # let _ = router;
    /// ```
    pub fn set_header<K: Kind>(
        &self,
        key: &Key<K>,
        value: &K::Value,
    ) -> Result<(), InvalidMetadata> {
        let value = K::encode(value)?;
        if let CancelSlot::Call(calls, call) = &self.cancel
            && !calls.add_header(*call, key.as_bytes(), value)
        {
            tracing::debug!(
                key = key.as_str(),
                "header set after the headers were sent: dropped"
            );
        }
        Ok(())
    }

    /// Adds a response trailer: a custom entry in the frame that ends this
    /// call, next to the status (e.g. a server timing or a cursor); the
    /// caller reads them with `Response::trailers` (unary, typed or raw)
    /// or `Streaming::trailers` once the call ended. Values are checked as
    /// for [`set_header`](Self::set_header). Set after the call ended, or
    /// on a context made with [`Context::new`], it is dropped.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use weft_rpc::{Binary, MetadataKey, Router, Status};
    ///
    /// const CURSOR: MetadataKey<Binary> = MetadataKey::from_static("cursor-bin");
    /// let router = Router::new().unary("page", |ctx, req: Bytes| async move {
    ///     ctx.set_trailer(&CURSOR, &[0, 42][..])?;
    ///     Ok::<_, Status>(req)
    /// });
    /// # let _ = router;
    /// ```
    pub fn set_trailer<K: Kind>(
        &self,
        key: &Key<K>,
        value: &K::Value,
    ) -> Result<(), InvalidMetadata> {
        let value = K::encode(value)?;
        if let CancelSlot::Call(calls, call) = &self.cancel {
            calls.add_trailer(*call, key.as_bytes(), value);
        }
        Ok(())
    }

    /// A signal that fires if this call is cancelled (the caller went away,
    /// the deadline passed, the connection died), for work the handler hands
    /// to other tasks. The handler itself needs none: its future is dropped.
    ///
    /// Costs nothing until used. Asked for after the call has ended, it
    /// reports cancelled: the call's work is moot either way.
    pub fn cancellation(&self) -> CancelSignal {
        match &self.cancel {
            CancelSlot::Detached => CancelSignal::new(),
            CancelSlot::Call(calls, call) => calls.signal(*call),
        }
    }
}

/// Whether a custom metadata key travels from a call to the calls its
/// handler makes through [`Context::call_options`] (`traceparent` travels
/// too, re-encoded from the call's trace context).
pub fn propagates(key: &[u8]) -> bool {
    key == b"tracestate" || key.starts_with(b"weft-propagate-")
}

#[derive(Debug)]
enum CancelSlot {
    Detached,
    Call(Arc<Calls>, CallKey),
}

#[derive(Debug, Default)]
struct SignalInner {
    cancelled: AtomicBool,
    notify: Notify,
}

/// Fires when a call is cancelled; cheap to clone.
#[derive(Debug, Clone)]
pub struct CancelSignal {
    inner: Arc<SignalInner>,
}

impl CancelSignal {
    fn new() -> CancelSignal {
        CancelSignal {
            inner: Arc::new(SignalInner::default()),
        }
    }

    pub(crate) fn fire(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
        self.inner.notify.notify_waiters();
    }

    /// Whether the call was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Resolves when the call is cancelled (at once if it already was).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.inner.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// The live calls of one connection, and the cancellation signals handlers
/// asked for. A signal is allocated only when a handler asks.
///
/// Every call takes an entry as it starts and gives it back as it ends,
/// so the table is a slab: a call's [`CallKey`] names its slot, found by
/// index under one lock (a hash map cost about 120 instructions more per
/// call). A slot freed is reused by a later call; the stream id in the
/// key tells a late handle of an ended call from the slot's new owner
/// (stream ids are never reused on a connection).
#[derive(Debug, Default)]
pub(crate) struct Calls {
    live: Mutex<Table>,
}

/// Where a call's entry is in its connection's [`Calls`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallKey {
    slot: u32,
    id: u32,
}

/// The slots of [`Calls`]: each empty or a live call's, with the stream
/// id that owns it; the empty ones listed for reuse.
#[derive(Debug, Default)]
struct Table {
    slots: Vec<Option<(u32, Live)>>,
    free: Vec<u32>,
}

impl Table {
    fn insert(&mut self, id: u32) -> CallKey {
        let entry = Some((id, Live::default()));
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = entry;
                slot
            }
            None => {
                self.slots.push(entry);
                // At most one slot per live stream: far below u32::MAX.
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        CallKey { slot, id }
    }

    fn get_mut(&mut self, key: CallKey) -> Option<&mut Live> {
        match self.slots.get_mut(key.slot as usize) {
            Some(Some((id, live))) if *id == key.id => Some(live),
            _ => None,
        }
    }

    fn remove(&mut self, key: CallKey) -> Option<Live> {
        let slot = self.slots.get_mut(key.slot as usize)?;
        if !matches!(slot, Some((id, _)) if *id == key.id) {
            return None;
        }
        let (_, live) = slot.take()?;
        self.free.push(key.slot);
        Some(live)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// A live call's entry: its cancellation signal, once asked for, and the
/// headers and trailers its handler set (all empty, allocating nothing,
/// until used).
#[derive(Debug, Default)]
struct Live {
    signal: Option<CancelSignal>,
    headers: Headers,
    trailers: Vec<Entry>,
}

/// The response headers of a call: collected until the first frame goes.
#[derive(Debug)]
enum Headers {
    Collecting(Vec<Entry>),
    Sent,
}

impl Default for Headers {
    fn default() -> Headers {
        Headers::Collecting(Vec::new())
    }
}

impl Headers {
    /// The headers to send now; later ones are refused.
    fn send(&mut self) -> Vec<Entry> {
        match std::mem::replace(self, Headers::Sent) {
            Headers::Collecting(h) => h,
            Headers::Sent => Vec::new(),
        }
    }
}

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters the call on stream `id`.
    pub(crate) fn begin(&self, id: u32) -> CallKey {
        self.lock().insert(id)
    }

    /// Ends the call of `key` unless [`finish`](Self::finish) did,
    /// firing its signal if it was `cancelled`.
    pub(crate) fn end(&self, key: CallKey, cancelled: bool) {
        let slot = self.lock().remove(key);
        if let Some(Live {
            signal: Some(sig), ..
        }) = slot
            && cancelled
        {
            sig.fire();
        }
    }

    fn signal(&self, key: CallKey) -> CancelSignal {
        let mut live = self.lock();
        match live.get_mut(key) {
            Some(live) => live.signal.get_or_insert_with(CancelSignal::new).clone(),
            None => {
                let s = CancelSignal::new();
                s.fire();
                s
            }
        }
    }

    fn add_trailer(&self, key: CallKey, name: &[u8], value: &[u8]) {
        if let Some(live) = self.lock().get_mut(key) {
            live.trailers.push((name.into(), value.into()));
        }
    }

    /// Adds a header to the call of `key`; `false` if the headers already
    /// went (or the call is over).
    fn add_header(&self, key: CallKey, name: &[u8], value: &[u8]) -> bool {
        match self.lock().get_mut(key).map(|l| &mut l.headers) {
            Some(Headers::Collecting(h)) => {
                h.push((name.into(), value.into()));
                true
            }
            _ => false,
        }
    }

    /// The headers the handler of the call of `key` set, as its first
    /// frame goes (taken: later ones are dropped).
    pub(crate) fn take_headers(&self, key: CallKey) -> Vec<Entry> {
        match self.lock().get_mut(key) {
            Some(live) => live.headers.send(),
            None => Vec::new(),
        }
    }

    /// Ends the call of `key` as its handler's result goes out (one lock
    /// for its headers not sent yet, its trailers and its signal): the
    /// call is over for its handles from here (a header or trailer set now
    /// is dropped, a signal asked for reports cancelled). The signal, if
    /// one was asked for, is returned for the caller to fire should the
    /// end not go out cleanly.
    pub(crate) fn finish(&self, key: CallKey) -> Finished {
        match self.lock().remove(key) {
            Some(mut live) => Finished {
                headers: live.headers.send(),
                trailers: live.trailers,
                signal: live.signal,
            },
            None => Finished::default(),
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// What a call's entry held as it finished ([`Calls::finish`]).
#[derive(Debug, Default)]
pub(crate) struct Finished {
    /// Response headers not sent yet.
    pub(crate) headers: Vec<Entry>,
    /// Response trailers.
    pub(crate) trailers: Vec<Entry>,
    /// The cancellation signal, if a handler asked for one.
    pub(crate) signal: Option<CancelSignal>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn signal_fires_only_on_cancel_and_after_the_end() {
        let calls = Arc::new(Calls::default());
        let (one, three) = (calls.begin(1), calls.begin(3));
        let peer = Arc::new(PeerInfo::new(Some("memory".into()), true, false));
        let ctx = Context::for_call(
            Arc::from("echo"),
            None,
            peer,
            Metadata::new(),
            calls.clone(),
            one,
            None,
        );
        let sig = ctx.cancellation();
        let sig2 = ctx.cancellation();
        assert!(!sig.is_cancelled());
        let waiter = tokio::spawn(async move { sig2.cancelled().await });
        tokio::task::yield_now().await;
        calls.end(one, true);
        waiter.await.unwrap();
        assert!(sig.is_cancelled());
        sig.cancelled().await; // already fired: returns at once
        // A call that ends normally does not fire its signal...
        let ctx3 = Context::for_test(&calls, three);
        let s3 = ctx3.cancellation();
        calls.end(three, false);
        assert!(!s3.is_cancelled());
        // ...but a signal asked for after the end reports the call over.
        assert!(ctx3.cancellation().is_cancelled());
        assert_eq!(calls.len(), 0);
    }

    /// A slot freed by a call's end goes to the next call; a handle of
    /// the ended call (a context a handler moved to a task of its own)
    /// still finds its call over, and cannot touch the new one's entry.
    #[test]
    fn a_reused_slot_belongs_to_its_new_call_only() {
        let calls = Arc::new(Calls::default());
        let ctx = |key| Context::for_test(&calls, key);
        const K: Key<weft_frame::metadata::Ascii> = Key::from_static("k");
        let old = ctx(calls.begin(1));
        let before = old.cancellation();
        let Finished { signal, .. } = calls.finish(match &old.cancel {
            CancelSlot::Call(_, key) => *key,
            CancelSlot::Detached => unreachable!("a served call's context"),
        });
        // The finished call's signal went to its server, not fired yet.
        assert!(signal.is_some() && !before.is_cancelled());
        let new = ctx(calls.begin(3));
        assert_eq!(calls.len(), 1);
        old.set_header(&K, "stale").unwrap();
        old.set_trailer(&K, "stale").unwrap();
        assert!(old.cancellation().is_cancelled());
        let key = match &new.cancel {
            CancelSlot::Call(_, key) => *key,
            CancelSlot::Detached => unreachable!("a served call's context"),
        };
        assert!(!new.cancellation().is_cancelled());
        let end = calls.finish(key);
        assert!(end.headers.is_empty() && end.trailers.is_empty(), "{end:?}");
        // Nothing of either call is left.
        assert_eq!(calls.len(), 0);
        calls.end(key, true);
    }

    #[tokio::test(start_paused = true)]
    async fn accessors_and_nested_options() {
        let meta = Metadata::builder().custom(b"k", b"v").finish();
        let deadline = Instant::now() + Duration::from_secs(2);
        let ctx = Context::new(
            "svc/m",
            Some(deadline),
            meta,
            PeerInfo::new(None, false, true),
        );
        assert_eq!(ctx.method(), "svc/m");
        assert_eq!(ctx.deadline(), Some(deadline));
        assert_eq!(ctx.remaining(), Some(Duration::from_secs(2)));
        assert_eq!(ctx.metadata().get(b"k"), Some(&b"v"[..]));
        assert!(ctx.peer().compressed && !ctx.peer().encrypted);
        assert_eq!(ctx.call_options().deadline_at(), Some(deadline));
        // Only `tracestate` and `weft-propagate-` keys travel on (the
        // traceparent comes from the parsed trace context, not copied).
        let meta = Metadata::builder()
            .custom(b"tracestate", b"vendor=1")
            .custom(b"authorization", b"Bearer x")
            .custom(b"weft-propagate-tenant", b"t1")
            .finish();
        let nested = Context::new("m", None, meta, PeerInfo::default()).call_options();
        let open = nested
            .open_metadata("m", None, Instant::now(), None)
            .unwrap();
        assert_eq!(open.get(b"tracestate"), Some(&b"vendor=1"[..]));
        assert_eq!(open.get(b"weft-propagate-tenant"), Some(&b"t1"[..]));
        assert_eq!(open.get(b"authorization"), None);
        assert!(!ctx.cancellation().is_cancelled());
        let free = Context::new("m", None, Metadata::new(), PeerInfo::default());
        assert_eq!(free.remaining(), None);
        assert_eq!(free.call_options().deadline_at(), None);
    }

    /// With no subscriber the server makes no span and no trace of its
    /// own, and reads no `traceparent` as the call starts: a nested call
    /// must still carry the caller's on, unchanged, read when asked for.
    #[test]
    fn an_untraced_call_passes_the_callers_traceparent_on() {
        let parent = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let meta = Metadata::builder()
            .custom(crate::observe::TRACEPARENT, parent)
            .finish();
        let ctx = Context::for_call(
            Arc::from("m"),
            None,
            Arc::new(PeerInfo::default()),
            meta,
            Arc::new(Calls::default()),
            CallKey { slot: 0, id: 1 },
            None,
        );
        assert_eq!(ctx.trace_context(), TraceContext::parse(parent));
        let open = ctx
            .call_options()
            .open_metadata("m", None, Instant::now(), None)
            .unwrap();
        assert_eq!(open.get(crate::observe::TRACEPARENT), Some(&parent[..]));
        // Its own trace, when its span made one, wins.
        let own = TraceContext::parse(parent).map(|t| TraceContext { span_id: 7, ..t });
        let traced =
            Context::new("m", None, ctx.metadata().clone(), PeerInfo::default()).with_trace(own);
        assert_eq!(traced.trace_context(), own);
    }
}
