//! A FIFO for the session's per-call items (events, the accept queue's
//! ids, the frames made at once): a ring of power-of-two size whose push and pop are
//! inline, its growth apart.
//!
//! Why not `VecDeque`: every call pushes and pops an id and an event on
//! the server (the `OPEN`'s accept-queue entry and its `Incoming`) and
//! its reply frame, an event on the client (the reply's `Readable`), and
//! the compiler kept `VecDeque::push_back` out of line (about 24
//! instructions a push, with its call and register saves), while the
//! push here is a test, a mask and a store. An `Option` per slot keeps
//! the code free of `unsafe`; for the items here it costs no room (a
//! `Frame` has a niche for it) or a tag beside a `u32`.

/// Slots of the first buffer (a power of two).
const FIRST_SLOTS: usize = 16;

/// FIFO ring. Invariant: `slots.len()` is zero or a power of two,
/// `len <= slots.len()`, and the items are the `len` slots from `head`
/// on (wrapping), every other slot `None`.
pub(crate) struct Ring<T> {
    slots: Box<[Option<T>]>,
    /// Where the oldest item is.
    head: u32,
    /// How many items there are.
    len: u32,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            slots: Box::default(),
            head: 0,
            len: 0,
        }
    }
}

impl<T> Ring<T> {
    /// Whether nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many items are queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Appends `item`. Always inline (a call was most of the cost it
    /// replaces); a full ring grows apart.
    #[inline(always)]
    pub(crate) fn push_back(&mut self, item: T) {
        if self.len as usize == self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let i = (self.head as usize + self.len as usize) & mask;
        // Not an assignment: that ran the old value's drop glue (a `None`
        // here, so nothing to drop).
        let was = self.slots[i].replace(item);
        debug_assert!(was.is_none());
        std::mem::forget(was);
        self.len += 1;
    }

    /// Takes the oldest item.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let head = self.head as usize;
        let item = self.slots[head].take();
        self.head = ((head + 1) & mask) as u32;
        self.len -= 1;
        item
    }

    /// How many items fit before the ring grows.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Drops every item (the buffer is kept).
    pub(crate) fn clear(&mut self) {
        while self.pop_front().is_some() {}
        self.head = 0;
    }

    /// Twice the slots (or the first ones), the items moved to the front
    /// in order.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let slots = (self.slots.len() * 2).max(FIRST_SLOTS);
        let mut fresh: Box<[Option<T>]> = std::iter::repeat_with(|| None).take(slots).collect();
        let mut n = 0;
        while let Some(item) = self.pop_front() {
            fresh[n] = Some(item);
            n += 1;
        }
        self.slots = fresh;
        self.head = 0;
        self.len = n as u32;
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mask = self.slots.len().wrapping_sub(1);
        let items = (0..self.len as usize).map(|k| &self.slots[(self.head as usize + k) & mask]);
        f.debug_list().entries(items.flatten()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// Against a `VecDeque`, with the ring wrapping and growing while it
    /// wraps (pushes and pops interleaved at changing rates).
    #[test]
    fn agrees_with_a_vec_deque() {
        let mut ring = Ring::default();
        let mut model = VecDeque::new();
        let mut x = 0x2545_f491_u32;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            // Phases that fill (more pushes) and drain (more pops).
            let filling = (step / 500).is_multiple_of(2);
            let push = filling != x.is_multiple_of(3);
            if push {
                ring.push_back(step);
                model.push_back(step);
            } else {
                assert_eq!(ring.pop_front(), model.pop_front());
            }
            assert_eq!(ring.len(), model.len());
            assert_eq!(ring.is_empty(), model.is_empty());
            if step % 997 == 0 {
                assert_eq!(format!("{ring:?}"), format!("{model:?}"));
            }
        }
        ring.clear();
        assert!(ring.is_empty());
        assert_eq!(ring.pop_front(), None);
        ring.push_back(7);
        assert_eq!(ring.pop_front(), Some(7));
    }

    /// Items with a drop of their own are dropped once: on pop, on
    /// clear, and with the ring.
    #[test]
    fn drops_each_item_once() {
        let item = std::rc::Rc::new(());
        let mut ring = Ring::default();
        for _ in 0..40 {
            ring.push_back(item.clone());
        }
        assert_eq!(std::rc::Rc::strong_count(&item), 41);
        drop(ring.pop_front());
        ring.clear();
        assert_eq!(std::rc::Rc::strong_count(&item), 1);
        for _ in 0..5 {
            ring.push_back(item.clone());
        }
        drop(ring);
        assert_eq!(std::rc::Rc::strong_count(&item), 1);
    }
}
