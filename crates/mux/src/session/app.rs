//! Application commands on streams: open, send, receive, accept, reset
//! and release (the calls a driver makes for its handles).

use super::*;

/// The largest piece `send_some` makes a frame of at once. A larger one is
/// queued: the writer may cut it to what the transport takes, and another
/// stream's frame queued meanwhile goes between its pieces (an immediate
/// frame goes out whole, ahead of every stream's queue).
const IMMEDIATE_MAX: usize = 16 * 1024;

/// Whether an open's caller keeps the `OPEN` metadata (a driver's handle
/// does, for its stream): the block is lent, taken for the frame and given
/// back — as it was when the frame went straight to the writer's buffer
/// (see `direct.rs`), a clone while the frame is queued. Lent rather than
/// cloned by the caller: a block built for the call is shared, and a clone
/// and its drop are two atomic operations through its vtable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Yes,
    No,
}

/// Puts `m` back in `slot`, which holds the empty block `mem::take` left:
/// that owns nothing (a static, empty `Bytes`), so it is forgotten rather
/// than dropped through its vtable.
#[inline(always)]
fn give_back(slot: &mut Metadata, m: Metadata) {
    std::mem::forget(std::mem::replace(slot, m));
}

/// What an open is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// A stream for a `Stream` handle.
    Stream,
    /// A unary call: a slot when the request goes whole.
    Call,
}

impl Session {
    /// Opens a stream: one `OPEN` frame with `metadata` and as much of
    /// `payload` as the peer's windows allow (the rest follows as `DATA`);
    /// `end` half-closes once all of it is sent.
    pub fn open(
        &mut self,
        metadata: Metadata,
        payload: Bytes,
        end: bool,
        now: Instant,
    ) -> Result<u32, OpenError> {
        self.clock = now;
        let mut metadata = metadata;
        let sent = (&mut metadata, Keep::No);
        self.open_as(sent, payload, end, Opening::Stream, &mut Queued)
    }

    /// [`open`](Self::open) for a driver's `Stream` handle, which keeps
    /// `metadata` (it is lent: see [`Keep`]), the `OPEN` put to `direct`
    /// when nothing is queued ahead of it (see `direct.rs`); and without a
    /// clock reading, which would be for nothing: the session's clock only
    /// stamps the start of the idle period when a stream leaves the table
    /// with no clock at hand, and a stream opened here can only leave that
    /// way after its handle's release, which reads the clock (see
    /// `finish_release`). An open empties no table, and it stops the idle
    /// clock without reading it.
    pub(crate) fn open_direct(
        &mut self,
        metadata: &mut Metadata,
        payload: Bytes,
        end: bool,
        direct: &mut impl Direct,
    ) -> Result<u32, OpenError> {
        let sent = (metadata, Keep::Yes);
        self.open_as(sent, payload, end, Opening::Stream, direct)
    }

    /// [`open`](Self::open) with `end`, for a unary call
    /// (`Connection::call`): when the request goes whole in the `OPEN`,
    /// the stream waits for its reply as a slot (`unary.rs`) instead of a
    /// full stream state, with the same semantics. Not while a progress
    /// deadline watches the streams: it would have to watch slots too, and
    /// the full stream already does. (The driver's is
    /// [`open_call_direct`](Self::open_call_direct).)
    #[cfg(test)]
    pub(crate) fn open_call(
        &mut self,
        metadata: Metadata,
        payload: Bytes,
    ) -> Result<u32, OpenError> {
        let mut metadata = metadata;
        let sent = (&mut metadata, Keep::No);
        self.open_as(sent, payload, true, Opening::Call, &mut Queued)
    }

    /// [`open_call`](Self::open_call) for a driver's call, which keeps
    /// `metadata` (lent: see [`Keep`]), the `OPEN` put to `direct` when
    /// nothing is queued ahead of it (see `direct.rs`).
    pub(crate) fn open_call_direct(
        &mut self,
        metadata: &mut Metadata,
        payload: Bytes,
        direct: &mut impl Direct,
    ) -> Result<u32, OpenError> {
        let sent = (metadata, Keep::Yes);
        self.open_as(sent, payload, true, Opening::Call, direct)
    }

    /// Always inline: each caller is one call path, and `opening` and
    /// `keep` are constants there.
    #[inline(always)]
    fn open_as(
        &mut self,
        (metadata, keep): (&mut Metadata, Keep),
        payload: Bytes,
        end: bool,
        opening: Opening,
        direct: &mut impl Direct,
    ) -> Result<u32, OpenError> {
        if let State::Closed(c) = &self.state {
            return Err(OpenError::Closed(CloseCause::clone(c)));
        }
        if self.is_going_away() {
            return Err(OpenError::GoingAway);
        }
        if metadata.len() > self.limits.max_metadata {
            return Err(OpenError::MetadataTooLarge);
        }
        let id = self.next_stream_id()?;
        self.outbound += 1;
        let mut window = SendWindow::new(self.peer.stream_window);
        let credit = window.room_with(self.conn_send);
        let n = payload
            .len()
            .min(credit)
            .min(self.limits.max_payload.min(IMMEDIATE_MAX));
        let mut first = payload;
        // The whole request in the OPEN (the common case) splits nothing:
        // `split_off` at the end still cost a call. No rest is `None`, not
        // an empty `Bytes`: dropping that is a call through its vtable.
        let rest = (n != first.len()).then(|| first.split_off(n));
        window.debit_with(&mut self.conn_send, n);
        let all = rest.is_none();
        let ended = end && all;
        let open = Frame {
            ty: FrameType::OPEN,
            flags: if ended {
                Flags::END_STREAM
            } else {
                Flags::NONE
            },
            stream_id: id,
            metadata: std::mem::take(metadata),
            payload: first,
        };
        if self.put_direct(direct, &open) {
            if keep == Keep::Yes {
                // Encoded: the block goes back to the caller uncloned.
                let Frame { metadata: m, .. } = open;
                give_back(metadata, m);
            }
        } else {
            if keep == Keep::Yes {
                give_back(metadata, open.metadata.clone());
            }
            self.push_control_in_order(open);
        }
        let recv_window = RecvWindow::new(self.limits.stream_window);
        if opening == Opening::Call && ended && self.limits.progress_timeout.is_none() {
            self.streams.insert_slot(id, window, recv_window);
        } else {
            let mut st = self
                .streams
                .fresh(false, self.peer.stream_window, recv_window);
            st.send.window = window;
            if ended {
                st.send.state = SendState::EndSent;
            } else if let Some(data) = rest {
                st.send.push(Pending {
                    metadata: Metadata::new(),
                    data,
                    end,
                });
            }
            // Scheduled before it goes in: no lookup for it.
            if st.enter_ready(self.conn_send) {
                self.ready.push_back(id);
            }
            self.streams.insert(id, st);
        }
        self.timers.idle_since = None;
        self.goaway_before_ids_run_out();
        Ok(id)
    }

    /// Takes the next stream id we open, or says goodbye (`GOAWAY`
    /// `STREAM_IDS_EXHAUSTED`) when there is none.
    fn next_stream_id(&mut self) -> Result<u32, OpenError> {
        let id = self.ids.next_local;
        if id > self.limits.max_stream_id || id == 0 {
            self.go_away(Reason::STREAM_IDS_EXHAUSTED, None);
            return Err(OpenError::IdsExhausted);
        }
        self.ids.next_local = id.checked_add(2).unwrap_or(0);
        Ok(id)
    }

    /// Says goodbye before the ids run out, so the peer moves on in time.
    fn goaway_before_ids_run_out(&mut self) {
        if self.ids.next_local > self.limits.max_stream_id || self.ids.next_local == 0 {
            self.go_away(Reason::STREAM_IDS_EXHAUSTED, None);
        }
    }

    /// How many bytes `send` on `id` would accept now (0: wait for
    /// [`Event::Writable`]), or the stream's error.
    pub fn send_room(&mut self, id: u32) -> Result<usize, StreamError> {
        let cap = self.limits.max_send_buffer;
        let s = self.stream_for_send(id)?;
        let room = cap.saturating_sub(s.send.queued + PENDING_OVERHEAD);
        if room == 0 {
            s.send.want_writable = true;
        }
        Ok(room)
    }

    /// Queues as much of `data` as the send buffer has room for, taking it
    /// from the front of `data`; with the last of it go `metadata` (taken)
    /// and `end`. Returns whether everything was queued; if not, an
    /// [`Event::Writable`] follows when there is room again.
    #[inline]
    pub fn send_some(
        &mut self,
        id: u32,
        metadata: &mut Metadata,
        data: &mut Bytes,
        end: bool,
    ) -> Result<bool, StreamError> {
        self.send_then_release(id, (metadata, data, end), None, &mut Queued)
    }

    /// [`send_some`](Self::send_some), then
    /// [`release_if_done`](Self::release_if_done) if it queued the end,
    /// with the one lookup: a stream whose peer's end was taken is
    /// released when the application's own end is queued (`released` then
    /// says so). A call's server sends its reply this way.
    #[inline]
    pub fn send_some_releasing(
        &mut self,
        id: u32,
        (metadata, data, end): (&mut Metadata, &mut Bytes, bool),
        now: &mut dyn FnMut() -> Instant,
        released: &mut bool,
    ) -> Result<bool, StreamError> {
        self.send_releasing_direct(id, (metadata, data, end), now, released, &mut Queued)
    }

    /// [`send_some_releasing`](Self::send_some_releasing), a frame made at
    /// once put to `direct` when nothing is queued ahead of it (see
    /// `direct.rs`).
    #[inline]
    pub(crate) fn send_releasing_direct(
        &mut self,
        id: u32,
        sent: (&mut Metadata, &mut Bytes, bool),
        now: &mut dyn FnMut() -> Instant,
        released: &mut bool,
        direct: &mut impl Direct,
    ) -> Result<bool, StreamError> {
        self.send_then_release(id, sent, Some((now, released)), direct)
    }

    #[inline(always)]
    fn send_then_release(
        &mut self,
        id: u32,
        (metadata, data, end): (&mut Metadata, &mut Bytes, bool),
        mut release: Option<(&mut dyn FnMut() -> Instant, &mut bool)>,
        direct: &mut impl Direct,
    ) -> Result<bool, StreamError> {
        let (cap, conn) = (self.limits.max_send_buffer, self.conn_send);
        let s = match self.streams.lookup_at(id) {
            Some((at, EntryMut::Serve(slot))) => {
                if let Some((now, released)) = release.as_mut()
                    && end
                    && slot.serving == Serving::Handling
                    && metadata.len() <= self.limits.max_metadata
                    && data.len() <= cap.saturating_sub(PENDING_OVERHEAD)
                    && data.len() <= self.limits.max_payload.min(IMMEDIATE_MAX)
                    && self.immediate.admits(true, self.limits.max_concurrent)
                    && self.ready.is_empty()
                    && slot
                        .send_window
                        .fits_with(conn, data.len() + metadata.len())
                {
                    let total = data.len() + metadata.len();
                    slot.send_window.debit_with(&mut self.conn_send, total);
                    self.reply_at_once((id, at), (metadata, data), &mut **now, direct);
                    **released = true;
                    return Ok(true);
                }
                // Anything else is the full stream's case.
                sendable(&self.state, &mut self.streams, id)?
            }
            _ => sendable(&self.state, &mut self.streams, id)?,
        };
        if metadata.len() > self.limits.max_metadata {
            return Err(StreamError::new(StreamKind::MetadataTooLarge));
        }
        // Room for bytes once the next item's overhead is counted.
        let room = cap.saturating_sub(s.send.queued + PENDING_OVERHEAD);
        let last = data.len() <= room;
        // Fast path: no stream waits for the socket and the whole piece
        // has credit: make the frame now instead of queueing it (while
        // other frames made so wait, only a stream's last: see
        // `immediate`).
        let total = data.len() + metadata.len();
        if last
            && self.immediate.admits(end, self.limits.max_concurrent)
            && self.ready.is_empty()
            && s.send.queue.is_empty()
            && data.len() <= self.limits.max_payload.min(IMMEDIATE_MAX)
            && s.send.window.fits_with(conn, total)
            && (total > 0 || end)
        {
            let frame = s.send_now(&mut self.conn_send, id, (metadata, data), total, end);
            let done = if end { release_done(s, &release) } else { None };
            if !self.put_direct(direct, &frame) {
                self.immediate.push(frame);
            }
            if let (Some(r), Some((now, released))) = (done, release) {
                self.finish_release(id, r, now);
                *released = true;
            }
            return Ok(true);
        }
        if !last && room == 0 {
            s.send.want_writable = true;
            return Ok(false);
        }
        if !s
            .send
            .queue_piece(metadata, data, (last, room), last && end)
        {
            return Ok(last);
        }
        if !s.send.in_ready && s.can_send(conn) {
            s.send.in_ready = true;
            self.ready.push_back(id);
        }
        if !last {
            s.send.want_writable = true;
        }
        let done = if last && end {
            release_done(s, &release)
        } else {
            None
        };
        if let (Some(r), Some((now, released))) = (done, release) {
            self.finish_release(id, r, now);
            *released = true;
        }
        Ok(last)
    }

    /// A served request's reply, all of it, made at once with
    /// `END_STREAM` (the caller checked that the slot is handling and that
    /// the frame fits every limit the full stream's fast path checks, and
    /// debited its credit): what that path and the release after it do to
    /// a stream whose request was taken whole — the frame queued behind
    /// the ones made before it, the stream out of the table (the clock
    /// read if it was the last) — in one step, with nothing to update or
    /// empty.
    #[inline(always)]
    fn reply_at_once(
        &mut self,
        (id, at): (u32, crate::idmap::At),
        (metadata, data): (&mut Metadata, &mut Bytes),
        now: &mut dyn FnMut() -> Instant,
        direct: &mut impl Direct,
    ) {
        let reply = Frame {
            ty: FrameType::DATA,
            flags: Flags::END_STREAM,
            stream_id: id,
            metadata: std::mem::take(metadata),
            payload: std::mem::take(data),
        };
        if !self.put_direct(direct, &reply) {
            self.immediate.push(reply);
        }
        if self.streams.len() == 1 {
            self.clock = now();
        }
        self.remove_finished_at(at, true);
    }

    /// Queues data (and optional metadata, sent with the last frame of it);
    /// `end` half-closes after it. The caller keeps within
    /// [`send_room`](Self::send_room); metadata may exceed it.
    pub fn send(
        &mut self,
        id: u32,
        metadata: Metadata,
        data: Bytes,
        end: bool,
    ) -> Result<(), StreamError> {
        let s = self.stream_for_send(id)?;
        if data.is_empty() && metadata.is_empty() && !end {
            return Ok(());
        }
        s.send.push(Pending {
            metadata,
            data,
            end,
        });
        self.mark_ready(id);
        Ok(())
    }

    pub(super) fn stream_for_send(&mut self, id: u32) -> Result<&mut StreamState, StreamError> {
        sendable(&self.state, &mut self.streams, id)
    }

    /// Takes the next received piece of `id`, returning its flow-control
    /// credit to the peer.
    #[inline]
    pub fn recv(&mut self, id: u32) -> Recv {
        // A unary call's slot becomes its stream: it is read as one.
        let _ = self.streams.get_mut(&id);
        self.recv_then_release(id, None)
    }

    /// [`recv`](Self::recv), then [`release_if_done`](Self::release_if_done)
    /// if what it returns ends the stream, with the one lookup: a stream
    /// whose application has sent its end is released when its last piece
    /// is taken (`released` then says so). A call's client takes its reply
    /// this way.
    #[inline]
    pub fn recv_releasing(
        &mut self,
        id: u32,
        now: &mut dyn FnMut() -> Instant,
        released: &mut bool,
    ) -> Recv {
        self.recv_then_release(id, Some((now, released)))
    }

    #[inline(always)]
    fn recv_then_release(
        &mut self,
        id: u32,
        release: Option<(&mut dyn FnMut() -> Instant, &mut bool)>,
    ) -> Recv {
        let s = match self.streams.lookup_at(id) {
            Some((_, EntryMut::Full(s))) => s,
            // A served request's stream is read as the full stream it
            // stands for (the request, if not taken, is its one chunk).
            Some((_, EntryMut::Serve(_))) => match self.streams.get_mut(&id) {
                Some(s) => s,
                None => return Recv::Pending,
            },
            // A slot meets only a releasing receive (`recv` promotes it).
            // The reply moves out as a chunk and again into a `Recv`:
            // moving it from the slot straight into the `Recv` (the slot
            // matched in place, the bookkeeping after) measured 12
            // instructions per call worse in every instr cell.
            Some((at, EntryMut::Unary(slot))) => {
                return match slot.take_reply() {
                    Some((chunk, len)) => self.finish_call(at, chunk, len, release),
                    None => Recv::Pending,
                };
            }
            None => {
                return Recv::Failed(StreamError::new(match &self.state {
                    State::Closed(c) => StreamKind::Closed(CloseCause::clone(c)),
                    State::Open => StreamKind::SendClosed,
                }));
            }
        };
        if let Some(chunk) = s.recv.queue.pop_front() {
            let n = fc_len(&chunk);
            s.recv.buffered -= n;
            // Return the credit (one lookup: the stream is at hand).
            if n > 0
                && !s.recv_done()
                && let Some(inc) = s
                    .recv
                    .window
                    .consume(n, self.bdp.window(self.limits.stream_window))
            {
                self.control.push_back(Frame::window_update(id, inc));
            }
            let done = if chunk.end {
                release_done(s, &release)
            } else {
                None
            };
            self.release_conn(n);
            if let (Some(r), Some((now, released))) = (done, release) {
                self.finish_release(id, r, now);
                *released = true;
            }
            if chunk.data.is_empty() && chunk.metadata.is_empty() && chunk.end {
                return Recv::End; // a bare END_STREAM
            }
            return Recv::Chunk(chunk);
        }
        if let Some(k) = &s.failed {
            return Recv::Failed(StreamError::new(k.clone()));
        }
        if s.recv_ended() {
            if let (Some(r), Some((now, released))) = (release_done(s, &release), release) {
                self.finish_release(id, r, now);
                *released = true;
            }
            return Recv::End;
        }
        if let State::Closed(c) = &self.state {
            return Recv::Failed(StreamError::new(StreamKind::Closed(CloseCause::clone(c))));
        }
        Recv::Pending
    }

    /// A unary call's reply taken from its slot: what a full stream's
    /// releasing receive of its last chunk does (the credit returned, the
    /// handle released, the stream out of the table, the idle clock), in
    /// one step, the slot having no windows to update or queue to empty.
    #[inline(always)]
    fn finish_call(
        &mut self,
        at: crate::idmap::At,
        chunk: Chunk,
        len: u32,
        release: Option<(&mut dyn FnMut() -> Instant, &mut bool)>,
    ) -> Recv {
        self.release_conn(len);
        if let Some((now, released)) = release {
            if self.streams.len() == 1 {
                self.clock = now();
            }
            self.remove_finished_at(at, false);
            *released = true;
        }
        if chunk.data.is_empty() && chunk.metadata.is_empty() {
            return Recv::End; // a bare END_STREAM
        }
        Recv::Chunk(chunk)
    }

    /// How many more streams we may open before reaching the cap the peer
    /// announced (`usize::MAX`-ish when it announced none). Streams count
    /// until they leave our table, so the figure errs on the safe side.
    pub fn open_credit(&self) -> usize {
        (self.peer.max_streams as usize).saturating_sub(self.outbound as usize)
    }

    /// Why `id` failed — reset by either side, or its connection closed —
    /// without taking any of its data; `None` while it is healthy (also
    /// after the peer's end).
    pub fn failure(&self, id: u32) -> Option<StreamError> {
        if let Some(k) = self.streams.get(&id).and_then(|s| s.failed.as_ref()) {
            return Some(StreamError::new(k.clone()));
        }
        match &self.state {
            State::Closed(c) => Some(StreamError::new(StreamKind::Closed(CloseCause::clone(c)))),
            State::Open => None,
        }
    }

    /// Gives `n` consumed bytes back to the connection window. The tests
    /// are inline: a call gives nothing back as often as not (a released
    /// stream with nothing unread), and when it does, the bytes are
    /// usually counted and held (less than a quarter of the window consumed);
    /// as calls, each cost about 20 instructions. The grant is apart.
    #[inline]
    pub(super) fn release_conn(&mut self, n: u32) {
        if n == 0 || self.is_closed() || self.conn_recv.hold(n) {
            return;
        }
        self.grant_conn();
    }

    /// The connection window's grant, due now (see `release_conn`).
    #[inline(never)]
    fn grant_conn(&mut self) {
        let target =
            (self.limits.connection_window).max(self.bdp.window(self.limits.stream_window));
        let inc = self.conn_recv.grant(target);
        self.control
            .push_back(Frame::window_update(CONNECTION_ID, inc));
    }

    /// The `OPEN` metadata of a stream the peer opened.
    pub fn open_metadata(&self, id: u32) -> Option<&Metadata> {
        static NONE: Metadata = Metadata::new();
        let metadata = match self.streams.entry(&id)? {
            Entry::Full(s) => s.open_metadata.as_ref(),
            Entry::Serve(slot) => slot.metadata.as_ref(),
            Entry::Unary(_) => None,
        };
        Some(metadata.unwrap_or(&NONE))
    }

    /// The driver's wakers of stream `id`, while it is in the table.
    pub(crate) fn wakers_mut(&mut self, id: u32) -> Option<&mut StreamWakers> {
        Some(match self.streams.lookup(id)? {
            EntryMut::Full(s) => &mut s.wakers,
            EntryMut::Unary(slot) => &mut slot.wakers,
            EntryMut::Serve(slot) => &mut slot.wakers,
        })
    }

    /// Takes the `OPEN` metadata of a stream the peer opened (the accepted
    /// handle keeps it; the session has no further use for it), leaving it
    /// empty: a moved reference instead of a shared-count increment and a
    /// decrement per accepted stream.
    pub fn take_open_metadata(&mut self, id: u32) -> Metadata {
        self.streams
            .get_mut(&id)
            .and_then(|s| s.open_metadata.take())
            .unwrap_or_default()
    }

    /// Takes the next stream the peer opened.
    pub fn accept(&mut self) -> Option<u32> {
        let id = self.accept_queue.pop_front()?;
        self.mark_accepted(id);
        Some(id)
    }

    /// [`accept`](Self::accept) and
    /// [`take_open_metadata`](Self::take_open_metadata) with one lookup: the
    /// next stream the peer opened and its `OPEN` metadata (what a
    /// driver's accept hands its caller).
    pub fn accept_with_metadata(&mut self) -> Option<(u32, Metadata)> {
        let id = self.accept_queue.pop_front()?;
        let metadata = self
            .mark_accepted(id)
            .and_then(|s| s.open_metadata.take())
            .unwrap_or_default();
        Some((id, metadata))
    }

    /// [`accept_with_metadata`](Self::accept_with_metadata), and the peer's
    /// whole side when the `OPEN` carried it (`END_STREAM`, nothing else
    /// received): its payload (an `OPEN` chunk has no metadata of its own),
    /// taken as [`recv`](Self::recv) would take it, its
    /// connection credit returned, so the stream's `recv` then says it
    /// ended. A unary call's request, handed over in the accept that finds
    /// it, with no receive (and no second lookup) of its own. A stream the
    /// peer reset before the accept keeps its data for `recv`, which
    /// delivers it before the reset.
    ///
    /// Always inline (the driver's accept is its one caller on the call
    /// path): as a call it built its result in its own frame and the
    /// accept copied it out.
    #[inline(always)]
    pub fn accept_with_request(&mut self) -> Option<(u32, Metadata, Option<Bytes>)> {
        let id = self.accept_queue.pop_front()?;
        if let Some(EntryMut::Serve(slot)) = self.streams.lookup(id)
            && slot.serving == Serving::Unaccepted
        {
            // A served request's slot: the request is its whole content.
            let (metadata, request) = slot.accept();
            self.release_conn(request.len() as u32);
            return Some((id, metadata, Some(request)));
        }
        let Some(s) = self.mark_accepted(id) else {
            return Some((id, Metadata::new(), None));
        };
        let metadata = s.open_metadata.take().unwrap_or_default();
        let request = s.take_whole_side().map(|c| c.data);
        if let Some(data) = &request {
            self.release_conn(data.len() as u32);
        }
        Some((id, metadata, request))
    }

    /// A stream the peer opened left the accept queue: the application (or
    /// a refusal) has it now. Returns the stream, for what else its caller
    /// does with it.
    #[inline]
    fn mark_accepted(&mut self, id: u32) -> Option<&mut StreamState> {
        let s = self.streams.get_mut(&id)?;
        match s.handle {
            Handle::Unaccepted => s.handle = Handle::Held,
            Handle::UnacceptedReset => {
                s.handle = Handle::Held;
                self.guards.taken_after_reset();
            }
            Handle::Held | Handle::Released => {}
        }
        Some(s)
    }

    /// Whether [`accept`](Self::accept) can return nothing more, ever: the
    /// connection is closed or we sent `GOAWAY`.
    pub fn accept_finished(&self) -> bool {
        // After the peer's GOAWAY it may still open streams; after ours,
        // nothing new is processed.
        self.accept_queue.is_empty() && (self.is_closed() || self.goaway.sent)
    }

    /// Stops (or resumes) accepting streams: while off, opens are refused
    /// with `REFUSED_STREAM` and queued ones are refused too.
    pub fn set_accepting(&mut self, on: bool) {
        self.accepting = on;
        if !on {
            while let Some(id) = self.accept_queue.pop_front() {
                self.mark_accepted(id);
                self.reset_stream(id, Reason::REFUSED_STREAM);
                self.release_now(id);
            }
        }
    }

    /// Resets a stream with `reason` (an application decision).
    pub fn reset(&mut self, id: u32, reason: Reason) {
        self.reset_stream(id, reason);
    }

    /// Whether the application is done with stream `id`: its own end is
    /// sent or queued, the peer's end arrived and every chunk before it was
    /// taken, and it did not fail. Releasing such a stream changes nothing
    /// the handle could still observe (its `recv` would only say "ended",
    /// its `send` "closed"), so the driver releases it in the same call
    /// that took the last chunk or queued the end, instead of waiting for
    /// the handle's drop.
    pub fn is_done_by_app(&self, id: u32) -> bool {
        self.streams.get(&id).is_some_and(StreamState::done_by_app)
    }

    /// Releases stream `id` if [`is_done_by_app`](Self::is_done_by_app)
    /// (as [`release`](Self::release) would, with one lookup for both);
    /// returns whether it did. `now` is read unless the stream leaves the
    /// table now and others stay in it: a stream still draining its end
    /// may be the last one when it leaves, and emptying the table starts
    /// the idle clock. With other streams in flight, finishing one reads
    /// no clock.
    pub fn release_if_done(&mut self, id: u32, now: impl FnOnce() -> Instant) -> bool {
        let Some(s) = self.streams.get_mut(&id) else {
            return false;
        };
        if !s.done_by_app() {
            return false;
        }
        let released = s.release_handle();
        self.finish_release(id, released, now);
        true
    }

    /// [`release_if_done`](Self::release_if_done) past the handle's
    /// release, which its caller made with the stream at hand. Always
    /// inline: it runs on both sides of every call.
    #[inline(always)]
    fn finish_release(&mut self, id: u32, released: Released, now: impl FnOnce() -> Instant) {
        if !released.finished || self.streams.len() == 1 {
            self.clock = now();
        }
        // A stream done by the application never needs the reset
        // `release` may send, and it is finished once its end is written:
        // `remove_finished` starts the idle clock and ends a drain.
        self.after_release(id, released);
    }

    /// The application dropped its handle: a stream not closed both ways
    /// (this side's end sent or queued, the peer's end received) is reset
    /// with `CANCEL`; otherwise queued data still drains. The slot is freed
    /// once the stream is closed.
    pub fn release(&mut self, id: u32, now: Instant) {
        self.clock = now;
        match self.streams.get_mut(&id) {
            // Closed both ways from the application's side: it ended its
            // half (queued data still drains) and the peer ended its own.
            // One lookup for the check and the release.
            Some(s) if s.send.state != SendState::Open && s.recv_done() => {
                let released = s.release_handle();
                self.after_release(id, released);
            }
            Some(_) => {
                self.reset_stream(id, Reason::CANCEL);
                self.release_now(id);
            }
            None => {}
        }
        if self.streams.is_empty() && self.timers.idle_since.is_none() {
            self.idle_from(now);
        }
        self.maybe_finish_drain();
    }

    pub(super) fn release_now(&mut self, id: u32) {
        if let Some(s) = self.streams.get_mut(&id) {
            let released = s.release_handle();
            self.after_release(id, released);
        }
    }

    /// The session's side of [`StreamState::release_handle`]. Always
    /// inline: every stream's release goes through it, on both sides.
    #[inline(always)]
    fn after_release(&mut self, id: u32, r: Released) {
        // Only a misuse releases a stream never accepted: it leaves the
        // pending-accept reset count then, instead of staying counted.
        if r.was == Handle::UnacceptedReset {
            self.guards.taken_after_reset();
        }
        self.release_conn(r.dropped);
        if r.finished {
            self.remove_finished(id, r.remote);
        }
    }
}

/// Releases `s`'s handle if a release was asked for and the application
/// is done with the stream ([`StreamState::done_by_app`]); the session's
/// part follows in `finish_release`. Always inline: it runs on both sides
/// of every call, and as a call it saved and restored registers around a
/// few tests.
#[inline(always)]
fn release_done<T>(s: &mut StreamState, release: &Option<T>) -> Option<Released> {
    (release.is_some() && s.done_by_app()).then(|| s.release_handle())
}

/// The stream `id` if this side may still send on it, or why not: the
/// connection closed, the stream unknown, failed, or its end already sent
/// or queued.
#[inline]
fn sendable<'a>(
    state: &State,
    streams: &'a mut super::table::StreamTable,
    id: u32,
) -> Result<&'a mut StreamState, StreamError> {
    if let State::Closed(c) = state {
        return Err(StreamError::new(StreamKind::Closed(CloseCause::clone(c))));
    }
    let Some(s) = streams.get_mut(&id) else {
        return Err(StreamError::new(StreamKind::SendClosed));
    };
    if let Some(k) = &s.failed {
        return Err(StreamError::new(k.clone()));
    }
    if s.send.state != SendState::Open {
        return Err(StreamError::new(StreamKind::SendClosed));
    }
    Ok(s)
}
