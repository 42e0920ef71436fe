//! The builder methods that give a [`Client`] (and the clones made from
//! it afterwards) other settings than the connection's defaults.

use std::sync::Arc;

use super::plain::PlainCache;
use super::{Client, Shared};
use crate::observe::meter::{ClientMeters, Metrics};

impl Shared {
    /// The same settings with other meters, and an empty metadata cache:
    /// what a builder method starts from.
    fn rebuilt(&self, meters: ClientMeters) -> Shared {
        Shared {
            max_message: self.max_message,
            default_timeout: self.default_timeout,
            plain: PlainCache::default(),
            meters,
            peer: self.peer.clone(),
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
        self.with(|s| s.credit = crate::client::tower::semaphore(n))
    }

    /// Whether calls are metered (`weft_rpc_client_*`, see [`Metrics`]):
    /// [`Metrics::Auto`] (the default) decides now, on when a `metrics`
    /// recorder is installed. Applies to this client and the clones made
    /// from it afterwards; their method handles start afresh.
    #[must_use]
    pub fn with_metrics(self, metrics: Metrics) -> Client {
        self.with(|s| s.meters = ClientMeters::new(metrics))
    }

    /// Names the server's address on the calls' `rpc.client` spans
    /// (`network.peer.address`), as the facade's `weft::connect` does.
    /// Applies to this client and the clones made from it afterwards.
    ///
    /// ```no_run
    /// # async fn f(conn: weft_mux::Connection) {
    /// let client = weft_rpc::Client::new(conn).with_peer_address("10.0.0.7:7700");
    /// # }
    /// ```
    #[must_use]
    pub fn with_peer_address(self, addr: &str) -> Client {
        self.with(|s| s.peer = Some(addr.into()))
    }

    /// The same client with the settings `change` makes (and fresh
    /// method handles).
    fn with(self, change: impl FnOnce(&mut Shared)) -> Client {
        let mut shared = self.shared.rebuilt(self.shared.meters.same());
        change(&mut shared);
        Client {
            shared: Arc::new(shared),
            ..self
        }
    }
}
