//! The client's unary slot: what a call whose request went whole in its
//! `OPEN|END_STREAM` keeps in the stream table while it waits for a
//! one-frame reply, instead of a full [`StreamState`].
//!
//! The slot holds only what the exchange needs: the two windows (so a
//! promotion rebuilds the stream exactly as it would be), the caller's
//! wakers and the reply. Everything that is not the common case — a reply
//! without `END_STREAM` or beyond our window, a reset, a `GOAWAY`, the
//! close, the application's release or reset, a settings change — first
//! *promotes* the slot to the full stream state it stands for
//! ([`UnarySlot::promote_into`]), and the full stream's rules then apply
//! unchanged. So the slot's semantics are the full stream's by
//! construction, and only two paths know about it: the reply's arrival
//! (`Session::on_data`) and its taking (`Session::recv_releasing`).
//!
//! ```text
//!   open_call --> Awaiting --(DATA|END_STREAM within the window)--> Replied
//!                    |                                                 |
//!                    | anything else                     taken: freed  |
//!                    v                                  (leaves table) |
//!              promoted to a full stream <----- anything else ---------+
//! ```

use super::stream::{Chunk, SendState, StreamState, StreamWakers};
use super::window::{RecvWindow, SendWindow};

/// Where a slot's exchange is.
#[derive(Debug, Default)]
pub(crate) enum Reply {
    /// The request is sent; nothing received.
    #[default]
    Awaiting,
    /// The reply arrived whole (`END_STREAM`): the chunk and its
    /// flow-controlled size, until the caller takes it.
    Replied(Chunk, u32),
}

/// One waiting unary call (boxed in the table, boxes reused like
/// [`StreamState`]'s).
#[derive(Debug)]
pub(crate) struct UnarySlot {
    /// The peer's credit for the stream, after the request.
    pub(crate) send_window: SendWindow,
    /// Our credit for the peer on the stream, debited by the reply.
    pub(crate) recv_window: RecvWindow,
    pub(crate) reply: Reply,
    /// The caller's wake-ups, kept as a stream's are.
    pub(crate) wakers: StreamWakers,
    /// The next spare box while this one is spare.
    pub(crate) spare_link: Option<Box<UnarySlot>>,
}

impl UnarySlot {
    /// A new slot for a call.
    pub(crate) fn new(send_window: SendWindow, recv_window: RecvWindow) -> UnarySlot {
        UnarySlot {
            send_window,
            recv_window,
            reply: Reply::Awaiting,
            wakers: StreamWakers::default(),
            spare_link: None,
        }
    }

    /// Starts a (blank) slot for a new call.
    #[inline(always)]
    pub(crate) fn start(&mut self, send_window: SendWindow, recv_window: RecvWindow) {
        self.send_window = send_window;
        self.recv_window = recv_window;
    }

    /// Back to blank: what it held is dropped now. Every field is named,
    /// so a field added later cannot be left over from the previous call.
    #[inline(always)]
    pub(crate) fn blank(&mut self) {
        let UnarySlot {
            send_window: _,
            recv_window: _,
            reply,
            wakers,
            spare_link: _,
        } = self;
        if matches!(reply, Reply::Replied(..)) {
            *reply = Reply::Awaiting;
        }
        wakers.clear();
    }

    /// Whether a `DATA|END_STREAM` of `len` flow-controlled bytes is the
    /// reply this slot waits for: nothing received yet, and within our
    /// window (anything else is a full stream's case).
    #[inline(always)]
    pub(crate) fn takes_reply(&self, len: u32) -> bool {
        matches!(self.reply, Reply::Awaiting) && len <= self.recv_window.credit()
    }

    /// Takes the reply if it arrived, leaving the slot awaiting (it is
    /// freed next).
    #[inline(always)]
    pub(crate) fn take_reply(&mut self) -> Option<(Chunk, u32)> {
        match std::mem::take(&mut self.reply) {
            Reply::Replied(chunk, len) => Some((chunk, len)),
            Reply::Awaiting => None,
        }
    }

    /// Makes `st` (a fresh local stream's state) the stream this slot
    /// stands for: its end sent with the request, the windows as they
    /// are, the caller's wakers, and the reply queued if it arrived. The
    /// slot is left blank.
    pub(crate) fn promote_into(&mut self, st: &mut StreamState) {
        st.send.state = SendState::EndSent;
        st.send.window = self.send_window;
        st.recv.window = self.recv_window;
        std::mem::swap(&mut st.wakers, &mut self.wakers);
        if let Some((chunk, len)) = self.take_reply() {
            st.recv.push(chunk, len);
        }
    }
}

#[cfg(test)]
mod tests;
