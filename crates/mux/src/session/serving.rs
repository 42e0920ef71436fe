//! The server's unary slot: what a stream the peer opened and ended with
//! one `OPEN|END_STREAM` keeps in the stream table while it waits for its
//! accept and then its reply, instead of a full [`StreamState`].
//!
//! The slot holds the request (the `OPEN`'s metadata and payload) until
//! the accept takes it, then the handler's reset waker until the reply.
//! A reply that is one `DATA|END_STREAM` made at once (the send's fast
//! path: credit for all of it, nothing waiting on the ready list, room in
//! the immediate queue) ends the exchange and frees the slot in the same
//! step. Everything else — any accept but `accept_with_request`, a frame
//! from the peer on the stream (`RESET`, a late `DATA`, a
//! `WINDOW_UPDATE`), a reply that does not go at once or does not end
//! the stream, a receive, a reset or release by the application, a
//! `GOAWAY`, the close — first *promotes* the slot to the full stream it
//! stands for ([`ServeSlot::promote_into`]), and the full stream's rules
//! apply unchanged. The slot counts against the stream cap as its stream
//! would (it is in the table, `inbound` counts it) until it leaves.
//!
//! ```text
//!   OPEN|END_STREAM --> Unaccepted --(accept_with_request)--> Handling
//!                           |                                     |
//!                           | anything else      reply made at    |
//!                           v                    once: freed      |
//!                 promoted to a full stream <--- anything else ---+
//! ```

use bytes::Bytes;
use weft_frame::Metadata;

use super::stream::{Chunk, Handle, RecvState, StreamState, StreamWakers};
use super::window::{RecvWindow, SendWindow};

/// Where a server slot's exchange is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Serving {
    /// In the accept queue, the request in the slot.
    Unaccepted,
    /// Accepted with its request: the handler owes the reply.
    Handling,
}

/// One unary exchange the peer opened (boxed in the table, boxes reused
/// like [`StreamState`]'s).
#[derive(Debug)]
pub(crate) struct ServeSlot {
    pub(crate) serving: Serving,
    /// The `OPEN` metadata, until the accept takes it.
    pub(crate) metadata: Option<Metadata>,
    /// The `OPEN` payload (the whole request), until the accept takes it.
    /// An `Option`, as the metadata: blanking an empty `Bytes` still ran
    /// its drop (an indirect call).
    pub(crate) request: Option<Bytes>,
    /// Our credit for the peer on the stream, after the request.
    pub(crate) recv_window: RecvWindow,
    /// The peer's credit for the stream: the reply is checked against it.
    pub(crate) send_window: SendWindow,
    /// The handler's reset watch, kept as a stream's wakers are.
    pub(crate) wakers: StreamWakers,
    /// The next spare box while this one is spare.
    pub(crate) spare_link: Option<Box<ServeSlot>>,
}

impl ServeSlot {
    /// A new slot for a request.
    pub(crate) fn new(
        (metadata, request): (Metadata, Bytes),
        recv_window: RecvWindow,
        send_window: u32,
    ) -> ServeSlot {
        ServeSlot {
            serving: Serving::Unaccepted,
            metadata: Some(metadata),
            request: Some(request),
            recv_window,
            send_window: SendWindow::new(send_window),
            wakers: StreamWakers::default(),
            spare_link: None,
        }
    }

    /// Starts a (blank) slot for a new request.
    #[inline(always)]
    pub(crate) fn start(
        &mut self,
        (metadata, request): (Metadata, Bytes),
        recv_window: RecvWindow,
        send_window: u32,
    ) {
        self.serving = Serving::Unaccepted;
        // A blank slot holds neither: `replace` and `forget` drop nothing
        // (an assignment was a call to the old value's drop glue).
        std::mem::forget(self.metadata.replace(metadata));
        std::mem::forget(self.request.replace(request));
        self.recv_window = recv_window;
        self.send_window = SendWindow::new(send_window);
    }

    /// Back to blank: what it held is dropped now. Every field is named,
    /// so a field added later cannot be left over from the previous call.
    #[inline(always)]
    pub(crate) fn blank(&mut self) {
        let ServeSlot {
            serving: _,
            metadata,
            request,
            recv_window: _,
            send_window: _,
            wakers,
            spare_link: _,
        } = self;
        // Tested first: the accept took both (the common case).
        if metadata.is_some() {
            *metadata = None;
        }
        if request.is_some() {
            *request = None;
        }
        wakers.clear();
    }

    /// The accept with the request: its metadata and payload taken, the
    /// handler's turn. The payload's size is the connection credit to
    /// return (an `OPEN`'s flow-controlled size is its payload's).
    #[inline(always)]
    pub(crate) fn accept(&mut self) -> (Metadata, Bytes) {
        self.serving = Serving::Handling;
        (
            self.metadata.take().unwrap_or_default(),
            self.request.take().unwrap_or_default(),
        )
    }

    /// Makes `st` (a fresh state) the stream this slot stands for: the
    /// peer's, ended by its `OPEN`; waiting to be accepted with the
    /// request queued, or held with the request taken; the windows as
    /// they are and the handler's wakers. The slot is left blank.
    pub(crate) fn promote_into(&mut self, st: &mut StreamState) {
        st.remote = true;
        st.open_metadata = self.metadata.take();
        st.recv.window = self.recv_window;
        st.send.window = self.send_window;
        std::mem::swap(&mut st.wakers, &mut self.wakers);
        match self.serving {
            Serving::Unaccepted => {
                st.handle = Handle::Unaccepted;
                let data = self.request.take().unwrap_or_default();
                let len = data.len() as u32;
                st.recv.push(
                    Chunk {
                        data,
                        metadata: Metadata::new(),
                        end: true,
                    },
                    len,
                );
            }
            Serving::Handling => {
                st.handle = Handle::Held;
                st.recv.state = RecvState::Ended;
            }
        }
    }
}

/// Whether a session keeps requests in slots (tests compare the slot with
/// the full stream it stands for). Per thread rather than a field: the
/// connection state's size is checked in the test build.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slots {
    On,
    Off,
}

#[cfg(test)]
thread_local! {
    pub(crate) static SLOTS: std::cell::Cell<Slots> = const { std::cell::Cell::new(Slots::On) };
}

#[cfg(test)]
mod tests;
