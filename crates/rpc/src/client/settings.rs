//! The builder methods that give a [`Client`] (and the clones made from
//! it afterwards) other settings than the connection's defaults.

use std::sync::Arc;

use super::{Client, HashMap, Mutex, Shared};
use crate::meter::{ClientMeters, Metrics};

impl Shared {
    /// The same settings with other meters, and an empty metadata cache:
    /// what a builder method starts from.
    fn rebuilt(&self, meters: ClientMeters) -> Shared {
        Shared {
            max_message: self.max_message,
            default_timeout: self.default_timeout,
            plain: Mutex::new(HashMap::default()),
            meters,
            #[cfg(feature = "tower")]
            credit: self.credit.clone(),
        }
    }
}

impl Client {
    /// Sets how many calls the `tower::Service` interface lets through
    /// `poll_ready` at once (default 100). Applies to this client and the
    /// clones made from it afterwards.
    #[cfg(feature = "tower")]
    #[must_use]
    pub fn with_in_flight_limit(self, n: usize) -> Client {
        let meters = self.shared.meters.same();
        Client {
            shared: Arc::new(Shared {
                credit: crate::tower::semaphore(n),
                ..self.shared.rebuilt(meters)
            }),
            ..self
        }
    }

    /// Whether calls are metered (`weft_rpc_client_*`, see [`Metrics`]):
    /// [`Metrics::Auto`] (the default) decides now, on when a `metrics`
    /// recorder is installed. Applies to this client and the clones made
    /// from it afterwards; their method handles start afresh.
    #[must_use]
    pub fn with_metrics(self, metrics: Metrics) -> Client {
        let meters = ClientMeters::new(metrics);
        Client {
            shared: Arc::new(self.shared.rebuilt(meters)),
            ..self
        }
    }
}
