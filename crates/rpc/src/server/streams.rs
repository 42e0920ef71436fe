//! The handles a streaming handler uses: [`RequestStream`] (messages from
//! the caller), [`ResponseSink`] (messages to the caller) and, for
//! bidirectional calls, [`BidiStream`] (both).
//!
//! The server keeps the call's stream in a shared slot while the handler
//! runs, so that once the handler returns it can end the call with the
//! final status. A receive cancelled half-way (e.g. in a `select!`) loses
//! nothing; a send cancelled half-way could leave half a message on the
//! wire, so no further message may follow it: the call can then only end,
//! with an error status (the deadline's `DEADLINE_EXCEEDED`, PROTOCOL 7.4)
//! or, if the handler claims success, a reset.

use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use weft_mux::Stream;

use weft_frame::Metadata;

use crate::codec;
use crate::codec::wire::{self, Reader};
use crate::server::context::CallCell;
use crate::status::Status;

/// Where the call's stream is.
#[derive(Debug)]
enum Place {
    /// In the slot, free to lease.
    Here(Stream),
    /// Leased: a send (or the server's reset watch) has it.
    Out,
    /// A send was cancelled half-way: part of a message may be queued, so
    /// nothing more may be sent but the call's end.
    Torn(Stream),
    /// The call is ending while a handle on another task (a split half)
    /// still has the stream out: it comes back to the server, not to the
    /// handles (whose task this wakes), and no handle may lease it again.
    Ending(Option<Waker>),
    /// What came back to the server during [`Place::Ending`].
    Back(Closed),
    /// The call is over: ended by the server.
    Gone,
}

/// What [`Slot::close`] found.
#[derive(Debug)]
pub(crate) enum Closed {
    /// The stream, between messages.
    Whole(Stream),
    /// The stream after a send cancelled half-way (see [`Place::Torn`]).
    Torn(Stream),
    /// Nothing: a handle still has it out (wait with
    /// [`Slot::returned`]), or the call is already over.
    Away,
}

/// Who waits for the stream to come back: one waker per role, so the two
/// halves of a bidirectional call can wait from two tasks.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    Receive = 0,
    Send = 1,
}

#[derive(Debug)]
struct SlotInner {
    place: Place,
    waiting: [Option<Waker>; 2],
    /// On a server's call until its first message goes: where the
    /// handler's response headers are (the call's entry).
    headers: Option<Arc<CallCell>>,
}

/// The call's stream, shared between the server task and the handler's
/// handles. A receive leases it for one poll at a time; a send for the
/// whole send (it may wait for flow-control credit), during which a
/// receive waits.
#[derive(Debug, Clone)]
pub(crate) struct Slot(Arc<Mutex<SlotInner>>);

impl Slot {
    pub(crate) fn new(stream: Stream) -> Slot {
        Slot(Arc::new(Mutex::new(SlotInner {
            place: Place::Here(stream),
            waiting: [None, None],
            headers: None,
        })))
    }

    /// The slot of a call served here: its first message carries the
    /// response headers the handler set by then.
    pub(crate) fn serving(stream: Stream, cell: Arc<CallCell>) -> Slot {
        let slot = Slot::new(stream);
        slot.inner().headers = Some(cell);
        slot
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, SlotInner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the stream out if it is here (to be [`put`](Self::put) back).
    pub(crate) fn take(&self) -> Option<Stream> {
        let mut inner = self.inner();
        match std::mem::replace(&mut inner.place, Place::Out) {
            Place::Here(s) => Some(s),
            other => {
                inner.place = other;
                None
            }
        }
    }

    pub(crate) fn put(&self, s: Stream) {
        self.give_back(Closed::Whole(s));
    }

    /// Puts the stream back: to the server if the call is ending, else for
    /// the next lease (or, torn, for none).
    fn give_back(&self, back: Closed) {
        let mut inner = self.inner();
        inner.place = match (std::mem::replace(&mut inner.place, Place::Gone), back) {
            (Place::Ending(server), back) => {
                if let Some(w) = server {
                    w.wake();
                }
                Place::Back(back)
            }
            (_, Closed::Whole(s)) => Place::Here(s),
            (_, Closed::Torn(s)) => Place::Torn(s),
            (_, Closed::Away) => Place::Gone,
        };
        wake_all(&mut inner.waiting);
    }

    /// Takes the stream for good (the call is ending); later leases fail.
    /// If a handle has it out, it is promised to the server instead (see
    /// [`Slot::returned`]).
    pub(crate) fn close(&self) -> Closed {
        let mut inner = self.inner();
        let place = std::mem::replace(&mut inner.place, Place::Gone);
        wake_all(&mut inner.waiting);
        match place {
            Place::Here(s) => Closed::Whole(s),
            Place::Torn(s) => Closed::Torn(s),
            Place::Back(c) => c,
            Place::Out | Place::Ending(_) => {
                inner.place = Place::Ending(None);
                Closed::Away
            }
            Place::Gone => Closed::Away,
        }
    }

    /// After a [`close`](Self::close) that found the stream out: waits
    /// until its handle lets go (its send completes or fails) and takes it
    /// for good. `Away` only if the call was already over.
    pub(crate) async fn returned(&self) -> Closed {
        poll_fn(|cx| {
            let mut inner = self.inner();
            match std::mem::replace(&mut inner.place, Place::Gone) {
                Place::Back(c) => Poll::Ready(c),
                Place::Ending(_) => {
                    inner.place = Place::Ending(Some(cx.waker().clone()));
                    Poll::Pending
                }
                other => {
                    inner.place = other;
                    Poll::Ready(Closed::Away)
                }
            }
        })
        .await
    }

    /// Puts back the stream of a send cut short: later leases fail.
    fn tear(&self, s: Stream) {
        self.give_back(Closed::Torn(s));
    }

    /// Leases the stream, waiting while another handle has it out.
    pub(crate) fn poll_lease(
        &self,
        role: Role,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Lease<'_>, Status>> {
        let mut inner = self.inner();
        match std::mem::replace(&mut inner.place, Place::Out) {
            Place::Here(stream) => Poll::Ready(Ok(Lease {
                slot: self,
                stream: Some(stream),
                sending: false,
                // A send takes the headers (under the same lock).
                headers: match role {
                    Role::Send => inner.headers.take(),
                    Role::Receive => None,
                },
            })),
            Place::Out => {
                inner.waiting[role as usize] = Some(cx.waker().clone());
                Poll::Pending
            }
            over @ (Place::Gone | Place::Ending(_) | Place::Back(_)) => {
                inner.place = over;
                Poll::Ready(Err(Status::cancelled("the call is over")))
            }
            Place::Torn(s) => {
                inner.place = Place::Torn(s);
                Poll::Ready(Err(Status::cancelled("a send was cut short")))
            }
        }
    }

    async fn lease(&self, role: Role) -> Result<Lease<'_>, Status> {
        poll_fn(|cx| self.poll_lease(role, cx)).await
    }
}

fn wake_all(waiting: &mut [Option<Waker>; 2]) {
    for w in waiting.iter_mut().filter_map(Option::take) {
        w.wake();
    }
}

/// The stream taken out of its slot; goes back when dropped. If a send
/// was under way it goes back torn: a send cut short could leave half a
/// message on the wire, so no handle may lease it again; only the server
/// ends the call.
pub(crate) struct Lease<'a> {
    slot: &'a Slot,
    stream: Option<Stream>,
    sending: bool,
    /// Where the call's response headers are, on its first send.
    headers: Option<Arc<CallCell>>,
}

impl Lease<'_> {
    /// The response headers this send carries: those the handler set, on
    /// a server call's first send (later ones carry none).
    fn take_headers(&mut self) -> Option<Metadata> {
        let entries = self.headers.take()?.take_headers();
        (!entries.is_empty()).then(|| wire::headers(&entries))
    }

    pub(crate) fn get(&mut self) -> &mut Stream {
        self.stream
            .as_mut()
            .expect("a lease holds its stream until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Some(s) = self.stream.take() else { return };
        if self.sending {
            self.slot.tear(s);
        } else {
            self.slot.put(s);
        }
    }
}

/// Messages the caller sends, in order.
#[derive(Debug)]
pub struct RequestStream {
    slot: Slot,
    reader: Reader,
}

impl RequestStream {
    /// The requests of the call in `slot`, starting with `first`: the
    /// caller's whole side when the accept took it with the stream.
    pub(crate) fn new(slot: Slot, max_message: usize, first: Option<Bytes>) -> RequestStream {
        let mut reader = Reader::new(max_message);
        if let Some(data) = first {
            // Only a receive's error is refused; a piece is always taken in.
            let _ = reader.absorb(Ok(Some(crate::server::request::whole_side(data))));
        }
        RequestStream { slot, reader }
    }

    /// The next message; `Ok(None)` once the caller has ended its side. A
    /// caller that went away is an error (`CANCELLED`), never an end.
    /// Cancel safe. Holds the call's stream only while polled, so a
    /// [`ResponseSink`] of the same call can send from another task.
    pub async fn message(&mut self) -> Result<Option<Bytes>, Status> {
        poll_fn(|cx| self.poll_message(cx)).await
    }

    /// Polls for the next message (see [`message`](Self::message)).
    pub fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Status>> {
        let mut lease = match self.slot.poll_lease(Role::Receive, cx) {
            Poll::Ready(Ok(l)) => l,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        self.reader.poll_next(lease.get(), cx)
    }

    /// The single message of a call that carries one.
    pub(crate) async fn single(&mut self) -> Result<Bytes, Status> {
        let mut lease = self.slot.lease(Role::Receive).await?;
        self.reader.single(lease.get()).await
    }

    /// The next message as JSON; malformed input is `INVALID_ARGUMENT`.
    #[cfg(feature = "json")]
    pub async fn message_json<T: serde::de::DeserializeOwned>(
        &mut self,
    ) -> Result<Option<T>, Status> {
        match self.message().await? {
            Some(b) => crate::codec::message::from_json(&b).map(Some),
            None => Ok(None),
        }
    }
}

/// Sends messages to the caller. The server ends the call with the
/// handler's status once the handler returns; a sink cannot end it early.
#[derive(Debug)]
pub struct ResponseSink {
    slot: Slot,
    max_message: usize,
}

impl ResponseSink {
    pub(crate) fn new(slot: Slot, max_message: usize) -> ResponseSink {
        ResponseSink { slot, max_message }
    }

    pub(crate) async fn send_framed(&mut self, framed: codec::Framed) -> Result<(), Status> {
        send_on(&self.slot, framed).await
    }

    /// A clone of the call's slot, for a send future that owns it.
    pub(crate) fn slot(&self) -> Slot {
        self.slot.clone()
    }

    /// The message limit.
    pub(crate) fn max_message(&self) -> usize {
        self.max_message
    }

    /// Sends one message, waiting for flow-control credit. Fails if the
    /// caller went away (`CANCELLED`) or the message is over the limit
    /// (`RESOURCE_EXHAUSTED`, nothing sent).
    pub async fn send(&mut self, message: Bytes) -> Result<(), Status> {
        let framed = codec::frame(message, self.max_message)?;
        self.send_framed(framed).await
    }

    /// Sends one value as a JSON message.
    #[cfg(feature = "json")]
    pub async fn send_json<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), Status> {
        let b = crate::codec::message::to_json(value, self.max_message)?;
        self.send_framed(codec::Framed::One(b)).await
    }
}

/// Sends one framed message on the call in `slot`.
pub(crate) async fn send_on(slot: &Slot, framed: codec::Framed) -> Result<(), Status> {
    let mut lease = slot.lease(Role::Send).await?;
    lease.sending = true;
    match lease.take_headers() {
        None => wire::send(lease.get(), framed, None).await?,
        Some(h) => wire::send_headed(lease.get(), framed, h, None).await?,
    }
    lease.sending = false;
    Ok(())
}

/// Ends the sending direction of the call in `slot` (`END_STREAM`, no data).
pub(crate) async fn end_on(slot: &Slot) -> Result<(), Status> {
    let mut lease = slot.lease(Role::Send).await?;
    lease.sending = true;
    let r = lease.get().send(Bytes::new(), true).await;
    r.map_err(|e| wire::from_stream(&e))?;
    lease.sending = false;
    Ok(())
}

/// Both directions of a bidirectional call, from the handler's side.
///
/// One handle for both directions: interleave [`message`](Self::message)
/// and [`send`](Self::send) as the protocol of the method requires, or
/// [`split`](Self::split) it into halves for two tasks. (Both directions
/// are flow-controlled separately, so a handler that reads what it is sent
/// never blocks the caller.)
#[derive(Debug)]
pub struct BidiStream {
    requests: RequestStream,
    responses: ResponseSink,
}

impl BidiStream {
    pub(crate) fn new(slot: Slot, max_message: usize, first: Option<Bytes>) -> BidiStream {
        BidiStream {
            requests: RequestStream::new(slot.clone(), max_message, first),
            responses: ResponseSink::new(slot, max_message),
        }
    }

    /// The receiving and the sending half, usable from two tasks. A send
    /// waiting for flow-control credit holds the call's stream: the
    /// receiving half waits for it meanwhile.
    pub fn split(self) -> (RequestStream, ResponseSink) {
        (self.requests, self.responses)
    }

    /// The next message from the caller (see [`RequestStream::message`]).
    pub async fn message(&mut self) -> Result<Option<Bytes>, Status> {
        self.requests.message().await
    }

    /// Sends a message to the caller (see [`ResponseSink::send`]).
    pub async fn send(&mut self, message: Bytes) -> Result<(), Status> {
        self.responses.send(message).await
    }

    /// The next message as JSON.
    #[cfg(feature = "json")]
    pub async fn message_json<T: serde::de::DeserializeOwned>(
        &mut self,
    ) -> Result<Option<T>, Status> {
        self.requests.message_json().await
    }

    /// Sends a value as a JSON message.
    #[cfg(feature = "json")]
    pub async fn send_json<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), Status> {
        self.responses.send_json(value).await
    }
}
