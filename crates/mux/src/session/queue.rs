//! A stream's queues (received chunks, data waiting to be sent): the first
//! item inline, the rest in a `VecDeque`. Most streams (every unary call)
//! hold at most one item each way at a time, so they never allocate one.

use std::collections::VecDeque;

/// FIFO with its head inline. Invariant: `rest` is empty (or absent)
/// whenever `first` is empty. `rest` is created on the first overflow: an
/// absent `VecDeque` costs nothing to drop, while dropping even an empty
/// one walks its (empty) slices, twice per stream per queue.
#[derive(Debug)]
pub(crate) struct InlineQueue<T> {
    first: Option<T>,
    rest: Option<VecDeque<T>>,
}

impl<T> Default for InlineQueue<T> {
    fn default() -> Self {
        InlineQueue {
            first: None,
            rest: None,
        }
    }
}

impl<T> InlineQueue<T> {
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    pub(crate) fn front(&self) -> Option<&T> {
        self.first.as_ref()
    }

    pub(crate) fn front_mut(&mut self) -> Option<&mut T> {
        self.first.as_mut()
    }

    /// The head's case inline, the overflow's apart: with the
    /// `VecDeque` push in it the whole was too large to inline.
    #[inline]
    pub(crate) fn push_back(&mut self, item: T) {
        if self.first.is_none() {
            self.first = Some(item);
        } else {
            self.push_rest(item);
        }
    }

    #[inline(never)]
    fn push_rest(&mut self, item: T) {
        self.rest.get_or_insert_default().push_back(item);
    }

    /// Inline, and the head moved once: an item is a chunk or a pending
    /// piece (72 bytes), and a unary call pops one each way per side, so
    /// an out-of-line pop that moved it through a temporary twice cost
    /// about 65 instructions.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let head = self.first.take();
        if head.is_some()
            && let Some(rest) = &mut self.rest
        {
            // `first` is empty here: the assignment drops nothing.
            self.first = rest.pop_front();
        }
        head
    }

    /// Takes the head when it is the only item, known to be the last
    /// (it ended its stream: nothing can follow it). Without
    /// [`pop_front`](Self::pop_front)'s refill from the overflow it is
    /// small enough to stay inline on the accept path.
    #[inline(always)]
    pub(crate) fn take_last(&mut self) -> Option<T> {
        debug_assert!(self.rest.as_ref().is_none_or(VecDeque::is_empty));
        self.first.take()
    }

    /// Empty, the overflow buffer freed too. Always inline: a recycled
    /// state's two queues are blanked with it, and as calls the two tests
    /// cost a call each.
    #[inline(always)]
    pub(crate) fn reset(&mut self) {
        self.first = None;
        // Tested first: assigning drops in place, a call even for `None`.
        if self.rest.is_some() {
            self.rest = None;
        }
    }

    /// Empty, the overflow buffer kept. An empty queue (the common case:
    /// a finished stream's) is one test: `rest` is empty whenever `first`
    /// is, so there is nothing to drop. Only that test is inline, always:
    /// left to the compiler the whole was a call (13 instructions for the
    /// test, twice per call).
    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        if self.first.is_some() {
            self.clear_items();
        }
    }

    #[inline(never)]
    fn clear_items(&mut self) {
        self.first = None;
        if let Some(rest) = &mut self.rest {
            rest.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::session::stream::Chunk;

    fn chunk(n: u8) -> Chunk {
        Chunk {
            data: Bytes::from(vec![n]),
            ..Chunk::default()
        }
    }

    #[test]
    fn keeps_order_across_the_inline_slot_and_the_rest() {
        let mut q = InlineQueue::<Chunk>::default();
        assert!(q.is_empty() && q.front().is_none());
        for n in 0..5 {
            q.push_back(chunk(n));
        }
        assert_eq!(q.front().unwrap().data[0], 0);
        q.front_mut().unwrap().end = true;
        let head = q.pop_front().unwrap();
        assert!(head.end && head.data[0] == 0);
        q.push_back(chunk(5));
        let order: Vec<u8> = std::iter::from_fn(|| q.pop_front().map(|c| c.data[0])).collect();
        assert_eq!(order, [1, 2, 3, 4, 5]);
        assert!(q.is_empty());
        q.push_back(chunk(9));
        q.push_back(chunk(10));
        q.clear();
        assert!(q.is_empty() && q.pop_front().is_none());
    }
}
