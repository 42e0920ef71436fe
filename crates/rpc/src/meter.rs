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
//! [`Client`](crate::Client) (shared by its clones) on the client, then
//! kept: a call itself allocates nothing. Handles taken before a recorder
//! is installed stay no-ops, so install it before serving or making the
//! client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use metrics::{Counter, Gauge, Histogram};
use tokio::time::Instant;

use crate::codec::Framed;
use crate::hash::FastHash;
use crate::{Code, Status, method};

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

/// Most methods whose handles a connection (server) or a client keeps (a
/// peer calling many unknown names cannot grow it: only routed names
/// reach the server's; past it, a call registers its handles itself).
const METHODS_MAX: usize = 1024;

/// The method handles of one server connection, held by its accepting task.
#[derive(Debug, Default)]
pub(crate) struct Meters {
    methods: HashMap<Arc<str>, Arc<MethodMeter>, FastHash>,
}

impl Meters {
    /// A call of `method` starts.
    pub(crate) fn start(&mut self, method: &Arc<str>) -> CallMeter {
        let m = match self.methods.get(method) {
            Some(m) => m.clone(),
            None => {
                let m = Arc::new(MethodMeter::new(method.clone(), &SERVER));
                if self.methods.len() < METHODS_MAX {
                    self.methods.insert(method.clone(), m.clone());
                }
                m
            }
        };
        CallMeter::begin(m)
    }
}

/// The method handles of one client and its clones, by the method name as
/// the caller spells it (so a hit skips canonicalisation).
#[derive(Debug, Default)]
pub(crate) struct ClientMeters {
    methods: Mutex<HashMap<Box<str>, Arc<MethodMeter>, FastHash>>,
}

impl ClientMeters {
    /// A call of `method` is made.
    pub(crate) fn start(&self, method: &str) -> CallMeter {
        let mut methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
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

/// One call's meter: records its outcome and duration once.
#[derive(Debug)]
pub(crate) struct CallMeter {
    m: Arc<MethodMeter>,
    start: Instant,
    finished: bool,
}

impl CallMeter {
    fn begin(m: Arc<MethodMeter>) -> CallMeter {
        m.started.increment(1);
        m.in_flight.increment(1.0);
        CallMeter {
            m,
            start: Instant::now(),
            finished: false,
        }
    }

    /// When the call started.
    pub(crate) fn started_at(&self) -> Instant {
        self.start
    }

    /// A unary message of `n` bytes came in (the server's request, the
    /// client's response).
    pub(crate) fn received(&self, n: usize) {
        self.m.received.increment(n as u64);
    }

    /// A unary message went out (its bytes on the stream, prefix included:
    /// the server's response, the client's request).
    pub(crate) fn sent(&self, framed: &Framed) {
        let n = match framed {
            Framed::One(b) => b.len(),
            Framed::Two(prefix, body) => prefix.len() + body.len(),
        };
        self.m.sent.increment(n as u64);
    }

    /// `finish`, counting the response body it is given as received first
    /// (for a client's unary call, whose response is decoded inside the
    /// call's future).
    pub(crate) fn counting<T, F: FnOnce(Bytes) -> Result<T, Status>>(
        &self,
        finish: F,
    ) -> impl FnOnce(Bytes) -> Result<T, Status> + use<T, F> {
        let received = self.m.received.clone();
        move |b| {
            received.increment(b.len() as u64);
            finish(b)
        }
    }

    /// The call ended with `code`: it is no longer in flight (later calls
    /// are ignored).
    pub(crate) fn finish(&mut self, code: Code) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        self.m.handled(code).increment(1);
        self.m.duration.record(self.start.elapsed().as_secs_f64());
        self.m.in_flight.decrement(1.0);
    }
}

impl Drop for CallMeter {
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
