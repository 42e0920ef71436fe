//! Data frames `send_some` made at once, in the order they were made,
//! waiting for the writer behind the control frames.
//!
//! A send that finds its stream's queue empty and credit for the whole
//! piece makes its frame on the spot instead of queueing it on the stream
//! and scheduling the stream in the ready list. The first such frame may be
//! any piece; while it waits, further ones are taken only if they *end*
//! their stream (a unary call's reply is one `DATA|END_STREAM`), and only
//! up to a bound: such a frame is its stream's last, so the stream leaves
//! the table in the send that made it (one lookup) rather than when the
//! writer reaches it through the ready list (a second lookup and the
//! round-robin's bookkeeping). With many calls answered between two writes
//! (64 in flight) that was most of the server mux's per-call work after
//! the send itself.
//!
//! Bounded so that a peer that opens streams but does not read cannot grow
//! it: a stream whose end frame is made here leaves the table and stops
//! counting against the peer's stream cap, so without a bound the next
//! requests would keep adding replies. Past the bound, sends queue on their
//! streams as before, which keeps those streams in the table (and the peer
//! under its cap). The bound is the cap on the peer's streams: the replies
//! of one full round of them.

use std::collections::VecDeque;

use weft_frame::Frame;

use super::ring::Ring;

/// The frames made at once, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Immediate {
    frames: Ring<Frame>,
}

impl Immediate {
    /// Whether a frame made now may join: any frame when none waits, one
    /// that ends its stream while fewer than `bound` wait.
    #[inline]
    pub(crate) fn admits(&self, ends_stream: bool, bound: usize) -> bool {
        self.frames.is_empty() || (ends_stream && self.frames.len() < bound)
    }

    /// Queues `f` behind the frames made before it.
    #[inline]
    pub(crate) fn push(&mut self, f: Frame) {
        self.frames.push_back(f);
    }

    /// The oldest frame, for the writer.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Frame> {
        self.frames.pop_front()
    }

    /// Whether no frame waits.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Moves every waiting frame, in order, to the back of `control`: a
    /// control frame queued next must go out after them (see
    /// `Session::push_control_in_order`). Only the test is inline, always:
    /// nothing waits at nearly every call (a client's `OPEN`), and left to
    /// the compiler the test was a call.
    #[inline(always)]
    pub(crate) fn move_to(&mut self, control: &mut VecDeque<Frame>) {
        if !self.frames.is_empty() {
            self.move_all(control);
        }
    }

    #[inline(never)]
    fn move_all(&mut self, control: &mut VecDeque<Frame>) {
        control.reserve(self.frames.len());
        while let Some(f) = self.frames.pop_front() {
            control.push_back(f);
        }
    }

    /// Frames waiting.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.frames.len()
    }

    /// Gives the room back when nothing waits (a quiet connection's tick).
    pub(crate) fn release_spare(&mut self) {
        if self.frames.is_empty() && self.frames.capacity() > 0 {
            self.frames = Ring::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use weft_frame::{Flags, FrameType};

    use super::*;

    fn data(id: u32) -> Frame {
        Frame::new(FrameType::DATA, Flags::NONE, id, bytes::Bytes::new())
    }

    #[test]
    fn the_first_frame_is_any_later_ones_end_their_stream_up_to_the_bound() {
        let mut q = Immediate::default();
        assert!(q.admits(false, 2), "an empty queue takes any frame");
        q.push(data(1));
        assert!(
            !q.admits(false, 2),
            "a frame that does not end waits its turn"
        );
        assert!(q.admits(true, 2));
        q.push(data(3));
        assert!(!q.admits(true, 2), "full at the bound");
        let mut control = VecDeque::from([data(9)]);
        q.move_to(&mut control);
        let ids: Vec<u32> = control.iter().map(|f| f.stream_id).collect();
        assert_eq!(ids, [9, 1, 3], "moved behind the control frames, in order");
        assert!(q.is_empty() && q.pop().is_none());
        q.release_spare();
        assert_eq!(q.frames.capacity(), 0);
    }

    /// The ring's `Option` per slot costs a frame no room (its niche).
    #[test]
    fn a_slot_is_the_size_of_a_frame() {
        assert_eq!(
            std::mem::size_of::<Option<Frame>>(),
            std::mem::size_of::<Frame>()
        );
    }

    #[test]
    fn a_quiet_tick_never_drops_a_waiting_frame() {
        let mut q = Immediate::default();
        q.push(data(5));
        q.release_spare();
        assert_eq!(q.len(), 1, "the room goes only when nothing waits");
        assert_eq!(q.pop().map(|f| f.stream_id), Some(5));
    }
}
