//! [`Channel`]: a client that stays up. It connects lazily, replaces
//! connections that end (idle timeout, `GOAWAY`, record limit, a server
//! restart), reconnects with backoff, spreads calls over several
//! connections per endpoint and, over many endpoints, balances with
//! tower's power-of-two-choices balancer, which ejects for a while an
//! endpoint whose calls keep failing `UNAVAILABLE` (outlier detection:
//! 5 in a row, 1 s doubling to 30 s, at most half the endpoints; see
//! docs/FAQ.md). Calls refused retry-safe are
//! retried under a retry budget; nothing else is retried unless a method
//! is declared idempotent.
//!
//! ```no_run
//! # async fn run() -> Result<(), weft::Error> {
//! use weft::{Bytes, Channel, Config};
//!
//! // Lazy: nothing connects until the first call.
//! let channel = Channel::new("127.0.0.1:7878", &Config::new())?;
//! let reply = channel.unary("echo", Bytes::from_static(b"hi")).await;
//! # let _ = reply; Ok(()) }
//! ```

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use weft_rpc::{
    BidiCall, CallOptions, Caller, Client, ClientInterceptors, ClientStreamingCall, Code,
    Idempotency, Raw, Status, Streaming, method, within,
};

mod attempt;
mod backoff;
mod balance;
mod budget;
mod caller;
mod discover;
mod ejection;
mod endpoint;
mod fixed;
mod outlier;
mod pool;
#[cfg(feature = "tower")]
mod service;

pub use backoff::Backoff;
pub use discover::Change;
pub use endpoint::Endpoint;

use attempt::Attempt;
use balance::Picker;
use budget::RetryBudget;
use fixed::Fixed;
use outlier::Outcome;
use pool::{Lease, Pool};

/// The settings every endpoint of a channel shares.
#[derive(Debug, Clone)]
struct Settings {
    connections: usize,
    backoff: Backoff,
    fail_fast: bool,
    max_calls: Option<u64>,
    idempotent: HashSet<String>,
    budget: (Duration, u32, f32),
    call_timeout: Option<Duration>,
    health_interval: Option<Duration>,
    outliers: outlier::Policy,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            connections: 1,
            backoff: Backoff::default(),
            fail_fast: false,
            max_calls: None,
            idempotent: HashSet::new(),
            budget: (Duration::from_secs(10), 10, 0.2),
            call_timeout: None,
            health_interval: None,
            outliers: outlier::Policy::default(),
        }
    }
}

/// Builds a [`Channel`]. Every setter states its default.
#[derive(Debug, Clone, Default)]
pub struct ChannelBuilder {
    settings: Settings,
}

impl ChannelBuilder {
    /// Connections per endpoint. Default 1 (for 64 callers on two tokio
    /// workers, two measured 1.58× one on a quiet machine and 0.82× on a
    /// busy one: docs/BENCHMARKS.md). Calls
    /// from one thread (one tokio worker) prefer one connection, so
    /// callers on different workers use different connections; a
    /// connection that is down is skipped for a live one.
    #[must_use]
    pub fn connections(mut self, n: usize) -> ChannelBuilder {
        self.settings.connections = n.max(1);
        self
    }

    /// The reconnect schedule and connect timeout. Default
    /// [`Backoff::default`] (gRPC's).
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> ChannelBuilder {
        self.settings.backoff = backoff;
        self
    }

    /// Fail a call at once (`UNAVAILABLE`, retry-safe) when its endpoint
    /// has no connection and every attempt is backing off, instead of
    /// waiting for a connection up to the call's deadline. Default off
    /// (wait). Over many endpoints the balancer always waits.
    #[must_use]
    pub fn fail_fast(mut self, on: bool) -> ChannelBuilder {
        self.settings.fail_fast = on;
        self
    }

    /// Replace a connection after this many calls (its calls in flight
    /// finish on it). Default `None`: a live connection is kept however
    /// many calls it carries (key updates keep an encrypted one under its
    /// record limit, see `Config::rekey_after`), as tonic and grpc-go
    /// clients keep theirs. A cap spreads long-lived clients over servers
    /// added later, as grpc-go's server-side `MaxConnectionAge` does.
    ///
    /// ```
    /// let builder = weft::Channel::builder().max_calls_per_connection(Some(1_000_000));
    /// # let _ = builder;
    /// ```
    #[must_use]
    pub fn max_calls_per_connection(mut self, n: Option<u64>) -> ChannelBuilder {
        self.settings.max_calls = n.map(|n| n.max(1));
        self
    }

    /// Declares `method` idempotent: besides retry-safe refusals, its
    /// calls are retried (under the same budget) when they fail
    /// `UNAVAILABLE` after being sent, e.g. when the connection died with
    /// the call in flight. The server may then run it more than once.
    ///
    /// For a `#[weft::service]` method, declare it where the method is,
    /// `#[weft(idempotent)]`: its calls then say so themselves
    /// (`CallOptions::idempotent`). This is for methods called by name;
    /// pass the generated constant (`UsersMethods::GET`) rather than a
    /// string. A name matches a call's in any case, as the server routes
    /// it for this release.
    ///
    /// # Panics
    /// If `method` is not `package.Service/Method` (or `Service/Method`):
    /// a bare `get` names no service, so it could never match a call, and
    /// the declaration would silently do nothing. A misspelt literal is a
    /// programming error, caught at start-up, as `Router` treats one; check
    /// a name read from configuration first with
    /// [`weft::rpc::method::qualified`](weft_rpc::method::qualified).
    #[must_use]
    #[track_caller]
    pub fn idempotent(mut self, method: &str) -> ChannelBuilder {
        match method::qualified(method) {
            Ok(name) => {
                self.settings.idempotent.insert(name.into_owned());
            }
            Err(e) => panic!(
                "ChannelBuilder::idempotent({method:?}): {}; name a method as \
                 `package.Service/Method`, e.g. a #[weft::service]'s `FooMethods::BAR`",
                e.message()
            ),
        }
        self
    }

    /// The retry budget (tower's `TpsBudget` algorithm): retries may add
    /// `ratio` of the calls of the last `ttl`, plus `min_per_sec` retries
    /// a second.
    /// Default 10 s, 10 a second, 0.2. Clamped to what tower accepts:
    /// `ttl` 1–60 s, `ratio` 0–1000, `min_per_sec` below 2^31.
    #[must_use]
    pub fn retry_budget(mut self, ttl: Duration, min_per_sec: u32, ratio: f32) -> ChannelBuilder {
        let ttl = ttl.clamp(Duration::from_secs(1), Duration::from_secs(60));
        let ratio = if ratio.is_finite() {
            ratio.clamp(0.0, 1000.0)
        } else {
            0.0
        };
        let min_per_sec = min_per_sec.min(i32::MAX as u32 - 1);
        self.settings.budget = (ttl, min_per_sec, ratio);
        self
    }

    /// A deadline for calls that set none, covering the wait for a
    /// connection and every retry. Default none (the `Config`'s call
    /// timeout, if any, still bounds each attempt).
    #[must_use]
    pub fn call_timeout(mut self, timeout: Option<Duration>) -> ChannelBuilder {
        self.settings.call_timeout = timeout;
        self
    }

    /// Over many endpoints: ask each connected endpoint's
    /// `weft.health/check` this often, and send no calls to one that
    /// answers `NOT_SERVING` until it answers `SERVING`. Default off.
    #[must_use]
    pub fn health_check(mut self, interval: Option<Duration>) -> ChannelBuilder {
        self.settings.health_interval = interval;
        self
    }

    /// A channel to one endpoint. Nothing connects until the first call.
    pub fn endpoint(self, endpoint: Endpoint) -> Channel {
        let settings = Arc::new(self.settings);
        let pool = Pool::new(endpoint, settings.clone(), None);
        Channel::with_route(Route::One(pool), settings)
    }

    /// A channel to `addr` (`host:port` or `unix:/path`) with `config`.
    /// Fails only on a malformed address; nothing connects until the
    /// first call.
    pub fn connect_lazy(self, addr: &str, config: &crate::Config) -> Result<Channel, crate::Error> {
        Ok(self.endpoint(Endpoint::new(addr, config)?))
    }

    /// A channel balanced over a fixed list of endpoints. Must be called
    /// within a tokio runtime (the balancer runs on a task).
    pub fn balance_list(self, endpoints: impl IntoIterator<Item = Endpoint>) -> Channel {
        let changes = endpoints
            .into_iter()
            .map(|e| Change::Insert(e.name().to_owned(), e))
            .collect();
        self.balance(discover::Fixed::new(changes))
    }

    /// A channel balanced over the endpoints a discovery stream announces
    /// (`Change::Insert(key, endpoint)`, `Change::Remove(key)`). Must be
    /// called within a tokio runtime.
    pub fn balance<K, S>(self, changes: S) -> Channel
    where
        K: std::hash::Hash + Eq + Clone + Send + 'static,
        S: futures_core::Stream<Item = Change<K, Endpoint>> + Send + 'static,
    {
        let settings = Arc::new(self.settings);
        let picker = Picker::new(changes, settings.clone());
        Channel::with_route(Route::Balanced(picker), settings)
    }

    /// A channel balanced over every address `host:port` resolves to,
    /// resolved again every `every` (addresses that appear are added,
    /// ones that disappear removed). Must be called within a tokio runtime.
    pub fn dns(
        self,
        host_port: &str,
        config: &crate::Config,
        every: Duration,
    ) -> Result<Channel, crate::Error> {
        let changes = discover::dns(host_port, config, every)?;
        Ok(self.balance(changes))
    }
}

/// Where a channel's calls go.
#[derive(Debug)]
enum Route {
    One(Pool),
    Balanced(Picker),
}

#[derive(Debug)]
struct Shared {
    route: Route,
    settings: Arc<Settings>,
    budget: RetryBudget,
}

/// A client that stays up: see the [module docs](self). Cheap to clone,
/// `Send + Sync`; clones share connections and the retry budget.
///
/// Its calls mirror [`Client`]'s, and it is a [`Caller`]: a
/// `#[weft::service]` client sits on it (`FooClient::new(channel)`), and
/// [`Caller::with_interceptor`] adds client interceptors that every call
/// passes once (not once per retry). A call's deadline (its options, or
/// the channel's [`call_timeout`](ChannelBuilder::call_timeout)) covers
/// the wait for a connection and every retry.
#[derive(Debug, Clone)]
pub struct Channel {
    shared: Arc<Shared>,
    intercept: ClientInterceptors,
}

/// What a call waits for when its deadline passes: what its
/// `DEADLINE_EXCEEDED` says.
#[derive(Debug, Clone, Copy)]
enum Waiting {
    /// A live connection (none is up: connecting or backing off).
    Connection,
    /// Room under the server's cap on concurrent streams.
    Room,
}

/// Each thread's preferred slot among an endpoint's connections.
fn thread_hint() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static HINT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    HINT.with(|h| *h)
}

impl Channel {
    /// A builder with the defaults.
    pub fn builder() -> ChannelBuilder {
        ChannelBuilder::default()
    }

    /// A channel with the default settings to `addr` with `config`
    /// (lazy: see [`ChannelBuilder::connect_lazy`]).
    pub fn new(addr: &str, config: &crate::Config) -> Result<Channel, crate::Error> {
        Channel::builder().connect_lazy(addr, config)
    }

    fn with_route(route: Route, settings: Arc<Settings>) -> Channel {
        let (ttl, min, ratio) = settings.budget;
        Channel {
            shared: Arc::new(Shared {
                route,
                budget: RetryBudget::new(ttl, min, ratio),
                settings,
            }),
            intercept: ClientInterceptors::new(),
        }
    }

    /// A live connection's client, waiting for one if need be (no retry
    /// of the call: for calls the channel's shapes do not cover).
    pub async fn client(&self) -> Result<Client, Status> {
        let deadline = self.deadline(&CallOptions::new());
        let lease = self.lease_within(deadline).await?;
        Ok(lease.client().clone())
    }

    /// A live connection, waiting for one until `deadline`: a call that
    /// runs out of time here fails naming the last connect error.
    async fn lease_within(&self, deadline: Option<Instant>) -> Result<Lease, Status> {
        match self.lease_now() {
            Some(lease) => Ok(lease),
            None => self.wait_for_lease(deadline).await,
        }
    }

    /// A live connection of a one-endpoint channel, if one is up now: the
    /// common case, taken without a timer or a future of its own (the
    /// call loop tries it before awaiting anything). Inlined into the
    /// loop: a call of its own cost every call its frame.
    #[inline(always)]
    fn lease_now(&self) -> Option<Lease> {
        match &self.shared.route {
            Route::One(pool) => pool.try_lease_with(thread_hint),
            Route::Balanced(_) => None,
        }
    }

    /// [`lease`](Self::lease) bounded by `deadline`, its
    /// `DEADLINE_EXCEEDED` naming the last connect error.
    async fn wait_for_lease(&self, deadline: Option<Instant>) -> Result<Lease, Status> {
        let waited = within(deadline, self.lease()).await;
        self.timed_out(waited, Waiting::Connection)
    }

    async fn lease(&self) -> Result<Lease, Status> {
        let hint = thread_hint();
        match &self.shared.route {
            Route::One(pool) => pool.lease(hint, self.shared.settings.fail_fast).await,
            Route::Balanced(picker) => picker.lease(hint).await,
        }
    }

    fn deadline(&self, opts: &CallOptions) -> Option<Instant> {
        let timeout = opts
            .timeout_value()
            .or(if opts.deadline_at().is_none() {
                self.shared.settings.call_timeout
            } else {
                None
            })
            .map(|t| Instant::now() + t);
        match (opts.deadline_at(), timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// `waited`, a wait bounded by [`within`], with its
    /// `DEADLINE_EXCEEDED` saying what the call was `waiting` for: one still
    /// waiting for a connection names the endpoint's last connect error (as
    /// a `fail_fast` channel's `UNAVAILABLE` does), so that a dead server
    /// reads as such and not as a slow one. (A mapping after the wait, not
    /// an `async fn` around it: that would hold the awaited work twice.)
    fn timed_out<T>(&self, waited: Result<T, Status>, waiting: Waiting) -> Result<T, Status> {
        match waited {
            Err(s) if s.code() == Code::DEADLINE_EXCEEDED => {
                let why = match waiting {
                    Waiting::Connection => match &self.shared.route {
                        Route::One(pool) => pool.connect_error(),
                        Route::Balanced(picker) => picker.connect_error(),
                    },
                    Waiting::Room => {
                        Some("waiting for room on the connection (the server's stream cap)".into())
                    }
                };
                Err(match why {
                    Some(why) => Status::deadline_exceeded(format!("deadline exceeded {why}")),
                    None => s,
                })
            }
            other => other,
        }
    }

    /// Whether a failed attempt of `method`, declared `idempotency` by
    /// the call, may be sent again.
    fn may_retry(&self, method: &str, idempotency: Idempotency, status: &Status) -> bool {
        if status.is_retry_safe() {
            return true;
        }
        if status.code() != Code::UNAVAILABLE {
            return false;
        }
        let idem = &self.shared.settings.idempotent;
        idempotency == Idempotency::Idempotent
            || (!idem.is_empty()
                && method::canonicalize(method)
                    .is_ok_and(|m| idem.iter().any(|i| i.eq_ignore_ascii_case(&m))))
    }

    /// The call's options as every attempt sends them: through the
    /// channel's interceptors (once per call), with the deadline fixed so
    /// that every attempt shares it (not a fresh timeout each): their
    /// `deadline_at` is the call's deadline. An interceptor's refusal is
    /// the call's error (see [`Fixed`] for why this is not a `Cow`).
    #[inline]
    fn fix<'o>(&self, method: &str, opts: &'o CallOptions) -> Fixed<'o> {
        if self.intercept.is_empty()
            && opts.timeout_value().is_none()
            && (opts.deadline_at().is_some() || self.shared.settings.call_timeout.is_none())
        {
            // Nothing to run and no deadline to fix: the common call
            // borrows its options (and reads no clock).
            return Fixed::Caller(opts);
        }
        self.fix_changed(method, opts)
    }

    /// [`fix`](Self::fix) for a call with interceptors to run or a
    /// deadline to fix: out of line, so that the common call's check is
    /// a few inlined tests rather than a call with this path's frame.
    #[inline(never)]
    fn fix_changed<'o>(&self, method: &str, opts: &'o CallOptions) -> Fixed<'o> {
        let opts = match self.intercept.apply(method, Cow::Borrowed(opts)) {
            Ok(opts) => opts,
            Err(refused) => return Fixed::refused(refused),
        };
        match (self.deadline(&opts), opts) {
            (Some(d), opts) if opts.deadline_at() != Some(d) => {
                Fixed::changed(opts.into_owned().deadline(d))
            }
            (_, Cow::Borrowed(opts)) => Fixed::Caller(opts),
            (_, Cow::Owned(opts)) => Fixed::changed(opts),
        }
    }

    /// Runs `attempt` on a live connection, with the call's `fixed`
    /// options, until it succeeds, fails in a way that may not be
    /// retried, the budget runs out, or the deadline passes. One state
    /// machine holds the options, the attempt, the leased client and the
    /// try on it (see [`Attempt`]), so a call is this future around the
    /// client's own, and nothing else.
    ///
    /// Each wait is bounded where it happens: for a connection and for
    /// room here, the attempt by its own deadline (`fix` put it in the
    /// options); no wrapper takes a future as an argument, which would hold
    /// it twice and double the call future every caller moves.
    ///
    /// A function returning an `async` block, not an `async fn`: an
    /// `async fn` moves its arguments into the body's locals and keeps
    /// both copies in the future.
    #[allow(clippy::manual_async_fn)] // reason: an `async fn` would hold its arguments twice
    fn run<'s, 'o, A>(
        &'s self,
        fixed: Fixed<'o>,
        attempt: A,
    ) -> impl Future<Output = Result<A::Output, Status>> + use<'s, 'o, A>
    where
        A: Attempt,
    {
        // Inlined into whatever awaits the call: left to LLVM, the poll
        // of a call awaited from more than one place (a user's code, the
        // typed client's) stayed a function of its own, which cost every
        // call its entry, its exit and its result passed through memory.
        // Its rare paths are boxed futures of their own, out of line.
        #[inline(always)]
        async move {
            // Read before any await only: kept across one, this reference
            // would take a slot of its own in the future beside `fixed`,
            // which the tries below read again instead.
            let opts = fixed.options()?;
            self.shared.budget.deposit();
            // The lease lives in one place across every await and the
            // attempt borrows it there: a lease moved into locals of its
            // own, or kept as a match's temporary, would each hold a slot
            // in this future beside the client's call future.
            let mut lease = match self.lease_now() {
                Some(lease) => lease,
                // Boxed: the wait (a timer, a wake-up, a balancer pick) is
                // rare, and inline it would widen every call future by its
                // size.
                None => Box::pin(self.wait_for_lease(opts.deadline_at())).await?,
            };
            loop {
                let recover = match attempt.attempt(lease.client(), fixed.sent()).await {
                    Ok(v) => {
                        lease.record(Outcome::Success);
                        fixed.finish();
                        return Ok(v);
                    }
                    // Boxed as rare: inline, the failure's status and its
                    // waits would each keep a slot in every call future.
                    Err(status) => {
                        Box::pin(self.recover(attempt.method(), fixed.sent(), lease, status))
                    }
                };
                lease = recover.await?;
            }
        }
    }

    /// After a failed try on `lease`: records the outcome, waits for room
    /// on a connection at its stream cap or retires one going away, and
    /// gives the lease for the next try, or the status when the call may
    /// not be retried (by its kind or the retry budget).
    async fn recover(
        &self,
        method: &str,
        opts: &CallOptions,
        lease: Lease,
        status: Status,
    ) -> Result<Lease, Status> {
        // A one-endpoint channel's leases do not hold its pool.
        let home = match &self.shared.route {
            Route::One(pool) => Some(pool),
            Route::Balanced(_) => None,
        };
        lease.record(if status.code() == Code::UNAVAILABLE {
            Outcome::Failure
        } else {
            Outcome::Success
        });
        if status.is_retry_safe() {
            if status.is_stream_refused() {
                // The connection is fine; the server's stream cap was
                // reached. Wait for room on it (as h2 queues at its peer's
                // max concurrent streams) instead of replacing it.
                // (A connection replaced meanwhile has room.)
                if lease.is_current(home) {
                    let conn = lease.client().connection();
                    let room = std::future::poll_fn(|cx| conn.poll_open_ready(cx).map(|_| Ok(())));
                    let waited = within(opts.deadline_at(), room).await;
                    self.timed_out(waited, Waiting::Room)?;
                }
            } else {
                lease.retire(home);
            }
        }
        drop(lease);
        let retry =
            self.may_retry(method, opts.idempotency(), &status) && self.shared.budget.withdraw();
        // Neither a failure nor a retry completes on the poll that failed
        // (a local failure needs no I/O): a caller's retry loop yields to
        // the runtime instead of spinning.
        tokio::task::yield_now().await;
        if !retry {
            return Err(status);
        }
        tracing::debug!(method, %status, "retrying");
        match self.lease_now() {
            Some(lease) => Ok(lease),
            None => self.wait_for_lease(opts.deadline_at()).await,
        }
    }

    /// A unary call on raw bytes.
    // Inlined into every caller (as `Client::unary`), so a constant
    // method name's cache key is worked out at compile time.
    #[inline(always)]
    pub fn unary<'a>(
        &'a self,
        method: &'a str,
        request: Bytes,
    ) -> impl Future<Output = Result<Bytes, Status>> + Send + 'a {
        self.call_unary(method, Raw, request, CallOptions::none())
    }

    /// A unary call with options (deadline, metadata). Its timeout counts
    /// from this call, not from the future's first poll.
    #[inline(always)]
    pub fn unary_with<'a>(
        &'a self,
        method: &'a str,
        request: Bytes,
        opts: &'a CallOptions,
    ) -> impl Future<Output = Result<Bytes, Status>> + Send + 'a {
        self.call_unary(method, Raw, request, opts)
    }

    /// A unary call on JSON values.
    #[cfg(feature = "json")]
    pub async fn unary_json<Req, Resp>(&self, method: &str, request: &Req) -> Result<Resp, Status>
    where
        Req: serde::Serialize + Sync + ?Sized,
        Resp: serde::de::DeserializeOwned,
    {
        self.unary_json_with(method, request, CallOptions::none())
            .await
    }

    /// A unary call on JSON values, with options (deadline, metadata).
    #[cfg(feature = "json")]
    pub async fn unary_json_with<Req, Resp>(
        &self,
        method: &str,
        request: &Req,
        opts: &CallOptions,
    ) -> Result<Resp, Status>
    where
        Req: serde::Serialize + Sync + ?Sized,
        Resp: serde::de::DeserializeOwned,
    {
        let attempt = attempt::Json {
            method,
            request,
            _resp: std::marker::PhantomData,
        };
        self.run(self.fix(method, opts), attempt).await
    }

    /// A server-streaming call. Starting it is retried as a unary call is;
    /// once messages flow, a failure is the caller's.
    pub async fn server_streaming(
        &self,
        method: &str,
        request: Bytes,
        opts: &CallOptions,
    ) -> Result<Streaming, Status> {
        self.call_server_streaming(method, Raw, &request, opts)
            .await
    }

    /// A client-streaming call (its start is retried when retry-safe).
    pub async fn client_streaming(
        &self,
        method: &str,
        opts: &CallOptions,
    ) -> Result<ClientStreamingCall, Status> {
        self.call_client_streaming(method, Raw, opts).await
    }

    /// A bidirectional call (its start is retried when retry-safe).
    pub async fn bidi(&self, method: &str, opts: &CallOptions) -> Result<BidiCall, Status> {
        self.call_bidi(method, Raw, opts).await
    }
}

/// Locks one of the channel's mutexes. They are `parking_lot`'s, which
/// do not poison: every critical section here is a plain assignment, so a
/// panic inside one leaves nothing inconsistent, and std's mutex would ask
/// whether the thread is panicking at every lock and unlock of the slot
/// each call leases from.
#[inline]
fn lock<T>(m: &parking_lot::Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_is_clone_send_and_sync_and_its_calls_are_send() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        fn send<T: Send>(_: &T) {}
        shareable::<Channel>();
        let ch = Channel::new("127.0.0.1:1", &crate::Config::new()).unwrap();
        send(&ch.unary("m", Bytes::new()));
        send(&ch.server_streaming("m", Bytes::new(), &CallOptions::new()));
        send(&ch.bidi("m", &CallOptions::new()));
        assert!(Channel::new("nohost", &crate::Config::new()).is_err());
    }

    #[test]
    fn only_retry_safe_failures_or_idempotent_unavailable_are_retried() {
        let ch = Channel::builder()
            .idempotent("/dir.Users/Get")
            .connect_lazy("127.0.0.1:1", &crate::Config::new())
            .unwrap();
        let lost = Status::unavailable("connection lost");
        let refused = Status::unavailable("refused").retry_safe();
        let (unknown, idem) = (Idempotency::Unknown, Idempotency::Idempotent);
        assert!(ch.may_retry("dir.Users/Put", unknown, &refused));
        assert!(!ch.may_retry("dir.Users/Put", unknown, &lost));
        assert!(
            ch.may_retry("dir.Users/Get", unknown, &lost),
            "declared on the builder"
        );
        assert!(ch.may_retry("dir.users/get", unknown, &lost), "any case");
        assert!(
            ch.may_retry("dir.Users/Put", idem, &lost),
            "declared by the call"
        );
        for other in [Status::internal("bug"), Status::deadline_exceeded("late")] {
            assert!(!ch.may_retry("dir.Users/Get", unknown, &other));
            assert!(!ch.may_retry("dir.Users/Put", idem, &other));
        }
    }

    #[test]
    #[should_panic(
        expected = "ChannelBuilder::idempotent(\"get\"): method name \"get\" is not `package.Service/Method`"
    )]
    fn an_idempotent_name_without_a_service_is_refused() {
        let _ = Channel::builder().idempotent("get");
    }

    #[test]
    fn idempotent_names_are_checked_whole() {
        for bad in ["", "a b/c", "a/b/c", "Get/"] {
            let caught = std::panic::catch_unwind(|| Channel::builder().idempotent(bad));
            assert!(caught.is_err(), "{bad:?}");
        }
        let b = Channel::builder()
            .idempotent("Users/Get")
            .idempotent("/a.b.C/D/");
        let mut names: Vec<&str> = b.settings.idempotent.iter().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["Users/Get", "a.b.C/D"]);
    }

    /// A one-endpoint channel's leases hold no handle on its pool; a
    /// retry-safe refusal (a connection going away) must still retire
    /// the connection through the pool the channel gives them, or the
    /// retry would be sent on it again.
    #[tokio::test(start_paused = true)]
    async fn a_refusal_retires_a_one_endpoint_channels_connection_for_the_retry() {
        let endpoint = Endpoint::from_fn("memory", || async {
            crate::memory(crate::Router::new(), &crate::Config::new()).await
        });
        let ch = Channel::builder().endpoint(endpoint);
        let lease = ch.lease_within(None).await.unwrap();
        let first = ch.lease_within(None).await.unwrap();
        let going_away = Status::unavailable("going away").retry_safe();
        let retry = ch
            .recover("m/m", CallOptions::none(), lease, going_away)
            .await
            .unwrap();
        assert!(
            !first.same_connection(&retry),
            "the retry goes to a new connection"
        );
        // Not retry-safe: no retirement, and no retry.
        let lost = Status::unavailable("lost");
        let e = ch
            .recover("m/m", CallOptions::none(), retry, lost)
            .await
            .unwrap_err();
        assert_eq!(e.message(), "lost");
    }

    #[test]
    fn a_nonsense_budget_is_clamped_not_a_panic() {
        let b = Channel::builder()
            .retry_budget(Duration::ZERO, u32::MAX, f32::NAN)
            .retry_budget(Duration::from_secs(3600), 1, -1.0);
        assert_eq!(b.settings.budget, (Duration::from_secs(60), 1, 0.0));
        let _ = Channel::builder()
            .retry_budget(Duration::ZERO, u32::MAX, f32::INFINITY)
            .connect_lazy("127.0.0.1:1", &crate::Config::new())
            .unwrap();
    }
}
