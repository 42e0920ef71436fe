//! The sans-I/O session core: all protocol logic of one connection.
//!
//! Input goes in through `handle_*` methods (received frames, timeouts with
//! an explicit `now`) and application commands (`open`, `send`, `recv`,
//! `reset`, `release`, `shutdown`); output comes out of `poll_*` methods
//! (`poll_transmit` for frames to send, `poll_timeout` for the next deadline,
//! `poll_event` for what changed). It never touches a socket, a clock or a
//! runtime, so every rule is tested in memory with a virtual clock.

mod app;
mod bdp;
mod budget;
mod close;
mod direct;
mod eof;
mod immediate;
mod input;
mod limits;
mod progress;
mod queue;
mod refused;
mod report;
mod ring;
mod serving;
mod settings;
mod stream;
mod table;
mod unary;
mod unreadable;
mod window;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use weft_frame::{CONNECTION_ID, Flags, Frame, FrameType, Metadata, Reason, Scope};

use crate::config::{BASELINE_WINDOW, Config, MAX_WINDOW};
use crate::error::{CloseCause, StreamError, StreamKind};
use crate::pipeline::{BATCH_SETTING, BATCH_SETTING_VALUE};
use budget::{Guards, Spend};
pub(crate) use direct::{Direct, Queued};
use limits::Limits;
use refused::{Refused, Verdict};
pub use report::{Event, OpenError, Recv, Stats};
use serving::Serving;
pub use settings::{MAX_STREAMS_KEY, STREAM_WINDOW_KEY, settings_frame, settings_frame_with_cap};
pub use stream::Chunk;
pub(crate) use stream::StreamWakers;
use stream::{Handle, PENDING_OVERHEAD, Pending, RecvState, Released, SendState, StreamState};
use table::{Entry, EntryMut};
use unary::Reply;
use window::{RecvWindow, SendWindow};

/// Which side of the connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The side that dialled: opens odd stream ids.
    Client,
    /// The side that accepted: opens even stream ids.
    Server,
}

impl Role {
    /// How the peer's user knows this side: "client" or "server".
    fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }

    fn first_id(self) -> u32 {
        match self {
            Role::Client => 1,
            Role::Server => 2,
        }
    }
    fn owns(self, id: u32) -> bool {
        (id % 2 == 1) == (self == Role::Client)
    }
}

#[derive(Debug)]
enum State {
    Open,
    /// Boxed: every connection holds a `State`, few reach this one.
    Closed(Box<CloseCause>),
}

/// The session core of one connection.
#[derive(Debug)]
pub struct Session {
    role: Role,
    limits: Limits,
    state: State,
    streams: table::StreamTable,
    /// Streams the peer opened that are still in the table.
    inbound: u32,
    /// Streams we opened that are still in the table.
    outbound: u32,
    ids: Ids,
    accept_queue: ring::Ring<u32>,
    accepting: bool,
    guards: Guards,
    /// The peer's streams we refused, for the frames it sent before it
    /// read the refusal.
    refused: Refused,
    peer: PeerSettings,
    /// The peer's credit for us on the connection.
    conn_send: SendWindow,
    /// Our credit for the peer on the connection.
    conn_recv: RecvWindow,
    /// Bandwidth-delay estimates that grow our receive windows.
    bdp: bdp::Growth,

    control: VecDeque<Frame>,
    /// Data frames made directly by `send_some`, sent after control frames
    /// ([`immediate`](self::immediate)).
    immediate: immediate::Immediate,
    ready: VecDeque<u32>,
    events: ring::Ring<Event>,

    goaway: GoAway,
    timers: Timers,
    /// The latest `now` any input carried: stamps events noticed in calls
    /// that take no clock (a stream leaving the table in `poll_transmit`).
    clock: Instant,
    /// A deadline may have moved since [`Session::take_timer_changed`].
    timer_changed: bool,
    /// What [`Session::poll_timeout`] last answered: an idle clock that
    /// restarts cannot make the earliest deadline earlier than that, so
    /// it needs no [`timer_changed`](Self::timer_changed) then.
    reported: std::cell::Cell<Option<Instant>>,
}

/// Stream ids: ours to open next, and the peer's as far as seen.
#[derive(Debug)]
struct Ids {
    /// The next id we open (0: exhausted).
    next_local: u32,
    /// The highest id the peer opened.
    highest_remote: u32,
    /// The highest peer stream we processed (our `GOAWAY`'s last id).
    last_processed: u32,
}

/// What the peer announced in its settings frame.
#[derive(Debug)]
struct PeerSettings {
    /// Its settings frame arrived (it must be the first frame).
    settings_received: bool,
    /// Its per-stream receive window: our initial send credit per stream.
    stream_window: u32,
    /// Its cap on streams we open (`u32::MAX`: none).
    max_streams: u32,
    /// Whether its settings said it reads sealed batches, and whether the
    /// writer has taken that news yet.
    batches: PeerBatches,
}

/// What the peer's settings said of sealed batches (PROTOCOL 5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerBatches {
    /// Not announced (or not yet).
    Unannounced,
    /// Announced; the writer has not turned them on yet.
    Announced,
    /// Announced and taken by the writer.
    Taken,
}

/// Graceful shutdown either way.
#[derive(Debug)]
struct GoAway {
    sent: bool,
    /// The peer's `GOAWAY`s, once one came.
    received: Option<Box<PeerGoAway>>,
    drain_deadline: Option<Instant>,
}

/// What the peer's `GOAWAY`s said.
#[derive(Debug, Clone)]
struct PeerGoAway {
    /// The lowest last-processed id among them.
    last: u32,
    /// The reason of the latest one that gave an error (`NO_ERROR` if none
    /// did): why the connection ends when the peer then closes it.
    reason: Reason,
    /// The debug text that went with `reason` (the latest non-empty one
    /// among `GOAWAY`s of that reason), bounded.
    text: Option<Arc<str>>,
}

/// The clocks behind the idle, keepalive and progress deadlines.
#[derive(Debug)]
struct Timers {
    /// Since when no stream is in the table (`None`: some are).
    idle_since: Option<Instant>,
    last_heard: Instant,
    ping_sent: Option<Instant>,
    ping_seq: u64,
    progress_tick: Option<Instant>,
}

/// A connection error detected while handling a frame: close with this.
type Fatal = CloseCause;

impl Session {
    /// A new session; `now` starts the idle and keepalive clocks. The first
    /// frame it transmits is the settings `WINDOW_UPDATE`.
    pub fn new(role: Role, config: &Config, now: Instant) -> Session {
        let mut s = Session {
            role,
            limits: Limits::new(config),
            state: State::Open,
            streams: table::StreamTable::default(),
            inbound: 0,
            outbound: 0,
            ids: Ids {
                next_local: role.first_id(),
                highest_remote: 0,
                last_processed: 0,
            },
            accept_queue: ring::Ring::default(),
            accepting: true,
            guards: Guards::new(config),
            refused: Refused::default(),
            peer: PeerSettings {
                settings_received: false,
                batches: PeerBatches::Unannounced,
                stream_window: BASELINE_WINDOW,
                max_streams: u32::MAX,
            },
            conn_send: SendWindow::new(BASELINE_WINDOW),
            conn_recv: RecvWindow::new(config.connection_window),
            bdp: bdp::Growth::default(),
            control: VecDeque::new(),
            immediate: immediate::Immediate::default(),
            ready: VecDeque::new(),
            events: ring::Ring::default(),
            goaway: GoAway {
                sent: false,
                received: None,
                drain_deadline: None,
            },
            timers: Timers {
                idle_since: Some(now),
                last_heard: now,
                ping_sent: None,
                ping_seq: 0,
                progress_tick: config.progress_timeout.map(|t| now + t / 2),
            },
            clock: now,
            timer_changed: true,
            reported: std::cell::Cell::new(None),
        };
        s.control.push_back(settings_frame_with_cap(
            config.connection_window - BASELINE_WINDOW,
            config.stream_window,
            u32::try_from(config.max_concurrent_streams).unwrap_or(u32::MAX),
        ));
        s
    }

    /// Says in our settings frame that we read sealed batches (PROTOCOL
    /// 5.2): for an encrypted connection, before the settings frame goes
    /// out (it is queued first, at construction). Returns whether it was
    /// still queued to be amended.
    pub fn announce_sealed_batches(&mut self) -> bool {
        let Some(f) = self.control.front_mut() else {
            return false;
        };
        if f.ty != FrameType::WINDOW_UPDATE || f.stream_id != CONNECTION_ID {
            return false;
        }
        let mut b = Metadata::builder();
        for e in f.metadata.iter() {
            b = b.raw(e.tag, e.key, e.value);
        }
        f.metadata = b.custom(BATCH_SETTING, &BATCH_SETTING_VALUE).finish();
        true
    }

    /// Whether the peer said it reads sealed batches, once: the writer
    /// turns them on when this first returns true.
    pub fn take_peer_batches(&mut self) -> bool {
        if self.peer.batches == PeerBatches::Announced {
            self.peer.batches = PeerBatches::Taken;
            return true;
        }
        false
    }

    /// Caps the payload of frames we send at the peer's limit (learnt in
    /// the handshake), if it is below ours.
    pub fn set_peer_max_payload(&mut self, max_payload: u32) {
        self.limits.max_payload = self.limits.max_payload.min(max_payload as usize).max(1);
    }

    /// This side's role.
    pub fn role(&self) -> Role {
        self.role
    }

    // ----- outputs -------------------------------------------------------

    /// The next frame to send: control frames first, then data from streams
    /// with credit, round-robin. After close only the final control frames.
    #[inline]
    pub fn poll_transmit(&mut self) -> Option<Frame> {
        self.poll_transmit_within(usize::MAX)
    }

    /// [`poll_transmit`](Self::poll_transmit), a data frame cut to at most
    /// `max_payload` bytes (at least 1): the writer asks for what the
    /// transport takes now, so a frame queued later waits behind less.
    /// Control frames are never cut.
    #[inline]
    pub fn poll_transmit_within(&mut self, max_payload: usize) -> Option<Frame> {
        if let Some(f) = self.control.pop_front() {
            return Some(f);
        }
        if self.is_closed() {
            return None;
        }
        if let Some(f) = self.immediate.pop() {
            return Some(f);
        }
        self.next_data_frame(max_payload.max(1))
    }

    /// Whether a frame is waiting in [`poll_transmit`](Self::poll_transmit).
    #[inline]
    pub fn has_transmit(&self) -> bool {
        !self.control.is_empty()
            || (!self.is_closed() && (!self.immediate.is_empty() || !self.ready.is_empty()))
    }

    /// Whether the session has nothing for the driver: no frame to send,
    /// no event, no deadline moved, not closed.
    #[inline]
    pub fn is_quiet(&self) -> bool {
        self.control.is_empty()
            && self.immediate.is_empty()
            && self.ready.is_empty()
            && self.events.is_empty()
            && !self.timer_changed
            && !self.is_closed()
    }

    /// Whether an event waits in [`poll_event`](Self::poll_event).
    #[inline]
    pub fn has_event(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest deadline at which [`handle_timeout`](Self::handle_timeout)
    /// must be called, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
        if let Some(d) = self.goaway.drain_deadline {
            at(d);
        }
        if let (Some(i), Some(since)) = (self.limits.idle_timeout, self.timers.idle_since) {
            at(since + i);
        }
        if let Some(p) = self.progress_deadline() {
            at(p);
        }
        if let Some(k) = self.limits.keepalive_interval {
            match self.timers.ping_sent {
                Some(sent) => at(sent + self.limits.keepalive_timeout),
                None => at(self.timers.last_heard + k),
            }
        }
        self.reported.set(t);
        t
    }

    /// Starts the idle clock at `since`. A driver is told (`timer_changed`)
    /// only if the idle deadline comes before what `poll_timeout` last
    /// answered, or it answered none: its timer is armed no later than
    /// that answer, and when it fires `handle_timeout` finds the later
    /// deadline. (The clock restarts at every call that empties the
    /// table; telling each time cost the driver a recomputation per call.)
    fn idle_from(&mut self, since: Instant) {
        self.timers.idle_since = Some(since);
        if let Some(i) = self.limits.idle_timeout
            && self.reported.get().is_none_or(|r| since + i < r)
        {
            self.timer_changed = true;
        }
    }

    /// Whether a deadline may have changed since the last call (so the
    /// driver need not recompute [`poll_timeout`](Self::poll_timeout) after
    /// every input). A restarted idle clock counts only when its deadline
    /// is earlier than `poll_timeout`'s last answer: a timer armed at that
    /// answer fires first, and `handle_timeout` then finds the later one.
    pub fn take_timer_changed(&mut self) -> bool {
        std::mem::take(&mut self.timer_changed)
    }

    /// Whether the session asks nothing of the driver but writing: no
    /// event, no deadline moved, not closed.
    #[inline]
    pub(crate) fn only_transmits(&self) -> bool {
        self.events.is_empty() && !self.timer_changed && !self.is_closed()
    }

    /// Whether the driver should read more from the peer: false while our
    /// control queue is full (a peer that does not read gets backpressure
    /// instead of growing our memory) or once closed.
    pub fn wants_read(&self) -> bool {
        !self.is_closed() && self.control.len() < self.limits.max_control_queue
    }

    /// Streams in the table (open, or closed but not yet released).
    #[inline]
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// How many streams the frames waiting to be sent may belong to, at
    /// most: the streams in the table, and the frames made at once, whose
    /// streams may have left it (a reply ends its stream as it is made).
    /// The writer seals the frames of several streams as one record.
    #[inline]
    pub fn senders(&self) -> usize {
        self.streams.len() + self.immediate.len()
    }

    /// Whether the connection is closed.
    #[inline]
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed(_))
    }

    /// Why the connection closed, once it has.
    pub fn close_cause(&self) -> Option<&CloseCause> {
        match &self.state {
            State::Closed(c) => Some(c),
            State::Open => None,
        }
    }

    /// Whether a `GOAWAY` was sent or received.
    pub fn is_going_away(&self) -> bool {
        self.goaway.sent || self.goaway.received.is_some()
    }

    /// Current figures.
    pub fn stats(&self) -> Stats {
        Stats {
            streams: self.streams.len(),
            inbound: self.inbound as usize,
            conn_send_window: self.conn_send.get(),
            conn_recv_window: self.conn_recv.credit(),
            conn_recv_unacked: self.conn_recv.unacked(),
            conn_recv_size: self.conn_recv.size(),
            stream_recv_target: self.bdp.window(self.limits.stream_window),
            control_queued: self.control.len(),
            local_resets: self.guards.local_resets,
            accept_queue: self.accept_queue.len(),
        }
    }

    // ----- application commands -----------------------------------------

    /// Graceful shutdown: `GOAWAY(last processed id, NO_ERROR)`; streams at
    /// or below it may finish until `now + drain`, then the connection closes.
    pub fn shutdown(&mut self, now: Instant, drain: Duration) {
        self.clock = now;
        if self.is_closed() {
            return;
        }
        self.go_away(Reason::NO_ERROR, Some(now + drain));
        self.maybe_finish_drain();
    }

    /// Closes at once with `reason` (sends `GOAWAY` first).
    pub fn close(&mut self, reason: Reason, detail: &'static str) {
        self.fail(CloseCause::local(reason, detail), true);
    }

    /// The transport failed or ended: close without sending anything.
    pub fn handle_transport_closed(&mut self, cause: CloseCause) {
        // Without a GOAWAY, whatever reason the caller passes is ours to
        // report, never the peer's.
        self.fail(self.peer_ended(cause.into_transport()), false);
    }

    // ----- timers ---------------------------------------------------------

    /// Fires whatever deadline has passed at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = now;
        if self.is_closed() {
            return;
        }
        if self.goaway.drain_deadline.is_some_and(|d| now >= d) {
            self.fail(
                CloseCause::local(Reason::NO_ERROR, "drain deadline passed"),
                false,
            );
            return;
        }
        if let (Some(i), Some(since)) = (self.limits.idle_timeout, self.timers.idle_since)
            && now >= since + i
        {
            // The peer learns why, and after how long (its user sees
            // this text, not a bare "went away").
            let said = format!(
                "closed by the {}'s idle timeout ({})",
                self.role.name(),
                Shown(i)
            );
            self.fail_saying(
                CloseCause::local(Reason::NO_ERROR, "idle timeout"),
                Some(said.into_bytes().into()),
            );
            return;
        }
        self.check_progress(now);
        if let Some(k) = self.limits.keepalive_interval {
            match self.timers.ping_sent {
                Some(sent) if now >= sent + self.limits.keepalive_timeout => {
                    self.fail(
                        CloseCause::local(Reason::TIMEOUT, "keepalive ping unanswered"),
                        true,
                    );
                }
                None if now >= self.timers.last_heard + k => {
                    self.timers.ping_sent = Some(now);
                    self.timers.ping_seq += 1;
                    self.control
                        .push_back(Frame::ping(self.timers.ping_seq.to_be_bytes(), false));
                }
                _ => {}
            }
        }
    }

    // ----- received frames ------------------------------------------------

    /// Handles one received frame. Errors the peer caused never panic: a
    /// stream error resets that stream, a connection error queues `GOAWAY`
    /// and closes the session.
    pub fn handle_frame(&mut self, frame: Frame, now: Instant) {
        self.handle_frame_with(frame, &mut || now, CONNECTION_ID);
    }

    /// [`handle_frame`](Self::handle_frame) with a clock read only when a
    /// rule needs the time (keepalive on, a budget spent, the idle clock
    /// starting), which on the hot path is never. A frame's rules may ask
    /// for the time more than once: the clock should answer the same
    /// `Instant` for the frames it is handed with, as a clock that reads
    /// the time once and keeps it does (the driver's, once per read; a
    /// second cache here, set up for every frame, cost a few instructions
    /// a frame for nothing).
    ///
    /// `reader` is the stream whose task is handling this input right now
    /// (`CONNECTION_ID`, 0: none): its data raises no [`Event::Readable`],
    /// since that reader looks at its queue next. Failures still do.
    #[inline]
    pub fn handle_frame_with(
        &mut self,
        frame: Frame,
        now: &mut dyn FnMut() -> Instant,
        reader: u32,
    ) {
        if self.is_closed() {
            return;
        }
        if self.limits.keepalive_interval.is_some() {
            let t = now();
            self.timers.last_heard = t;
            self.clock = t;
        }
        let was_idle = self.timers.idle_since.is_some();
        let sid = frame.stream_id;
        // Read before `dispatch` takes the frame; only if a deadline watches.
        let progress = self.limits.progress_timeout.is_some()
            && sid != CONNECTION_ID
            && progress::carries_data(&frame);
        if let Err(cause) = self.dispatch(frame, now, reader) {
            tracing::debug!(%cause, "closing connection");
            self.fail(cause, true);
        }
        if progress && let Some(s) = self.streams.get_mut(&sid) {
            s.progress.bump();
        }
        if self.streams.is_empty() && (!was_idle || self.timers.idle_since.is_none()) {
            // The last stream left during this frame: the idle clock starts now.
            let t = now();
            self.idle_from(t);
        }
    }

    /// Resets `id` from this side: `RESET` frame, queued data dropped.
    fn reset_stream(&mut self, id: u32, reason: Reason) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.failed.is_some() || (s.send_done() && s.recv_done()) {
            return;
        }
        if !self.is_closed() {
            self.push_control_in_order(Frame::reset(id, reason));
        }
        self.fail_stream(
            id,
            StreamKind::Reset {
                reason,
                remote: false,
            },
        );
        // Nothing more will be read after a local reset.
        if let Some(s) = self.streams.get_mut(&id) {
            let dropped = s.clear_recv();
            self.release_conn(dropped);
        }
        self.try_remove(id);
    }

    /// Queues control frame `f` behind the data frames `send_some` made
    /// directly, if any, which would otherwise go out after it: the peer
    /// must see a stream's last `DATA` before our `RESET` of it (or it is
    /// a late frame there), and the `END_STREAM` that closed one of our
    /// streams before the `OPEN` that takes its slot under the peer's cap.
    /// Always inline: every stream we open goes through it, and as a call
    /// it moved the frame once more.
    #[inline(always)]
    fn push_control_in_order(&mut self, f: Frame) {
        self.immediate.move_to(&mut self.control);
        self.control.push_back(f);
    }

    /// Marks a stream failed and drops its queued data.
    fn fail_stream(&mut self, id: u32, kind: StreamKind) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        s.failed = Some(kind);
        s.clear_send();
        s.send.want_writable = false;
        self.events.push_back(Event::Readable(id));
        self.events.push_back(Event::Writable(id));
    }

    fn try_remove(&mut self, id: u32) {
        match self.streams.get(&id) {
            Some(s) if s.finished() => {
                let remote = s.remote;
                self.remove_finished(id, remote);
            }
            _ => {}
        }
    }

    /// Frees what a quiet connection keeps for reuse (its idle tick): the
    /// states of finished streams and an empty control queue's room (the
    /// next stream or control frame allocates again).
    pub(crate) fn release_spares(&mut self) {
        self.streams.release_spare();
        self.immediate.release_spare();
        if self.control.is_empty() && self.control.capacity() > 0 {
            self.control = VecDeque::new();
        }
    }

    /// Takes finished stream `id` (opened by the peer if `remote`) out of
    /// the table (its boxed state goes back to the spares).
    fn remove_finished(&mut self, id: u32, remote: bool) {
        self.streams.remove(id);
        self.after_removal(remote);
    }

    /// [`remove_finished`](Self::remove_finished) of the entry a
    /// `lookup_at` found, the table unchanged since: a unary exchange's
    /// slot, freed in the step that looked it up (no second probe, and
    /// inline, where the call saved and restored registers around it).
    #[inline(always)]
    fn remove_finished_at(&mut self, at: crate::idmap::At, remote: bool) {
        self.streams.remove_at(at);
        self.after_removal(remote);
    }

    /// The session's side of a stream leaving the table: the count it was
    /// under, the idle clock, a drain that was waiting for it.
    #[inline(always)]
    fn after_removal(&mut self, remote: bool) {
        if remote {
            self.inbound -= 1;
        } else {
            // A slot under the peer's cap came free.
            if self.outbound == self.peer.max_streams {
                self.events.push_back(Event::OpenCredit);
            }
            self.outbound -= 1;
        }
        if self.streams.is_empty() && self.timers.idle_since.is_none() {
            self.idle_from(self.clock);
        }
        self.maybe_finish_drain();
    }

    fn mark_ready(&mut self, id: u32) {
        let credit = self.conn_send;
        if let Some(s) = self.streams.get_mut(&id)
            && s.enter_ready(credit)
        {
            self.ready.push_back(id);
        }
    }

    fn next_data_frame(&mut self, cap: usize) -> Option<Frame> {
        while let Some(id) = self.ready.pop_front() {
            let conn = self.conn_send;
            let max = self.limits.max_payload.min(cap);
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            s.send.in_ready = false;
            let Some(p) = s.send.queue.front_mut() else {
                continue;
            };
            let credit = s.send.window.room_with(conn);
            let total = p.data.len() + p.metadata.len();
            let frame = if p.data.len() <= max && total <= credit {
                let p = s.send.queue.pop_front().expect("front exists");
                let mut flags = Flags::NONE;
                if p.end {
                    flags = Flags::END_STREAM;
                    s.send.state = SendState::EndSent;
                }
                s.send.window.debit_with(&mut self.conn_send, total);
                s.send.queued -= total + PENDING_OVERHEAD;
                s.progress.bump();
                Frame {
                    ty: FrameType::DATA,
                    flags,
                    stream_id: id,
                    metadata: p.metadata,
                    payload: p.data,
                }
            } else {
                let n = p.data.len().min(max).min(credit);
                if n == 0 {
                    continue; // blocked: a WINDOW_UPDATE marks it ready again
                }
                let piece = p.data.split_to(n);
                s.progress.bump();
                s.send.window.debit_with(&mut self.conn_send, n);
                s.send.queued -= n;
                Frame::new(FrameType::DATA, Flags::NONE, id, piece)
            };
            if s.send.want_writable && s.send.queued < self.limits.max_send_buffer {
                s.send.want_writable = false;
                self.events.push_back(Event::Writable(id));
            }
            if s.can_send(self.conn_send) {
                s.send.in_ready = true;
                self.ready.push_back(id);
            }
            if s.finished() {
                self.try_remove(id);
            }
            return Some(frame);
        }
        None
    }
}

/// A duration as a person writes it: "30 s", "200 ms", "1.5 s".
struct Shown(Duration);

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.0.as_millis();
        if ms >= 1000 {
            write!(f, "{} s", self.0.as_secs_f64())
        } else {
            write!(f, "{ms} ms")
        }
    }
}

fn protocol(detail: &'static str) -> CloseCause {
    CloseCause::local(Reason::PROTOCOL_ERROR, detail)
}

fn fc_len(chunk: &Chunk) -> u32 {
    (chunk.data.len() + chunk.metadata.len()) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_tick_gives_an_empty_control_queue_back() {
        let now = Instant::now();
        let mut s = Session::new(Role::Server, &Config::default(), now);
        s.handle_frame(settings_frame(1 << 20, 1 << 18), now);
        s.handle_frame(Frame::ping([1; 8], false), now);
        while s.poll_transmit().is_some() {}
        assert!(s.control.capacity() > 0, "the pong went through the queue");
        s.release_spares();
        assert_eq!(s.control.capacity(), 0);
        // A queue with frames in it keeps them.
        s.handle_frame(Frame::ping([3; 8], false), now);
        s.release_spares();
        assert_eq!(s.control.len(), 1, "the unsent pong survives the tick");
        while s.poll_transmit().is_some() {}
        // And it still answers.
        s.handle_frame(Frame::ping([2; 8], false), now);
        let pong = std::iter::from_fn(|| s.poll_transmit()).find(|f| f.ty == FrameType::PING);
        assert!(
            pong.is_some_and(|f| f.flags.contains(weft_frame::Flags::ACK)),
            "a pong after the release"
        );
    }
}
