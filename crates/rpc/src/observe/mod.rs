//! Per-call tracing: a span per call on both sides, with the
//! OpenTelemetry RPC semantic-convention fields, and W3C trace context
//! carried in the call's `traceparent` metadata entry.
//!
//! | span | fields |
//! |---|---|
//! | `rpc.connection` (server) | `network.peer.address`, `weft.encrypted`, `weft.compressed` |
//! | `rpc.server` | `rpc.system = "weft"`, `rpc.service`, `rpc.method`, `network.peer.address`, `rpc.weft.stream_id`, `rpc.weft.timeout_us`, `rpc.response.status_code`, `trace_id`, `span_id`, `parent_id` |
//! | `rpc.client` | the same; `network.peer.address` when the client knows it (`weft::connect` sets it; see `Client::with_peer_address`) |
//!
//! `rpc.service` and `rpc.method` split the canonical name at its last `/`
//! (`pkg.greeter/hello` → `pkg.greeter`, `hello`; a bare `echo` has an
//! empty service). Spans are at `INFO`; each call's end is a `DEBUG`
//! event, or `WARN` on the server for the codes that point at a bug or
//! an outage rather than at the caller (`INTERNAL`, `UNKNOWN`,
//! `DATA_LOSS`).
//!
//! ## Trace context
//! A client call inside a traced server call (through
//! [`Context::call_options`](crate::Context::call_options)) continues the
//! caller's trace: it takes the trace id, makes a new span id, and sends
//! `traceparent: 00-<trace id>-<its span id>-<flags>`. A call with no
//! context starts a trace when its span is enabled. When no subscriber
//! wants the spans, an incoming `traceparent` is passed on unchanged and
//! none is made up.
//!
//! ## Cost when nobody listens
//! Until a tracing subscriber has been set (globally or for a scope) no
//! span is made at all: one relaxed load per hook ([`listening`]); no id
//! is drawn, no metadata read, nothing allocated. With one set, `span!`
//! returns a disabled span after its cached interest check. The call's
//! meter is off unless a `metrics` recorder was installed when the client
//! was made or the connection opened ([`Metrics`](crate::observe::meter::Metrics)): then
//! no clock is read either, and a client call's observers are one
//! `Quiet` value. Measured in docs/BENCHMARKS.md, "What observability
//! costs". (With tracing's `log` feature and no subscriber, call spans
//! are therefore not forwarded to `log`.)

pub(crate) mod meter;

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use tokio::time::Instant;
use tracing::{Level, Span, field};
use weft_frame::Metadata;

use crate::codec::Framed;
use crate::observe::meter::{CallMeter, ClientMeters, Receiving};
use crate::options::CallOptions;
use crate::server::peer::PeerInfo;
use crate::status::{Code, Status};

/// The metadata key of the W3C trace context.
pub const TRACEPARENT: &[u8] = b"traceparent";

/// A W3C trace context (`traceparent`): which trace a call belongs to and
/// which span is its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace id (never zero).
    pub trace_id: u128,
    /// The parent span's id (never zero).
    pub span_id: u64,
    /// The `sampled` flag.
    pub sampled: bool,
}

impl TraceContext {
    /// Parses `00-<32 hex>-<16 hex>-<2 hex>`; `None` for anything else,
    /// including all-zero ids, upper-case hex and a version other than
    /// `00`. One pass over the 55 bytes, no formatting machinery: a traced
    /// server parses one per call.
    pub fn parse(v: &[u8]) -> Option<TraceContext> {
        let v: &[u8; 55] = v.try_into().ok()?;
        if &v[..3] != b"00-" || v[35] != b'-' || v[52] != b'-' {
            return None;
        }
        let trace_id = lower_hex(&v[3..35])?;
        let span_id = u64::try_from(lower_hex(&v[36..52])?).ok()?;
        let flags = lower_hex(&v[53..55])?;
        (trace_id != 0 && span_id != 0).then_some(TraceContext {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The `traceparent` value, written digit by digit (`format!` cost a
    /// traced client call about 2,500 instructions and an allocation).
    pub fn encode(&self) -> [u8; 55] {
        let mut out = [b'-'; 55];
        out[..2].copy_from_slice(b"00");
        put_hex(&mut out[3..35], self.trace_id);
        put_hex(&mut out[36..52], u128::from(self.span_id));
        put_hex(&mut out[53..55], u128::from(u8::from(self.sampled)));
        out
    }

    /// A new trace with a random id.
    fn root() -> TraceContext {
        TraceContext {
            trace_id: (u128::from(random_id()) << 64) | u128::from(random_id()),
            span_id: random_id(),
            sampled: true,
        }
    }

    /// The same trace, with a new span id (the caller's own span).
    fn child(&self) -> TraceContext {
        TraceContext {
            span_id: random_id(),
            ..*self
        }
    }
}

/// The value of lower-case hex `digits` (at most 32 of them); `None` for
/// any other byte.
fn lower_hex(digits: &[u8]) -> Option<u128> {
    digits.iter().try_fold(0u128, |acc, &d| {
        let nibble = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => return None,
        };
        Some(acc << 4 | u128::from(nibble))
    })
}

/// Writes the low `out.len()` nibbles of `v` into `out`, lower-case hex,
/// most significant first.
fn put_hex(out: &mut [u8], mut v: u128) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for d in out.iter_mut().rev() {
        *d = DIGITS[(v & 0xf) as usize];
        v >>= 4;
    }
}

/// Hex of an id, formatted only when a subscriber records it.
struct Hex<T>(T);

impl fmt::Display for Hex<u128> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Display for Hex<u64> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

thread_local! {
    static RNG: Cell<u64> = Cell::new({
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5eed);
        h.finish() | 1
    });
}

/// A non-zero random id (xorshift64*, seeded per thread; ids need to be
/// unique, not secret).
fn random_id() -> u64 {
    RNG.with(|c| {
        let mut x = c.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d).max(1)
    })
}

/// `rpc.service` and `rpc.method` of a canonical name.
fn split(method: &str) -> (&str, &str) {
    method.rsplit_once('/').unwrap_or(("", method))
}

/// The trace context in a call's metadata, if any (and well-formed).
pub(crate) fn incoming(meta: &Metadata) -> Option<TraceContext> {
    meta.get(TRACEPARENT).and_then(TraceContext::parse)
}

/// Records the ids of `trace` on `span`, the parent being `parent`.
fn record_ids(span: &Span, trace: &TraceContext, parent: Option<u64>) {
    span.record("trace_id", field::display(Hex(trace.trace_id)));
    span.record("span_id", field::display(Hex(trace.span_id)));
    if let Some(p) = parent {
        span.record("parent_id", field::display(Hex(p)));
    }
}

/// Whether a tracing subscriber could hear a span or event at `level`:
/// one has been set, globally or for a scope (a relaxed load), and its
/// level filter lets `level` through.
///
/// tracing's own level check is no help when none is set: its stand-in
/// dispatcher gives no level hint, so the maximum level reads `TRACE` once
/// any callsite has registered, and every span macro goes on to ask the
/// callsite (and every `Span::current` the thread-local dispatcher).
#[inline]
fn listening(level: Level) -> bool {
    tracing::dispatcher::has_been_set() && tracing::level_enabled!(level)
}

/// The span of a server connection.
pub(crate) fn connection_span(peer: &PeerInfo) -> Span {
    tracing::span!(
        Level::INFO,
        "rpc.connection",
        network.peer.address = peer.addr.as_deref(),
        weft.encrypted = peer.encrypted,
        weft.compressed = peer.compressed,
    )
}

/// The span of an incoming call and the trace context its handler passes
/// on to nested calls: the trace context is `None` when the span is
/// disabled, and then the caller's `traceparent` is passed on unchanged,
/// read from the call's metadata only if a nested call asks for it
/// ([`Context::trace_context`](crate::Context::trace_context)).
///
/// With no subscriber this is one relaxed load ([`listening`]) and `None`:
/// no span is made (not even a disabled one, for the caller to check and
/// drop), the metadata is not read at all.
#[inline]
pub(crate) fn server_span(
    meta: &Metadata,
    peer: &PeerInfo,
    stream_id: u32,
) -> Option<(Span, Option<TraceContext>)> {
    if !listening(Level::INFO) {
        return None;
    }
    Some(make_server_span(meta, peer, stream_id))
}

/// [`server_span`] past its check, out of line: the check is all that
/// runs per call with no subscriber.
#[inline(never)]
fn make_server_span(
    meta: &Metadata,
    peer: &PeerInfo,
    stream_id: u32,
) -> (Span, Option<TraceContext>) {
    let span = tracing::span!(
        Level::INFO,
        "rpc.server",
        rpc.system = "weft",
        rpc.service = field::Empty,
        rpc.method = field::Empty,
        network.peer.address = peer.addr.as_deref(),
        rpc.weft.stream_id = stream_id,
        rpc.weft.timeout_us = meta.timeout_micros(),
        rpc.response.status_code = field::Empty,
        trace_id = field::Empty,
        span_id = field::Empty,
        parent_id = field::Empty,
    );
    if span.is_disabled() {
        return (span, None);
    }
    let (service, method) = split(meta.method().unwrap_or(""));
    span.record("rpc.service", service);
    span.record("rpc.method", method);
    let parent = incoming(meta);
    let own = parent.map_or_else(TraceContext::root, |p| p.child());
    record_ids(&span, &own, parent.map(|p| p.span_id));
    (span, Some(own))
}

/// Records a server call's outcome on the current span (its own), and
/// the call's end as an event.
///
/// Nothing is looked up unless a subscriber listens at `WARN` or finer
/// ([`listening`]): finding the current span costs a thread-local access
/// and a dispatcher call, a few dozen instructions per call.
#[inline]
pub(crate) fn server_finished(status: &Status) {
    if listening(Level::WARN) {
        record_finished(status);
    }
}

/// [`server_finished`] past its check, out of line: the check is all
/// that runs per call with no subscriber.
#[inline(never)]
fn record_finished(status: &Status) {
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    let code = status.code();
    span.record("rpc.response.status_code", code.name());
    if matches!(code, Code::INTERNAL | Code::UNKNOWN | Code::DATA_LOSS) {
        tracing::warn!(rpc.response.status_code = code.name(), %status, "call failed");
    } else {
        tracing::debug!(rpc.response.status_code = code.name(), "call finished");
    }
}

/// Records the stream id of a client call on the current span (its own).
pub(crate) fn client_stream(id: u32) {
    if !listening(Level::INFO) {
        return;
    }
    let span = Span::current();
    if !span.is_disabled() {
        span.record("rpc.weft.stream_id", id);
    }
}

/// The span of an outgoing call, and its options with the `traceparent`
/// to send (borrowed unchanged when there is nothing to add).
fn client_span<'a>(
    peer: Option<&str>,
    method: &str,
    opts: &'a CallOptions,
) -> (Span, Cow<'a, CallOptions>) {
    let span = tracing::span!(
        Level::INFO,
        "rpc.client",
        rpc.system = "weft",
        rpc.service = field::Empty,
        rpc.method = field::Empty,
        network.peer.address = peer,
        rpc.weft.stream_id = field::Empty,
        rpc.weft.timeout_us = field::Empty,
        rpc.response.status_code = field::Empty,
        trace_id = field::Empty,
        span_id = field::Empty,
        parent_id = field::Empty,
    );
    if span.is_disabled() {
        return (span, Cow::Borrowed(opts));
    }
    let (service, m) = split(method);
    span.record("rpc.service", service);
    span.record("rpc.method", m);
    if let Some(t) = opts.timeout_value() {
        span.record("rpc.weft.timeout_us", t.as_micros() as u64);
    }
    let parent = opts
        .metadata_value(TRACEPARENT)
        .and_then(TraceContext::parse);
    let own = parent.map_or_else(TraceContext::root, |p| p.child());
    record_ids(&span, &own, parent.map(|p| p.span_id));
    let mut with = opts.clone();
    with.set_metadata(TRACEPARENT, &own.encode());
    (span, Cow::Owned(with))
}

/// A client call's observers: its `rpc.client` span (when enabled) and
/// its meter (when a recorder is installed).
///
/// Small, because every unary call's future holds one: a metered call's
/// meter is inline (24 bytes), a traced call's span, meter and start are
/// boxed. A traced call already allocates (its `traceparent` options, the
/// subscriber's span), and inline they would make every call future, and
/// every copy of it a caller's `join_all` or `spawn` makes, 56 bytes larger.
#[derive(Debug)]
pub(crate) struct ClientCall(Observers);

/// Whether anything observes a client call.
#[derive(Debug)]
enum Observers {
    /// The span is disabled and the meter off: every hook returns at
    /// once, and dropping the call drops nothing.
    Quiet,
    /// Metered, not traced.
    Metered(CallMeter),
    /// A span that records (and the meter, on or off).
    Traced(Box<Watched>),
}

/// A traced call's observers.
#[derive(Debug)]
struct Watched {
    span: Span,
    meter: CallMeter,
    /// When the call started, for the span's latency; taken when the
    /// outcome is recorded.
    start: Option<Instant>,
}

/// The observers of an outgoing call, and its options with the
/// `traceparent` to send (see [`client_span`]).
///
/// Inlined: when nothing listens this is one relaxed load and a branch in
/// the caller, no span made at all.
#[inline]
pub(crate) fn client_call<'a>(
    meters: &ClientMeters,
    peer: Option<&str>,
    method: &str,
    opts: &'a CallOptions,
) -> (ClientCall, Cow<'a, CallOptions>) {
    if unobserved(meters) {
        return (ClientCall::QUIET, Cow::Borrowed(opts));
    }
    client_call_observed(meters, peer, method, opts)
}

/// Whether a client call with these meters would be observed by nothing:
/// then [`client_call`] gives [`ClientCall::QUIET`] and the options as
/// they are (no `traceparent`), and a caller may skip it.
#[inline]
pub(crate) fn unobserved(meters: &ClientMeters) -> bool {
    !listening(Level::INFO) && meters.is_off()
}

/// [`client_call`] when a subscriber or a recorder is installed.
#[inline(never)]
fn client_call_observed<'a>(
    meters: &ClientMeters,
    peer: Option<&str>,
    method: &str,
    opts: &'a CallOptions,
) -> (ClientCall, Cow<'a, CallOptions>) {
    let (span, opts) = client_span(peer, method, opts);
    let meter = meters.start(method);
    let obs = match (span.is_disabled(), meter.is_off()) {
        (true, true) => Observers::Quiet,
        (true, false) => Observers::Metered(meter),
        (false, _) => {
            let start = Some(meter.started_at().unwrap_or_else(Instant::now));
            Observers::Traced(Box::new(Watched { span, meter, start }))
        }
    };
    (ClientCall(obs), opts)
}

impl ClientCall {
    /// The observers of a call nothing observes ([`unobserved`]).
    pub(crate) const QUIET: ClientCall = ClientCall(Observers::Quiet);

    /// A unary request message is on its way.
    pub(crate) fn sent(&self, framed: &Framed) {
        if let Some(meter) = self.meter() {
            meter.sent(framed);
        }
    }

    /// A unary response message of `n` bytes came in.
    #[inline]
    pub(crate) fn received(&self, n: usize) {
        if let Some(meter) = self.meter() {
            meter.received(n);
        }
    }

    /// The response counter, for a reply read in a future of its own.
    pub(crate) fn receiving(&self) -> Receiving {
        self.meter()
            .map_or(Receiving::OFF, |meter| meter.receiving())
    }

    /// The meter, if the call is metered or traced.
    fn meter(&self) -> Option<&CallMeter> {
        match &self.0 {
            Observers::Metered(meter) => Some(meter),
            Observers::Traced(w) => Some(&w.meter),
            Observers::Quiet => None,
        }
    }

    /// Enters the call's span (if traced) until the guard is dropped.
    #[inline]
    pub(crate) fn enter(&self) -> Option<tracing::span::Entered<'_>> {
        match &self.0 {
            Observers::Traced(w) => Some(w.span.enter()),
            Observers::Quiet | Observers::Metered(_) => None,
        }
    }

    /// The call's stream is `id` (recorded on its span). Inlined, as the
    /// other hooks: an untraced call pays the test, not a call.
    #[inline]
    pub(crate) fn stream(&self, id: u32) {
        if let Observers::Traced(w) = &self.0 {
            w.span.record("rpc.weft.stream_id", id);
        }
    }

    /// A streaming call's open: records the stream id, or the failure.
    pub(crate) fn opened<T>(
        &mut self,
        opened: Result<(weft_mux::Stream, T), Status>,
    ) -> Result<(weft_mux::Stream, T), Status> {
        match &opened {
            Ok((s, _)) => self.stream(s.id()),
            Err(e) => self.ended(&Err::<(), _>(e.clone())),
        }
        opened
    }

    /// The call's outcome, on its span and its meter (once: later
    /// outcomes are not counted again).
    #[inline]
    pub(crate) fn ended<T>(&mut self, r: &Result<T, Status>) {
        match &mut self.0 {
            Observers::Quiet => {}
            Observers::Metered(meter) => meter.finish(code_of(r)),
            Observers::Traced(w) => w.ended(code_of(r)),
        }
    }
}

/// A call's outcome as a code.
fn code_of<T>(r: &Result<T, Status>) -> Code {
    match r {
        Ok(_) => Code::OK,
        Err(s) => s.code(),
    }
}

impl Watched {
    /// The outcome `code`, on the meter and the span (once).
    fn ended(&mut self, code: Code) {
        self.meter.finish(code);
        let Some(start) = self.start.take() else {
            // The outcome is already recorded.
            return;
        };
        self.span.record("rpc.response.status_code", code.name());
        let latency_us = start.elapsed().as_micros() as u64;
        self.span.in_scope(|| {
            tracing::debug!(
                rpc.response.status_code = code.name(),
                latency_us,
                "call finished"
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_malformed_values() {
        let t = TraceContext {
            trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
            span_id: 0x00f067aa0ba902b7,
            sampled: true,
        };
        let text = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(&t.encode(), text);
        assert_eq!(TraceContext::parse(text), Some(t));
        for bad in [
            &b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"[..],
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            b"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            b"",
            b"\xff",
        ] {
            assert_eq!(
                TraceContext::parse(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // Any ids: the text `format!` would write, and back.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..64 {
            x = x.wrapping_mul(0x5851_f42d_4c95_7f2d).wrapping_add(1);
            let t = TraceContext {
                trace_id: (u128::from(x) << 64 | u128::from(x.rotate_left(17))) >> (x % 64),
                span_id: x.max(1) >> (x % 61),
                sampled: x & 1 == 1,
            };
            let text = format!(
                "00-{:032x}-{:016x}-{:02x}",
                t.trace_id,
                t.span_id,
                u8::from(t.sampled)
            );
            assert_eq!(&t.encode()[..], text.as_bytes());
            let back = TraceContext::parse(text.as_bytes());
            let valid = t.trace_id != 0 && t.span_id != 0;
            assert_eq!(back, valid.then_some(t), "{text}");
        }
        let c = t.child();
        assert_eq!((c.trace_id, c.sampled), (t.trace_id, true));
        assert_ne!(c.span_id, t.span_id);
        assert_ne!(TraceContext::root().trace_id, TraceContext::root().trace_id);
    }

    #[test]
    fn names_split_into_service_and_method() {
        assert_eq!(split("pkg.greeter/hello"), ("pkg.greeter", "hello"));
        assert_eq!(split("a/b/c"), ("a/b", "c"));
        assert_eq!(split("echo"), ("", "echo"));
    }
}
