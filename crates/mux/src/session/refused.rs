//! Streams of the peer's that we never processed (refused over the cap or
//! while not accepting, or opened after our `GOAWAY`), remembered for the
//! frames the peer sent on them before it read the refusal.
//!
//! A client-streaming call keeps sending after its `OPEN` until the
//! `RESET(REFUSED_STREAM)` reaches it, and that is no fault of the peer:
//! those `DATA` frames are dropped without touching the late-frame budget,
//! as long as they fit in the window the peer had for the stream (the most
//! a well-behaved peer can send without a `WINDOW_UPDATE`, which it never
//! gets on a refused stream). Anything beyond, or on a stream no longer
//! remembered, is a late frame as before.

use std::collections::VecDeque;

/// How many refused streams are remembered; the oldest is forgotten first
/// (its frames have long arrived). 256 entries are 2 KiB at most.
pub(crate) const REMEMBERED: usize = 256;

/// What to do with a frame on a stream id we have no state for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A refused stream's frame within its window: drop it, free.
    Drop,
    /// Not a remembered refused stream (or beyond its window): a late frame.
    Late,
}

/// One refused stream: its id and the bytes the peer may still send on it.
#[derive(Clone, Copy, Debug)]
struct Entry {
    id: u32,
    credit: u32,
}

/// The refused streams remembered, in the order refused (ascending ids:
/// the peer opens in ascending order).
#[derive(Debug, Default)]
pub(crate) struct Refused {
    entries: VecDeque<Entry>,
}

impl Refused {
    /// We refused `id`; the peer may still send `credit` bytes on it.
    pub(crate) fn remember(&mut self, id: u32, credit: u32) {
        if self.entries.len() == REMEMBERED {
            self.entries.pop_front();
        }
        self.entries.push_back(Entry { id, credit });
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.entries.binary_search_by_key(&id, |e| e.id).ok()
    }

    /// A `DATA` frame of `len` flow-controlled bytes on `id`; `end`: it
    /// carried `END_STREAM` (nothing more will come, the stream is
    /// forgotten).
    pub(crate) fn data(&mut self, id: u32, len: u32, end: bool) -> Verdict {
        let Some(i) = self.find(id) else {
            return Verdict::Late;
        };
        let e = &mut self.entries[i];
        if len > e.credit {
            // Beyond what it could send: not the well-behaved case.
            self.entries.remove(i);
            return Verdict::Late;
        }
        e.credit -= len;
        if end {
            self.entries.remove(i);
        }
        Verdict::Drop
    }

    /// The peer reset `id` (it gave up on the stream, perhaps before it
    /// read our refusal): forgotten, free.
    pub(crate) fn reset(&mut self, id: u32) -> Verdict {
        match self.find(id) {
            Some(i) => {
                self.entries.remove(i);
                Verdict::Drop
            }
            None => Verdict::Late,
        }
    }

    /// How many refused streams are remembered (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_within_the_window_drop_until_the_end() {
        let mut r = Refused::default();
        r.remember(3, 10);
        assert_eq!(r.data(3, 4, false), Verdict::Drop);
        assert_eq!(r.data(3, 6, false), Verdict::Drop);
        assert_eq!(r.data(3, 0, true), Verdict::Drop);
        assert_eq!(r.len(), 0, "its end forgets it");
        assert_eq!(r.data(3, 0, true), Verdict::Late);
        assert_eq!(r.data(5, 1, false), Verdict::Late, "never refused");
    }

    #[test]
    fn beyond_the_window_is_late_and_forgets() {
        let mut r = Refused::default();
        r.remember(1, 10);
        assert_eq!(r.data(1, 11, false), Verdict::Late);
        assert_eq!(r.data(1, 1, false), Verdict::Late);
    }

    #[test]
    fn a_reset_forgets_and_the_oldest_goes_first() {
        let mut r = Refused::default();
        r.remember(1, 10);
        assert_eq!(r.reset(1), Verdict::Drop);
        assert_eq!(r.reset(1), Verdict::Late);
        for i in 0..=REMEMBERED as u32 {
            r.remember(2 * i + 1, 10);
        }
        assert_eq!(r.len(), REMEMBERED);
        assert_eq!(r.data(1, 1, false), Verdict::Late, "forgotten");
        assert_eq!(r.data(3, 1, false), Verdict::Drop);
    }
}
