//! Server metrics through the [`metrics`] facade: no exporter is forced on
//! a library user; with no recorder installed every handle is a no-op.
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
//!
//! Handles are registered once per method per connection (a method's
//! first call on a connection), then kept: a call itself allocates
//! nothing. Handles taken before a recorder is installed stay no-ops, so
//! install it before serving.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use metrics::{Counter, Gauge, Histogram};
use tokio::time::Instant;

use crate::Code;
use crate::codec::Framed;
use crate::hash::FastHash;

/// Status codes with a handle of their own; others count as `UNKNOWN`.
const CODES: usize = 17;

/// The handles of one method.
#[derive(Debug)]
pub(crate) struct MethodMeter {
    method: Arc<str>,
    started: Counter,
    duration: Histogram,
    received: Counter,
    sent: Counter,
    handled: [OnceLock<Counter>; CODES],
}

impl MethodMeter {
    fn new(method: Arc<str>) -> MethodMeter {
        let m = || method.clone();
        MethodMeter {
            started: metrics::counter!("weft_rpc_server_started_total", "rpc_method" => m()),
            duration: metrics::histogram!("weft_rpc_server_duration_seconds", "rpc_method" => m()),
            received: metrics::counter!("weft_rpc_server_received_bytes_total", "rpc_method" => m()),
            sent: metrics::counter!("weft_rpc_server_sent_bytes_total", "rpc_method" => m()),
            handled: Default::default(),
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
                "weft_rpc_server_handled_total",
                "rpc_method" => self.method.clone(),
                "code" => name
            )
        })
    }
}

/// The method handles of one connection, held by its accepting task.
#[derive(Debug, Default)]
pub(crate) struct Meters {
    methods: HashMap<Arc<str>, Arc<MethodMeter>, FastHash>,
}

/// Most methods whose handles a connection keeps (a peer calling many
/// unknown names cannot grow it: only routed names reach it).
const METHODS_MAX: usize = 1024;

impl Meters {
    /// A call of `method` starts.
    pub(crate) fn start(&mut self, method: &Arc<str>) -> CallMeter {
        let m = match self.methods.get(method) {
            Some(m) => m.clone(),
            None => {
                let m = Arc::new(MethodMeter::new(method.clone()));
                if self.methods.len() < METHODS_MAX {
                    self.methods.insert(method.clone(), m.clone());
                }
                m
            }
        };
        m.started.increment(1);
        in_flight().increment(1.0);
        CallMeter {
            m,
            start: Instant::now(),
            finished: false,
        }
    }
}

fn in_flight() -> Gauge {
    metrics::gauge!("weft_rpc_server_calls_in_flight")
}

/// One call's meter: records its outcome and duration once.
#[derive(Debug)]
pub(crate) struct CallMeter {
    m: Arc<MethodMeter>,
    start: Instant,
    finished: bool,
}

impl CallMeter {
    /// The unary request was `n` bytes.
    pub(crate) fn received(&self, n: usize) {
        self.m.received.increment(n as u64);
    }

    /// The response message was sent (its bytes on the stream, prefix included).
    pub(crate) fn sent(&self, framed: &Framed) {
        let n = match framed {
            Framed::One(b) => b.len(),
            Framed::Two(prefix, body) => prefix.len() + body.len(),
        };
        self.m.sent.increment(n as u64);
    }

    /// The call ended with `code`.
    pub(crate) fn finish(&mut self, code: Code) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        self.m.handled(code).increment(1);
        self.m.duration.record(self.start.elapsed().as_secs_f64());
    }
}

impl Drop for CallMeter {
    fn drop(&mut self) {
        // Dropped without a status sent: the call was cut off.
        self.finish(Code::CANCELLED);
        in_flight().decrement(1.0);
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
