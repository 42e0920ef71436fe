//! The connections of one endpoint: `connections(n)` slots, each idle,
//! connecting, ready or backing off, replaced when its connection ends.
//!
//! Connecting happens on a spawned task, so a caller that gives up (its
//! deadline passed, its future dropped) does not abort an attempt others
//! wait for. A task per ready connection waits for its end and frees the
//! slot; the next call (or the balancer) reconnects it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use tower::util::rng::{HasherRng, Rng};
use weft_rpc::{Client, Status};

use super::ejection::Detector;
use super::outlier::Outcome;
use super::{Endpoint, Settings, lock};

/// How long a retired connection (replaced after its call limit or a
/// retry-safe refusal) lets its calls in flight finish.
const RETIRE_DRAIN: Duration = Duration::from_secs(60);

/// One connection slot.
#[derive(Debug)]
enum Slot {
    /// No connection; the next use connects. `failures` failed attempts
    /// in a row came before.
    Idle { failures: u32 },
    /// An attempt is under way.
    Connecting,
    /// A live connection. It is shared behind one `Arc`, so a lease
    /// takes it with one reference count, not one per handle its client
    /// holds.
    Ready {
        conn: Arc<Conn>,
        generation: u64,
        calls: u64,
    },
    /// The last attempt failed; the next may start at `until`.
    Backoff { until: Instant, failures: u32 },
}

/// The state of a pool, shared by its clones and its tasks.
#[derive(Debug)]
pub(crate) struct Inner {
    endpoint: Endpoint,
    settings: Arc<Settings>,
    slots: Box<[Mutex<Slot>]>,
    /// Woken whenever a slot changes state.
    changed: Notify,
    /// Behind a balancer: its calls in flight and its outlier detector
    /// (only a balancer reads them; one shared counter touched by every
    /// call costs cross-core traffic). Every connection of the pool holds
    /// them too, so that a lease reaches them through its connection.
    counted: Option<Arc<Counted>>,
    /// What the endpoint's health service last said (true until asked).
    serving: AtomicBool,
    generation: AtomicU64,
    last_error: Mutex<Option<String>>,
    rng: Mutex<HasherRng>,
}

/// The connections of one endpoint. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    inner: Arc<Inner>,
}

/// A live connection: its client and, behind a balancer, its pool's
/// count of calls in flight and outlier detector.
#[derive(Debug)]
pub(crate) struct Conn {
    client: Client,
    counted: Option<Arc<Counted>>,
}

/// A balanced endpoint's calls in flight and outlier detector, shared by
/// its pool and its connections (so by every lease), and the pool itself,
/// weakly (a connection is held by its pool's slot: a strong handle back
/// would keep the pool alive forever).
#[derive(Debug)]
struct Counted {
    in_flight: AtomicUsize,
    detector: Detector,
    pool: Weak<Inner>,
}

/// A connection handed to one call, which reports how the call went.
///
/// One pointer: every call future holds its lease across the call, and
/// every byte there is copied whenever the future moves (a `join_all`
/// copies it into a task whose size decides `memcpy`'s path). Where the
/// lease came from is found through its connection (behind a balancer)
/// or given by the one-endpoint channel (`home`): a lease keeps no slot
/// index and no generation either, since its connection names itself (the
/// slot holds the same `Arc`; a replacement is a new allocation, and the
/// lease keeps the old one alive, so its address is not reused meanwhile),
/// and the failure paths that need its slot look for it among the few
/// slots.
#[derive(Debug)]
pub(crate) struct Lease {
    conn: Arc<Conn>,
}

impl Lease {
    /// The lease of `conn`: behind a balancer, one more call in flight on
    /// its endpoint until the lease drops.
    #[inline]
    fn new(conn: Arc<Conn>) -> Self {
        if let Some(counted) = &conn.counted {
            counted.in_flight.fetch_add(1, Ordering::Relaxed);
        }
        Lease { conn }
    }

    /// The leased connection's client.
    #[inline(always)]
    pub(crate) fn client(&self) -> &Client {
        &self.conn.client
    }

    /// Whether `other` leases the same connection.
    #[cfg(test)]
    pub(crate) fn same_connection(&self, other: &Lease) -> bool {
        Arc::ptr_eq(&self.conn, &other.conn)
    }

    /// The pool the lease came from: its connection's (behind a balancer,
    /// while the pool lives), or else `home`, the one-endpoint channel's
    /// pool. Only failure paths ask.
    fn pool(&self, home: Option<&Pool>) -> Option<Pool> {
        match &self.conn.counted {
            Some(counted) => Pool::upgrade(&counted.pool),
            None => home.cloned(),
        }
    }

    /// Tells the endpoint's outlier detector (if balanced) how the call
    /// ended.
    #[inline]
    pub(crate) fn record(&self, outcome: Outcome) {
        if let Some(counted) = &self.conn.counted {
            counted.detector.record(outcome);
            if outcome == Outcome::Failure && counted.detector.ejected_until().is_some() {
                // The balancer's waiters re-check their endpoints.
                if let Some(inner) = counted.pool.upgrade() {
                    inner.changed.notify_waiters();
                }
            }
        }
    }

    /// The connection refused the call retry-safe (it is going away or
    /// out of stream ids): stop using it and connect a new one.
    pub(crate) fn retire(&self, home: Option<&Pool>) {
        if let Some(pool) = self.pool(home) {
            pool.retire(&self.conn);
        }
    }

    /// Whether a slot still holds the leased connection (it was not
    /// replaced meanwhile).
    pub(crate) fn is_current(&self, home: Option<&Pool>) -> bool {
        self.pool(home)
            .is_some_and(|pool| self.slot(&pool).is_some())
    }

    /// The slot of `pool` holding the leased connection, while one does.
    fn slot(&self, pool: &Pool) -> Option<usize> {
        pool.inner.slots.iter().position(
            |m| matches!(&*lock(m), Slot::Ready { conn, .. } if Arc::ptr_eq(conn, &self.conn)),
        )
    }
}

impl Drop for Lease {
    #[inline]
    fn drop(&mut self) {
        if let Some(counted) = &self.conn.counted {
            counted.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// What [`Pool::kick`] found.
struct Kicked {
    /// The earliest end of a backoff still running.
    next: Option<Instant>,
    /// Whether a slot is connecting or ready.
    live: bool,
}

impl Pool {
    /// A pool; with a `detector` (behind a balancer) it also keeps its
    /// calls-in-flight count and ejects itself while it fails.
    pub(crate) fn new(
        endpoint: Endpoint,
        settings: Arc<Settings>,
        detector: Option<Detector>,
    ) -> Pool {
        let slots = (0..settings.connections.max(1))
            .map(|_| Mutex::new(Slot::Idle { failures: 0 }))
            .collect();
        Pool {
            inner: Arc::new_cyclic(|pool| Inner {
                endpoint,
                settings,
                slots,
                changed: Notify::new(),
                counted: detector.map(|detector| {
                    Arc::new(Counted {
                        in_flight: AtomicUsize::new(0),
                        detector,
                        pool: pool.clone(),
                    })
                }),
                serving: AtomicBool::new(true),
                generation: AtomicU64::new(0),
                last_error: Mutex::new(None),
                rng: Mutex::new(HasherRng::new()),
            }),
        }
    }

    /// The shared state (for tasks that hold it weakly).
    pub(crate) fn shared(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// The pool of `weak`, while it lives.
    pub(crate) fn upgrade(weak: &Weak<Inner>) -> Option<Pool> {
        weak.upgrade().map(|inner| Pool { inner })
    }

    /// Records the health service's answer.
    pub(crate) fn set_serving(&self, serving: bool) {
        if self.inner.serving.swap(serving, Ordering::Relaxed) != serving {
            tracing::debug!(endpoint = self.name(), serving, "health changed");
            self.inner.changed.notify_waiters();
        }
    }

    /// Ready for the balancer: connected, not reported `NOT_SERVING`, and
    /// not ejected for failing.
    pub(crate) fn is_usable(&self) -> bool {
        self.inner.serving.load(Ordering::Relaxed) && self.is_ready() && self.ejected().is_none()
    }

    /// The end of the endpoint's ejection, while it is ejected.
    fn ejected(&self) -> Option<Instant> {
        self.detector()?.ejected_until()
    }

    /// The endpoint's outlier detector (behind a balancer).
    fn detector(&self) -> Option<&Detector> {
        self.inner.detector()
    }

    /// The endpoint's name.
    pub(crate) fn name(&self) -> &str {
        self.inner.endpoint.name()
    }

    /// Calls in flight on this endpoint.
    pub(crate) fn in_flight(&self) -> usize {
        self.inner
            .counted
            .as_ref()
            .map_or(0, |c| c.in_flight.load(Ordering::Relaxed))
    }

    /// The balancer's load: calls in flight, plus the penalty of recent
    /// failures (a fast-failing endpoint has few calls in flight).
    pub(crate) fn load(&self) -> f64 {
        let penalty = self.detector().map_or(0.0, Detector::penalty);
        self.in_flight() as f64 + penalty
    }

    /// Whether some slot holds a live connection.
    pub(crate) fn is_ready(&self) -> bool {
        self.inner
            .slots
            .iter()
            .any(|s| matches!(*lock(s), Slot::Ready { .. }))
    }

    /// A ready connection, preferring slot `hint % n`; starts connecting
    /// the preferred slot if it is not ready. The lease borrows the pool.
    #[inline]
    pub(crate) fn try_lease(&self, hint: usize) -> Option<Lease> {
        self.try_lease_with(|| hint)
    }

    /// [`try_lease`](Self::try_lease) with the preference computed only
    /// when there is a choice (`hint` is not called for one connection,
    /// the default): the common call's lease. Always inlined, with the
    /// claim: left to the optimizer, it stayed a call of its own, and every
    /// call paid its frame.
    #[inline(always)]
    pub(crate) fn try_lease_with(&self, hint: impl FnOnce() -> usize) -> Option<Lease> {
        let claimed = self.claim(hint)?;
        Some(Lease::new(claimed))
    }

    /// Claims a ready connection for one call (see `try_lease`): its
    /// client (the lease made of it counts the call in flight where a
    /// balancer reads the count). The preferred slot is tried inline (one
    /// lock, one reference count); the others only when it is not ready.
    #[inline(always)]
    fn claim(&self, hint: impl FnOnce() -> usize) -> Option<Arc<Conn>> {
        let n = self.inner.slots.len();
        let first = if n == 1 { 0 } else { hint() % n };
        match self.claim_slot(first) {
            Some(claimed) => Some(claimed),
            None => self.claim_another(first),
        }
    }

    /// Claims slot `idx`'s connection if it is ready, counting the call
    /// against the connection's cap (`max_calls_per_connection`), if any.
    #[inline(always)]
    fn claim_slot(&self, idx: usize) -> Option<Arc<Conn>> {
        let mut slot = lock(&self.inner.slots[idx]);
        let Slot::Ready { conn, calls, .. } = &mut *slot else {
            return None;
        };
        let claimed = conn.clone();
        // Only a cap reads the count, so only a capped pool keeps it.
        if let Some(max) = self.inner.settings.max_calls {
            *calls += 1;
            if *calls >= max {
                *slot = Slot::Idle { failures: 0 };
                drop(slot);
                self.spent(&claimed);
            }
        }
        Some(claimed)
    }

    /// A connection reached its call cap with the call just claimed: it
    /// finishes its calls in flight while its slot reconnects.
    #[cold]
    #[inline(never)]
    fn spent(&self, conn: &Arc<Conn>) {
        retire_conn(conn);
        self.kick();
    }

    /// The preferred slot `first` was not ready: the next ready one, in
    /// order, while the preferred one starts connecting.
    #[cold]
    #[inline(never)]
    fn claim_another(&self, first: usize) -> Option<Arc<Conn>> {
        let n = self.inner.slots.len();
        let claimed = (1..n).find_map(|i| self.claim_slot((first + i) % n))?;
        self.kick();
        Some(claimed)
    }

    /// A ready connection: waits while one is being made (or, with
    /// `fail_fast`, fails retry-safe when every slot is backing off).
    /// The caller bounds the wait with its deadline.
    pub(crate) async fn lease(&self, hint: usize, fail_fast: bool) -> Result<Lease, Status> {
        loop {
            if let Some(l) = self.try_lease(hint) {
                return Ok(l);
            }
            let notified = self.inner.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let kicked = self.kick();
            if let Some(l) = self.try_lease(hint) {
                return Ok(l);
            }
            if fail_fast && !kicked.live {
                // Never complete a local failure on the first poll: a
                // caller's retry loop would spin.
                tokio::task::yield_now().await;
                return Err(self.unavailable());
            }
            wait(notified, kicked.next).await;
        }
    }

    /// Resolves once the pool is usable, connecting idle slots, retrying
    /// backed-off ones when their backoff ends, and waiting out an
    /// ejection.
    pub(crate) async fn ready(&self) {
        loop {
            if self.is_usable() {
                return;
            }
            let notified = self.inner.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let kicked = self.kick();
            if self.is_usable() {
                return;
            }
            let next = match (kicked.next, self.ejected()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            wait(notified, next).await;
        }
    }

    /// `UNAVAILABLE`, retry-safe (nothing was sent), with the last error.
    pub(crate) fn unavailable(&self) -> Status {
        let last = lock(&self.inner.last_error).clone();
        let why = last.as_deref().unwrap_or("not connected");
        Status::unavailable(format!("{}: {why}", self.name())).retry_safe()
    }

    /// While no connection is up: what the endpoint is doing about it,
    /// with its last connect error, for a call that gave up waiting
    /// (`None` once a connection is up: the wait was not for one).
    pub(crate) fn connect_error(&self) -> Option<String> {
        if self.is_ready() {
            return None;
        }
        let name = self.name();
        Some(match &*lock(&self.inner.last_error) {
            Some(e) => format!("waiting for a connection to {name}; last connect error: {e}"),
            None => format!("waiting for a connection to {name} (still connecting)"),
        })
    }

    /// Starts an attempt on every idle slot and every slot whose backoff
    /// ended.
    fn kick(&self) -> Kicked {
        let now = Instant::now();
        let mut k = Kicked {
            next: None,
            live: false,
        };
        for (idx, m) in self.inner.slots.iter().enumerate() {
            let mut slot = lock(m);
            let failures = match *slot {
                Slot::Idle { failures } => failures,
                Slot::Backoff { until, failures } if until <= now => failures,
                Slot::Backoff { until, .. } => {
                    k.next = Some(k.next.map_or(until, |n: Instant| n.min(until)));
                    continue;
                }
                Slot::Connecting | Slot::Ready { .. } => {
                    k.live = true;
                    continue;
                }
            };
            *slot = Slot::Connecting;
            k.live = true;
            drop(slot);
            tokio::spawn(connect(self.inner.clone(), idx, failures));
        }
        k
    }

    /// Retires the connection of `leased`, if a slot still holds it.
    fn retire(&self, leased: &Arc<Conn>) {
        for m in &self.inner.slots {
            let mut slot = lock(m);
            if let Slot::Ready { conn, .. } = &*slot
                && Arc::ptr_eq(conn, leased)
            {
                retire_conn(conn);
                *slot = Slot::Idle { failures: 0 };
                drop(slot);
                self.inner.changed.notify_waiters();
                self.kick();
                return;
            }
        }
    }
}

/// Waits for a slot change, or until `until`.
async fn wait(
    notified: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    until: Option<Instant>,
) {
    match until {
        Some(t) => {
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(t) => {}
            }
        }
        None => notified.await,
    }
}

/// Lets a replaced connection's calls finish, then closes it.
fn retire_conn(conn: &Conn) {
    // The client alone, not the connection's `Arc`: that holds a balanced
    // endpoint's detector, which would stay counted in the balancer's
    // census (and its ejection share) for the whole drain.
    let client = conn.client.clone();
    tokio::spawn(async move { client.connection().shutdown(RETIRE_DRAIN).await });
}

/// One connection attempt for slot `idx`, after `failures` failed ones.
async fn connect(inner: Arc<Inner>, idx: usize, failures: u32) {
    let start = Instant::now();
    let timeout = inner.settings.backoff.connect_timeout(failures);
    let attempt = tokio::time::timeout(timeout, inner.endpoint.connect()).await;
    let next = match attempt {
        Ok(Ok(client)) => {
            // An error from before this connection would mislead later.
            *lock(&inner.last_error) = None;
            if let Some(d) = inner.detector() {
                d.connected(inner.endpoint.name(), Ok(()));
            }
            let generation = inner.generation.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(watch(
                Arc::downgrade(&inner),
                client.clone(),
                idx,
                generation,
            ));
            Slot::Ready {
                conn: Arc::new(Conn {
                    client,
                    counted: inner.counted.clone(),
                }),
                generation,
                calls: 0,
            }
        }
        Ok(Err(e)) => backoff(&inner, start, failures, e.to_string()),
        Err(_) => backoff(
            &inner,
            start,
            failures,
            format!("connect timed out after {timeout:?}"),
        ),
    };
    *lock(&inner.slots[idx]) = next;
    inner.changed.notify_waiters();
}

fn backoff(inner: &Inner, start: Instant, failures: u32, error: String) -> Slot {
    tracing::debug!(endpoint = inner.endpoint.name(), %error, "connect failed");
    if let Some(d) = inner.detector() {
        d.connected(inner.endpoint.name(), Err(&error));
    }
    *lock(&inner.last_error) = Some(error);
    let failures = failures.saturating_add(1);
    let unit = lock(&inner.rng).next_f64();
    Slot::Backoff {
        until: start + inner.settings.backoff.delay(failures, unit),
        failures,
    }
}

/// Frees the slot when its connection ends (idle timeout, `GOAWAY`
/// drained, transport gone). Holds the pool weakly: a dropped channel is
/// not kept alive by its connections.
async fn watch(pool: Weak<Inner>, client: Client, idx: usize, generation: u64) {
    client.connection().closed().await;
    let Some(inner) = pool.upgrade() else { return };
    let mut slot = lock(&inner.slots[idx]);
    if matches!(&*slot, Slot::Ready { generation: g, .. } if *g == generation) {
        *slot = Slot::Idle { failures: 0 };
    }
    drop(slot);
    inner.changed.notify_waiters();
}

impl Inner {
    /// The endpoint's outlier detector (behind a balancer).
    fn detector(&self) -> Option<&Detector> {
        self.counted.as_ref().map(|c| &c.detector)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The channel is gone: close its connections instead of leaving
        // them to their idle timeout.
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        for m in &self.slots {
            if let Slot::Ready { conn, .. } = &*lock(m) {
                retire_conn(conn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Router};

    /// A pool of `n` connections behind a balancer (with a detector).
    fn pool(n: usize) -> Pool {
        let census = Arc::new(crate::channel::ejection::Census::default());
        let detector = Detector::new(census, crate::channel::outlier::Policy::default());
        pool_with(n, Some(detector))
    }

    fn pool_with(n: usize, detector: Option<Detector>) -> Pool {
        let endpoint = Endpoint::from_fn("memory", || async {
            crate::memory(Router::new(), &Config::new()).await
        });
        let settings = Settings {
            connections: n,
            ..Settings::default()
        };
        Pool::new(endpoint, Arc::new(settings), detector)
    }

    /// Every call future holds its lease across the call; a lease of two
    /// words made the `Channel`'s call future cross a size where the
    /// copies `join_all` makes of it leave `memcpy`'s short path.
    #[test]
    fn a_lease_is_one_pointer() {
        assert_eq!(std::mem::size_of::<Lease>(), std::mem::size_of::<usize>());
    }

    #[tokio::test(start_paused = true)]
    async fn a_one_endpoint_lease_holds_no_pool_and_is_found_through_its_home() {
        let p = pool_with(1, None);
        let lease = p.lease(0, false).await.unwrap();
        assert!(lease.conn.counted.is_none(), "no reference count per call");
        assert_eq!(p.in_flight(), 0, "nothing counts calls without a balancer");
        // Its failure paths see its connection only through the pool given.
        assert!(!lease.is_current(None));
        assert!(lease.is_current(Some(&p)));
        lease.retire(None);
        assert!(lease.is_current(Some(&p)), "nothing to retire");
        lease.retire(Some(&p));
        assert!(!lease.is_current(Some(&p)), "retired");
        let fresh = p.lease(0, false).await.unwrap();
        assert!(!fresh.same_connection(&lease));
        // Behind a balancer, the lease holds its pool and counts.
        let balanced = pool(1);
        let counted = balanced.lease(0, false).await.unwrap();
        assert!(counted.conn.counted.is_some());
        assert_eq!(balanced.in_flight(), 1);
        assert!(counted.is_current(None));
        drop(counted);
        assert_eq!(balanced.in_flight(), 0);
    }

    /// A balanced endpoint's connections hold its detector (for their
    /// leases); a retired one draining its calls must not, or a removed
    /// endpoint would stay counted in the census (and its share of
    /// ejections) for the whole drain.
    #[tokio::test(start_paused = true)]
    async fn a_draining_connection_keeps_no_endpoint_counted() {
        let endpoint = Endpoint::from_fn("memory", || async {
            let never =
                |_ctx, _req: bytes::Bytes| std::future::pending::<Result<bytes::Bytes, Status>>();
            crate::memory(Router::new().unary("s.S/never", never), &Config::new()).await
        });
        let census = Arc::new(crate::channel::ejection::Census::default());
        let detector = Detector::new(census.clone(), crate::channel::outlier::Policy::default());
        let p = Pool::new(endpoint, Arc::new(Settings::default()), Some(detector));
        let lease = p.lease(0, false).await.unwrap();
        let client = lease.client().clone();
        let call =
            tokio::spawn(async move { client.unary("s.S/never", bytes::Bytes::new()).await });
        tokio::task::yield_now().await;
        // The connection drains (its call is in flight) once retired.
        lease.retire(None);
        drop((lease, p));
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(!call.is_finished(), "the drain is still under way");
        assert_eq!(census.endpoints(), 0, "the drain holds the client alone");
        call.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn each_hint_keeps_its_connection_and_a_dead_one_is_skipped() {
        let p = pool(2);
        // The first lease connects every slot.
        let first = p.lease(0, false).await.unwrap();
        assert_eq!(first.slot(&p), Some(0));
        while !matches!(*lock(&p.inner.slots[1]), Slot::Ready { .. }) {
            tokio::task::yield_now().await;
        }
        let (a, b) = (p.try_lease(0).unwrap(), p.try_lease(1).unwrap());
        assert_eq!((a.slot(&p), b.slot(&p)), (Some(0), Some(1)));
        assert!(!a.same_connection(&b), "two connections");
        assert_eq!(p.try_lease(2).unwrap().slot(&p), Some(0), "hint modulo n");
        assert_eq!(p.in_flight(), 3);
        drop((first, b));
        assert_eq!(p.in_flight(), 1);
        // The claim finds its connection again while its slot holds it...
        assert!(a.is_current(None));
        // Slot 0 retired: hint 0 falls over to slot 1 and slot 0 reconnects.
        a.retire(None);
        // ... and not once it is gone.
        assert!(!a.is_current(None));
        assert_eq!(p.try_lease(0).unwrap().slot(&p), Some(1));
        let again = p.lease(0, false).await.unwrap();
        let fresh = loop {
            let l = p.try_lease(0).unwrap();
            if l.slot(&p) == Some(0) {
                break l;
            }
            tokio::task::yield_now().await;
        };
        assert!(!fresh.same_connection(&a), "a new connection");
        drop(again);
    }
}
