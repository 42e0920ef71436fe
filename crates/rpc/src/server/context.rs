//! What a handler knows about its call: method, deadline, peer, metadata,
//! and a cancellation signal.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use weft_frame::Metadata;
use weft_frame::metadata::{InvalidMetadata, Key, Kind};

use crate::observe::TraceContext;
use crate::options::CallOptions;
use crate::options::Entry;
use crate::server::peer::PeerInfo;

#[cfg(all(test, loom))]
mod loom_touch;
mod touch;

use touch::{Ended, TouchCell};

/// The context of one incoming call, handed to its handler.
///
/// The deadline is the caller's: the server cancels the handler (drops its
/// future) when it passes, and answers `DEADLINE_EXCEEDED`. Pass
/// [`Context::call_options`] to calls the handler makes so they inherit it.
///
/// What is the same for every call of a route on a connection (method,
/// peer) and the trace context live in the call's `CallCell`, which the
/// connection reuses from call to call (see `Calls`): a context is
/// moved a few times per call, and these parts, set once rather than
/// cloned per call, made it twice as large.
#[derive(Debug)]
pub struct Context {
    deadline: Option<Instant>,
    metadata: Metadata,
    call: Arc<CallCell>,
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
        // A cell of its own that nothing ends: what is set in it is
        // never sent, and its signal never fires.
        let about = About::new(Arc::from(method), Arc::new(peer), None);
        Context {
            deadline,
            metadata,
            call: Arc::new(CallCell::new(about)),
        }
    }

    /// A context for a test's call of `cell`: no deadline, no metadata.
    #[cfg(test)]
    pub(crate) fn for_test(cell: &Arc<CallCell>) -> Context {
        Context::for_call(None, Metadata::new(), cell.clone())
    }

    /// The context of the call whose cell is `cell` (which holds its
    /// method, peer and trace context, see [`Calls::begin`]).
    pub(crate) fn for_call(
        deadline: Option<Instant>,
        metadata: Metadata,
        cell: Arc<CallCell>,
    ) -> Context {
        // Built whole here: a builder step taking and returning the
        // context copied all of it once more per call.
        Context {
            deadline,
            metadata,
            call: cell,
        }
    }

    /// The W3C trace context of this call (this call's span as the parent),
    /// when the caller sent one or this call is traced.
    pub fn trace_context(&self) -> Option<TraceContext> {
        self.call
            .about
            .trace
            .or_else(|| crate::observe::incoming(&self.metadata))
    }

    /// The canonical method name.
    pub fn method(&self) -> &str {
        &self.call.about.method
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
        &self.call.about.peer
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
        if !self.call.add_header(key.as_bytes(), value) {
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
        self.call.add_trailer(key.as_bytes(), value);
        Ok(())
    }

    /// A signal that fires if this call is cancelled (the caller went away,
    /// the deadline passed, the connection died), for work the handler hands
    /// to other tasks. The handler itself needs none: its future is dropped.
    ///
    /// Costs nothing until used. Asked for after the call has ended, it
    /// reports cancelled: the call's work is moot either way.
    pub fn cancellation(&self) -> CancelSignal {
        self.call.signal()
    }
}

/// Whether a custom metadata key travels from a call to the calls its
/// handler makes through [`Context::call_options`] (`traceparent` travels
/// too, re-encoded from the call's trace context).
pub fn propagates(key: &[u8]) -> bool {
    key == b"tracestate" || key.starts_with(b"weft-propagate-")
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

    #[inline(never)]
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

/// Where a connection's calls get their [`CallCell`]s: the cell of the
/// call before, reused once nobody holds it any more.
///
/// A call's cell is shared by its server task (the `CallGuard`), its
/// handler's [`Context`] (which the handler may move to a task of its
/// own) and, for a streaming call, its stream's slot. Most calls end
/// before the next one starts (a unary call finishes in its first poll)
/// and drop every handle, so the cell left here is free again:
/// [`Arc::get_mut`] proves it, and the next call takes it with no
/// allocation and no lock. A cell still held (a call still running, a
/// context kept past its call) is left to its holders, and the next call
/// gets a new one. Only the serving task touches this; calls reach their
/// cells through their own `Arc`s, so there is nothing to model beyond
/// `Arc`, `Mutex` and the one compare-exchange deciding who of a handle
/// and the call's end uses an entry first (`touch`, model-checked).
///
/// A table of every live call under one lock, entered and left by each
/// call, cost two lock round trips and a slot search per call (about 200
/// instructions); nothing iterates the live calls, so nothing needs them
/// in one place.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    last: Option<Arc<CallCell>>,
}

impl Calls {
    /// A cell for a call of `method` from `peer`, continuing `trace`,
    /// starting now: the last one, if it is free.
    pub(crate) fn begin(
        &mut self,
        method: &Arc<str>,
        peer: &Arc<PeerInfo>,
        trace: Option<TraceContext>,
    ) -> Arc<CallCell> {
        match self.last.as_mut().and_then(Arc::get_mut) {
            Some(free) => {
                free.entry.renew();
                free.about.renew(method, peer, trace);
            }
            // Still held (or the first call): the holders keep theirs.
            None => {
                let about = About::new(method.clone(), peer.clone(), trace);
                self.last = Some(Arc::new(CallCell::new(about)));
            }
        }
        self.last.get_or_insert_with(Arc::default).clone()
    }
}

/// What a call is (method, peer, trace context), kept in its cell.
#[derive(Debug, Default)]
struct About {
    method: Arc<str>,
    peer: Arc<PeerInfo>,
    /// The trace context nested calls continue (see `observe`): this
    /// call's own when its span is enabled; `None` passes on the caller's,
    /// read from the context's metadata only when asked for.
    trace: Option<TraceContext>,
}

impl About {
    fn new(method: Arc<str>, peer: Arc<PeerInfo>, trace: Option<TraceContext>) -> About {
        About {
            method,
            peer,
            trace,
        }
    }

    /// Sets the next call's; the `Arc`s are cloned only when they change
    /// (the usual next call is of the same route from the same peer).
    fn renew(&mut self, method: &Arc<str>, peer: &Arc<PeerInfo>, trace: Option<TraceContext>) {
        if !Arc::ptr_eq(&self.method, method) {
            self.method = method.clone();
        }
        if !Arc::ptr_eq(&self.peer, peer) {
            self.peer = peer.clone();
        }
        self.trace = trace;
    }
}

/// One call's entry: its cancellation signal, once asked for, and the
/// headers and trailers its handler set, until the call ends. Once it
/// ended, its handles find it over (a header or trailer set is dropped, a
/// signal asked for reports cancelled).
///
/// Most calls never touch their entry (no header, trailer or signal), so
/// ending one takes no lock ([`TouchCell`]).
#[derive(Debug, Default)]
pub(crate) struct CallCell {
    entry: TouchCell<Live>,
    about: About,
}

/// A live call's entry (all empty, allocating nothing, until used).
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

impl CallCell {
    fn new(about: About) -> CallCell {
        CallCell {
            entry: TouchCell::default(),
            about,
        }
    }

    /// A cell for a test's call of method `m` from an unknown peer.
    #[cfg(test)]
    pub(crate) fn for_test() -> Arc<CallCell> {
        let about = About::new(Arc::from("m"), Arc::default(), None);
        Arc::new(CallCell::new(about))
    }

    /// The call's entry while it is live.
    fn with_live<R>(&self, f: impl FnOnce(&mut Live) -> R) -> Option<R> {
        self.entry.with_live(f)
    }

    /// Ends the call unless [`finish`](Self::finish) did, firing its
    /// signal if it was `cancelled`.
    // Out of line, as is `CancelSignal::fire`: the rare ends of a call
    // (one whose entry was never taken, one cancelled after a handler
    // asked for its signal), kept out of the guard's drop so that the
    // usual drop is small enough to inline.
    #[inline(never)]
    pub(crate) fn end(&self, cancelled: bool) {
        if let Ended::Used(Live {
            signal: Some(sig), ..
        }) = self.entry.end()
            && cancelled
        {
            sig.fire();
        }
    }

    fn signal(&self) -> CancelSignal {
        let live = self.with_live(|l| l.signal.get_or_insert_with(CancelSignal::new).clone());
        live.unwrap_or_else(|| {
            let s = CancelSignal::new();
            s.fire();
            s
        })
    }

    fn add_trailer(&self, name: &[u8], value: &[u8]) {
        self.with_live(|l| l.trailers.push((name.into(), value.into())));
    }

    /// Adds a header; `false` if the headers already went (or the call
    /// is over).
    fn add_header(&self, name: &[u8], value: &[u8]) -> bool {
        self.with_live(|l| match &mut l.headers {
            Headers::Collecting(h) => {
                h.push((name.into(), value.into()));
                true
            }
            Headers::Sent => false,
        })
        .unwrap_or(false)
    }

    /// The headers the call's handler set, as its first frame goes
    /// (taken: later ones are dropped).
    pub(crate) fn take_headers(&self) -> Vec<Entry> {
        self.with_live(|l| l.headers.send()).unwrap_or_default()
    }

    /// Ends the call as its handler's result goes out (one lock for its
    /// headers not sent yet, its trailers and its signal): the call is
    /// over for its handles from here (a header or trailer set now is
    /// dropped, a signal asked for reports cancelled). The signal, if one
    /// was asked for, is returned for the caller to fire should the end
    /// not go out cleanly. `None` when no handle used the entry (no
    /// header, trailer or signal: the usual call, whose end then has
    /// nothing to move out and look through) or the call was over.
    // Inlined (as is `CallGuard::finish`): the usual answer, `None`, is
    // then a branch, where a call returned it through memory.
    #[inline(always)]
    pub(crate) fn finish(&self) -> Option<Finished> {
        match self.entry.end() {
            Ended::Used(mut live) => Some(Finished {
                headers: live.headers.send(),
                trailers: live.trailers,
                signal: live.signal,
            }),
            Ended::Untouched | Ended::Over => None,
        }
    }

    /// Whether the call is over.
    #[cfg(test)]
    pub(crate) fn is_over(&self) -> bool {
        self.entry.is_over()
    }
}

/// What a call's entry held as it finished ([`CallCell::finish`]).
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

    /// The next cell of `calls`, for a call of `m` from an unknown peer.
    fn begin(calls: &mut Calls) -> Arc<CallCell> {
        thread_local!(static ABOUT: (Arc<str>, Arc<PeerInfo>) = (Arc::from("m"), Arc::default()));
        ABOUT.with(|(m, p)| calls.begin(m, p, None))
    }

    /// A context is moved a few times per call (built, into the call,
    /// into the call's future, into the handler's): its deadline, its
    /// `OPEN` block and its cell, nothing a connection's calls share
    /// (method, peer: in the cell). 112 bytes while it held those, and
    /// a trace context that is `None` with no subscriber, itself.
    #[test]
    fn a_context_stays_small() {
        let size = size_of::<Context>();
        assert!(size <= 56, "{size} bytes");
    }

    #[tokio::test]
    async fn signal_fires_only_on_cancel_and_after_the_end() {
        let (one, three) = (CallCell::for_test(), CallCell::for_test());
        let ctx = Context::for_test(&one);
        let sig = ctx.cancellation();
        let sig2 = ctx.cancellation();
        assert!(!sig.is_cancelled());
        let waiter = tokio::spawn(async move { sig2.cancelled().await });
        tokio::task::yield_now().await;
        one.end(true);
        waiter.await.unwrap();
        assert!(sig.is_cancelled());
        sig.cancelled().await; // already fired: returns at once
        // A call that ends normally does not fire its signal...
        let ctx3 = Context::for_test(&three);
        let s3 = ctx3.cancellation();
        three.end(false);
        assert!(!s3.is_cancelled());
        // ...but a signal asked for after the end reports the call over.
        assert!(ctx3.cancellation().is_cancelled());
        assert!(one.is_over() && three.is_over());
    }

    /// A connection's next call reuses the cell of the call before once
    /// nobody holds it; a handle of an ended call (a context a handler
    /// moved to a task of its own) keeps its cell, finds its call over,
    /// and cannot touch the next call's entry.
    #[test]
    fn a_cell_is_reused_only_once_nobody_holds_it() {
        const K: Key<weft_frame::metadata::Ascii> = Key::from_static("k");
        let mut calls = Calls::default();
        // A call that ended and dropped every handle: its cell is reused,
        // fresh.
        let first = begin(&mut calls);
        let ctx = Context::for_test(&first);
        ctx.set_trailer(&K, "old").unwrap();
        let at = Arc::as_ptr(&first);
        first.finish();
        drop((ctx, first));
        let second = begin(&mut calls);
        assert_eq!(Arc::as_ptr(&second), at, "the free cell is reused");
        assert!(!second.is_over(), "reused live again");
        // A context kept past its call: the next call gets a cell of its own.
        let old = Context::for_test(&second);
        let before = old.cancellation();
        let Finished { signal, .. } = second.finish().expect("a signal was asked for");
        // The finished call's signal went to its server, not fired yet.
        assert!(signal.is_some() && !before.is_cancelled());
        drop(second);
        let third = begin(&mut calls);
        assert_ne!(Arc::as_ptr(&third), at, "a held cell is not reused");
        let new = Context::for_test(&third);
        old.set_header(&K, "stale").unwrap();
        old.set_trailer(&K, "stale").unwrap();
        assert!(old.cancellation().is_cancelled());
        assert!(!new.cancellation().is_cancelled());
        let end = third.finish().unwrap_or_default();
        assert!(end.headers.is_empty() && end.trailers.is_empty(), "{end:?}");
        third.end(true);
    }

    /// A call whose handles never used its entry ends without its lock
    /// (see `touch`); its handles still find it over afterwards, and its
    /// reused cell is live and empty for the next call.
    #[test]
    fn an_untouched_entry_ends_over_and_is_reused_empty() {
        const K: Key<weft_frame::metadata::Ascii> = Key::from_static("k");
        let mut calls = Calls::default();
        let cell = begin(&mut calls);
        let ctx = Context::for_test(&cell);
        assert!(cell.finish().is_none(), "nothing to take");
        assert!(cell.is_over());
        // Too late: dropped, and the call reads as cancelled.
        ctx.set_trailer(&K, "late").unwrap();
        ctx.set_header(&K, "late").unwrap();
        assert!(ctx.cancellation().is_cancelled());
        assert!(cell.finish().is_none(), "ended once only");
        let at = Arc::as_ptr(&cell);
        drop((ctx, cell));
        let next = begin(&mut calls);
        assert_eq!(Arc::as_ptr(&next), at, "the free cell is reused");
        assert!(!next.is_over(), "live again");
        let ctx = Context::for_test(&next);
        assert!(!ctx.cancellation().is_cancelled());
        ctx.set_trailer(&K, "v").unwrap();
        let end = next.finish().expect("a trailer was set");
        assert_eq!(end.trailers.len(), 1, "{end:?}");
        assert!(end.headers.is_empty(), "{end:?}");
    }

    /// A handle racing the call's end on another thread: a header it was
    /// told went in is in the end, and one refused is not (every
    /// interleaving: `loom_touch`).
    #[test]
    fn a_header_racing_the_end_is_either_in_it_or_refused() {
        for _ in 0..2_000 {
            let cell = Arc::new(CallCell::default());
            let handle = cell.clone();
            let racer = std::thread::spawn(move || handle.add_header(b"k", b"v"));
            let end = cell.finish().unwrap_or_default();
            let accepted = racer.join().unwrap();
            assert_eq!(accepted, end.headers.len() == 1, "{end:?}");
            assert!(cell.is_over());
        }
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
        let ctx = Context::for_call(None, meta, CallCell::for_test());
        assert_eq!(ctx.trace_context(), TraceContext::parse(parent));
        let open = ctx
            .call_options()
            .open_metadata("m", None, Instant::now(), None)
            .unwrap();
        assert_eq!(open.get(crate::observe::TRACEPARENT), Some(&parent[..]));
        // Its own trace, when its span made one, wins.
        let own = TraceContext::parse(parent).map(|t| TraceContext { span_id: 7, ..t });
        let cell = CallCell::new(About::new(Arc::from("m"), Arc::default(), own));
        let traced = Context::for_call(None, ctx.metadata().clone(), Arc::new(cell));
        assert_eq!(traced.trace_context(), own);
    }
}
