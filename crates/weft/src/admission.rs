//! Server admission: which accepted connections may run a handshake, and
//! what happens when there is no room.
//!
//! Handshakes in progress form a bounded *pending set*. When it is full (or
//! the connection cap is reached) a newcomer is not turned away while a
//! stalled handshake holds a slot: the pending handshake that has sent the
//! fewest bytes, the oldest among equals, is evicted once it has been
//! pending for [`MIN_AGE_TO_EVICT`]. A silent TCP connection has sent
//! nothing, a legitimate client sends its whole first flight at once, so an
//! attacker holding every slot with silent or trickling connections loses
//! them to the first real client. Only when every pending handshake is
//! younger than that (a genuine burst) is the newcomer refused, with the
//! retry-safe refusal of docs/PROTOCOL.md section 3.10; an evicted client
//! receives the same refusal. See docs/SECURITY.md, "Admission".

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

/// How long a handshake is safe from eviction. A legitimate handshake on a
/// local network takes about a millisecond; this leaves room for a loaded
/// server and a distant client while still freeing a slot held by a silent
/// connection well within a second.
pub const MIN_AGE_TO_EVICT: Duration = Duration::from_millis(200);

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
    /// Every pending handshake is recent: a burst.
    Busy,
    /// The connection cap is reached.
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
            Refusal::Busy => "server busy: too many handshakes in progress",
            Refusal::ConnectionCap => "server at its connection limit",
            Refusal::PerAddress => "too many connections from this address",
            Refusal::Evicted => "handshake too slow while the server is busy",
        }
    }
}

/// One pending handshake as the table sees it.
struct Pending {
    started: Instant,
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

    /// The pending handshake to evict: fewest bytes received, oldest first,
    /// pending at least [`MIN_AGE_TO_EVICT`].
    fn victim(&self, now: Instant) -> Option<u64> {
        self.pending
            .iter()
            .filter(|(_, p)| now.saturating_duration_since(p.started) >= MIN_AGE_TO_EVICT)
            .min_by_key(|(_, p)| (p.slot.received.load(Ordering::Relaxed), p.started))
            .map(|(id, _)| *id)
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

    /// Admits a connection from `ip` into the pending set, evicting a
    /// stalled handshake if that makes room, or says why not.
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
            let Some(id) = t.victim(now) else {
                return Err(if at_cap {
                    Refusal::ConnectionCap
                } else {
                    Refusal::Busy
                });
            };
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
                started: now,
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
    received: AtomicU64,
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
/// reads and writes (for eviction and for the refusal), and hands the
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
        let before = buf.filled().len();
        let r = self.io().poll_read(cx, buf);
        if r.is_ready() {
            let n = (buf.filled().len() - before) as u64;
            self.slot.received.fetch_add(n, Ordering::Relaxed);
        }
        r
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
pub(crate) async fn refuse<T>(mut io: T, why: Refusal, preface_sent: bool, linger: bool)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let bytes = weft_transform::refusal(Reason::REFUSED_STREAM, why.text(), preface_sent);
    let linger = async {
        io.write_all(&bytes).await?;
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
    async fn a_full_pending_set_evicts_the_stalled_handshake_that_sent_least() {
        let a = Admission::new(limits(2, None, None));
        let silent = a.admit(None).unwrap();
        let talker = a.admit(None).unwrap();
        talker.slot().received.store(93, Ordering::Relaxed);
        // Both are young: a burst, the newcomer is refused.
        assert_eq!(a.admit(None).err(), Some(Refusal::Busy));
        tokio::time::advance(MIN_AGE_TO_EVICT).await;
        let newcomer = a.admit(None).unwrap();
        assert!(silent.slot().is_evicted() && !talker.slot().is_evicted());
        assert_eq!(a.counts(), (2, 0));
        drop(silent);
        assert_eq!(a.counts(), (2, 0), "an evicted ticket frees nothing twice");
        drop((talker, newcomer));
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
        tokio::time::advance(MIN_AGE_TO_EVICT).await;
        // Established connections are never evicted.
        let third: IpAddr = [127, 0, 0, 3].into();
        assert_eq!(a.admit(Some(third)).err(), Some(Refusal::ConnectionCap));
        drop(first);
        assert!(a.admit(Some(ip)).is_ok());
        drop(second);
        assert_eq!(a.counts(), (0, 0));
    }
}
