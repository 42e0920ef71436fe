//! The read side: whoever holds the state reads the socket and handles
//! every frame it brings, for all streams.

use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use weft_frame::Reason;

pub(crate) use super::rbuf::READ_FIRST;
use super::rbuf::ReadBuf;
use super::task::Turn;
use super::wake::Waiter;
use super::{Inner, now};
use crate::error::CloseCause;
use crate::pipeline::Inbound;
use crate::session::Session;

/// The transport's read half, the record pipeline and the read buffer
/// (received payloads are slices of it).
///
/// The buffer is sized on demand ([`ReadBuf`]): its first reserve is
/// [`READ_FIRST`], reads that fill their room double the next reserve (up
/// to 256 KiB) and small reads halve it, a frame larger than that has the
/// codec reserve what it needs, and a connection that has gone quiet gives
/// it all back ([`Inner::release_quiet_buffers`]). An idle connection so
/// holds a small buffer, or none, instead of 16 KiB reserved at connect:
/// untouched, that reserve cost no resident memory but doubled the
/// allocator's peak mapping, and with it the allocator metadata it never
/// returns (which is what 10,000 idle connections paid for).
pub(super) struct Reader {
    inbound: Inbound,
    rbuf: ReadBuf,
    /// Bytes read since the connection task's last timer tick.
    read_since_tick: u32,
    /// Bytes read during the handshake, or left when our control queue
    /// filled up, are waiting in `buf`.
    leftover: bool,
    /// Reading, blocked, or ended.
    flow: Flow,
    /// Whether the socket's registration is live (never once ended).
    arm: Arm,
    /// Whose task is reading the socket right now: its own events need no
    /// wake-up (the reader looks next).
    pub(super) reading_for: Option<Waiter>,
    /// Whether a task whose read burst woke others yields before it reads
    /// again (see [`Next`]).
    next: Next,
}

/// Who may read next after a read burst by a waiting task's `recv` (or
/// `accept`) that woke other tasks.
///
/// A task reading a transfer's bytes for itself takes them chunk by chunk
/// and reads again in the same poll, so the tasks its reads woke (woken
/// at each release of the state, on the same worker) ran only once its
/// whole message was in: a small reply read first waited for the rest of
/// the transfer (2 MiB in the bulk fairness test). With `YieldFirst` that
/// task's next wait for the socket yields once instead of reading, so the
/// tasks it woke run first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Whoever waits reads.
    Anyone,
    /// The task of this waiter yields once before its next read.
    YieldFirst(Waiter),
}

/// Whether the socket's read registration is live. Kept apart from
/// [`Flow`]: reading may stop on a full control queue while the socket is
/// armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arm {
    /// The last read returned bytes (or none was made yet): the socket may
    /// hold more, and will not wake anyone for them.
    Unarmed,
    /// The last read returned `Pending`: the socket wakes
    /// [`ReadWake`](super::wake::ReadWake) when bytes arrive.
    Armed,
}

/// Whether the read side reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Reading whenever the session wants input.
    Reading,
    /// Reading stopped because our control queue was full; `pump_app` or
    /// the connection task resumes it once the queue drains (a read made
    /// meanwhile, because the session wants input again, keeps it here
    /// until then, so that wake-up still happens).
    Blocked,
    /// The peer's end of file, or a failed read: nothing more is read.
    Ended,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("buffered", &self.rbuf.buf.len())
            .field("flow", &self.flow)
            .field("arm", &self.arm)
            .finish_non_exhaustive()
    }
}

impl Reader {
    pub(super) fn new(inbound: Inbound, buf: BytesMut) -> Reader {
        Reader {
            leftover: !buf.is_empty(),
            rbuf: ReadBuf::new(buf).with_record_overhead(inbound.record_overhead()),
            inbound,
            read_since_tick: 0,
            flow: Flow::Reading,
            arm: Arm::Unarmed,
            reading_for: None,
            next: Next::Anyone,
        }
    }

    /// Whether the last read ended armed (`Pending`): the socket wakes
    /// `ReadWake` for what comes next.
    #[inline]
    pub(super) fn armed(&self) -> bool {
        self.arm == Arm::Armed
    }

    /// Whether reading goes on: neither blocked nor ended.
    #[inline]
    fn is_reading(&self) -> bool {
        self.flow == Flow::Reading
    }

    /// Whether reading stopped on a full control queue.
    #[inline]
    pub(super) fn is_blocked(&self) -> bool {
        self.flow == Flow::Blocked
    }

    /// Whether the peer's end of file (or a failed read) was seen.
    #[inline]
    pub(super) fn is_ended(&self) -> bool {
        self.flow == Flow::Ended
    }

    /// Resumes reading after a block (nothing once ended).
    #[inline]
    pub(super) fn unblock(&mut self) {
        if self.flow == Flow::Blocked {
            self.flow = Flow::Reading;
        }
    }

    /// Reading stops until the control queue drains (only while reading:
    /// read loops never run once ended).
    fn block(&mut self) {
        if self.flow == Flow::Reading {
            self.flow = Flow::Blocked;
        }
    }

    /// A read returned: it armed the socket if it was `Pending` (reads
    /// happen only before the end: read loops stop at it).
    #[inline]
    fn set_arm(&mut self, pending: bool) {
        self.arm = if pending { Arm::Armed } else { Arm::Unarmed };
    }

    /// Nothing more is read. Returns whether reading was blocked: the
    /// resume that would have followed is owed to the connection task.
    fn end(&mut self) -> bool {
        let was_blocked = self.is_blocked();
        self.flow = Flow::Ended;
        self.arm = Arm::Unarmed;
        was_blocked
    }

    /// The buffer's capacity, spares included (tests watch it stay small
    /// while idle).
    pub(super) fn capacity(&self) -> usize {
        self.rbuf.capacity()
    }

    /// `n` bytes arrived into `room`.
    fn note_read(&mut self, n: usize, room: usize) {
        let counted = u32::try_from(n).unwrap_or(u32::MAX);
        self.read_since_tick = self.read_since_tick.saturating_add(counted);
        self.rbuf.note_read(n, room);
    }
}

/// The connection's receive window in bytes as granted so far (grown by
/// bandwidth estimates): what frames waiting in stream queues can hold at
/// most, and so what the read buffer's spares are tracked up to.
fn recv_window(session: &Session) -> usize {
    session.stats().conn_recv_size as usize
}

/// Read calls per poll before yielding to other tasks.
const READS_PER_POLL: usize = 16;

/// Why a read burst ([`Inner::read_frames`]) stopped, and so who reads next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BurstEnd {
    /// The socket is armed, reading is blocked or has ended: nobody needs
    /// to read until the socket (or the control queue) says so.
    Drained,
    /// [`READS_PER_POLL`] reads were made: the socket waiter (or the
    /// connection task) is woken to read on.
    Budget,
    /// A full read brought input for some task (its wake-up waits for the
    /// state's release): the burst ends there and the connection task
    /// reads on after it.
    HandOver,
    /// A full read was made while an application call's frames wait for
    /// the connection task's write ([`Turn::Owed`]): the reader writes them
    /// before it reads on (see [`Inner::read_frames`]).
    WriteOwed,
}

impl Inner {
    /// Reads and handles frames until the socket has nothing more (it is
    /// then armed to wake [`ReadWake`](super::wake::ReadWake)), the session
    /// stops reading, or the per-call budget is used (then `ReadWake` is
    /// woken to continue). Returns whether any bytes arrived.
    pub(super) fn read_frames(&mut self) -> bool {
        self.reader.next = Next::Anyone;
        let mut budget = READS_PER_POLL;
        let mut got = false;
        loop {
            // Borrowed out for the loop instead of cloned: no reference
            // count traffic per read.
            let waker = std::mem::replace(&mut self.wakers.read_waker, Waker::noop().clone());
            let (read, end) = self.read_loop(&mut Context::from_waker(&waker), &mut budget);
            got |= read;
            match end {
                BurstEnd::Drained | BurstEnd::WriteOwed => {}
                BurstEnd::Budget => waker.wake_by_ref(),
                BurstEnd::HandOver => self.hand_over(),
            }
            self.wakers.read_waker = waker;
            if end != BurstEnd::WriteOwed {
                return got;
            }
            // A call's frames were left for the connection task's next
            // write, and we hold the state for a transfer's reads: under a
            // transfer that task got the state only after a reader's whole
            // burst (and after the reading task's next ones), so the
            // frames of a small call — a request, or the reply to one —
            // waited for up to a window of someone else's bytes. The
            // deferral is there to gather frames of tasks already
            // runnable; a full read's time is as long as they get.
            self.write_owed();
        }
    }

    /// A burst ended at a full read that gave some task input. The socket
    /// likely holds more, and whoever reads on, the tasks woken at release
    /// should get the state first: a task reading for itself yields once
    /// before its next read (its `recv` comes back to read, or its wait
    /// hands reading to the connection task: `stop_waiting`,
    /// `abandon_socket_wait`); otherwise the connection task reads on
    /// after them.
    fn hand_over(&mut self) {
        match self.reader.reading_for {
            Some(who) if !self.wakers.list.is_empty() => {
                self.reader.next = Next::YieldFirst(who);
            }
            _ => self.link.wake_driver(),
        }
    }

    /// Reads the socket from the task of `who` (a waiting `recv` or
    /// `accept`), for every stream; `who`'s own events need no wake-up.
    pub(super) fn read_inline(&mut self, who: Waiter) {
        self.reader.reading_for = Some(who);
        if self.read_frames() {
            self.pump_app();
        }
        self.reader.reading_for = None;
    }

    /// [`read_frames`](Self::read_frames)' loop: whether bytes arrived, and
    /// why it stopped.
    fn read_loop(&mut self, cx: &mut Context<'_>, budget: &mut usize) -> (bool, BurstEnd) {
        let mut got = false;
        while *budget > 0 {
            *budget -= 1;
            if self.reader.is_ended() {
                return (got, BurstEnd::Drained);
            }
            if !self.session.wants_read() {
                // Resumed by `pump_app` or the driver once the queue drains.
                self.reader.block();
                return (got, BurstEnd::Drained);
            }
            let mut filled = false;
            let r = &mut self.reader;
            let res = if std::mem::take(&mut r.leftover) {
                Poll::Ready(Ok(usize::MAX))
            } else {
                let session = &self.session;
                let room = r.rbuf.make_room(|| recv_window(session));
                self.wakers.read.fired.store(false, Ordering::Release);
                let res = tokio_util::io::poll_read_buf(self.io.get(), cx, &mut r.rbuf.buf);
                if let Poll::Ready(Ok(n)) = res {
                    filled = n >= room;
                    r.note_read(n, room);
                }
                res
            };
            self.reader.set_arm(res.is_pending());
            match res {
                Poll::Pending => return (got, BurstEnd::Drained),
                Poll::Ready(Ok(0)) => {
                    self.end_reading();
                    self.decode(true);
                    return (true, BurstEnd::Drained);
                }
                Poll::Ready(Ok(_)) => {
                    got = true;
                    let own_end = self.decode(false);
                    // A read that filled its room leaves more in the socket:
                    // under a transfer, the next reads would hold the state
                    // (and every wake-up, which waits for its release) for
                    // up to a connection window of someone else's bytes. So
                    // a burst ends as soon as a frame gave anyone something
                    // to do. A read that did not fill its room goes on to
                    // the read that arms the socket, as before.
                    if filled && self.dispatch_read_events(own_end) {
                        return (true, BurstEnd::HandOver);
                    }
                    if filled && self.link.turn == Turn::Owed {
                        return (true, BurstEnd::WriteOwed);
                    }
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!(error = %e, "read failed");
                    self.end_reading();
                    self.session.handle_transport_closed(CloseCause::peer(
                        Reason::INTERNAL_ERROR,
                        "transport read failed",
                    ));
                    return (true, BurstEnd::Drained);
                }
            }
        }
        (got, BurstEnd::Budget)
    }

    /// The read side ended (end of file, or a failed read). A block ended
    /// with it still owes the connection task the wake-up its resume would
    /// have given (`pump_app` wakes it to read on once the queue drains).
    fn end_reading(&mut self) {
        if self.reader.end() {
            self.link.wake_driver();
        }
    }

    /// Whether the close should wait for the peer's end of file: after a
    /// close of ours (our `GOAWAY` and FIN are out, whether the close was
    /// graceful or an error) a peer that is still sending would otherwise
    /// get a TCP reset, which discards the replies and the `GOAWAY` still
    /// unread in its receive buffer (its calls then fail as "write failed"
    /// instead of learning which were processed, or why the connection
    /// ended). Lingering close, as nginx and Apache do it. Not after our
    /// write failed: nothing of ours is left to read.
    pub(super) fn lingers(&self) -> bool {
        !self.reader.is_ended()
            && !self.writer.shut
            && self
                .session
                .close_cause()
                .is_some_and(|c| c.origin == crate::error::Origin::Local)
    }

    /// Reads and drops what the peer still sends, until its end of file
    /// (or a read error): `Ready` then. A bounded number of reads per
    /// poll; the caller bounds the time.
    pub(super) fn discard_until_eof(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut scratch = [0u8; 2048];
        for _ in 0..READS_PER_POLL {
            let mut buf = tokio::io::ReadBuf::new(&mut scratch);
            match self.io.get().poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {}
                Poll::Ready(_) => {
                    self.reader.end();
                    return Poll::Ready(());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// The connection task's timer fired (a keepalive or idle tick). A
    /// connection with no streams that read less than [`READ_FIRST`] since
    /// the last tick has gone quiet: it gives its read and write buffers
    /// back (the next read or write reserves a first chunk again) and frees
    /// what the session keeps for reuse (`Session::release_spares`).
    /// At most one allocation per tick per connection, none per call.
    pub(super) fn release_quiet_buffers(&mut self) {
        let r = &mut self.reader;
        let quiet = (r.read_since_tick as usize) < READ_FIRST;
        r.read_since_tick = 0;
        if !quiet || self.session.stream_count() > 0 {
            return;
        }
        if !r.leftover {
            r.rbuf.release();
        }
        self.writer.release_if_idle();
        self.session.release_spares();
    }

    /// Whether the connection holds buffers a quiet tick would give back.
    pub(super) fn holds_buffers(&self) -> bool {
        self.reader.capacity() > 0 || self.writer.capacity() > 0
    }

    /// Whether the socket woke since the last read was armed.
    pub(super) fn read_wake_fired(&self) -> bool {
        self.reader.armed() && self.wakers.read.fired.load(Ordering::Acquire)
    }

    /// Whether the socket may have bytes nobody has read: it is not armed,
    /// or it fired since. Never after its end of file: nothing is read
    /// after it, so no caller waits for the socket then.
    ///
    /// Not while a reader that woke others owes them a yield
    /// ([`Next::YieldFirst`]): every `recv` then goes through
    /// [`wait_for_socket`](Self::wait_for_socket), which yields for that
    /// reader and reads for any other.
    pub(super) fn read_needed(&self) -> bool {
        self.reader.next == Next::Anyone
            && !self.reader.is_ended()
            && self.wakers.read.may_have_bytes(self.reader.armed())
    }

    /// Handles every whole frame in the buffer. Returns whether the
    /// stream whose task reads got its last frame (its frames raise no
    /// event: that task looks at its queue next). Only the last: a task
    /// reading a transfer's own frames would otherwise end every burst at
    /// its first read, and stopping there gains nothing until its message
    /// is whole (it cost seven more thread wake-ups per 1 MiB echo).
    ///
    /// Inline into `read_frames`, its one caller (twice): out of line, its
    /// entry and exit (the registers the frame loop needs saved and
    /// restored) and the state reloaded around it cost about 30
    /// instructions a read, two reads per sequential call.
    #[inline(always)]
    fn decode(&mut self, eof: bool) -> bool {
        let mut own_end = false;
        let mut cached = None;
        let mut clock = || *cached.get_or_insert_with(now);
        // The stream whose task reads now needs no event for its own data.
        let reader = match self.reader.reading_for {
            Some(Waiter::Stream(id)) => id,
            _ => 0,
        };
        loop {
            let r = &mut self.reader;
            if !eof && r.rbuf.buf.is_empty() {
                // Every frame so far was whole: nothing to decode (a header
                // held by the codec needs more bytes too).
                break;
            }
            r.rbuf.before_decode(|| recv_window(&self.session));
            let res = if eof {
                r.inbound.decode_eof(&mut r.rbuf.buf)
            } else {
                r.inbound.decode(&mut r.rbuf.buf)
            };
            match res {
                Ok(Some(frame)) => {
                    own_end |= reader != 0 && frame.stream_id == reader && frame.is_end_stream();
                    self.session.handle_frame_with(frame, &mut clock, reader);
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "bad input from peer");
                    match (e.frame_type(), e.stream_id()) {
                        (Some(ty), Some(id)) if !e.is_fatal() => {
                            self.session
                                .reset_unreadable(ty, id, e.reason(), &mut clock);
                        }
                        _ => self.session.close(e.reason(), "undecodable input"),
                    }
                    if e.is_fatal() {
                        break;
                    }
                }
            }
            if self.session.is_closed() {
                break;
            }
            if !self.session.wants_read() {
                // Our control queue is full: the rest waits in the buffer.
                self.reader.leftover = !self.reader.rbuf.buf.is_empty();
                if !eof {
                    return own_end;
                }
            }
        }
        if eof {
            // A clean end of file between frames (a truncated frame closed
            // the session above): the peer half-closed its write side.
            // What it asked for is still answered; the session closes once
            // that is done or its drain deadline passes.
            self.session.handle_peer_eof(clock());
        }
        own_end
    }

    /// `who` waits for socket bytes in the task of `waker`; returns whether
    /// the caller must read once more first. Registered first, checked
    /// second: a wake-up that fired before we were the waiter went to the
    /// old waiter, which may never read (its task may be gone, or be the
    /// one that polled a stream before it moved to ours). So if the socket
    /// may hold unread bytes, the caller reads — or, if it already read in
    /// this poll (`may_read` false), the connection task is woken to.
    pub(super) fn wait_for_socket(&mut self, who: Waiter, waker: &Waker, may_read: bool) -> bool {
        let armed = self.reader.armed();
        let (displaced, may_have_bytes) = self.wakers.read.register(who, waker, armed);
        if let Some((other, w)) = displaced {
            self.park_displaced(other, w);
        }
        if !may_have_bytes || !self.reader.is_reading() {
            return false;
        }
        if self.reader.next == Next::YieldFirst(who) {
            // Registered as the waiter: if its task is dropped meanwhile,
            // the connection task takes the socket (`abandon_socket_wait`).
            self.reader.next = Next::Anyone;
            waker.wake_by_ref();
            return false;
        }
        if may_read {
            return true;
        }
        self.link.wake_driver();
        false
    }

    /// `who` no longer waits for the socket (its wait returned). If the
    /// socket may hold bytes nobody has read — it woke us, or reading
    /// stopped at the per-poll budget — the connection task takes over,
    /// or nobody would read them.
    pub(super) fn stop_waiting(&mut self, who: Waiter) {
        if self.wakers.read.leave(who, self.reader.armed()) {
            self.link.wake_driver();
        }
    }

    /// Keeps the socket waiter that `ReadWake::set_recv` displaced as its
    /// event waker, so events for it (its stream's data, or an incoming
    /// stream for the acceptor) read by someone else still wake it.
    fn park_displaced(&mut self, who: Waiter, waker: Waker) {
        match who {
            Waiter::Acceptor => self.wakers.accept = Some(waker),
            Waiter::Stream(id) => {
                if let Some(slot) = self.session.wakers_mut(id) {
                    slot.recv = Some(waker);
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn reader() -> Reader {
        let (_, inbound) = crate::pipeline::passthrough(Default::default());
        Reader::new(inbound, BytesMut::new())
    }

    /// A block keeps the socket's registration: an armed socket still wakes
    /// `ReadWake` for what comes, so nobody needs to read it meanwhile.
    #[test]
    fn a_block_keeps_the_arm_and_resumes_reading() {
        let mut r = reader();
        assert!(r.is_reading() && !r.armed());
        r.set_arm(true);
        r.block();
        assert!(r.is_blocked() && r.armed());
        // A read made while blocked (the session wants input again) stays
        // blocked: the resume's wake-up of the connection task is still due.
        r.set_arm(false);
        assert!(r.is_blocked() && !r.armed());
        r.unblock();
        assert!(r.is_reading() && !r.is_blocked());
    }

    /// The end while blocked reports the resume it cancels; after the end
    /// nothing reads, arms or resumes.
    #[test]
    fn the_end_is_final_and_reports_a_cancelled_resume() {
        let mut r = reader();
        r.block();
        assert!(r.end(), "ended while blocked: the resume is owed");
        assert!(r.is_ended() && !r.armed() && !r.is_blocked());
        r.unblock();
        assert!(r.is_ended());
        assert!(!reader().end(), "ended while reading: nothing owed");
    }
}
