//! The client's unary entry: [`Connection::call`] sends one request that
//! ends its side and resolves with the first piece of the reply.
//!
//! One future does what `open` + `recv` + drop did as three: it waits its
//! turn under the peer's stream cap, opens, writes and starts waiting for
//! the reply (reading the socket itself, as [`Stream::recv`] does) in one
//! critical section, and it holds no `Stream` handle (no `Arc` clone, no
//! per-call metadata copy) unless the reply turns out to be longer than one
//! frame. A reply of one `DATA|END_STREAM` frame — the common unary case —
//! leaves the stream table in the read that takes it, so a finished call
//! submits nothing when dropped.
//!
//! The wire is unchanged, and so is every semantic of a stream opened with
//! `open(.., end = true)`: flow control, the stream cap, resets, the
//! connection's close, and a `CANCEL` reset for a call dropped before its
//! reply ended.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use weft_frame::Metadata;

use crate::driver::{Deferred, Life, Waiter};
use crate::error::{MuxError, StreamError};
use crate::handle::{Connection, Stream};
use crate::session::Chunk;

impl Connection {
    /// A unary exchange: opens a stream whose one `OPEN|END_STREAM` frame
    /// carries `metadata` and `payload` (as [`open`](Self::open) with
    /// `end` set, and split the same way when flow control requires), then
    /// waits for the first piece of the reply.
    ///
    /// Fails with a [`MuxError`] only where `open` does (closed, going
    /// away, ids exhausted, metadata too large); what the stream itself
    /// meets afterwards (a reset, the connection's close) is in
    /// [`Replied::first`], as `recv` would have returned it.
    ///
    /// Dropped before the reply has ended, the call resets the stream with
    /// `CANCEL`, as a dropped [`Stream`] does; dropped while it waits for
    /// its turn under the peer's cap, it leaves the queue.
    pub fn call(&self, metadata: Metadata, payload: Bytes) -> Reply<'_> {
        Reply {
            conn: self,
            state: CallState::Queued {
                args: Some((metadata, payload)),
                ticket: None,
            },
        }
    }
}

/// The future of [`Connection::call`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Reply<'a> {
    conn: &'a Connection,
    state: CallState,
}

/// Where a [`Reply`] is.
#[derive(Debug)]
enum CallState {
    /// Not opened yet: waiting (with `ticket`, a place in the queue of
    /// opens) for a slot under the peer's cap.
    Queued {
        args: Option<(Metadata, Bytes)>,
        ticket: Option<u64>,
    },
    /// Opened as stream `id`; the reply has not come.
    Awaiting {
        id: u32,
        metadata: Metadata,
        /// Registered as the socket's waiter (to be handed back if the
        /// call is dropped).
        socket: SocketWatch,
    },
    /// Resolved: nothing is owed to the session any more.
    Done,
}

/// Whether a waiting call holds the socket's watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SocketWatch {
    /// It does not.
    Off,
    /// It is the registered reader: a drop hands the watch back.
    Held,
}

/// The reply's first piece, and the stream when more may follow.
#[derive(Debug)]
pub struct Replied {
    /// The stream id the call used.
    pub id: u32,
    /// The `OPEN` metadata the call sent (as [`Stream::metadata`] holds it).
    pub metadata: Metadata,
    /// What `recv` returned first: a chunk (with `end` set when the reply
    /// was that one frame), the end, or the stream's failure.
    pub first: Result<Option<Chunk>, StreamError>,
    /// The stream, when the reply did not end with `first` (a reply of
    /// several frames): read the rest from it. `None` once the exchange is
    /// over, which is the single-frame reply's case: the stream has left
    /// the table already.
    pub more: Option<Stream>,
}

impl Future for Reply<'_> {
    type Output = Result<Replied, MuxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.get_mut();
        let shared = &me.conn.shared;
        let mut inner = shared.lock();
        if let CallState::Queued { args, ticket } = &mut me.state {
            if inner.must_wait_to_open(cx, ticket) {
                return Poll::Pending;
            }
            let (metadata, payload) = args.take().expect("call polled after it completed");
            // The handle's copy of the metadata, as `open` keeps for its
            // `Stream` (a reference count, not the bytes).
            let kept = metadata.clone();
            match inner.open(metadata, payload, true) {
                Ok(id) => {
                    me.state = CallState::Awaiting {
                        id,
                        metadata: kept,
                        socket: SocketWatch::Off,
                    }
                }
                Err(e) => {
                    me.state = CallState::Done;
                    return Poll::Ready(Err(e));
                }
            }
        }
        let CallState::Awaiting { id, socket, .. } = &mut me.state else {
            panic!("call polled after it completed");
        };
        let id = *id;
        // The same critical section as the open on the first poll: the
        // request is written, the stream's queue looked at, and this task
        // registered as the socket's reader.
        let mut life = Life::Held;
        let Poll::Ready(first) = inner.poll_recv(id, cx, true, &mut life) else {
            *socket = SocketWatch::Held;
            return Poll::Pending;
        };
        drop(inner);
        let CallState::Awaiting { metadata, .. } =
            std::mem::replace(&mut me.state, CallState::Done)
        else {
            unreachable!("matched above");
        };
        let ended = matches!(&first, Ok(None) | Ok(Some(Chunk { end: true, .. })));
        let more = match (life, ended, &first) {
            // Finished both ways and released in the read that took it.
            (Life::Released, _, _) => None,
            // More of the reply may come: the caller reads it from a
            // stream handle, which owns the release from here.
            (Life::Held, false, Ok(_)) => Some(Stream::new(shared.clone(), id, metadata.clone())),
            // Failed (or ended while the session still keeps it): free it
            // as a dropped handle would.
            (Life::Held, _, _) => {
                shared.submit(Deferred::Release(id));
                None
            }
        };
        Poll::Ready(Ok(Replied {
            id,
            metadata,
            first,
            more,
        }))
    }
}

impl Drop for Reply<'_> {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, CallState::Done) {
            CallState::Queued {
                ticket: Some(t), ..
            } => self.conn.shared.submit(Deferred::CancelOpen(t)),
            CallState::Awaiting { id, socket, .. } => {
                if socket == SocketWatch::Held {
                    self.conn.shared.abandon_socket_wait(Waiter::Stream(id));
                }
                // The reply has not ended: reset (`CANCEL`) and free.
                self.conn.shared.submit(Deferred::Release(id));
            }
            CallState::Queued { ticket: None, .. } | CallState::Done => {}
        }
    }
}
