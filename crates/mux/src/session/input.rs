//! Input: every frame the peer sends, dispatched by type to the rules
//! for it (settings, data and opens, resets, window updates, pings,
//! `GOAWAY`), with the budgets against floods.

use super::*;

/// What [`Session::check_header`] made of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Header {
    /// Checked: on to its type's rules.
    Passed,
    /// Dropped or handled already (an unknown type, the settings).
    Handled,
}

impl Session {
    #[inline]
    pub(super) fn dispatch(
        &mut self,
        frame: Frame,
        now: &mut dyn FnMut() -> Instant,
        reader: u32,
    ) -> Result<(), Fatal> {
        // A call's frames (`DATA`, `OPEN`) pass every check below in one
        // test when they come on a stream id with known flags after the
        // settings: the type's scope looked up and matched (about 10
        // instructions a frame) only for the rest.
        let checked = self.peer.settings_received
            && matches!(frame.ty, FrameType::DATA | FrameType::OPEN)
            && frame.stream_id != CONNECTION_ID
            && frame.flags.unknown_bits() == 0;
        if !checked {
            if self.check_header(&frame, now)? == Header::Handled {
                return Ok(());
            }
            if !matches!(frame.ty, FrameType::DATA | FrameType::OPEN) {
                return self.on_control(&frame, now);
            }
        }
        // An `OPEN` straight to its rules, not through `on_data`'s: each
        // inlined call that takes the frame by value may copy it (72
        // bytes). A test, not the type's jump table: these two are known.
        if frame.ty == FrameType::OPEN {
            self.on_open(frame, now)
        } else {
            self.on_data(frame, now, reader)
        }
    }

    /// A checked frame of any type but `DATA` and `OPEN`.
    fn on_control(&mut self, frame: &Frame, now: &mut dyn FnMut() -> Instant) -> Result<(), Fatal> {
        match frame.ty {
            FrameType::RESET => self.on_reset(frame, now),
            FrameType::WINDOW_UPDATE => self.on_window_update(frame, now),
            FrameType::PING => self.on_ping(frame, now),
            FrameType::GOAWAY => self.on_goaway(frame),
            // With records on, the transform layer consumes every
            // KEY_UPDATE, so one that reaches the session came in clear.
            FrameType::KEY_UPDATE => Err(protocol("KEY_UPDATE on a connection without encryption")),
            _ => Err(protocol("HANDSHAKE frame after the handshake")),
        }
    }

    /// The checks every frame gets: a known type (an unknown one is
    /// spent from its budget and dropped), known flags, a stream id its
    /// type may carry, and the settings first (the settings frame is
    /// handled here).
    fn check_header(
        &mut self,
        frame: &Frame,
        now: &mut dyn FnMut() -> Instant,
    ) -> Result<Header, Fatal> {
        let scope = match frame.ty.scope() {
            Some(s) => s,
            None => {
                self.spend(Spend::Unknown, now, "unknown frame flood")?;
                return Ok(Header::Handled);
            }
        };
        if frame.flags.unknown_bits() != 0 {
            self.spend(Spend::Unknown, now, "unknown flag flood")?;
        }
        let scope_ok = match scope {
            Scope::Connection => frame.stream_id == CONNECTION_ID,
            Scope::Stream => frame.stream_id != CONNECTION_ID,
            Scope::Either => true,
        };
        if !scope_ok {
            return Err(protocol("frame on the wrong stream id"));
        }
        if !self.peer.settings_received {
            self.on_settings(frame)?;
            return Ok(Header::Handled);
        }
        Ok(Header::Passed)
    }

    /// Spends one late frame (a frame for a stream already gone), beyond
    /// one per stream opened since the window's first (see
    /// [`Budgets::spend_late`](super::budget::Budgets::spend_late)).
    pub(super) fn spend_late(&mut self, now: &mut dyn FnMut() -> Instant) -> Result<(), Fatal> {
        // Ids are claimed in order: half the highest id of each side is
        // how many streams it opened (a side that ran out of ids opened
        // all it could).
        let local = match self.ids.next_local {
            0 => self.limits.max_stream_id.div_ceil(2),
            next => (next - 1) / 2,
        };
        let streams = local.saturating_add(self.ids.highest_remote.div_ceil(2));
        if self.guards.rates.spend_late(now(), streams) {
            Ok(())
        } else {
            Err(CloseCause::local(
                Reason::ENHANCE_YOUR_CALM,
                "late frame flood",
            ))
        }
    }

    pub(super) fn spend(
        &mut self,
        kind: Spend,
        now: &mut dyn FnMut() -> Instant,
        what: &'static str,
    ) -> Result<(), Fatal> {
        if self.guards.rates.spend(kind, now()) {
            Ok(())
        } else {
            Err(CloseCause::local(Reason::ENHANCE_YOUR_CALM, what))
        }
    }

    pub(super) fn on_settings(&mut self, frame: &Frame) -> Result<(), Fatal> {
        if frame.ty != FrameType::WINDOW_UPDATE || frame.stream_id != CONNECTION_ID {
            return Err(protocol("first frame is not the settings WINDOW_UPDATE"));
        }
        let inc = frame
            .parse_window_update()
            .map_err(|_| protocol("bad WINDOW_UPDATE payload"))?;
        let window = frame
            .metadata
            .get(STREAM_WINDOW_KEY)
            .and_then(|v| <[u8; 4]>::try_from(v).ok())
            .map(u32::from_be_bytes)
            .ok_or_else(|| protocol("settings without a stream window"))?;
        if !(BASELINE_WINDOW..=MAX_WINDOW).contains(&window) {
            return Err(protocol("announced stream window out of range"));
        }
        if let Some(v) = frame.metadata.get(MAX_STREAMS_KEY) {
            let n = <[u8; 4]>::try_from(v)
                .map(u32::from_be_bytes)
                .map_err(|_| protocol("bad max-streams setting"))?;
            self.peer.max_streams = n;
            self.events.push_back(Event::OpenCredit);
        }
        if frame.metadata.get(BATCH_SETTING) == Some(&BATCH_SETTING_VALUE[..]) {
            self.peer.batches = PeerBatches::Announced;
        }
        self.peer.settings_received = true;
        self.add_conn_credit(inc)?;
        let delta = i64::from(window - self.peer.stream_window);
        self.peer.stream_window = window;
        if delta != 0 {
            let ids: Vec<u32> = self.streams.keys().copied().collect();
            for id in ids {
                // A call opened before the peer's settings stays a slot:
                // only its window changes, and it has nothing to send.
                match self.streams.lookup(id) {
                    Some(EntryMut::Full(s)) => s.send.window.resize(delta),
                    Some(EntryMut::Unary(slot)) => {
                        slot.send_window.resize(delta);
                        continue;
                    }
                    Some(EntryMut::Serve(slot)) => {
                        slot.send_window.resize(delta);
                        continue;
                    }
                    None => {}
                }
                self.mark_ready(id);
            }
        }
        Ok(())
    }

    pub(super) fn add_conn_credit(&mut self, inc: u32) -> Result<(), Fatal> {
        let was_blocked = self.conn_send.is_blocked();
        if self.conn_send.credit(i64::from(inc)).is_err() {
            return Err(CloseCause::local(
                Reason::FLOW_CONTROL_ERROR,
                "connection window overflow",
            ));
        }
        if was_blocked && !self.conn_send.is_blocked() {
            // Every stream with queued data may go again.
            let ids: Vec<u32> = self
                .streams
                .iter()
                .filter(|(_, s)| !s.send.queue.is_empty())
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                self.mark_ready(id);
            }
        }
        Ok(())
    }

    /// Checks a stream id the peer used on a frame for a stream we do not
    /// have. `Ok(true)`: a closed stream (late frame); errors: never opened.
    pub(super) fn unknown_stream(
        &mut self,
        id: u32,
        now: &mut dyn FnMut() -> Instant,
    ) -> Result<(), Fatal> {
        let known = if self.role.owns(id) {
            id < self.ids.next_local || self.ids.next_local == 0
        } else {
            id <= self.ids.highest_remote
        };
        if !known {
            return Err(protocol("frame for a stream never opened"));
        }
        self.spend_late(now)
    }

    #[inline]
    pub(super) fn on_data(
        &mut self,
        frame: Frame,
        now: &mut dyn FnMut() -> Instant,
        reader: u32,
    ) -> Result<(), Fatal> {
        let id = frame.stream_id;
        let len = (frame.payload.len() + frame.metadata.len()) as u32;
        self.debit_conn(len)?;
        let end = frame.is_end_stream();
        if len == 0 && !end {
            self.spend(Spend::Empty, now, "empty frame flood")?;
        }
        let s = match self
            .streams
            .lookup_keeping(id, |slot| end && slot.takes_reply(len))
        {
            Some(EntryMut::Full(s)) => s,
            Some(EntryMut::Unary(slot)) => {
                // A unary call's reply, whole: kept in its slot, as a full
                // stream's queue would keep it, with the same window debit,
                // bandwidth sample and event.
                let _ = slot.recv_window.debit(len);
                let pressure = bdp::transfer_under_way(len, slot.recv_window, self.conn_recv);
                let chunk = Chunk {
                    data: frame.payload,
                    metadata: frame.metadata,
                    end,
                };
                // The lookup kept the slot only if it was awaiting
                // (`takes_reply`): nothing to drop, so not an assignment,
                // which called the old reply's drop glue on every call.
                let was = std::mem::replace(&mut slot.reply, Reply::Replied(chunk, len));
                debug_assert!(matches!(was, Reply::Awaiting));
                std::mem::forget(was);
                let (cap, configured) = (self.limits.adaptive_window, self.limits.stream_window);
                if self.bdp.on_data(len, pressure, cap, configured, now) {
                    self.control
                        .push_back(Frame::ping(bdp::PROBE_PAYLOAD, false));
                }
                if id != reader {
                    self.events.push_back(Event::Readable(id));
                }
                return Ok(());
            }
            // `lookup_keeping` promotes a served request's slot.
            Some(EntryMut::Serve(_)) => unreachable!("promoted by the lookup"),
            None => {
                self.release_conn(len);
                if !self.role.owns(id) && self.refused.data(id, len, end) == Verdict::Drop {
                    return Ok(());
                }
                return self.unknown_stream(id, now);
            }
        };
        if s.failed.is_some() {
            self.release_conn(len);
            return self.spend_late(now);
        }
        if s.recv_ended() {
            self.release_conn(len);
            return self.peer_caused_reset(id, Reason::STREAM_CLOSED);
        }
        if s.recv.window.debit(len).is_err() {
            self.release_conn(len);
            return self.peer_caused_reset(id, Reason::FLOW_CONTROL_ERROR);
        }
        if len == 0 && !end {
            return Ok(());
        }
        let pressure = bdp::transfer_under_way(len, s.recv.window, self.conn_recv);
        let (cap, configured) = (self.limits.adaptive_window, self.limits.stream_window);
        if self.bdp.on_data(len, pressure, cap, configured, now) {
            self.control
                .push_back(Frame::ping(bdp::PROBE_PAYLOAD, false));
        }
        let chunk = Chunk {
            data: frame.payload,
            metadata: frame.metadata,
            end,
        };
        if !s.released() {
            // The common case, with the one table lookup above.
            if s.recv.push(chunk, len) && id != reader {
                self.events.push_back(Event::Readable(id));
            }
            return Ok(());
        }
        self.deliver(id, chunk, len);
        Ok(())
    }

    /// Takes `len` flow-controlled bytes the peer sent from the
    /// connection's window.
    #[inline(always)]
    fn debit_conn(&mut self, len: u32) -> Result<(), Fatal> {
        if self.conn_recv.debit(len).is_err() {
            return Err(CloseCause::local(
                Reason::FLOW_CONTROL_ERROR,
                "data beyond the connection window",
            ));
        }
        Ok(())
    }

    pub(super) fn deliver(&mut self, id: u32, chunk: Chunk, len: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.released() {
            // Nobody will read it: give the credit straight back.
            if chunk.end {
                s.recv.state = RecvState::Ended;
            }
            self.release_conn(len);
            self.try_remove(id);
            return;
        }
        if s.recv.push(chunk, len) {
            self.events.push_back(Event::Readable(id));
        }
        self.try_remove(id);
    }

    /// Inline (one call site, a frame per call): out of line, the frame
    /// (72 bytes) was copied into its stack frame and registers saved.
    #[inline]
    pub(super) fn on_open(
        &mut self,
        frame: Frame,
        now: &mut dyn FnMut() -> Instant,
    ) -> Result<(), Fatal> {
        let id = frame.stream_id;
        // Only an `OPEN`'s payload is flow-controlled (its metadata opens
        // the stream, whatever the peer's credit).
        let len = frame.payload.len() as u32;
        self.debit_conn(len)?;
        self.claim_remote_id(id)?;
        if self.goaway.sent {
            // Above our GOAWAY's last id: not processed (the peer retries).
            self.release_conn(len);
            self.remember_refused(&frame, len);
            return self.spend(Spend::Late, now, "opens after GOAWAY");
        }
        if !self.accepting || self.inbound as usize >= self.limits.max_concurrent {
            self.release_conn(len);
            self.remember_refused(&frame, len);
            self.control
                .push_back(Frame::reset(id, Reason::REFUSED_STREAM));
            self.events.push_back(Event::Refused);
            return Ok(());
        }
        let mut window = RecvWindow::new(self.limits.stream_window);
        if window.debit(len).is_err() {
            self.release_conn(len);
            return self.peer_caused_reset(id, Reason::FLOW_CONTROL_ERROR);
        }
        let end = frame.is_end_stream();
        if end && self.limits.progress_timeout.is_none() && self.serve_slots() {
            // The peer's whole side in one frame (a unary request): a slot
            // until anything but its accept and one-frame reply happens
            // (`serving.rs`). Not while a progress deadline watches the
            // streams: it would have to watch slots too.
            let request = (frame.metadata, frame.payload);
            self.streams
                .insert_serve(id, request, window, self.peer.stream_window);
        } else {
            self.open_stream(id, frame, (len, end), window);
        }
        self.inbound += 1;
        self.ids.last_processed = id;
        self.timers.idle_since = None;
        // Raised once until the queue is emptied, as `Readable` is for a
        // stream's queue: an acceptor takes streams until `accept` says
        // none, so one more event per stream already queued would only
        // wake it again (64 events per read with 64 calls in flight).
        if self.accept_queue.is_empty() {
            self.events.push_back(Event::Incoming);
        }
        self.accept_queue.push_back(id);
        Ok(())
    }

    /// Whether requests may wait in slots (always, outside tests).
    #[inline(always)]
    fn serve_slots(&self) -> bool {
        #[cfg(test)]
        return super::serving::SLOTS.with(std::cell::Cell::get) == super::serving::Slots::On;
        #[cfg(not(test))]
        true
    }

    /// A full stream for the peer's `OPEN` of `len` bytes.
    #[inline]
    fn open_stream(&mut self, id: u32, frame: Frame, (len, end): (u32, bool), window: RecvWindow) {
        let mut st = self.streams.fresh(true, self.peer.stream_window, window);
        // A fresh state holds none: the assignment drops nothing (a test).
        st.open_metadata = Some(frame.metadata);
        // The first chunk goes in before the state does: no lookup for it,
        // and a stream waiting to be accepted is never finished, so there
        // is nothing to remove. `Incoming` stands for its `Readable`: no
        // task can wait on a stream nobody has accepted.
        if len > 0 || end {
            st.recv.push(
                Chunk {
                    data: frame.payload,
                    metadata: Metadata::new(),
                    end,
                },
                len,
            );
        }
        self.streams.insert(id, st);
    }

    /// The peer's `OPEN` of `len` bytes was not processed: unless it ended
    /// the stream, the `DATA` the peer sends before it reads the refusal
    /// (at most the rest of the window it had) is dropped for free.
    fn remember_refused(&mut self, open: &Frame, len: u32) {
        if !open.is_end_stream() {
            let credit = self.limits.stream_window.saturating_sub(len);
            self.refused.remember(open.stream_id, credit);
        }
    }

    pub(super) fn on_reset(
        &mut self,
        frame: &Frame,
        now: &mut dyn FnMut() -> Instant,
    ) -> Result<(), Fatal> {
        let id = frame.stream_id;
        let reason = frame
            .parse_reset()
            .map_err(|_| protocol("bad RESET payload"))?;
        let Some(s) = self.streams.get_mut(&id) else {
            if !self.role.owns(id) && self.refused.reset(id) == Verdict::Drop {
                return Ok(());
            }
            return self.unknown_stream(id, now);
        };
        if s.failed.is_some() {
            return self.spend_late(now);
        }
        let pending_accept = matches!(s.handle, Handle::Unaccepted | Handle::UnacceptedReset);
        let kind = if reason == Reason::REFUSED_STREAM && !s.remote {
            StreamKind::Refused
        } else {
            StreamKind::Reset {
                reason,
                remote: true,
            }
        };
        self.fail_stream(id, kind);
        if pending_accept {
            if let Some(s) = self.streams.get_mut(&id) {
                s.handle = Handle::UnacceptedReset;
            }
            if !self.guards.reset_before_accept() {
                return Err(CloseCause::local(
                    Reason::ENHANCE_YOUR_CALM,
                    "too many streams reset before accept (rapid reset)",
                ));
            }
        }
        self.try_remove(id);
        Ok(())
    }

    pub(super) fn on_window_update(
        &mut self,
        frame: &Frame,
        now: &mut dyn FnMut() -> Instant,
    ) -> Result<(), Fatal> {
        let id = frame.stream_id;
        let inc = frame
            .parse_window_update()
            .map_err(|_| protocol("bad WINDOW_UPDATE payload"))?;
        if id == CONNECTION_ID {
            if inc == 0 {
                return Err(protocol("zero connection window increment"));
            }
            return self.add_conn_credit(inc);
        }
        if inc < 64 {
            self.spend(Spend::Empty, now, "tiny window update flood")?;
        }
        let Some(s) = self.streams.get_mut(&id) else {
            return self.unknown_stream(id, now);
        };
        if s.failed.is_some() {
            return self.spend_late(now);
        }
        if inc == 0 {
            return self.peer_caused_reset(id, Reason::PROTOCOL_ERROR);
        }
        if s.send.window.credit(i64::from(inc)).is_err() {
            return self.peer_caused_reset(id, Reason::FLOW_CONTROL_ERROR);
        }
        self.mark_ready(id);
        Ok(())
    }

    pub(super) fn on_ping(
        &mut self,
        frame: &Frame,
        now: &mut dyn FnMut() -> Instant,
    ) -> Result<(), Fatal> {
        let opaque = frame
            .parse_ping()
            .map_err(|_| protocol("bad PING payload"))?;
        if frame.flags.contains(Flags::ACK) {
            if opaque == bdp::PROBE_PAYLOAD {
                if let Some(window) = self.bdp.on_ack(now()) {
                    // Granted with the next grant back of each window
                    // (`RecvWindow::consume`): only for credit the peer
                    // cycled, never ahead of it.
                    tracing::debug!(window, "bandwidth estimate raised the receive windows");
                }
                return Ok(());
            }
            if self.timers.ping_sent.is_some() && opaque == self.timers.ping_seq.to_be_bytes() {
                self.timers.ping_sent = None;
            }
            return Ok(());
        }
        self.spend(Spend::Ping, now, "ping flood")?;
        self.control.push_back(Frame::ping(opaque, true));
        // The peer's keepalive counts as activity: a client that pings is
        // healthy and wants the connection, so the idle clock restarts (the
        // ping budget bounds how often). Answers to our own pings do not
        // count, or our keepalive would defeat our idle timeout.
        if self.timers.idle_since.is_some() {
            let t = now();
            self.idle_from(t);
        }
        Ok(())
    }

    pub(super) fn on_goaway(&mut self, frame: &Frame) -> Result<(), Fatal> {
        let (last, reason, text) = frame
            .parse_goaway()
            .map_err(|_| protocol("bad GOAWAY payload"))?;
        let said = crate::error::peer_text(&text);
        let prev = self.goaway.received.take();
        let first = prev.is_none();
        let g = match prev {
            // An error reason, and what was said with it, stands even if a
            // later GOAWAY says NO_ERROR.
            Some(p) if reason == Reason::NO_ERROR && p.reason != Reason::NO_ERROR => PeerGoAway {
                last: p.last.min(last),
                ..*p
            },
            Some(p) => PeerGoAway {
                last: p.last.min(last),
                reason,
                text: said.or(p.text),
            },
            None => PeerGoAway {
                last,
                reason,
                text: said,
            },
        };
        let last = g.last;
        // Boxed: a connection holds it only once its peer is going away.
        self.goaway.received = Some(Box::new(g));
        if first {
            self.events.push_back(Event::GoingAway);
        }
        // Our streams above `last` were never processed: retry-safe.
        self.streams.promote_all();
        let refused: Vec<u32> = self
            .streams
            .iter()
            .filter(|(id, s)| !s.remote && **id > last)
            .map(|(id, _)| *id)
            .collect();
        for id in refused {
            self.fail_stream(id, StreamKind::Refused);
            self.try_remove(id);
        }
        // Logged whatever the reason: a test of it would only pick log lines.
        tracing::debug!(%reason, last, text = %String::from_utf8_lossy(&text), "peer sent GOAWAY");
        self.maybe_finish_drain();
        Ok(())
    }

    // ----- internals ------------------------------------------------------

    pub(super) fn peer_caused_reset(&mut self, id: u32, reason: Reason) -> Result<(), Fatal> {
        let within = self.guards.peer_caused_reset();
        if self.streams.contains_key(&id) {
            self.reset_stream(id, reason);
        } else {
            self.control.push_back(Frame::reset(id, reason));
        }
        if !within {
            return Err(CloseCause::local(
                Reason::ENHANCE_YOUR_CALM,
                "peer caused too many resets",
            ));
        }
        Ok(())
    }
}
