//! The session's stream table: stream states boxed, and the boxes of
//! finished streams kept for the next ones. Opening and finishing a stream
//! then moves a pointer into and out of the map instead of the whole state
//! (about 370 bytes: a `memcpy` into the table and one out of it, per
//! stream and side), and a steady stream of calls allocates nothing.

use super::stream::StreamState;
use super::window::RecvWindow;
use crate::idmap::IdMap;

/// Stream id to state, with spare boxes: a list threaded through the
/// boxes themselves (`StreamState::spare_link`), so the table costs the
/// connection one pointer for them. Spares never outnumber the streams the
/// connection had in flight at once (a new stream takes a spare before it
/// allocates), the memory the map's buckets kept before the states were
/// boxed; a quiet connection gives them all back
/// ([`release_spare`](Self::release_spare)).
///
/// `fresh`, `insert` and `recycle` are inline (`recycle` always: the
/// compiler kept it a call): each runs once per stream and side, and as
/// calls their register saves cost instructions on every call.
#[derive(Default)]
pub(crate) struct StreamTable {
    map: IdMap<Box<StreamState>>,
    spare: Option<Box<StreamState>>,
}

impl StreamTable {
    /// A new stream's state, outside the table until
    /// [`insert`](Self::insert)ed: a spare (blank) box started in place, or
    /// a new one.
    #[inline(always)]
    pub(crate) fn fresh(
        &mut self,
        remote: bool,
        send_window: u32,
        recv_window: RecvWindow,
    ) -> Box<StreamState> {
        match self.spare.take() {
            Some(mut b) => {
                // `spare` is empty after the take: the swap moves the next
                // box up without the drop call an assignment made.
                std::mem::swap(&mut self.spare, &mut b.spare_link);
                b.start(remote, send_window, recv_window);
                b
            }
            None => Box::new(StreamState::new(remote, send_window, recv_window)),
        }
    }

    /// Puts a [`fresh`](Self::fresh) state in the table as stream `id`.
    #[inline]
    pub(crate) fn insert(&mut self, id: u32, state: Box<StreamState>) {
        if let Some(old) = self.map.insert(id, state) {
            // Ids are never reused while listed; keep the box regardless.
            self.recycle(old);
        }
    }

    /// Removes stream `id`: what its state holds is dropped now, the box
    /// kept for a later stream.
    pub(crate) fn remove(&mut self, id: u32) {
        if let Some(b) = self.map.remove(&id) {
            self.recycle(b);
        }
    }

    #[inline(always)]
    fn recycle(&mut self, mut b: Box<StreamState>) {
        // Blank now: what it held is dropped at once, and `fresh` only
        // sets what differs between streams.
        b.renew(false, 0, RecvWindow::new(0));
        // A live state links no spare, so nothing is dropped here; said
        // as a test, because assigning over the link was a call to its
        // drop even when empty.
        if let Some(stray) = std::mem::replace(&mut b.spare_link, self.spare.take()) {
            drop(stray);
        }
        self.spare = Some(b);
    }

    /// Frees the spare boxes (a quiet connection's idle tick), one at a
    /// time: a long list dropped as a whole would recurse once per box.
    pub(crate) fn release_spare(&mut self) {
        let mut next = self.spare.take();
        while let Some(mut b) = next {
            next = b.spare_link.take();
        }
    }

    /// How many spare boxes are kept (tests).
    #[cfg(test)]
    pub(crate) fn spare_count(&self) -> usize {
        self.spares().count()
    }

    fn spares(&self) -> impl Iterator<Item = &StreamState> {
        std::iter::successors(self.spare.as_deref(), |b| b.spare_link.as_deref())
    }

    pub(crate) fn get(&self, id: &u32) -> Option<&StreamState> {
        self.map.get(id).map(|b| &**b)
    }

    pub(crate) fn get_mut(&mut self, id: &u32) -> Option<&mut StreamState> {
        self.map.get_mut(id).map(|b| &mut **b)
    }

    pub(crate) fn contains_key(&self, id: &u32) -> bool {
        self.map.contains_key(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &u32> {
        self.map.keys()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u32, &StreamState)> {
        self.map.iter().map(|(id, b)| (id, &**b))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut StreamState)> {
        self.map.iter_mut().map(|(id, b)| (id, &mut **b))
    }
}

impl std::fmt::Debug for StreamTable {
    // Not derived: the spare list would print (and recurse) box by box.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamTable")
            .field("streams", &self.map)
            .field("spare", &self.spares().count())
            .finish()
    }
}

impl Drop for StreamTable {
    fn drop(&mut self) {
        self.release_spare();
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use weft_frame::Metadata;

    use super::*;
    use crate::error::StreamKind;
    use crate::session::stream::{Chunk, Handle, Pending, RecvState, SendState};

    /// Bytes only the test holds (unique) until a state takes a share.
    fn held() -> Bytes {
        let md = Metadata::builder().custom(b"k", b"v").finish();
        Bytes::from(md.as_bytes().to_vec())
    }

    /// A state with every field moved away from a new stream's.
    fn dirty(s: &mut StreamState, held: &Bytes) {
        s.handle = Handle::Released;
        s.open_metadata = Metadata::from_bytes(held.clone()).unwrap();
        s.send.state = SendState::EndSent;
        s.send
            .window
            .debit_with(&mut super::super::window::SendWindow::new(1 << 20), 5);
        for _ in 0..2 {
            s.send.push(Pending {
                metadata: Metadata::new(),
                data: held.clone(),
                end: false,
            });
        }
        s.send.in_ready = true;
        s.send.want_writable = true;
        s.recv.state = RecvState::Ended;
        let _ = s.recv.window.debit(3);
        for _ in 0..2 {
            s.recv.push(
                Chunk {
                    data: held.clone(),
                    metadata: Metadata::new(),
                    end: false,
                },
                3,
            );
        }
        s.failed = Some(StreamKind::Refused);
        s.progress.bump();
        s.wakers.recv = Some(std::task::Waker::noop().clone());
        s.wakers.send = Some(std::task::Waker::noop().clone());
    }

    #[test]
    fn a_recycled_state_is_a_new_one_and_holds_nothing_meanwhile() {
        let held = held();
        let mut t = StreamTable::default();
        let mut s = t.fresh(false, 100, RecvWindow::new(200));
        dirty(&mut s, &held);
        t.insert(1, s);
        assert!(!held.is_unique());
        t.remove(1);
        // Removed: the box is kept, what it held is not.
        assert_eq!((t.len(), t.spare_count()), (0, 1));
        assert!(
            held.is_unique(),
            "a kept box still holds the stream's bytes"
        );
        for remote in [false, true] {
            let renewed = t.fresh(remote, 7, RecvWindow::new(9));
            assert_eq!(t.spare_count(), 0, "the spare box is reused");
            let new = StreamState::new(remote, 7, RecvWindow::new(9));
            assert_eq!(format!("{renewed:?}"), format!("{new:?}"));
            let mut renewed = renewed;
            dirty(&mut renewed, &held);
            t.insert(3, renewed);
            t.remove(3);
        }
    }

    #[test]
    fn renew_alone_resets_every_field() {
        let held = held();
        for remote in [false, true] {
            let mut s = StreamState::new(!remote, 1, RecvWindow::new(2));
            dirty(&mut s, &held);
            s.renew(remote, 7, RecvWindow::new(9));
            let new = StreamState::new(remote, 7, RecvWindow::new(9));
            assert_eq!(format!("{s:?}"), format!("{new:?}"));
        }
        assert!(held.is_unique());
    }

    #[test]
    fn spares_never_outnumber_the_peak_and_are_given_back() {
        let mut t = StreamTable::default();
        let peak = 100u32;
        for round in 0..3 {
            for id in 0..peak {
                let s = t.fresh(true, 1, RecvWindow::new(1));
                t.insert(round * peak + id, s);
            }
            assert_eq!(t.spare_count(), 0, "every spare was taken first");
            for id in 0..peak {
                assert!(t.get(&(round * peak + id)).is_some_and(|s| s.remote));
                t.remove(round * peak + id);
            }
            assert_eq!((t.len(), t.spare_count()), (0, peak as usize));
        }
        t.release_spare();
        assert_eq!(t.spare_count(), 0);
        // A long list goes without recursing (and the table's drop too).
        for id in 0..100_000 {
            let s = t.fresh(true, 1, RecvWindow::new(1));
            t.insert(id, s);
        }
        for id in 0..100_000 {
            t.remove(id);
        }
        assert_eq!(t.spare_count(), 100_000);
    }

    #[test]
    fn a_listed_stream_is_known_and_enters_the_ready_list_once() {
        use super::super::window::{RecvWindow, SendWindow};
        let mut t = StreamTable::default();
        let mut s = t.fresh(false, 1 << 16, RecvWindow::new(1 << 16));
        let credit = SendWindow::new(1 << 16);
        assert!(!s.enter_ready(credit), "nothing queued: nothing to send");
        s.send.push(Pending {
            metadata: Metadata::new(),
            data: Bytes::from_static(b"x"),
            end: false,
        });
        assert!(!s.enter_ready(SendWindow::new(0)), "no connection credit");
        assert!(s.enter_ready(credit), "queued data and credit: it enters");
        assert!(s.send.in_ready);
        assert!(!s.enter_ready(credit), "already listed: never twice");
        t.insert(3, s);
        assert!(t.contains_key(&3) && !t.contains_key(&5));
    }
}
