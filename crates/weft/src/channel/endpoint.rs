//! [`Endpoint`]: how to make one connection to one server.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use weft_rpc::Client;

use crate::{Address, Config, Error};

/// A boxed, sendable future.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

type Connect = dyn Fn() -> BoxFuture<Result<Client, Error>> + Send + Sync;

/// One server a [`Channel`](super::Channel) connects to: a name (for logs
/// and errors) and a way to make a new connection (TCP or Unix socket
/// through [`crate::connect`], or any function, e.g. an in-memory pipe).
/// Cheap to clone.
#[derive(Clone)]
pub struct Endpoint {
    name: Arc<str>,
    connect: Arc<Connect>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint at `addr` (`host:port` or `unix:/path`), connected with
    /// `config`. Fails only if the address is malformed; nothing connects
    /// until a call needs it.
    pub fn new(addr: &str, config: &Config) -> Result<Endpoint, Error> {
        addr.parse::<Address>()?;
        let (owned, config) = (addr.to_owned(), config.clone());
        Ok(Endpoint::from_fn(addr, move || {
            let (addr, config) = (owned.clone(), config.clone());
            async move { crate::connect(&addr, &config).await }
        }))
    }

    /// An endpoint whose connections `connect` makes: each call of it must
    /// return a new connection's client (e.g. `weft::memory`, or
    /// [`crate::connect_io`] over a custom transport).
    pub fn from_fn<F, Fut>(name: &str, connect: F) -> Endpoint
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Client, Error>> + Send + 'static,
    {
        Endpoint {
            name: name.into(),
            connect: Arc::new(move || Box::pin(connect())),
        }
    }

    /// The name given (the address, for [`Endpoint::new`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Starts one connection attempt.
    pub(crate) fn connect(&self) -> BoxFuture<Result<Client, Error>> {
        (self.connect)()
    }
}
