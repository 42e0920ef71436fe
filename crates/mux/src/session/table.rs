//! The session's stream table: stream states boxed, and the boxes of
//! finished streams kept for the next ones. Opening and finishing a stream
//! then moves a pointer into and out of the map instead of the whole state
//! (about 370 bytes: a `memcpy` into the table and one out of it, per
//! stream and side), and a steady stream of calls allocates nothing.

use bytes::Bytes;
use weft_frame::Metadata;

use super::serving::ServeSlot;
use super::stream::StreamState;
use super::unary::UnarySlot;
use super::window::{RecvWindow, SendWindow};
use crate::idmap::{At, IdMap};

/// What the table holds for one stream id: a full stream, or a unary
/// exchange's slot standing for one until anything but its common case
/// happens: a call's (`unary.rs`, the client's: the request sent, the
/// one-frame reply awaited) or a served request's (`serving.rs`, the
/// server's: the request received, the one-frame reply owed). Boxes, so
/// an entry stays a tag and a pointer.
#[derive(Debug)]
pub(crate) enum Entry {
    Full(Box<StreamState>),
    Unary(Box<UnarySlot>),
    Serve(Box<ServeSlot>),
}

/// An entry looked up as it is, without promoting a slot: for the paths
/// that know slots (a reply's arrival and its taking, a request's accept
/// and its reply) and the wakers.
pub(crate) enum EntryMut<'a> {
    Full(&'a mut StreamState),
    Unary(&'a mut UnarySlot),
    Serve(&'a mut ServeSlot),
}

/// Stream id to state, with spare boxes: a list threaded through the
/// boxes themselves (`StreamState::spare_link`, `UnarySlot::spare_link`),
/// so the table costs the connection one pointer for each kind. Spares
/// never outnumber the streams the connection had in flight at once (a
/// new stream takes a spare before it allocates), the memory the map's
/// buckets kept before the states were boxed; a quiet connection gives
/// them all back ([`release_spare`](Self::release_spare)).
///
/// [`get_mut`](Self::get_mut) and [`get`](Self::get) see full streams:
/// `get_mut` first promotes a slot it finds (so every rule written for a
/// full stream applies to a slot's stream unchanged), `get` does not see
/// slots, nor do [`iter`](Self::iter) and [`iter_mut`](Self::iter_mut)
/// (call [`promote_all`](Self::promote_all) first where a slot matters).
/// `len`, `keys` and `contains_key` count both kinds.
///
/// `fresh`, `insert` and `recycle` are inline (`recycle` always: the
/// compiler kept it a call): each runs once per stream and side, and as
/// calls their register saves cost instructions on every call.
#[derive(Default)]
pub(crate) struct StreamTable {
    map: IdMap<Entry>,
    spare: Option<Box<StreamState>>,
    spare_slots: Option<Box<UnarySlot>>,
    spare_serve: Option<Box<ServeSlot>>,
}

/// The spare lists, borrowed apart from the map.
struct Spares<'a> {
    full: &'a mut Option<Box<StreamState>>,
    unary: &'a mut Option<Box<UnarySlot>>,
    serve: &'a mut Option<Box<ServeSlot>>,
}

/// A new stream's state from the spares (a blank box started in place),
/// or a new one.
#[inline(always)]
fn fresh_in(
    spare: &mut Option<Box<StreamState>>,
    remote: bool,
    send_window: u32,
    recv_window: RecvWindow,
) -> Box<StreamState> {
    match spare.take() {
        Some(mut b) => {
            // `spare` is empty after the take: the swap moves the next
            // box up without the drop call an assignment made.
            std::mem::swap(spare, &mut b.spare_link);
            b.start(remote, send_window, recv_window);
            b
        }
        None => Box::new(StreamState::new(remote, send_window, recv_window)),
    }
}

/// Makes `b` the head of a spare list its caller just emptied (the old
/// head is `b`'s link now). Not an assignment: that was a call to the
/// old head's drop glue (an `Option` the compiler did not know empty),
/// once per stream and side.
#[inline(always)]
fn put_spare<T>(spare: &mut Option<Box<T>>, b: Box<T>) {
    let was = spare.replace(b);
    debug_assert!(was.is_none(), "the caller emptied the list");
    std::mem::forget(was);
}

#[inline(always)]
fn recycle_slot_in(spare: &mut Option<Box<UnarySlot>>, mut b: Box<UnarySlot>) {
    b.blank();
    if let Some(stray) = std::mem::replace(&mut b.spare_link, spare.take()) {
        drop(stray);
    }
    put_spare(spare, b);
}

#[inline(always)]
fn recycle_serve_in(spare: &mut Option<Box<ServeSlot>>, mut b: Box<ServeSlot>) {
    b.blank();
    if let Some(stray) = std::mem::replace(&mut b.spare_link, spare.take()) {
        drop(stray);
    }
    put_spare(spare, b);
}

/// Makes slot entry `e` the full stream it stands for (see
/// `UnarySlot::promote_into`, `ServeSlot::promote_into`); the slot's box
/// goes to the spares. Out of line: only what is not a unary exchange's
/// common case promotes.
#[cold]
#[inline(never)]
fn promote<'a>(e: &'a mut Entry, spares: Spares<'_>) -> &'a mut StreamState {
    match e {
        Entry::Full(_) => {}
        Entry::Unary(slot) => {
            let mut st = fresh_in(spares.full, false, 0, RecvWindow::new(0));
            slot.promote_into(&mut st);
            if let Entry::Unary(b) = std::mem::replace(e, Entry::Full(st)) {
                recycle_slot_in(spares.unary, b);
            }
        }
        Entry::Serve(slot) => {
            let mut st = fresh_in(spares.full, true, 0, RecvWindow::new(0));
            slot.promote_into(&mut st);
            if let Entry::Serve(b) = std::mem::replace(e, Entry::Full(st)) {
                recycle_serve_in(spares.serve, b);
            }
        }
    }
    match e {
        Entry::Full(b) => b,
        Entry::Unary(_) | Entry::Serve(_) => unreachable!("promoted above"),
    }
}

impl Spares<'_> {
    fn reborrow(&mut self) -> Spares<'_> {
        Spares {
            full: self.full,
            unary: self.unary,
            serve: self.serve,
        }
    }
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
        fresh_in(&mut self.spare, remote, send_window, recv_window)
    }

    /// Puts a [`fresh`](Self::fresh) state in the table as stream `id`.
    #[inline]
    pub(crate) fn insert(&mut self, id: u32, state: Box<StreamState>) {
        self.insert_entry(id, Entry::Full(state));
    }

    /// Puts a new unary call's slot in the table as stream `id`, with the
    /// windows its stream has after the request.
    #[inline(always)]
    pub(crate) fn insert_slot(
        &mut self,
        id: u32,
        send_window: SendWindow,
        recv_window: RecvWindow,
    ) {
        let slot = match self.spare_slots.take() {
            Some(mut b) => {
                std::mem::swap(&mut self.spare_slots, &mut b.spare_link);
                b.start(send_window, recv_window);
                b
            }
            None => Box::new(UnarySlot::new(send_window, recv_window)),
        };
        self.insert_entry(id, Entry::Unary(slot));
    }

    /// Puts a served request's slot in the table as stream `id` (the
    /// peer's, opened and ended by one `OPEN` carrying `request`), with
    /// the windows its stream has after the request.
    #[inline(always)]
    pub(crate) fn insert_serve(
        &mut self,
        id: u32,
        request: (Metadata, Bytes),
        recv_window: RecvWindow,
        send_window: u32,
    ) {
        let slot = match self.spare_serve.take() {
            Some(mut b) => {
                std::mem::swap(&mut self.spare_serve, &mut b.spare_link);
                b.start(request, recv_window, send_window);
                b
            }
            None => Box::new(ServeSlot::new(request, recv_window, send_window)),
        };
        self.insert_entry(id, Entry::Serve(slot));
    }

    #[inline(always)]
    fn insert_entry(&mut self, id: u32, e: Entry) {
        if let Some(old) = self.map.insert(id, e) {
            // Ids are never reused while listed; keep the box regardless.
            self.recycle(old);
        }
    }

    /// Removes stream `id`: what its state holds is dropped now, the box
    /// kept for a later stream. Always inline, with the map's removal and
    /// the queues' blanking: its one caller is `Session::remove_finished`
    /// (once per stream and side), and as a call of its own it saved and
    /// restored six registers around the work.
    #[inline(always)]
    pub(crate) fn remove(&mut self, id: u32) {
        if let Some(e) = self.map.remove(&id) {
            self.recycle(e);
        }
    }

    #[inline(always)]
    fn recycle(&mut self, e: Entry) {
        let mut b = match e {
            Entry::Full(b) => b,
            Entry::Unary(b) => return recycle_slot_in(&mut self.spare_slots, b),
            Entry::Serve(b) => return recycle_serve_in(&mut self.spare_serve, b),
        };
        // Blank now: what it held is dropped at once, and `fresh` only
        // sets what differs between streams.
        b.renew(false, 0, RecvWindow::new(0));
        // A live state links no spare, so nothing is dropped here; said
        // as a test, because assigning over the link was a call to its
        // drop even when empty.
        if let Some(stray) = std::mem::replace(&mut b.spare_link, self.spare.take()) {
            drop(stray);
        }
        put_spare(&mut self.spare, b);
    }

    /// Frees the spare boxes (a quiet connection's idle tick), one at a
    /// time: a long list dropped as a whole would recurse once per box.
    pub(crate) fn release_spare(&mut self) {
        let mut next = self.spare.take();
        while let Some(mut b) = next {
            next = b.spare_link.take();
        }
        let mut next = self.spare_slots.take();
        while let Some(mut b) = next {
            next = b.spare_link.take();
        }
        let mut next = self.spare_serve.take();
        while let Some(mut b) = next {
            next = b.spare_link.take();
        }
    }

    /// How many spare boxes are kept (tests).
    #[cfg(test)]
    pub(crate) fn spare_count(&self) -> usize {
        self.spares().count()
    }

    /// How many spare slot boxes are kept (tests).
    #[cfg(test)]
    pub(crate) fn spare_slot_count(&self) -> usize {
        self.slot_spares().count()
    }

    /// How many spare served-request slot boxes are kept (tests).
    #[cfg(test)]
    pub(crate) fn spare_serve_count(&self) -> usize {
        self.serve_spares().count()
    }

    fn serve_spares(&self) -> impl Iterator<Item = &ServeSlot> {
        std::iter::successors(self.spare_serve.as_deref(), |b| b.spare_link.as_deref())
    }

    fn slot_spares(&self) -> impl Iterator<Item = &UnarySlot> {
        std::iter::successors(self.spare_slots.as_deref(), |b| b.spare_link.as_deref())
    }

    fn spares(&self) -> impl Iterator<Item = &StreamState> {
        std::iter::successors(self.spare.as_deref(), |b| b.spare_link.as_deref())
    }

    /// Full stream `id` (a slot is not seen: see the type's doc).
    pub(crate) fn get(&self, id: &u32) -> Option<&StreamState> {
        match self.map.get(id)? {
            Entry::Full(b) => Some(b),
            Entry::Unary(_) | Entry::Serve(_) => None,
        }
    }

    /// Entry `id` as it is, read only (a slot is seen as one).
    pub(crate) fn entry(&self, id: &u32) -> Option<&Entry> {
        self.map.get(id)
    }

    /// The map and the spare lists, apart.
    fn parts(&mut self) -> (&mut IdMap<Entry>, Spares<'_>) {
        let StreamTable {
            map,
            spare,
            spare_slots,
            spare_serve,
        } = self;
        let spares = Spares {
            full: spare,
            unary: spare_slots,
            serve: spare_serve,
        };
        (map, spares)
    }

    /// Stream `id`, a slot promoted to its full stream first.
    #[inline]
    pub(crate) fn get_mut(&mut self, id: &u32) -> Option<&mut StreamState> {
        let (map, spares) = self.parts();
        match map.get_mut(id)? {
            Entry::Full(b) => Some(b),
            e @ (Entry::Unary(_) | Entry::Serve(_)) => Some(promote(e, spares)),
        }
    }

    /// Entry `id` as it is (a slot stays one).
    #[inline(always)]
    pub(crate) fn lookup(&mut self, id: u32) -> Option<EntryMut<'_>> {
        let (map, _) = self.parts();
        Some(match map.get_mut(&id)? {
            Entry::Full(b) => EntryMut::Full(b),
            Entry::Unary(b) => EntryMut::Unary(b),
            Entry::Serve(b) => EntryMut::Serve(b),
        })
    }

    /// [`lookup`](Self::lookup), and where the entry sits, for a
    /// [`remove_at`](Self::remove_at) in the same step (no second probe).
    #[inline(always)]
    pub(crate) fn lookup_at(&mut self, id: u32) -> Option<(At, EntryMut<'_>)> {
        let (at, e) = self.map.get_at(id)?;
        Some((
            at,
            match e {
                Entry::Full(b) => EntryMut::Full(b),
                Entry::Unary(b) => EntryMut::Unary(b),
                Entry::Serve(b) => EntryMut::Serve(b),
            },
        ))
    }

    /// [`remove`](Self::remove) of the entry [`lookup_at`](Self::lookup_at)
    /// found, the table unchanged since.
    #[inline(always)]
    pub(crate) fn remove_at(&mut self, at: At) {
        if let Some(e) = self.map.remove_at(at) {
            self.recycle(e);
        }
    }

    /// Entry `id`, a call's slot promoted to its full stream first unless
    /// `keep` says it stays one (what comes next is its common case), a
    /// served request's slot always (the peer has ended that stream, and
    /// only the full stream's rules know what else it may send): one
    /// lookup either way. Never [`EntryMut::Serve`].
    #[inline(always)]
    pub(crate) fn lookup_keeping(
        &mut self,
        id: u32,
        keep: impl FnOnce(&UnarySlot) -> bool,
    ) -> Option<EntryMut<'_>> {
        let (map, spares) = self.parts();
        let e = map.get_mut(&id)?;
        let promoted = match e {
            Entry::Full(_) => false,
            Entry::Unary(slot) => !keep(slot),
            Entry::Serve(_) => true,
        };
        if promoted {
            promote(e, spares);
        }
        Some(match e {
            Entry::Full(b) => EntryMut::Full(b),
            Entry::Unary(b) => EntryMut::Unary(b),
            Entry::Serve(b) => EntryMut::Serve(b),
        })
    }

    /// Promotes every slot to its full stream (before a rule that walks
    /// the streams: a `GOAWAY`, the peer's end of file).
    pub(crate) fn promote_all(&mut self) {
        let (map, mut spares) = self.parts();
        for (_, e) in map.iter_mut() {
            if !matches!(e, Entry::Full(_)) {
                promote(e, spares.reborrow());
            }
        }
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

    /// The full streams (slots are not seen: see the type's doc).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u32, &StreamState)> {
        self.map.iter().filter_map(|(id, e)| match e {
            Entry::Full(b) => Some((id, &**b)),
            Entry::Unary(_) | Entry::Serve(_) => None,
        })
    }

    /// The full streams (slots are not seen: see the type's doc).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut StreamState)> {
        self.map.iter_mut().filter_map(|(id, e)| match e {
            Entry::Full(b) => Some((id, &mut **b)),
            Entry::Unary(_) | Entry::Serve(_) => None,
        })
    }
}

impl std::fmt::Debug for StreamTable {
    // Not derived: the spare list would print (and recurse) box by box.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamTable")
            .field("streams", &self.map)
            .field("spare", &self.spares().count())
            .field("spare_slots", &self.slot_spares().count())
            .field("spare_serve", &self.serve_spares().count())
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
        s.open_metadata = Some(Metadata::from_bytes(held.clone()).unwrap());
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
