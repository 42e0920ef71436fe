//! Server admission: which accepted connections may run a handshake, and
//! what happens when there is no room.
//!
//! Connections not yet proven form a bounded *pending set*: those in their
//! handshake, and those whose handshake is done but whose client has not
//! yet sent a record under the new keys (a replayed first message stops
//! there for ever; docs/SECURITY.md, "Replayed first messages"). When the
//! set is full, or the connection cap is reached, a pending connection is
//! always evicted for the newcomer, whatever its age: ranked by progress (a
//! protocol step, never a byte count, so trickling bytes buys nothing),
//! then by how long it has gone without progress (see [`rank`]).
//! An evicted client still in its handshake reads the retry-safe refusal
//! of docs/PROTOCOL.md section 3.10. Established connections are never
//! evicted: at the connection cap with nothing pending, the newcomer is
//! refused. See docs/SECURITY.md, "Admission".

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use weft_frame::Reason;
use weft_frame::preface::PREFACE_LEN;

/// How long a refused or evicted connection is kept to let the refusal
/// reach the client (the server half-closes and reads until the client
/// closes, so the client reads the refusal rather than a reset).
const LINGER: Duration = Duration::from_secs(1);

/// The admission limits of one server.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Handshakes in progress at once.
    pub(crate) pending: usize,
    /// Connections (pending and established) at once.
    pub(crate) connections: Option<usize>,
    /// Connections (pending and established) per source address.
    pub(crate) per_address: Option<usize>,
}

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The connection cap is reached by established connections.
    ConnectionCap,
    /// The source address has its share.
    PerAddress,
    /// Evicted from the pending set to make room.
    Evicted,
}

impl Refusal {
    /// The text the client reads in its error.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Refusal::ConnectionCap => "server at its connection limit",
            Refusal::PerAddress => "too many connections from this address",
            Refusal::Evicted => "handshake too slow while the server is busy",
        }
    }
}

/// How far a pending connection has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Waiting for the client's handshake message(s).
    Handshake,
    /// Our reply is out; waiting for the client's first record.
    FirstRecord,
}

/// One pending connection as the table sees it.
struct Pending {
    /// When it was admitted or last made progress.
    since: Instant,
    stage: Stage,
    ip: Option<IpAddr>,
    slot: Arc<Slot>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    pending: HashMap<u64, Pending>,
    established: usize,
    per_ip: HashMap<IpAddr, usize>,
}

impl Table {
    fn release_ip(&mut self, ip: Option<IpAddr>) {
        let Some(ip) = ip else { return };
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }

    /// The pending connection to evict, whatever its age (see [`rank`]).
    fn victim(&self, now: Instant) -> Option<u64> {
        self.pending
            .iter()
            .map(|(id, p)| (rank(p.stage, p.since, now), p.since, *id))
            .min()
            .map(|(_, _, id)| id)
    }
}

/// How long after our reply a client's first record may take before its
/// connection counts as stalled: a round trip, with room for a distant
/// client or a loaded server.
pub(crate) const FIRST_RECORD_GRACE: Duration = Duration::from_millis(500);

/// The eviction order, lowest first (then the time since the connection
/// last made progress, oldest first):
///
/// 0. our reply is out and the client's first record is overdue: a
///    replayed handshake message, or a client that went silent;
/// 1. still in the handshake, whatever its age: silent, slow, or a real
///    client whose message is on its way (evicted, it reads the
///    retry-safe refusal);
/// 2. our reply went out less than [`FIRST_RECORD_GRACE`] ago: a real
///    client here is one record from done and has returned from `connect`,
///    so it goes last; evicted, its connection ends cleanly before our
///    settings frame, which its calls report as retry-safe.
///
/// Progress is a protocol step, never a byte count, so trickling bytes buys
/// nothing; age buys nothing either: whatever the rate at which an attacker
/// re-opens connections, each newcomer evicts one of them. A real client
/// loses its slot only to a stream of newcomers that outnumbers the pending
/// set within its own round trip (docs/SECURITY.md, "Admission").
fn rank(stage: Stage, since: Instant, now: Instant) -> u8 {
    match stage {
        Stage::FirstRecord if now.saturating_duration_since(since) >= FIRST_RECORD_GRACE => 0,
        Stage::Handshake => 1,
        Stage::FirstRecord => 2,
    }
}

/// The admission state of one server.
pub(crate) struct Admission {
    limits: Limits,
    table: Mutex<Table>,
}

impl Admission {
    pub(crate) fn new(limits: Limits) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            table: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `ip` into the pending set, evicting the
    /// stalest pending connection if there is no room, or says why not.
    pub(crate) fn admit(self: &Arc<Self>, ip: Option<IpAddr>) -> Result<Ticket, Refusal> {
        let now = Instant::now();
        let mut t = self.lock();
        if let (Some(limit), Some(ip)) = (self.limits.per_address, ip)
            && t.per_ip.get(&ip).copied().unwrap_or(0) >= limit
        {
            return Err(Refusal::PerAddress);
        }
        let at_cap = self
            .limits
            .connections
            .is_some_and(|cap| t.pending.len() + t.established >= cap);
        if at_cap || t.pending.len() >= self.limits.pending {
            // Nothing pending: every connection under the cap is established.
            let id = t.victim(now).ok_or(Refusal::ConnectionCap)?;
            let evicted = t.pending.remove(&id).expect("the victim is pending");
            t.release_ip(evicted.ip);
            evicted.slot.evict();
        }
        let id = t.next_id;
        t.next_id += 1;
        let slot = Arc::new(Slot::default());
        t.pending.insert(
            id,
            Pending {
                since: now,
                stage: Stage::Handshake,
                ip,
                slot: slot.clone(),
            },
        );
        if let Some(ip) = ip {
            *t.per_ip.entry(ip).or_default() += 1;
        }
        Ok(Ticket {
            admission: self.clone(),
            id,
            ip,
            slot,
            established: false,
        })
    }

    /// Handshakes in progress and established connections.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let t = self.lock();
        (t.pending.len(), t.established)
    }
}

/// What a connection's handshake and the table share.
#[derive(Default)]
pub(crate) struct Slot {
    written: AtomicU64,
    evicted: AtomicBool,
    wake: Notify,
}

impl Slot {
    fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }

    /// Resolves once the connection is evicted from the pending set.
    pub(crate) async fn evicted(&self) {
        self.wake.notified().await;
    }
}

/// A connection's place in the table: pending, then established; freed on
/// drop.
pub(crate) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    ip: Option<IpAddr>,
    slot: Arc<Slot>,
    established: bool,
}

impl Ticket {
    pub(crate) fn slot(&self) -> &Arc<Slot> {
        &self.slot
    }

    /// The handshake messages are done and our reply is out: the client's
    /// first record is next. Counts as progress: the connection is ranked
    /// as if admitted now.
    pub(crate) fn replied(&self) {
        let mut t = self.admission.lock();
        if let Some(p) = t.pending.get_mut(&self.id) {
            p.since = Instant::now();
            p.stage = Stage::FirstRecord;
        }
    }

    /// The handshake completed: the connection now counts as established.
    pub(crate) fn established(&mut self) {
        let mut t = self.admission.lock();
        if t.pending.remove(&self.id).is_none() {
            // Evicted just as it completed: it keeps its place after all.
            if let Some(ip) = self.ip {
                *t.per_ip.entry(ip).or_default() += 1;
            }
        }
        t.established += 1;
        self.established = true;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut t = self.admission.lock();
        if self.established {
            t.established -= 1;
            t.release_ip(self.ip);
        } else if t.pending.remove(&self.id).is_some() {
            t.release_ip(self.ip);
        }
    }
}

/// The transport of an admitted connection: counts the bytes the handshake
/// writes (so a refusal knows whether our preface went out), and hands the
/// transport back through `rescue` when it is dropped after an eviction, so
/// the refusal can still be sent.
pub(crate) struct Tracked<T> {
    inner: Option<T>,
    slot: Arc<Slot>,
    rescue: Option<oneshot::Sender<T>>,
}

impl<T> Tracked<T> {
    pub(crate) fn new(io: T, slot: Arc<Slot>) -> (Tracked<T>, oneshot::Receiver<T>) {
        let (tx, rx) = oneshot::channel();
        let t = Tracked {
            inner: Some(io),
            slot,
            rescue: Some(tx),
        };
        (t, rx)
    }

    fn io(&mut self) -> Pin<&mut T>
    where
        T: Unpin,
    {
        Pin::new(self.inner.as_mut().expect("present until dropped"))
    }
}

impl<T> Drop for Tracked<T> {
    fn drop(&mut self) {
        if self.slot.is_evicted()
            && let (Some(tx), Some(io)) = (self.rescue.take(), self.inner.take())
        {
            let _ = tx.send(io);
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.io().poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = self.io().poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.slot.written.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = self.io().poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.slot.written.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(T::is_write_vectored)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.io().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.io().poll_shutdown(cx)
    }
}

/// Whether the server's preface already went out on `slot`'s connection.
pub(crate) fn preface_sent(slot: &Slot) -> bool {
    slot.written.load(Ordering::Relaxed) >= PREFACE_LEN as u64
}

/// Sends the retry-safe refusal for `why`, half-closes, and (when `linger`)
/// reads until the client closes (at most [`LINGER`] and 64 KiB), so the
/// client reads the refusal instead of a reset.
pub(crate) async fn refuse<T>(io: T, why: Refusal, preface_sent: bool, linger: bool)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let bytes = weft_transform::refusal(Reason::REFUSED_STREAM, why.text(), preface_sent);
    close_after(io, &bytes, linger).await;
}

/// Writes `bytes`, half-closes, and (when `linger`) reads until the client
/// closes (at most [`LINGER`] and 64 KiB): the client reads an end of file
/// after `bytes`, not a reset, even with our receive buffer holding data.
pub(crate) async fn close_after<T>(mut io: T, bytes: &[u8], linger: bool)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let linger = async {
        io.write_all(bytes).await?;
        io.shutdown().await?;
        if !linger {
            return Ok(());
        }
        let mut sink = [0u8; 1024];
        let mut total = 0;
        while total < 64 * 1024 {
            match io.read(&mut sink).await? {
                0 => break,
                n => total += n,
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(LINGER, linger).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(pending: usize, connections: Option<usize>, per_address: Option<usize>) -> Limits {
        Limits {
            pending,
            connections,
            per_address,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_pending_set_evicts_by_progress_then_staleness_whatever_the_age() {
        let a = Admission::new(limits(2, None, None));
        let first = a.admit(None).unwrap();
        tokio::time::advance(Duration::from_millis(1)).await;
        let second = a.admit(None).unwrap();
        tokio::time::advance(Duration::from_millis(1)).await;
        // The first one's reply is out: its first record is due any moment.
        first.replied();
        // Both are a millisecond old: the newcomer still gets in, and the
        // one still in its handshake makes room.
        let third = a.admit(None).unwrap();
        assert!(second.slot().is_evicted() && !first.slot().is_evicted());
        assert_eq!(a.counts(), (2, 0));
        drop(second);
        assert_eq!(a.counts(), (2, 0), "an evicted ticket frees nothing twice");
        // Among handshakes, the stalest goes first.
        let fourth = a.admit(None).unwrap();
        assert!(third.slot().is_evicted() && !first.slot().is_evicted());
        // Only records due any moment left: the stalest of them goes.
        fourth.replied();
        let fifth = a.admit(None).unwrap();
        assert!(first.slot().is_evicted() && !fourth.slot().is_evicted());
        // A first record overdue goes before any handshake.
        tokio::time::advance(FIRST_RECORD_GRACE).await;
        let sixth = a.admit(None).unwrap();
        assert!(fourth.slot().is_evicted() && !fifth.slot().is_evicted());
        drop((first, third, fourth, fifth, sixth));
        assert_eq!(a.counts(), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_cap_counts_established_connections_and_per_address_shares() {
        let ip: IpAddr = [127, 0, 0, 1].into();
        let other: IpAddr = [127, 0, 0, 2].into();
        let a = Admission::new(limits(8, Some(2), Some(1)));
        let mut first = a.admit(Some(ip)).unwrap();
        first.established();
        assert_eq!(a.admit(Some(ip)).err(), Some(Refusal::PerAddress));
        let mut second = a.admit(Some(other)).unwrap();
        second.established();
        assert_eq!(a.counts(), (0, 2));
        // Established connections are never evicted.
        let third: IpAddr = [127, 0, 0, 3].into();
        assert_eq!(a.admit(Some(third)).err(), Some(Refusal::ConnectionCap));
        drop(first);
        assert!(a.admit(Some(ip)).is_ok());
        drop(second);
        assert_eq!(a.counts(), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_an_unproven_connection_goes_before_an_established_one() {
        let a = Admission::new(limits(8, Some(2), None));
        let mut established = a.admit(None).unwrap();
        established.established();
        tokio::time::advance(Duration::from_secs(60)).await;
        // Replied, its first record never came: pending, though younger.
        let unproven = a.admit(None).unwrap();
        unproven.replied();
        tokio::time::advance(FIRST_RECORD_GRACE).await;
        let newcomer = a.admit(None).unwrap();
        assert!(unproven.slot().is_evicted() && !established.slot().is_evicted());
        assert_eq!(a.counts(), (1, 1));
        drop((established, unproven, newcomer));
        assert_eq!(a.counts(), (0, 0));
    }
}
