//! Call metrics through the [`metrics`] facade, on both sides: no
//! exporter is forced on a library user; with no recorder installed every
//! handle is a no-op.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `weft_rpc_server_started_total` | counter | `rpc_method` |
//! | `weft_rpc_server_handled_total` | counter | `rpc_method`, `code` |
//! | `weft_rpc_server_duration_seconds` | histogram | `rpc_method` |
//! | `weft_rpc_server_received_bytes_total` | counter | `rpc_method` (unary request messages) |
//! | `weft_rpc_server_sent_bytes_total` | counter | `rpc_method` (unary response messages, length prefix included) |
//! | `weft_rpc_server_connections` | gauge | |
//! | `weft_rpc_server_calls_in_flight` | gauge | |
//! | `weft_rpc_client_started_total` | counter | `rpc_method` |
//! | `weft_rpc_client_handled_total` | counter | `rpc_method`, `code` |
//! | `weft_rpc_client_duration_seconds` | histogram | `rpc_method` |
//! | `weft_rpc_client_sent_bytes_total` | counter | `rpc_method` (unary request messages, length prefix included) |
//! | `weft_rpc_client_received_bytes_total` | counter | `rpc_method` (unary response messages) |
//! | `weft_rpc_client_calls_in_flight` | gauge | |
//!
//! The client's names mirror the server's (as go-grpc-prometheus'
//! `grpc_client_*` mirror its `grpc_server_*`), so one dashboard query
//! serves both with the side swapped. A client call counts from the
//! moment it is made (its future created, or its stream opened) to its
//! outcome; a call whose future is dropped first counts as `CANCELLED`,
//! as does a streaming call dropped before its end. Failures found before
//! anything is sent (a bad method name, a request over the limit) count
//! too, with their code. The client labels a method by its canonical
//! name, the one the server sees.
//!
//! Handles are registered once per method per connection on the server
//! (a method's first call on a connection) and once per method per
//! [`Client`](crate::client::Client) (shared by its clones) on the client, then
//! kept: a call itself allocates nothing. Handles taken before a recorder
//! is installed stay no-ops, so install it before serving or making the
//! client.
//!
//! ## Off unless a recorder is installed
//! Whether an endpoint meters its calls at all is decided once
//! ([`Metrics`], default [`Metrics::Auto`]): when a client is made, and
//! when a server connection opens. Off, a call reads no clock and looks
//! up no handle: metering costs a branch. Auto is on when the thread's
//! local recorder or the global one is installed at that moment; the
//! `metrics` facade cannot be asked that directly, so it is told by the
//! current recorder's size: the facade's stand-in, `NoopRecorder`, is the
//! one recorder with no state. A recorder type of size zero (keeping all
//! its state in statics) is not seen; meter with [`Metrics::On`] then.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use metrics::{Counter, Gauge, Histogram};
use tokio::time::Instant;

use crate::codec::Framed;
use crate::hash::FastHash;
use crate::method;
use crate::server::route::RouteId;
use crate::status::Code;

/// Whether an endpoint records call metrics (`weft_rpc_client_*`,
/// `weft_rpc_server_*`), decided once: when a client is made, when a
/// server connection opens. Off, a call reads no clock and looks up no
/// handle.
///
/// The `metrics` facade cannot be asked whether a recorder is installed;
/// [`Auto`](Metrics::Auto) tells by the current recorder's size, since the
/// facade's stand-in `NoopRecorder` is the one recorder with no state. A
/// zero-sized recorder type of your own (its state all in statics) is not
/// seen: use [`On`](Metrics::On).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metrics {
    /// On when a `metrics` recorder (the thread's local one, or the global
    /// one) is installed when the client is made or the server connection
    /// opens; off otherwise. What a user of grpc-go's or tonic's metrics
    /// middleware expects: metrics appear once a recorder is installed,
    /// and cost nothing until then.
    #[default]
    Auto,
    /// Always: every call registers and updates its handles (no-ops while
    /// no recorder is installed).
    On,
    /// Never: no clock read, no handle lookup, even with a recorder.
    Off,
}

impl Metrics {
    /// Whether to meter, deciding [`Metrics::Auto`] now.
    pub(crate) fn enabled(self) -> bool {
        match self {
            Metrics::Auto => recorder_installed(),
            Metrics::On => true,
            Metrics::Off => false,
        }
    }
}

/// Whether the recorder that a handle registered now would use is a real
/// one: every recorder but the facade's zero-sized `NoopRecorder` has
/// state (see the module docs for the one blind spot).
fn recorder_installed() -> bool {
    metrics::with_recorder(|r| std::mem::size_of_val(r) != 0)
}

/// Status codes with a handle of their own; others count as `UNKNOWN`.
const CODES: usize = 17;

/// The metric names of one side of a call.
#[derive(Debug)]
struct Names {
    started: &'static str,
    handled: &'static str,
    duration: &'static str,
    received: &'static str,
    sent: &'static str,
    in_flight: &'static str,
}

const SERVER: Names = Names {
    started: "weft_rpc_server_started_total",
    handled: "weft_rpc_server_handled_total",
    duration: "weft_rpc_server_duration_seconds",
    received: "weft_rpc_server_received_bytes_total",
    sent: "weft_rpc_server_sent_bytes_total",
    in_flight: "weft_rpc_server_calls_in_flight",
};

const CLIENT: Names = Names {
    started: "weft_rpc_client_started_total",
    handled: "weft_rpc_client_handled_total",
    duration: "weft_rpc_client_duration_seconds",
    received: "weft_rpc_client_received_bytes_total",
    sent: "weft_rpc_client_sent_bytes_total",
    in_flight: "weft_rpc_client_calls_in_flight",
};

/// The handles of one method on one side.
#[derive(Debug)]
pub(crate) struct MethodMeter {
    names: &'static Names,
    method: Arc<str>,
    started: Counter,
    duration: Histogram,
    received: Counter,
    sent: Counter,
    in_flight: Gauge,
    handled: [OnceLock<Counter>; CODES],
}

impl MethodMeter {
    fn new(method: Arc<str>, names: &'static Names) -> MethodMeter {
        let m = || method.clone();
        MethodMeter {
            started: metrics::counter!(names.started, "rpc_method" => m()),
            duration: metrics::histogram!(names.duration, "rpc_method" => m()),
            received: metrics::counter!(names.received, "rpc_method" => m()),
            sent: metrics::counter!(names.sent, "rpc_method" => m()),
            in_flight: metrics::gauge!(names.in_flight),
            handled: Default::default(),
            names,
            method,
        }
    }

    fn handled(&self, code: Code) -> &Counter {
        let i = usize::try_from(code.0)
            .ok()
            .filter(|&i| i < CODES)
            .unwrap_or(Code::UNKNOWN.0 as usize);
        self.handled[i].get_or_init(|| {
            let name = if i == code.0 as usize {
                code.name()
            } else {
                Code::UNKNOWN.name()
            };
            metrics::counter!(
                self.names.handled,
                "rpc_method" => self.method.clone(),
                "code" => name
            )
        })
    }
}

/// Most methods whose handles a client keeps (past it, a call registers
/// its handles itself).
const METHODS_MAX: usize = 1024;

/// The method handles of one server connection, held by its accepting
/// task; `Off` when the connection does not meter its calls.
#[derive(Debug)]
pub(crate) enum Meters {
    /// Calls are not metered.
    Off,
    /// Handles by route ([`RouteId`]): registered at a method's first call
    /// on the connection, then found by index (only routed calls are
    /// metered, so the table is as long as the router's).
    On(Vec<Option<Arc<MethodMeter>>>),
}

impl Meters {
    /// The handles of a connection that opens now, to a router of
    /// `routes` methods, metered as `metrics` says.
    pub(crate) fn new(metrics: Metrics, routes: usize) -> Meters {
        if metrics.enabled() {
            Meters::On(vec![None; routes])
        } else {
            Meters::Off
        }
    }

    /// A call of `method`, routed to `route`, starts. Only the test is
    /// always inline: left to the compiler, the whole was a call of its
    /// own on every call of a server that meters nothing.
    #[inline(always)]
    pub(crate) fn start(&mut self, route: RouteId, method: &Arc<str>) -> CallMeter {
        match self {
            Meters::Off => CallMeter::OFF,
            Meters::On(methods) => Meters::start_on(methods, route, method),
        }
    }

    /// [`start`](Self::start) of a metering server.
    fn start_on(
        methods: &mut [Option<Arc<MethodMeter>>],
        route: RouteId,
        method: &Arc<str>,
    ) -> CallMeter {
        let m = match methods.get_mut(route.index()) {
            Some(Some(m)) => m.clone(),
            Some(slot @ None) => slot
                .insert(Arc::new(MethodMeter::new(method.clone(), &SERVER)))
                .clone(),
            // Not a route of this connection's router: counted, not kept.
            None => Arc::new(MethodMeter::new(method.clone(), &SERVER)),
        };
        CallMeter::begin(m)
    }
}

/// The method handles of one client and its clones, by the method name as
/// the caller spells it (so a hit skips canonicalisation); `Off` when the
/// client does not meter its calls.
#[derive(Debug)]
pub(crate) enum ClientMeters {
    /// Calls are not metered.
    Off,
    /// Handles by method name.
    On(Mutex<HashMap<Box<str>, Arc<MethodMeter>, FastHash>>),
}

impl ClientMeters {
    /// Whether calls are not metered.
    pub(crate) fn is_off(&self) -> bool {
        matches!(self, ClientMeters::Off)
    }

    /// The handles of a client made now, metered as `metrics` says.
    pub(crate) fn new(metrics: Metrics) -> ClientMeters {
        if metrics.enabled() {
            ClientMeters::On(Mutex::default())
        } else {
            ClientMeters::Off
        }
    }

    /// Empty handles, metered as these are.
    pub(crate) fn same(&self) -> ClientMeters {
        match self {
            ClientMeters::Off => ClientMeters::Off,
            ClientMeters::On(_) => ClientMeters::On(Mutex::default()),
        }
    }

    /// A call of `method` is made.
    pub(crate) fn start(&self, method: &str) -> CallMeter {
        let ClientMeters::On(methods) = self else {
            return CallMeter::OFF;
        };
        let mut methods = methods.lock().unwrap_or_else(|e| e.into_inner());
        let m = match methods.get(method) {
            Some(m) => m.clone(),
            None => {
                // A name that does not canonicalise fails the call; it is
                // labelled as given.
                let label: Arc<str> = match method::canonicalize(method) {
                    Ok(c) => c.as_ref().into(),
                    Err(_) => method.into(),
                };
                let m = Arc::new(MethodMeter::new(label, &CLIENT));
                if methods.len() < METHODS_MAX {
                    methods.insert(method.into(), m.clone());
                }
                m
            }
        };
        drop(methods);
        CallMeter::begin(m)
    }
}

/// A call's response counter, held by a reply read in a future of its
/// own (a client's unary reply that is not one whole frame): that future
/// cannot borrow the call's meter.
#[derive(Debug)]
pub(crate) struct Receiving(Option<Counter>);

impl Receiving {
    /// Counts nothing (the call is not metered).
    pub(crate) const OFF: Receiving = Receiving(None);

    /// A response message of `n` bytes came in.
    pub(crate) fn count(&self, n: usize) {
        if let Some(c) = &self.0 {
            c.increment(n as u64);
        }
    }
}

/// One call's meter: records its outcome and duration once.
#[derive(Debug)]
pub(crate) struct CallMeter(Metered);

/// Where a call's meter is.
#[derive(Debug)]
enum Metered {
    /// The call is not metered (no clock read, nothing recorded).
    Off,
    /// In flight since `start`.
    Running {
        /// The method's handles.
        m: Arc<MethodMeter>,
        /// When the call started.
        start: Instant,
    },
    /// Its outcome is recorded; later outcomes are ignored.
    Finished,
}

impl CallMeter {
    /// A call that is not metered.
    pub(crate) const OFF: CallMeter = CallMeter(Metered::Off);

    fn begin(m: Arc<MethodMeter>) -> CallMeter {
        m.started.increment(1);
        m.in_flight.increment(1.0);
        CallMeter(Metered::Running {
            m,
            start: Instant::now(),
        })
    }

    fn method(&self) -> Option<&MethodMeter> {
        match &self.0 {
            Metered::Running { m, .. } => Some(m),
            Metered::Off | Metered::Finished => None,
        }
    }

    /// When the call started, if it is metered and running.
    pub(crate) fn started_at(&self) -> Option<Instant> {
        match &self.0 {
            Metered::Running { start, .. } => Some(*start),
            Metered::Off | Metered::Finished => None,
        }
    }

    /// Whether this call is not metered at all.
    pub(crate) fn is_off(&self) -> bool {
        matches!(self.0, Metered::Off)
    }

    /// A unary message of `n` bytes came in (the server's request, the
    /// client's response).
    pub(crate) fn received(&self, n: usize) {
        if let Some(m) = self.method() {
            m.received.increment(n as u64);
        }
    }

    /// A unary message went out (its bytes on the stream, prefix included:
    /// the server's response, the client's request).
    pub(crate) fn sent(&self, framed: &Framed) {
        let Some(m) = self.method() else { return };
        let n = match framed {
            Framed::One(b) => b.len(),
            Framed::Two(prefix, body) => prefix.len() + body.len(),
        };
        m.sent.increment(n as u64);
    }

    /// This call's response counter, for a reply read apart from the
    /// meter (in a future of its own).
    pub(crate) fn receiving(&self) -> Receiving {
        Receiving(self.method().map(|m| m.received.clone()))
    }

    /// The call ended with `code`: it is no longer in flight (later calls
    /// are ignored).
    #[inline]
    pub(crate) fn finish(&mut self, code: Code) {
        // Inlined, so an unmetered call pays this one branch, not a call.
        if matches!(self.0, Metered::Running { .. }) {
            self.record(code);
        }
    }

    /// [`finish`](Self::finish) of a running meter.
    #[inline(never)]
    fn record(&mut self, code: Code) {
        let Metered::Running { m, start } = std::mem::replace(&mut self.0, Metered::Finished)
        else {
            return;
        };
        m.handled(code).increment(1);
        m.duration.record(start.elapsed().as_secs_f64());
        m.in_flight.decrement(1.0);
    }
}

impl Drop for CallMeter {
    #[inline]
    fn drop(&mut self) {
        // Dropped without an outcome: the call was cut off.
        self.finish(Code::CANCELLED);
    }
}

/// Counts a server connection while it lives.
#[derive(Debug)]
pub(crate) struct ConnectionMeter(());

impl ConnectionMeter {
    /// A connection opened.
    pub(crate) fn open() -> ConnectionMeter {
        metrics::gauge!("weft_rpc_server_connections").increment(1.0);
        ConnectionMeter(())
    }
}

impl Drop for ConnectionMeter {
    fn drop(&mut self) {
        metrics::gauge!("weft_rpc_server_connections").decrement(1.0);
    }
}
