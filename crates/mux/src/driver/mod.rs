//! The tokio side of weft-mux: who owns a connection's state, and when.
//!
//! # Ownership
//! A connection's state — the sans-I/O [`Session`], the socket, the
//! record pipeline and the wakers — sits in one [`Inner`] behind one
//! mutex (`parking_lot`'s, without poisoning: [`sync`](self::sync)).
//! Whoever holds it is the connection's *owner* for
//! that moment and does everyone's work: it writes every queued frame
//! (coalesced into one write), reads and handles every frame the socket
//! has (for all streams), and completes other callers' operations left in
//! a mailbox ([`Combiner`]). Critical sections never await.
//!
//! No caller waits on another for an operation that returns nothing: a
//! stream's drop, a reset, the acceptor's drop are *submitted* with
//! [`Shared::submit`] when the state is busy — pushed onto the mailbox,
//! never blocking — and the owner applies them before it lets go
//! ([`Guard`]'s drop), or the next owner does when it takes over.
//!
//! Wake-ups are collected while the state is held ([`WakeList`](wake::WakeList)) and
//! woken only after it is released, so a woken caller never starts on
//! another core just to find the state still held.
//!
//! # Reads and writes
//! Writes happen inline from whichever side has something to send: a
//! `send` that finds the writer idle encodes and writes its own frame in
//! the same call, so a round trip needs no wake-up of a writer task. With
//! other streams in flight the first call to queue something wakes the
//! connection task, which yields once so that every caller already
//! runnable queues its frame too, then writes them in one go
//! ([`write`](self::write)).
//!
//! The socket is always polled with one connection-wide [`ReadWake`]
//! waker; when bytes arrive it wakes the task of the `recv` or `accept`
//! currently waiting for them (which then reads the socket itself,
//! handling frames for every stream) or, if none waits, the connection
//! task ([`read`](self::read)). So the reply to a request wakes the
//! requesting task directly, and some task always watches the socket.
//!
//! The connection task ([`task`](self::task)) fires timers, finishes
//! writes the socket was not ready for, watches the socket when nobody
//! else does, and shuts the transport down at the end.
//!
//! Handles ([`crate::handle`]) never touch `Inner`'s fields: they call
//! the operations in [`ops`](self::ops).
//!
//! # Parts
//! `Inner` is a handful of parts, each changed by the file that owns it;
//! methods on `Inner` itself are only the glue that needs several parts:
//!
//! | part | owner | state |
//! |---|---|---|
//! | `io` | [`io`](self::io) | the transport: open, write side shut, done |
//! | `session` | `crate::session` | the protocol; it reports events, [`events`](self::events) acts on them (wakes, metrics) |
//! | `reader` | [`read`](self::read) | read buffer; reading, blocked on a full control queue, or ended; armed or not |
//! | `writer` | [`write`](self::write) | write buffer; flushed or not, shut |
//! | `link` | [`task`](self::task) | the connection task's turn to write, its timer's deadline, a wake-up owed to it |
//! | `wakers` | [`wake`](self::wake) | every waker outside the stream table, and the wake-ups owed at release |

mod batch;
mod combine;
mod events;
mod io;
#[cfg(all(test, loom))]
mod loom_link;
#[cfg(all(test, loom))]
mod loom_opens;
#[cfg(all(test, loom))]
mod loom_tests;
mod opens;
mod ops;
mod rbuf;
mod read;
mod sync;
mod task;
mod wake;
mod wbuf;
mod write;

use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use bytes::BytesMut;
use tracing::Span;

use crate::pipeline::{Inbound, Negotiated, Outbound};
use crate::session::Session;

use combine::Combiner;
pub(crate) use combine::Guard;
use io::Io;
pub(crate) use io::Transport;
pub(crate) use ops::{Deferred, Life, Request, recv_result};
pub(crate) use read::READ_FIRST;
use read::Reader;
pub(crate) use task::Driver;
use task::Link;
pub(crate) use wake::Waiter;
use wake::{ReadWake, Wakers};
use write::Writer;

/// Everything behind the connection's lock: a handful of parts, each
/// with the one file that changes it.
#[derive(Debug)]
pub(crate) struct Inner {
    /// The transport and how far its life has gone ([`io`](self::io)).
    io: Io,
    /// The sans-I/O protocol state: it reports events, the driver acts on
    /// them ([`events`](self::events)).
    session: Session,
    /// The read buffer, the inbound pipeline and the read side's state
    /// ([`read`](self::read)).
    reader: Reader,
    /// The outbound pipeline and the coalescing buffer
    /// ([`write`](self::write)).
    writer: Writer,
    /// What the connection task shares with application calls: whose turn
    /// writing is, the timer's deadline ([`task`](self::task)).
    link: Link,
    /// Every waker outside the stream table, and the wake-ups owed at
    /// release ([`wake`](self::wake)).
    wakers: Wakers,
    /// The combiner's spare mailbox buffer ([`combine`](self::combine)).
    spare_ops: Vec<Deferred>,
}

/// What [`Connection::buffer_capacity`](crate::Connection::buffer_capacity)
/// reports, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferCapacity {
    /// Reserved for bytes read from the transport (received payloads are
    /// slices of it).
    pub read: usize,
    /// Reserved for encoded frames waiting to be written.
    pub write: usize,
}

/// Shared by the driver, the `Connection` handles and every `Stream`.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Combiner<Inner>,
    /// Also in `Inner`'s wakers: here so a dropped wait can hand the socket back
    /// without taking the state.
    read_wake: Arc<ReadWake>,
    /// Boxed: read at connect, by `Connection::negotiated` and once per
    /// connection-task poll, never per frame. Inline they made this
    /// allocation 2,672 bytes, past jemalloc's 2,560-byte size class (so
    /// 3,072 bytes per connection; the test below keeps it within).
    cold: Box<Cold>,
}

/// The parts of [`Shared`] off the per-frame path.
#[derive(Debug)]
struct Cold {
    negotiated: Negotiated,
    span: Span,
}

impl Shared {
    /// Takes the connection's state, waiting if another caller holds it.
    pub(crate) fn lock(&self) -> Guard<'_, Inner> {
        self.state.lock()
    }

    /// Takes the state if it is free, or has the task of `waker` polled
    /// again once it is (see [`Combiner::lock_or_wake`]).
    pub(crate) fn lock_or_wake(&self, waker: &Waker) -> Option<Guard<'_, Inner>> {
        self.state.lock_or_wake(waker)
    }

    /// Polls `f` with the state, waiting for it if another caller holds
    /// it. (Handles' polls do not use `lock_or_wake`: a refused poll made
    /// the rpc server's inline first poll of a handler return `Pending`,
    /// which moves that call to a spawned task — an allocation per call
    /// the allocation gate caught with eight calls in flight.)
    ///
    /// Inline: out of line, each handle's result (a received chunk is 72
    /// bytes) was built in this function's frame and copied out again.
    #[inline]
    pub(crate) fn poll_state<R>(
        &self,
        cx: &mut std::task::Context<'_>,
        f: impl FnOnce(&mut Inner, &mut std::task::Context<'_>) -> std::task::Poll<R>,
    ) -> std::task::Poll<R> {
        let mut inner = self.lock();
        let out = f(&mut inner, cx);
        inner.unlock();
        out
    }

    /// Runs `op` now, or leaves it to whoever holds the state (see
    /// [`Combiner::submit`]): for operations that return nothing.
    pub(crate) fn submit(&self, op: Deferred) {
        self.state.submit(op);
    }

    /// `who`'s wait for socket bytes was dropped while registered: the
    /// connection task takes the watch back (and reads anything that woke
    /// us meanwhile).
    pub(crate) fn abandon_socket_wait(&self, who: Waiter) {
        self.read_wake.clear_recv(who, true);
    }

    /// What the handshake agreed.
    pub(crate) fn negotiated(&self) -> &Negotiated {
        &self.cold.negotiated
    }

    /// The connection's span.
    pub(crate) fn span(&self) -> &Span {
        &self.cold.span
    }
}

/// The current time on tokio's clock (virtual in paused tests).
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Builds the shared state for a connection whose handshake is done.
/// `buf` holds any bytes read past the handshake.
pub(crate) fn shared(
    session: Session,
    io: Box<dyn Transport>,
    pipeline: (Inbound, Outbound),
    buf: BytesMut,
    negotiated: Negotiated,
    coalesce: usize,
    span: Span,
) -> Arc<Shared> {
    let read_wake = Arc::new(ReadWake::default());
    Arc::new(Shared {
        state: Combiner::new(Inner {
            io: Io::new(io),
            session,
            reader: Reader::new(pipeline.0, buf),
            writer: Writer::new(pipeline.1, coalesce),
            link: Link::new(),
            wakers: Wakers::new(read_wake.clone()),
            spare_ops: Vec::new(),
        }),
        read_wake,
        cold: Box::new(Cold { negotiated, span }),
    })
}

#[cfg(test)]
mod tests {
    /// The allocator size class the connection's `Shared` (in its `Arc`)
    /// must fit: the largest allocation every connection holds for its life,
    /// so a step up in its size class multiplies across idle connections.
    /// jemalloc (the `weft` binary's allocator) rounds 2,049 to
    /// 2,560 bytes up to 2,560 and the next 512 bytes up to 3,072.
    const SHARED_CLASS: usize = 2560;

    /// Struct layouts do not depend on the optimisation level, so a debug
    /// build checks the release figure.
    #[test]
    fn shared_fits_its_size_class() {
        let size = std::mem::size_of::<super::Shared>() + 2 * std::mem::size_of::<usize>();
        println!("Arc<Shared>: {size} bytes");
        assert!(size <= SHARED_CLASS, "Arc<Shared>: {size} bytes");
    }
}
