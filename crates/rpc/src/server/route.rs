//! What names a route apart from its handler: its [`Shape`] and its
//! [`RouteId`]. A leaf, so the call runners and the metrics can name a
//! route without importing the router that holds the handlers.

/// The shape of a method, for listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One request, one response.
    Unary,
    /// One request, a stream of responses.
    ServerStreaming,
    /// A stream of requests, one response.
    ClientStreaming,
    /// Streams both ways.
    Bidi,
}

/// A route's place in its [`Router`](super::router::Router)'s table: the
/// server resolves a call's name to it once, as the call opens, and
/// everything after (handler, metric handles) is found by index, not by
/// name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RouteId(pub(super) u32);

impl RouteId {
    /// The index into a table with one entry per route.
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}
