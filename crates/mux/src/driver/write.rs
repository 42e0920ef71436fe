//! The write side: whoever holds the state encodes every queued frame
//! into one buffer and writes it; with other streams in flight the
//! connection task does, after one yield, so many calls share a syscall.
//! Large payloads are chained rather than copied (see [`WriteBuf`]). On a
//! plain connection a call's `OPEN` and a reply made at once are encoded
//! into the buffer as they are made, when nothing is queued ahead of them
//! (the [`Direct`] impl below); the write itself still waits its turn.
//!
//! A write is bounded by what the transport took lately ([`WriteBound`]): the
//! frames of a large message leave in a few large vectored writes while
//! the transport takes them whole, and when it pushes back the next write
//! is cut to what it took, so a small frame queued later waits behind
//! little of ours (the session still hands out frames round robin).

use std::io;
use std::task::{Context, Poll};

use weft_frame::{CHAIN_THRESHOLD, Frame, Reason};

use super::Inner;
use super::batch::{self, Batching};
use super::task::{Pace, Turn};
use super::wbuf::WriteBuf;
use crate::error::CloseCause;
use crate::pipeline::{Batch, Outbound};
use crate::session::Direct;

/// The record pipeline and the coalescing buffer.
pub(super) struct Writer {
    outbound: Outbound,
    buf: WriteBuf,
    /// Bytes copied into the buffer ahead of a write at most (a `u32`, so
    /// it packs with the flags: the connection's state has a size class
    /// to fit).
    coalesce: u32,
    /// Bytes, copied and chained, encoded ahead of a write at most.
    bound: WriteBound,
    /// On a sealing connection, the batch at the end of the buffer that
    /// frames made since the last write went into (see the [`Direct`]
    /// impl): the next write's loop goes on with it and seals it before
    /// any of its bytes is written.
    open: Option<Batch>,
    needs_flush: bool,
    pub(super) shut: bool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("buffered", &self.buf.len())
            .field("shut", &self.shut)
            .finish_non_exhaustive()
    }
}

/// A write batch's byte bound, from what the transport took: doubled (up to
/// [`MAX_BATCH`]) after a write that took all it was given, cut to what it
/// took (at least [`MIN_BATCH`]) after one that took part. Whatever a write
/// leaves stays ahead of every frame encoded after it, so the bound is
/// what a small message can find queued in our buffer; TCP's congestion
/// window grows and shrinks the same way.
#[derive(Clone, Copy, Debug)]
struct WriteBound(u32);

/// A batch's largest bound: 1 MiB, a large message in one vectored write.
const MAX_BATCH: u32 = 1 << 20;

/// A batch's smallest bound, and the smallest piece a data frame is cut to
/// to fit one: 16 KiB, the frame size of h2 and grpc-go (smaller frames cost
/// more per byte than the wait they save).
const MIN_BATCH: u32 = 16 * 1024;

impl WriteBound {
    fn new(coalesce: usize) -> WriteBound {
        let first = u32::try_from(coalesce).unwrap_or(MAX_BATCH);
        WriteBound(first.clamp(MIN_BATCH, MAX_BATCH))
    }

    /// The bound in bytes.
    fn bytes(self) -> usize {
        self.0 as usize
    }

    /// Learns from a write that took `took` bytes, `whole` if that was
    /// everything it was given.
    fn wrote(&mut self, took: usize, whole: bool) {
        self.0 = if whole {
            self.0.saturating_mul(2).min(MAX_BATCH)
        } else {
            u32::try_from(took)
                .unwrap_or(MAX_BATCH)
                .clamp(MIN_BATCH, MAX_BATCH)
        };
    }
}

/// The write buffer's first size: the settings frame and a small call fit;
/// encoding reserves more as frames need (up to about `coalesce` plus one
/// frame), kept while the connection is busy.
const WRITE_FIRST: usize = 1024;

impl Writer {
    pub(super) fn new(outbound: Outbound, coalesce: usize) -> Writer {
        Writer {
            outbound,
            buf: WriteBuf::with_capacity(WRITE_FIRST),
            coalesce: u32::try_from(coalesce).unwrap_or(u32::MAX),
            bound: WriteBound::new(coalesce),
            open: None,
            needs_flush: false,
            shut: false,
        }
    }

    /// Gives the buffer back if nothing is buffered (see
    /// `Inner::release_quiet_buffers`); the next write reserves
    /// [`WRITE_FIRST`] again.
    pub(super) fn release_if_idle(&mut self) {
        if self.is_idle() && self.buf.bytes.capacity() > 0 {
            self.buf = WriteBuf::with_capacity(0);
        }
    }

    /// The buffer's capacity (tests watch it stay small while idle).
    pub(super) fn capacity(&self) -> usize {
        self.buf.bytes.capacity()
    }

    /// Whether nothing is buffered or owed a flush.
    fn is_idle(&self) -> bool {
        self.buf.is_empty() && !self.needs_flush
    }
}

/// A frame made by an application command (an `OPEN`, a reply), encoded
/// into the buffer as it is made when the session has nothing queued
/// ahead of it (see `session/direct.rs`): on the passthrough as the
/// codec writes it, on a sealing connection into the batch the next write
/// seals (once the peer reads batches; [`batch::put`]); only a payload
/// too short to be chained, and only while the buffer has room under the
/// write's bounds, as the writer's loop would have taken it. Otherwise it
/// is queued and the writer takes it.
impl Direct for Writer {
    #[inline(always)]
    fn takes_frames(&self) -> bool {
        self.outbound.is_plain() || self.outbound.batches_allowed()
    }

    /// Always inline: the tests stay at the call site; the encoder is a
    /// call of its own.
    #[inline(always)]
    fn put(&mut self, frame: &Frame) -> bool {
        // Shut only once the session is closed, which sends nothing here.
        debug_assert!(!self.shut, "a frame made after the writer shut");
        let buf = &mut self.buf;
        if frame.payload.len() >= CHAIN_THRESHOLD {
            return false;
        }
        if buf.bytes.capacity() == 0 {
            // As in `write_out`: the first size, not a reserve per frame.
            buf.bytes.reserve(WRITE_FIRST);
        }
        if buf.room(self.bound.bytes(), self.coalesce as usize) == 0 {
            return false;
        }
        // A frame over the peer's limits writes nothing and fails here:
        // queued, it fails the writer's encode, which closes the
        // connection as before.
        match self.outbound.plain_codec() {
            Some(codec) => codec.encode_frame(frame, &mut buf.bytes).is_ok(),
            None => self.put_sealed(frame),
        }
    }
}

impl Writer {
    /// [`Direct::put`] on a sealing connection: into the open batch.
    /// Out of line: inlined at the put's call sites (an open, a reply),
    /// whose frames are large, the frame's encoder was not inlined into
    /// it (three calls to copy a small frame) and the call sites' own
    /// code grew, plain connections' included.
    #[inline(never)]
    fn put_sealed(&mut self, frame: &Frame) -> bool {
        batch::put(
            &mut self.open,
            &mut self.outbound,
            &mut self.buf.bytes,
            frame,
        )
    }
}

impl Inner {
    /// Writes what the session has to send and dispatches its events. The
    /// driver calls this; application calls use [`pump_app`](Self::pump_app).
    pub(super) fn pump(&mut self) {
        self.write();
        self.dispatch_events();
    }

    /// Writes what the session has to send; a failed write closes it.
    /// Returns whether the write went well.
    ///
    /// Inline, the work out of line: most calls (an application call
    /// behind which the connection task writes, a pump with only events
    /// to dispatch) find nothing to write or leave it to the connection
    /// task, and would otherwise pay the large frame of the encoding loop
    /// for two tests.
    #[inline]
    fn write(&mut self) -> bool {
        let w = &self.writer;
        if w.shut || (w.is_idle() && !self.session.has_transmit()) {
            return true;
        }
        if self.link.turn != Turn::Driver && self.defer_write() {
            return true;
        }
        self.write_now()
    }

    /// [`write`](Self::write) past its tests: encodes and writes.
    #[inline(never)]
    fn write_now(&mut self) -> bool {
        if self.link.turn == Turn::Driver {
            self.link.pace = Pace::of(self.session.stream_count());
        }
        let Err(e) = self.write_out() else {
            return true;
        };
        tracing::debug!(error = %e, "write failed");
        self.writer.buf.clear();
        self.writer.open = None;
        self.writer.shut = true;
        // A peer that closed on us (a reset is what fails the write) may
        // have said why first: its `GOAWAY` can still be unread in our
        // receive buffer, and reading it makes the close the peer's, with
        // its reason, rather than "write failed".
        self.read_frames();
        self.session
            .handle_transport_closed(CloseCause::local(Reason::INTERNAL_ERROR, "write failed"));
        false
    }

    /// [`pump_app`](Self::pump_app) after `Session::send_some`: the write
    /// first, and the rest (events, timers, reading resumed) only if the
    /// write left the session anything to report (a stream that finished
    /// sending, a failure) or reading waits for the control queue to drain.
    ///
    /// Frames still queued after the write do not call for the rest: the
    /// write has just either left them to the connection task (woken for
    /// them, [`Turn::Owed`]: the usual case for a reply with calls in
    /// flight) or found the socket full (the driver's waker is registered
    /// with it). With no event, no deadline moved, the session open and
    /// reading not blocked, [`after_write`](Self::after_write) would wake
    /// no one and write nothing, so the test is `only_transmits`, not
    /// `is_quiet` (which a queued reply always fails). With the turn
    /// already [`Turn::Owed`] the write would only defer again, so its own
    /// tests (shut, idle, frames queued) are skipped too.
    pub(super) fn pump_send(&mut self) {
        let written = self.link.turn == Turn::Owed || self.write();
        if written && !self.reader.is_blocked() && self.session.only_transmits() {
            return;
        }
        // Written already: a second write would find what this one left
        // (frames left to the connection task, or a socket that is full).
        self.after_write();
    }

    /// [`pump`](Self::pump), then wakes the driver if a timer moved earlier
    /// or the connection closed (the driver shuts the transport down).
    ///
    /// The test inline, the work out of line (as `dispatch_events`): whether
    /// the whole function was inlined at a call site came down to the
    /// compiler's weighing of its size, which a field more in the session
    /// tipped (about 35 instructions per sequential call on the client).
    #[inline]
    pub(super) fn pump_app(&mut self) {
        if self.writer.is_idle() && !self.reader.is_blocked() && self.session.is_quiet() {
            // Nothing to write, dispatch or re-arm (the common case after a
            // read that only brought data).
            return;
        }
        self.pump_app_now();
    }

    /// [`pump_app`](Self::pump_app) after an open, which only queued its
    /// frame: with the frames already left for the connection task
    /// ([`Turn::Owed`], the usual case with calls in flight) and nothing
    /// else for the driver, the pump would neither write nor act, so it
    /// is skipped. Out of line, the pump's call and tests cost about 35
    /// instructions per call at 64 in flight.
    #[inline(always)]
    pub(super) fn pump_opened(&mut self) {
        if self.link.turn == Turn::Owed
            && !self.reader.is_blocked()
            && self.session.only_transmits()
        {
            return;
        }
        self.pump_app();
    }

    /// [`pump_app`](Self::pump_app) past its test.
    #[inline(never)]
    fn pump_app_now(&mut self) {
        self.write();
        self.after_write();
    }

    /// [`pump_app`](Self::pump_app) past its write: events dispatched, the
    /// driver woken if a timer moved earlier, reading resumed or the
    /// connection closed. Inline: its two callers are the pump's, once or
    /// more per call (out of line it cost a call and the moves around it).
    #[inline]
    fn after_write(&mut self) {
        self.dispatch_events();
        let earlier = self.session.take_timer_changed()
            && self
                .session
                .poll_timeout()
                .is_some_and(|t| self.link.armed.is_none_or(|a| t < a));
        let resume_reading = self.reader.is_blocked() && self.session.wants_read();
        if resume_reading {
            self.reader.unblock();
        }
        if earlier || resume_reading || self.session.is_closed() {
            self.link.wake_driver();
        }
    }

    /// Encodes queued frames into the buffer and writes it, until the
    /// session has nothing left or the socket is not writable (the driver's
    /// waker is registered then). [`write`](Self::write) has checked that
    /// there is something to write and that this task is to write it.
    fn write_out(&mut self) -> io::Result<()> {
        let w = &mut self.writer;
        if w.buf.bytes.capacity() == 0 {
            // Given back while quiet: the first frames get the first size,
            // not a reserve per frame as the buffer grows from nothing.
            w.buf.bytes.reserve(WRITE_FIRST);
        }
        let io = &mut self.io;
        // Large payloads are chained only where writes are vectored: a
        // transport writing one slice at a time would make each chained
        // payload a write (and a packet) of its own.
        let vectored = io.is_write_vectored();
        let mut cx = Context::from_waker(&self.wakers.driver);
        if self.session.take_peer_batches() {
            w.outbound.allow_batches();
        }
        loop {
            // Frames of several streams written together go sealed as one
            // record (PROTOCOL 5.2) where the peer reads them: one AEAD
            // operation for the write instead of one per frame. Not for a
            // lone stream: a batch of one frame costs more than its record.
            let streams = self.session.senders();
            let mut sealed = Batching::start(&w.outbound, streams, &mut w.open);
            // `has_transmit` first: a few field tests (a `poll_transmit`
            // that finds nothing still moves an `Option<Frame>` around),
            // and after a call's one frame it ends the loop without
            // looking at the buffer.
            while self.session.has_transmit() {
                let room = w.buf.room(w.bound.bytes(), w.coalesce as usize);
                if room == 0 {
                    break;
                }
                // A data frame is cut to the batch's room, but not below
                // the smallest batch (a few bytes of room would make a
                // frame of a few bytes).
                let cap = room.max(MIN_BATCH as usize);
                let Some(frame) = self.session.poll_transmit_within(cap) else {
                    break;
                };
                // Only a payload long enough to be chained goes through the
                // chaining encoder: for the usual small frame its
                // `Option<Bytes>` (always `None`) was built, returned and
                // matched for nothing.
                let encoded = match sealed.push(&mut w.outbound, &mut w.buf.bytes, &frame) {
                    Ok(true) => Ok(()),
                    Err(e) => Err(e),
                    Ok(false) if vectored && frame.payload.len() >= CHAIN_THRESHOLD => w
                        .outbound
                        .encode_chained(&frame, &mut w.buf.bytes)
                        .map(|chained| {
                            if let Some(payload) = chained {
                                w.buf.chain(payload);
                            }
                        }),
                    Ok(false) => w.outbound.encode(&frame, &mut w.buf.bytes),
                };
                if let Err(e) = encoded {
                    if e.is_record_limit() && !self.session.is_closed() {
                        // The key's last record is kept for this GOAWAY;
                        // the close then shuts the transport (FIN).
                        self.session
                            .close(Reason::INTERNAL_ERROR, "record limit reached");
                        continue;
                    }
                    return Err(io::Error::other(e));
                }
            }
            // Sealed before any of its bytes is written.
            sealed
                .seal(&mut w.outbound, &mut w.buf.bytes)
                .map_err(io::Error::other)?;
            if w.buf.is_empty() {
                if w.needs_flush {
                    match io.get().poll_flush(&mut cx) {
                        Poll::Ready(r) => {
                            w.needs_flush = false;
                            r?;
                        }
                        Poll::Pending => {}
                    }
                }
                return Ok(());
            }
            match w.buf.poll_write(io.get_mut(), &mut cx) {
                Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) => {
                    w.bound.wrote(n, w.buf.is_empty());
                    w.needs_flush = true;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(()),
            }
        }
    }

    /// Whether an application call should leave its frames for the
    /// connection task rather than write them itself. Alone on the
    /// connection, a call writes at once (lowest latency). With other
    /// streams in flight, or right after the task's last write found
    /// several ([`Pace::Burst`]: the first call of the next burst), the
    /// first call to queue something wakes the connection task, which
    /// yields once (so the tasks already runnable — typically the callers
    /// one read of replies woke — queue theirs too) and then writes
    /// everything in one go: one syscall for many calls. A call that
    /// turns out alone costs one hop through the task once: that write
    /// finds one stream and sets [`Pace::Alone`] again.
    #[inline]
    fn defer_write(&mut self) -> bool {
        if self.link.turn == Turn::Owed {
            return true;
        }
        if self.link.pace == Pace::Alone && self.session.stream_count() < 2 {
            return false;
        }
        self.link.turn = Turn::Owed;
        self.link.wake_driver();
        true
    }

    /// Writes the frames an application call left for the connection task
    /// ([`Turn::Owed`]) now, from whoever holds the state (see
    /// `Inner::read_frames`). The connection task, already woken for
    /// them, then finds nothing owed.
    pub(super) fn write_owed(&mut self) {
        self.link.turn = Turn::Driver;
        self.write_now();
        self.link.turn = Turn::Inline;
    }

    /// Whether frames wait in the buffer or the session (the connection
    /// task must not finish before they are written).
    pub(super) fn write_pending(&self) -> bool {
        !self.writer.shut && (!self.writer.buf.is_empty() || self.session.has_transmit())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use bytes::{Bytes, BytesMut};
    use weft_frame::{Flags, FrameCodec, FrameType, Limits};
    use weft_transform::{EncryptionPolicy, HandshakeConfig, Offer, handshake_in_memory};

    use super::*;
    use crate::pipeline::Established;

    /// Two ends of an encrypted connection past the handshake, uncompressed
    /// (a frame's bytes are what a batch holds).
    pub(in crate::driver) fn sealed_pair() -> (Established, Established) {
        let config = || HandshakeConfig {
            offer: Offer {
                encryption: EncryptionPolicy::Required,
                compression: false,
                ..Offer::default()
            },
            ..HandshakeConfig::default()
        };
        handshake_in_memory(config(), config()).unwrap()
    }

    fn frame(len: usize) -> Frame {
        Frame::new(
            FrameType::DATA,
            Flags::END_STREAM,
            1,
            Bytes::from(vec![3; len]),
        )
    }

    /// A plain writer takes a small frame as its encoder writes it, and
    /// leaves to the queues a payload long enough to be chained and any
    /// frame past the bytes it copies ahead of a write.
    #[test]
    fn a_plain_writer_takes_small_frames_within_its_bounds() {
        let limits = Limits::default();
        let mut w = Writer::new(crate::pipeline::passthrough(limits).0, 100);
        assert!(w.takes_frames());
        assert!(w.put(&frame(10)));
        let mut want = BytesMut::new();
        FrameCodec::new(limits)
            .encode_frame(&frame(10), &mut want)
            .unwrap();
        assert_eq!(w.buf.bytes, want);
        assert!(!w.put(&frame(CHAIN_THRESHOLD)), "chained by the writer");
        assert!(w.put(&frame(70)), "the buffer is under 100 bytes");
        assert!(!w.put(&frame(1)), "over 100 bytes copied");
        assert_eq!(w.buf.len(), want.len() + frame(70).encoded_len());
    }

    /// A sealing writer takes frames only once the peer reads batches, and
    /// then puts small ones in one batch, which the write's loop goes on
    /// with and seals: the peer reads every frame, in order, from one
    /// record; a frame too large to ride goes to the queues.
    #[test]
    fn a_sealing_writer_puts_small_frames_in_the_batch_its_write_seals() {
        let (a, mut b) = sealed_pair();
        let mut w = Writer::new(a.outbound, 64 * 1024);
        assert!(!w.takes_frames(), "the peer has not said it reads batches");
        assert!(w.outbound.allow_batches());
        assert!(w.takes_frames());
        let frames: Vec<Frame> = (1..4).map(frame).collect();
        for f in &frames {
            assert!(w.put(f));
        }
        assert!(!w.put(&frame(4 * 1024)), "too large for a batch");
        assert!(w.open.is_some());
        let mut sealed = Batching::start(&w.outbound, 0, &mut w.open);
        sealed.seal(&mut w.outbound, &mut w.buf.bytes).unwrap();
        assert_eq!(w.outbound.records(), 1, "one record for three frames");
        let mut wire = std::mem::take(&mut w.buf.bytes);
        for f in frames {
            assert_eq!(b.inbound.decode(&mut wire).unwrap(), Some(f));
        }
        assert!(wire.is_empty());
    }

    #[test]
    fn a_batch_grows_while_writes_go_whole_and_shrinks_to_what_a_write_took() {
        let mut b = WriteBound::new(64 * 1024);
        assert_eq!(b.bytes(), 64 * 1024);
        let mut seen = Vec::new();
        for _ in 0..6 {
            b.wrote(b.bytes(), true);
            seen.push(b.bytes() / 1024);
        }
        assert_eq!(seen, [128, 256, 512, 1024, 1024, 1024]);
        b.wrote(300 * 1024, false);
        assert_eq!(b.bytes(), 300 * 1024);
        // Never below the smallest batch, nor above the largest.
        b.wrote(100, false);
        assert_eq!(b.bytes(), MIN_BATCH as usize);
        assert_eq!(WriteBound::new(1).bytes(), MIN_BATCH as usize);
        assert_eq!(WriteBound::new(usize::MAX).bytes(), MAX_BATCH as usize);
    }
}
