//! [`Connection::call`]: a request sent whole and the first piece of its
//! answer, in one future — what a unary call needs of the mux, with one
//! take of the connection's state fewer than an `open` followed by a
//! `recv`, and no [`Stream`] handle unless the answer needs one.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use weft_frame::Metadata;

use crate::driver::{Deferred, Life, Waiter, recv_result};
use crate::error::{MuxError, StreamError};
use crate::handle::{Connection, Stream};
use crate::session::{Chunk, Recv};

impl Connection {
    /// Opens a stream with `metadata` and all of `payload`, ending this
    /// side, and waits for the peer's first piece of the answer: the
    /// exchange of a unary call. What resolves is an [`Answer`]: that
    /// piece (or the stream's end or failure), and the stream itself if
    /// the peer has more to send.
    ///
    /// It behaves as [`open`](Self::open) with `end` followed by
    /// [`Stream::recv`]: it waits its turn under the peer's stream cap,
    /// fails with the same errors, and reads the socket from the calling
    /// task while it waits. Dropped before the answer's end, it resets the
    /// stream with `CANCEL` (the peer's handler sees the reset).
    ///
    /// ```
    /// # async fn demo(conn: weft_mux::Connection) -> Result<(), Box<dyn std::error::Error>> {
    /// use bytes::Bytes;
    /// use weft_mux::Metadata;
    ///
    /// let answer = conn.call(Metadata::new(), Bytes::from_static(b"ping")).await?;
    /// if let Ok(Some(chunk)) = answer.first() {
    ///     println!("{} bytes, ended: {}", chunk.data.len(), chunk.end);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn call(&self, metadata: Metadata, payload: Bytes) -> Call<'_> {
        Call {
            conn: self,
            metadata: ManuallyDrop::new(metadata),
            state: State::Opening {
                payload,
                ticket: None,
            },
        }
    }
}

/// The future of [`Connection::call`].
#[derive(Debug)]
#[must_use = "a call does nothing unless polled"]
pub struct Call<'a> {
    conn: &'a Connection,
    /// The `OPEN` metadata, for the [`Answer`]: beside the state, not in
    /// it, so that neither the open nor the answer moves it with the rest
    /// of the state (an enum moved whole: about 20 instructions a call).
    /// Dropped by hand, and only while it is the call's own: once moved
    /// to the answer the static empty block is left (see the `Drop`
    /// impl).
    metadata: ManuallyDrop<Metadata>,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Not opened yet: the request's payload, and the place in the queue
    /// of opens waiting under the peer's stream cap, if it had to wait.
    Opening { payload: Bytes, ticket: Option<u64> },
    /// Opened: waiting for the answer's first piece, registered as the
    /// socket's reader while pending (`waiting`).
    Waiting { id: u32, life: Life, waiting: bool },
    /// Resolved (or its stream handed on): `metadata` is the answer's.
    Done,
}

impl<'a> Future for Call<'a> {
    type Output = Result<Answer<'a>, MuxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.get_mut();
        let mut inner = me.conn.shared.lock();
        let opened = matches!(me.state, State::Opening { .. });
        if let State::Opening { ticket, .. } = &mut me.state {
            if inner.must_wait_to_open(cx, ticket) {
                return Poll::Pending;
            }
            // Only the payload moves out, not the metadata with it.
            let State::Opening { payload, .. } = std::mem::replace(&mut me.state, State::Done)
            else {
                unreachable!("matched above");
            };
            // The metadata is lent, not cloned: the open gives it back.
            let id = match inner.open_call(&mut me.metadata, payload) {
                Ok(id) => id,
                Err(e) => {
                    me.drop_metadata();
                    return Poll::Ready(Err(e));
                }
            };
            // The answer is looked for under the same take of the state.
            me.state = State::Waiting {
                id,
                life: Life::Held,
                waiting: false,
            };
        }
        let State::Waiting { id, life, waiting } = &mut me.state else {
            panic!("call polled after it completed");
        };
        let first = if opened {
            inner.poll_reply_fresh(*id, cx, life)
        } else {
            inner.poll_reply(*id, cx, life)
        };
        // Let go before the answer is built, the piece held across the
        // unlock (one 72-byte move more): building the answer first,
        // straight into the output, measured worse: +32 instructions
        // per call in every instr cell (the cause not found).
        inner.unlock();
        let Poll::Ready(first) = first else {
            *waiting = true;
            return Poll::Pending;
        };
        let (id, life) = (*id, *life);
        me.state = State::Done;
        Poll::Ready(Ok(Answer {
            conn: me.conn,
            id,
            metadata: me.take_metadata(),
            life,
            first: ManuallyDrop::new(first),
        }))
    }
}

impl Call<'_> {
    /// The metadata, the static empty block left in its place (which
    /// needs no drop).
    #[inline(always)]
    fn take_metadata(&mut self) -> Metadata {
        ManuallyDrop::into_inner(std::mem::replace(
            &mut self.metadata,
            ManuallyDrop::new(Metadata::new()),
        ))
    }

    /// Drops the metadata now (the call failed without an answer).
    fn drop_metadata(&mut self) {
        drop(self.take_metadata());
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        match &mut self.state {
            State::Opening { ticket, .. } => {
                if let Some(t) = ticket {
                    self.conn.shared.submit(Deferred::CancelOpen(*t));
                }
            }
            State::Waiting { id, life, waiting } => {
                if *waiting {
                    self.conn.shared.abandon_socket_wait(Waiter::Stream(*id));
                }
                if *life == Life::Held {
                    self.conn.shared.submit(Deferred::Release(*id));
                }
            }
            // The metadata went to the answer (or was dropped on failure).
            State::Done => return,
        }
        self.drop_metadata();
    }
}

/// What [`Connection::call`] resolves to: the first piece of the answer,
/// and the call's stream for the rest. Dropped before the answer's end,
/// it resets the stream with `CANCEL`, as a dropped [`Stream`] does.
#[derive(Debug)]
pub struct Answer<'a> {
    conn: &'a Connection,
    id: u32,
    metadata: Metadata,
    life: Life,
    /// The first piece as the session gave it (kept in its shape: a
    /// conversion here moved the 72-byte chunk once more per call).
    /// Never `Pending`; `End` once taken. Dropped by hand, and only when
    /// it holds something (see the `Drop` impl).
    first: ManuallyDrop<Recv>,
}

impl Answer<'_> {
    /// The stream's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The `OPEN` metadata the call was made with.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The first piece of the answer, as [`Stream::recv`] gives it:
    /// `Ok(None)` for an end without data, an error for a reset or the
    /// connection's loss.
    pub fn first(&self) -> Result<Option<&Chunk>, &StreamError> {
        match &*self.first {
            Recv::Chunk(c) => Ok(Some(c)),
            Recv::Failed(e) => Err(e),
            Recv::End | Recv::Pending => Ok(None),
        }
    }

    /// Takes the first piece (later calls of [`first`](Self::first) see
    /// the stream's end).
    pub fn take_first(&mut self) -> Result<Option<Chunk>, StreamError> {
        recv_result(self.replace_first())
    }

    /// The first piece, `End` left in its place.
    #[inline(always)]
    fn replace_first(&mut self) -> Recv {
        ManuallyDrop::into_inner(std::mem::replace(
            &mut self.first,
            ManuallyDrop::new(Recv::End),
        ))
    }

    /// The call's stream, to read the rest of the answer. Whatever
    /// [`take_first`](Self::take_first) has not taken is lost.
    pub fn into_stream(mut self) -> Stream {
        let life = std::mem::replace(&mut self.life, Life::Released);
        let metadata = std::mem::take(&mut self.metadata);
        Stream::with_life(self.conn.shared.clone(), self.id, metadata, life)
    }
}

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        if self.life == Life::Held {
            self.conn.shared.submit(Deferred::Release(self.id));
        }
        // Usually taken by now: the enum's drop glue, an out-of-line call
        // (about 17 instructions), only runs for a piece still held.
        if matches!(*self.first, Recv::Chunk(_) | Recv::Failed(_)) {
            drop(self.replace_first());
        }
    }
}
