//! The handles a streaming handler uses: [`RequestStream`] (messages from
//! the caller), [`ResponseSink`] (messages to the caller) and, for
//! bidirectional calls, [`BidiStream`] (both).
//!
//! The server keeps the call's stream in a shared slot while the handler
//! runs, so that once the handler returns it can end the call with the
//! final status. A receive cancelled half-way (e.g. in a `select!`) loses
//! nothing; a send cancelled half-way could leave half a message on the
//! wire, so it resets the call instead.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use weft_mux::Stream;

use crate::Status;
use crate::codec;
use crate::wire::{self, Reader};

/// The call's stream, shared between the server task and the handler.
#[derive(Debug, Clone)]
pub(crate) struct Slot(Arc<Mutex<Option<Stream>>>);

impl Slot {
    pub(crate) fn new(stream: Stream) -> Slot {
        Slot(Arc::new(Mutex::new(Some(stream))))
    }

    pub(crate) fn take(&self) -> Option<Stream> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    pub(crate) fn put(&self, s: Stream) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
    }

    fn lease(&self) -> Result<Lease<'_>, Status> {
        match self.take() {
            Some(stream) => Ok(Lease {
                slot: self,
                stream: Some(stream),
            }),
            None => Err(Status::cancelled("the call is over")),
        }
    }
}

/// The stream taken out of its slot; goes back when dropped.
struct Lease<'a> {
    slot: &'a Slot,
    stream: Option<Stream>,
}

impl Lease<'_> {
    fn get(&mut self) -> &mut Stream {
        self.stream
            .as_mut()
            .expect("a lease holds its stream until dropped")
    }

    /// Keep the stream out of the slot: dropping it resets the call.
    fn forfeit(&mut self) -> Stream {
        self.stream
            .take()
            .expect("a lease holds its stream until dropped")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.stream.take() {
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
    pub(crate) fn new(slot: Slot, max_message: usize) -> RequestStream {
        RequestStream {
            slot,
            reader: Reader::new(max_message),
        }
    }

    /// The next message; `Ok(None)` once the caller has ended its side. A
    /// caller that went away is an error (`CANCELLED`), never an end.
    /// Cancel safe.
    pub async fn message(&mut self) -> Result<Option<Bytes>, Status> {
        let mut lease = self.slot.lease()?;
        self.reader.next(lease.get()).await
    }

    /// The single message of a call that carries one.
    pub(crate) async fn single(&mut self) -> Result<Bytes, Status> {
        let mut lease = self.slot.lease()?;
        self.reader.single(lease.get()).await
    }

    /// The next message as JSON; malformed input is `INVALID_ARGUMENT`.
    #[cfg(feature = "json")]
    pub async fn message_json<T: serde::de::DeserializeOwned>(
        &mut self,
    ) -> Result<Option<T>, Status> {
        match self.message().await? {
            Some(b) => crate::message::from_json(&b).map(Some),
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

    async fn send_framed(&mut self, framed: codec::Framed) -> Result<(), Status> {
        let mut lease = self.slot.lease()?;
        let mut stream = lease.forfeit();
        wire::send(&mut stream, framed, None).await?;
        drop(lease);
        self.slot.put(stream);
        Ok(())
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
        let b = crate::message::to_json(value, self.max_message)?;
        self.send_framed(codec::Framed::One(b)).await
    }
}

/// Both directions of a bidirectional call, from the handler's side.
///
/// One handle for both directions, used from one task: interleave
/// [`message`](Self::message) and [`send`](Self::send) as the protocol of
/// the method requires. (Both directions are flow-controlled separately, so
/// a handler that reads what it is sent never blocks the caller.)
#[derive(Debug)]
pub struct BidiStream {
    requests: RequestStream,
    responses: ResponseSink,
}

impl BidiStream {
    pub(crate) fn new(slot: Slot, max_message: usize) -> BidiStream {
        BidiStream {
            requests: RequestStream::new(slot.clone(), max_message),
            responses: ResponseSink::new(slot, max_message),
        }
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
