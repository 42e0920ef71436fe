//! The read buffer: sized on demand, grown while bytes flow, shrunk when
//! they stop, and reused once the frames decoded from it are gone.
//!
//! Received payloads are `Bytes` slices of the buffer, so a frame waiting
//! in a stream's queue keeps its part of the buffer alive. Without help the
//! next read then finds the buffer shared and `reserve` allocates a new one
//! (copying the start of a frame split at the end): about one allocation per
//! frame under a large transfer. Instead the buffer in use is retired as a
//! *spare* when it fills, and a spare whose frames have all been dropped is
//! taken back (`try_reclaim`) before anything is allocated: a busy
//! connection settles at cycling through a few buffers.
//!
//! ```text
//!   read ──► [ frame | frame | frame | fra ] full: the start "fra" moves to
//!                 │       │       │              a spare (or a new chunk),
//!                 ▼       ▼       ▼              and this buffer is retired
//!            stream queues hold slices        ──► spares: reclaimed once
//!                                                  the slices are dropped
//! ```
//!
//! How many spares are tracked is what makes the allocations of a large
//! message constant: the task that reads the socket reads for every
//! stream, so up to the connection's receive window of frames can wait in
//! the queues of streams whose tasks have not run yet, each holding its
//! buffer. Spares are tracked up to that window (in bytes, see
//! [`ReadBuf::make_room`]), so in a steady transfer every buffer frames
//! held comes back for reuse, whatever the message size; a fixed count
//! (16 idle of 64 tracked, before) made an 8 MiB echo allocate 57 times,
//! about one buffer per 256 KiB received.
//!
//! Memory: a retired buffer still held by frames costs nothing the frames
//! do not already hold (the receive windows bound those). Once they are
//! gone it is *idle*; a new buffer is allocated only when no idle spare
//! fits, so the buffers never add up to more than frames held at their
//! peak plus the one in use, and the spares tracked (held or idle) total
//! at most the connection's receive window, or [`RETIRED_FLOOR`] when that
//! is smaller: a peer cannot make a connection keep more than the window
//! it may fill anyway. At most [`RETIRED_MAX`] handles are tracked at all;
//! beyond either bound the oldest is forgotten (its frames free it).
//! Spares go when the chunk shrinks (reads stay small) and all of them
//! when the connection goes quiet ([`ReadBuf::release`]), so an idle
//! connection holds nothing.

use std::collections::VecDeque;

use bytes::BytesMut;
use weft_frame::{DEFAULT_MAX_PAYLOAD, HEADER_LEN};

/// The first reserve of a connection's read buffer (and the handshake's):
/// a settings frame, a ping or a small call fits.
pub(crate) const READ_FIRST: usize = 1024;
const FIRST_SHIFT: u8 = READ_FIRST.trailing_zeros() as u8;
/// The largest chunk a read reserves while bytes flow: a 256 KiB read
/// takes four default 64 KiB frames per system call (larger frames have
/// the codec reserve what they need).
pub(super) const READ_CHUNK_MAX: usize = 256 * 1024;
const MAX_SHIFT: u8 = READ_CHUNK_MAX.trailing_zeros() as u8;
/// The least the spares tracked may total, whatever the window: 16
/// chunks of 256 KiB (below this, a connection with the default 1 MiB
/// window would forget buffers its frames are about to let go of: frames
/// of several streams pin a buffer until the last of them is read).
pub(super) const RETIRED_FLOOR: usize = 16 * READ_CHUNK_MAX;
/// Retired buffers tracked at most, whatever the window (1,024 handles of
/// 48 bytes: 256 MiB of 256 KiB chunks). Tracking one costs a handle, not
/// memory, while frames hold it.
pub(super) const RETIRED_MAX: usize = 1024;
/// Reads this much smaller than the chunk, this many times in a row, halve
/// it: a connection whose transfer ended stops reserving 256 KiB.
const SMALL_READ_DIVISOR: usize = 8;
const SMALL_READS_TO_SHRINK: u8 = 4;
/// A read of at most this part of the chunk is short: an empty buffer
/// with half a chunk of room left after it (room for two more like it)
/// is not rewound before the next read (see [`ReadBuf::make_room`]).
const SHORT_READ_DIVISOR: usize = 4;
/// The allocation that holds `chunk` bytes of default-size frames whole:
/// each 64 KiB of payload comes with its frame's header. A 256 KiB buffer
/// held three frames and all but 64 bytes of a fourth, whose start was then
/// copied to the next buffer at every fill (a quarter of a transfer's bytes
/// copied twice); 256 KiB + 64 bytes holds four.
///
/// On an encrypted connection each record also carries its tag
/// (`overhead` bytes), and four records are 64 bytes more than that: the
/// fourth's first 65,504 bytes were moved at every fill. Its buffers hold
/// as many whole records as fit in the plain buffer's size (three of a
/// 256 KiB chunk), so a fill cuts no record and no read, and no buffer,
/// is larger than on a plain connection.
#[inline]
fn whole_frames(chunk: usize, overhead: u8) -> usize {
    let plain = chunk + chunk / DEFAULT_MAX_PAYLOAD as usize * HEADER_LEN;
    if overhead == 0 {
        return plain;
    }
    let record = DEFAULT_MAX_PAYLOAD as usize + HEADER_LEN + overhead as usize;
    match plain / record {
        0 => plain,
        records => records * record,
    }
}

/// A tail shorter than this part of a chunk is not read into: the bytes
/// held move to a spare or a new chunk instead.
const MIN_TAIL_PARTS: usize = 16;
const MIN_TAIL_SHIFT: u8 = MIN_TAIL_PARTS.trailing_zeros() as u8;
/// The least chunk of a transfer: from this size on, an encrypted
/// connection's buffer is rewound to whole records when the chunk does not
/// fit (see [`ReadBuf::make_room`]).
const TRANSFER_CHUNK_MIN: usize = 64 * 1024;

#[cfg(test)]
thread_local! {
    /// Buffers allocated by this thread's read buffers (tests count them;
    /// a field would grow the connection's shared state in test builds,
    /// which its size-class test measures).
    static ALLOCATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Buffers this thread's read buffers allocated so far.
#[cfg(test)]
fn allocations() -> usize {
    ALLOCATIONS.with(std::cell::Cell::get)
}

/// A retired buffer: an empty handle on an allocation that frames may
/// still hold, and about how large that allocation is (exact once it has
/// been reclaimed).
#[derive(Debug)]
struct Spare {
    buf: BytesMut,
    size: usize,
    state: SpareState,
}

/// Whether frames may still hold a retired buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpareState {
    /// Frames decoded from it may be alive.
    Held,
    /// Its handle here is the only one, rewound to the whole allocation:
    /// it stays so (only the buffer in use hands out frames).
    Idle,
}

impl Spare {
    /// A buffer just retired: held until checked (a size estimate must
    /// never stand for that check, or a buffer could be written over
    /// while frames still read it).
    fn retired(buf: BytesMut, size: usize) -> Spare {
        Spare {
            buf,
            size,
            state: SpareState::Held,
        }
    }

    /// Whether no frame holds the buffer any more; if so it is rewound to
    /// its whole allocation, whose size is then known exactly.
    fn reclaim(&mut self) -> bool {
        if self.state == SpareState::Held {
            // Asking for more than the view has makes `try_reclaim` check
            // that the handle is the allocation's only owner (asked again
            // once rewound, it would find no more room and say no).
            if !self.buf.try_reclaim(self.buf.capacity() + 1) {
                return false;
            }
            self.size = self.buf.capacity();
            self.state = SpareState::Idle;
        }
        true
    }
}

/// The retired buffers, oldest first, and the sizes they total.
#[derive(Debug, Default)]
struct Spares {
    list: VecDeque<Spare>,
    /// The sum of the `size` of `list`.
    bytes: usize,
}

impl Spares {
    /// Takes the oldest spare whose frames are all gone, rewound, with room
    /// for `need`.
    fn take(&mut self, need: usize) -> Option<Spare> {
        let mut found = None;
        for (i, s) in self.list.iter_mut().enumerate() {
            let before = s.size;
            let idle = s.reclaim();
            // A reclaim makes the size exact.
            self.bytes = self.bytes - before + s.size;
            if idle && s.size >= need {
                found = Some(i);
                break;
            }
        }
        let spare = self.list.remove(found?)?;
        self.bytes -= spare.size;
        Some(spare)
    }

    /// Keeps `spare`, forgetting the oldest while the spares total more
    /// than `budget` bytes or number more than [`RETIRED_MAX`] (a
    /// forgotten spare still held is freed by its frames).
    fn push(&mut self, spare: Spare, budget: usize) {
        self.bytes += spare.size;
        self.list.push_back(spare);
        while self.bytes > budget || self.list.len() > RETIRED_MAX {
            let Some(old) = self.list.pop_front() else {
                break;
            };
            self.bytes -= old.size;
        }
    }

    /// Lets go of spares larger than `keep` bytes.
    fn drop_larger_than(&mut self, keep: usize) {
        let mut bytes = 0;
        self.list.retain(|s| {
            let small = s.size <= keep;
            if small {
                bytes += s.size;
            }
            small
        });
        self.bytes = bytes;
    }
}

/// The connection's read buffer and its spares (see the module docs).
#[derive(Debug)]
pub(super) struct ReadBuf {
    /// Bytes read and not yet decoded, and the room after them.
    pub(super) buf: BytesMut,
    /// About how large `buf`'s allocation is; 0 once released (the next
    /// reserve is then a first chunk again, not a doubling). Buffers are
    /// at most a frame, far below 4 GiB: a `u32` (with the two bytes
    /// below and the boxed spares) keeps the connection's shared state in
    /// its allocator size class.
    size: u32,
    /// What the next reserve asks for: `1 << shift` bytes.
    shift: u8,
    /// Consecutive reads much smaller than the chunk.
    small_reads: u8,
    /// How far an empty buffer's room may fall below the chunk before a
    /// read rewinds it, as a shift of the chunk: 1 after a read of at most
    /// a quarter chunk ([`SHORT_READ_DIVISOR`]; half a chunk of room then
    /// takes the next read as it is), else 0 (any room short of the chunk
    /// is rewound). A shift, not a flag, so the test is one comparison.
    empty_slack: u8,
    /// What a record adds to each frame on the wire besides its header (the
    /// AEAD tag when encrypted, else 0): buffers are sized to hold whole
    /// records ([`whole_frames`]).
    overhead: u8,
    /// Retired buffers; boxed on the first retire (a connection that
    /// never carried a transfer has none), which keeps the connection's
    /// shared state one pointer larger, not five.
    spares: Option<Box<Spares>>,
}

impl ReadBuf {
    /// Wraps the handshake's buffer (bytes it read past the handshake may
    /// be in it).
    pub(super) fn new(buf: BytesMut) -> ReadBuf {
        ReadBuf {
            size: u32::try_from(buf.capacity()).unwrap_or(u32::MAX),
            buf,
            shift: FIRST_SHIFT,
            small_reads: 0,
            empty_slack: 0,
            overhead: 0,
            spares: None,
        }
    }

    /// Sizes buffers for records that add `overhead` bytes to each frame
    /// (the pipeline's [`Inbound::record_overhead`](crate::pipeline::Inbound::record_overhead)).
    pub(super) fn with_record_overhead(mut self, overhead: usize) -> ReadBuf {
        // A tag is 16 bytes; a larger overhead only loses the fit.
        self.overhead = u8::try_from(overhead).unwrap_or(0);
        self
    }

    /// Room after the bytes held.
    #[inline]
    fn room(&self) -> usize {
        self.buf.capacity() - self.buf.len()
    }

    /// The chunk the next reserve asks for.
    #[inline]
    pub(super) fn chunk(&self) -> usize {
        1 << self.shift
    }

    /// The least a buffer must hold to serve a read of `chunk`: the chunk,
    /// or the whole records of it that a buffer holds when that is less
    /// (encrypted, see [`whole_frames`]).
    #[inline]
    fn serving(&self, chunk: usize) -> usize {
        if self.overhead == 0 {
            return chunk;
        }
        chunk.min(whole_frames(chunk, self.overhead))
    }

    /// A larger chunk next time, up to [`READ_CHUNK_MAX`].
    fn grow(&mut self) {
        self.shift = (self.shift + 1).min(MAX_SHIFT);
    }

    /// Bytes reserved: the buffer in use and the spares.
    pub(super) fn capacity(&self) -> usize {
        let spares = self.spares.as_ref().map_or(0, |s| s.bytes);
        self.buf.capacity().max(self.size as usize) + spares
    }

    /// Makes room for the next read: reuses the buffer when the frames
    /// decoded from it are gone, reads into the tail left, and takes a
    /// spare or a new chunk only when nothing is left. Returns the room.
    /// `window` is the connection's receive window in bytes, asked only
    /// when a buffer is retired: the spares tracked total at most that
    /// (or [`RETIRED_FLOOR`]), the most frames can hold.
    pub(super) fn make_room(&mut self, window: impl FnOnce() -> usize) -> usize {
        let room = self.room();
        // An empty buffer is rewound whenever it can be (a read into a
        // short tail leaves a frame split at its end, which must then be
        // moved), unless the last read was short and half a chunk is left
        // (two more reads like it fit: `empty_slack`). Small calls read a
        // frame or two at a time, and rewinding before every read (the
        // reply's, then the one that finds the socket empty) cost about 25
        // instructions a read in the check that the frames are gone. A
        // buffer holding bytes is rewound only below a sixteenth of the
        // chunk (then it moves, below).
        let chunk = self.chunk();
        let slack = if self.buf.is_empty() {
            self.empty_slack
        } else {
            MIN_TAIL_SHIFT
        };
        let rewind = room < chunk >> slack;
        // The chunk first: whole records (encrypted, a transfer's chunks
        // only) are asked for when it does not fit, so the small calls'
        // reads pay one test.
        if rewind
            && (self.buf.try_reclaim(chunk)
                || (self.overhead != 0
                    && chunk >= TRANSFER_CHUNK_MIN
                    && self.buf.try_reclaim(self.serving(chunk))))
        {
            return self.room();
        }
        if room < chunk / MIN_TAIL_PARTS {
            // Too short a tail to be worth a read: with replies in flight
            // the codec's reserve for a split frame's rest leaves one of
            // just those bytes (a shared buffer replaced by one of exactly
            // the size asked), and reading into it costs a read per header
            // and one per body.
            if self.size > 0 {
                // Frames still hold the last buffer (replies waiting for
                // their callers' tasks): a bigger chunk lasts until they
                // are gone.
                self.grow();
            }
            self.move_to_another(window);
        }
        self.room()
    }

    /// `n` bytes arrived into `room`: a read that filled a room of half a
    /// chunk or more asks for a bigger chunk next time; reads much smaller
    /// than the chunk, several in a row, halve it and let go of spares
    /// larger than it needs.
    pub(super) fn note_read(&mut self, n: usize, room: usize) {
        let chunk = self.chunk();
        self.empty_slack = u8::from(n <= chunk / SHORT_READ_DIVISOR);
        if n >= room && room >= chunk / 2 {
            self.grow();
            self.small_reads = 0;
        } else if n < chunk / SMALL_READ_DIVISOR && self.shift > FIRST_SHIFT {
            self.small_reads += 1;
            if self.small_reads >= SMALL_READS_TO_SHRINK {
                self.small_reads = 0;
                self.shift -= 1;
                let keep = whole_frames(2 * self.chunk(), self.overhead);
                if let Some(spares) = &mut self.spares {
                    spares.drop_larger_than(keep);
                }
            }
        } else {
            self.small_reads = 0;
        }
    }

    /// Called before each decode: a full buffer ending in the start of a
    /// frame would have the codec `reserve` the rest of that frame, which
    /// allocates while earlier frames hold the buffer. So once at most a
    /// quarter chunk is left in it, that is rewound in place if the frames
    /// are gone, else moved to a spare or a new chunk, before the codec
    /// looks: at most a quarter chunk is copied, once per buffer filled
    /// (the codec's reserve would copy it too).
    ///
    /// Small calls too, not only a transfer: 64 requests or replies that
    /// arrive together (about 2 KiB) often fill the buffer (a first-size
    /// one, or the tail a short read left) and are cut at its end, and
    /// the codec's reserve then allocated a new buffer, and the first
    /// slice of it a shared header, at most such fills. Moved, the bytes
    /// go to the spare of the fill before, whose calls have been
    /// answered. `window` as for [`make_room`](Self::make_room).
    #[inline]
    pub(super) fn before_decode(&mut self, window: impl FnOnce() -> usize) {
        let len = self.buf.len();
        // Not an empty buffer (at the end of input): nothing to move.
        if len == self.buf.capacity() && len.wrapping_sub(1) < self.chunk() / 4 {
            self.move_cut(window);
        }
    }

    /// [`before_decode`](Self::before_decode)'s move: in place when no
    /// frame holds the buffer and it has half a chunk of room once
    /// rewound (as the codec's reserve would, without allocating), else
    /// to another buffer.
    #[inline(never)]
    fn move_cut(&mut self, window: impl FnOnce() -> usize) {
        if !self.buf.try_reclaim(self.chunk() / 2) {
            self.move_to_another(window);
        }
    }

    /// Moves the bytes held to a spare the frames have let go of, or to a
    /// new chunk, with at least half a chunk of room after them; retires
    /// the old buffer as a spare. New buffers are a whole chunk (when the
    /// bytes held leave room), so spares of the same chunk fit any move.
    // Out of line: `before_decode` runs before every frame decoded and must
    // stay a check the caller inlines (the move is once per buffer filled).
    #[inline(never)]
    fn move_to_another(&mut self, window: impl FnOnce() -> usize) {
        let chunk = self.chunk();
        let need = self.buf.len() + chunk / 2;
        let taken = self.spares.as_mut().and_then(|s| s.take(need));
        let (mut next, size) = match taken {
            Some(s) => (s.buf, s.size),
            None => {
                let b = BytesMut::with_capacity(need.max(whole_frames(chunk, self.overhead)));
                #[cfg(test)]
                ALLOCATIONS.with(|n| n.set(n.get() + 1));
                let size = b.capacity();
                (b, size)
            }
        };
        next.extend_from_slice(&self.buf);
        let mut old = std::mem::replace(&mut self.buf, next);
        let old_size = (self.size as usize).max(old.len() + old.capacity());
        self.size = u32::try_from(size).unwrap_or(u32::MAX);
        old.clear();
        // A buffer too small to serve a chunk would only take a slot.
        if old_size >= self.serving(chunk) {
            // Counted in buffer bytes: frames of a window's payload fill
            // buffers of its size with their headers (a budget of payload
            // bytes kept one spare fewer than frames can hold).
            let budget = whole_frames(window().max(RETIRED_FLOOR), self.overhead);
            let spares = self.spares.get_or_insert_default();
            spares.push(Spare::retired(old, old_size), budget);
        }
    }

    /// The connection went quiet: gives everything back if no bytes wait
    /// (the next read reserves a first chunk again).
    pub(super) fn release(&mut self) {
        self.spares = None;
        if self.buf.is_empty() && self.buf.capacity() > 0 {
            self.buf = BytesMut::new();
            self.size = 0;
            self.shift = FIRST_SHIFT;
            self.small_reads = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With replies in flight, frames decoded from the buffer still hold
    /// it, and the codec's reserve for a split frame's rest leaves a tail
    /// of just those bytes: the next read must get a chunk, not that tail
    /// (reads of 16 and 8 bytes, two per frame, were 2 system calls per
    /// call at 64 in flight).
    #[test]
    fn a_tail_left_by_the_codecs_reserve_is_not_read_into() {
        // A buffer that does not remember a capacity (as a handshake's
        // grown from nothing would not): a shared reserve on it allocates
        // just what is asked.
        let mut buf = BytesMut::new();
        buf.reserve(READ_FIRST);
        let mut r = ReadBuf::new(buf);
        fill_and_split(&mut r);
        let room = r.make_room(no_window);
        assert!(
            room >= r.chunk() / MIN_TAIL_PARTS,
            "a read into {room} bytes (chunk {})",
            r.chunk()
        );
    }

    /// Small calls: after a short read whose frames are gone, an empty
    /// buffer with half a chunk of room left is read into as it is (its
    /// rewind checked that the frames were gone before every read, about
    /// 25 instructions each); with less than half a chunk left, or after a
    /// longer read, it is rewound to the whole chunk.
    #[test]
    fn short_reads_skip_the_rewind_while_half_a_chunk_is_left() {
        let mut r = ReadBuf::new(BytesMut::new());
        let chunk = r.chunk();
        // One read of `n` bytes, its frames decoded and dropped; the room
        // it was given.
        let read = |r: &mut ReadBuf, n: usize| {
            let room = r.make_room(no_window);
            r.buf.resize(r.buf.len() + n, 7);
            r.note_read(n, room);
            drop(r.buf.split_to(n));
            room
        };
        let short = chunk / 8;
        let rooms: Vec<usize> = (0..6).map(|_| read(&mut r, short)).collect();
        assert_eq!(
            rooms,
            [
                chunk,
                chunk - short,
                chunk - 2 * short,
                chunk - 3 * short,
                chunk / 2,
                chunk
            ],
            "rewound only below half a chunk"
        );
        // Not short (more than a quarter chunk), and more than half a
        // chunk left after it.
        let longer = chunk / SHORT_READ_DIVISOR + 1;
        assert_eq!(read(&mut r, longer), chunk - short);
        assert_eq!(read(&mut r, short), chunk, "rewound after a longer read");
    }

    /// A buffer the reader makes remembers its capacity, so the codec's
    /// reserve on it while frames hold it asks for a real buffer, not for
    /// the few bytes it needs.
    #[test]
    fn the_readers_own_buffer_remembers_its_capacity() {
        let mut r = ReadBuf::new(BytesMut::new());
        assert!(r.make_room(no_window) >= READ_FIRST);
        fill_and_split(&mut r);
        assert!(r.buf.capacity() >= READ_FIRST, "{}", r.buf.capacity());
    }

    /// A read that filled the buffer: frames still held by their callers,
    /// then the first 8 bytes of a split frame's header, for whose rest
    /// the codec reserves.
    fn fill_and_split(r: &mut ReadBuf) {
        let cap = r.buf.capacity();
        r.buf.resize(cap, 7);
        let held = r.buf.split_to(cap - 8).freeze();
        r.buf.reserve(8);
        std::mem::forget(held);
    }

    /// Small calls: requests that arrive together fill a first-size
    /// buffer and the last is cut at its end while the ones before it are
    /// held (their calls not answered yet). Its start moves to the spare
    /// of the fill before, whose frames are gone, so the codec's reserve
    /// for the rest finds room: once warm, fills allocate nothing. With no
    /// frame held, the buffer is rewound in place instead.
    #[test]
    fn a_small_calls_cut_frame_moves_to_the_last_spare() {
        const CUT: usize = 20;
        let mut r = ReadBuf::new(BytesMut::new());
        // One fill, its whole frames held while `before_decode` looks; the
        // cut frame's rest then arrives and is decoded. Whether the cut
        // frame's start stayed in the buffer read into.
        let fill = |r: &mut ReadBuf, hold: bool| {
            let room = r.make_room(no_window);
            let start = r.buf.as_ptr();
            r.buf.resize(r.buf.len() + room, 7);
            let frames = r.buf.split_to(r.buf.len() - CUT).freeze();
            let held = hold.then_some(frames);
            r.before_decode(no_window);
            let room = r.buf.capacity() - r.buf.len();
            assert!(
                room >= r.chunk() / 2,
                "the codec's reserve allocates: {room}"
            );
            let stayed = r.buf.as_ptr() == start;
            drop(held);
            r.buf.resize(CUT + 24, 7);
            drop(r.buf.split_to(CUT + 24));
            stayed
        };
        for _ in 0..4 {
            assert!(!fill(&mut r, true), "moved");
        }
        let before = allocations();
        for _ in 0..16 {
            fill(&mut r, true);
        }
        assert_eq!(allocations(), before, "16 fills, no allocation");
        assert_eq!(r.chunk(), READ_FIRST);
        assert!(fill(&mut r, false), "rewound in place, not moved");
        assert_eq!(allocations(), before);
    }

    /// A connection whose receive window is below the floor (the default
    /// 1 MiB, say): the spares tracked total [`RETIRED_FLOOR`].
    fn no_window() -> usize {
        0
    }

    /// The spares' sizes, oldest first.
    fn spare_sizes(r: &ReadBuf) -> Vec<usize> {
        r.spares
            .as_ref()
            .map_or_else(Vec::new, |s| s.list.iter().map(|s| s.size).collect())
    }

    /// One fill under a transfer: a read, whole frames split off (held by
    /// the caller, as stream queues do) and `tail` bytes left, the start
    /// of the next frame.
    fn fill(r: &mut ReadBuf, tail: usize) -> bytes::Bytes {
        fill_within(r, tail, no_window())
    }

    /// A transfer grown to the largest chunk: 32 fills leaving `tail`
    /// bytes each, the last `keep` of them still held (as stream queues
    /// hold frames until their tasks take them).
    fn grown(
        r: &mut ReadBuf,
        tail: usize,
        keep: usize,
    ) -> std::collections::VecDeque<bytes::Bytes> {
        let mut held = std::collections::VecDeque::new();
        for _ in 0..32 {
            held.push_back(fill(r, tail));
            if held.len() > keep {
                held.pop_front();
            }
        }
        assert_eq!(r.chunk(), READ_CHUNK_MAX);
        held
    }

    /// [`fill`] on a connection whose receive window is `window` bytes:
    /// the read fills the room it gets, like a socket with plenty.
    fn fill_within(r: &mut ReadBuf, tail: usize, window: usize) -> bytes::Bytes {
        let room = r.make_room(|| window);
        r.buf.resize(r.buf.len() + room, 7);
        r.note_read(room, room);
        r.before_decode(|| window);
        let frames = r.buf.split_to(r.buf.len() - tail).freeze();
        r.before_decode(|| window);
        frames
    }

    /// Under a transfer whose frames are dropped a little after the next
    /// read (as when they wait for their stream's task), the buffers are
    /// reused: once the chunk has grown, fills stop allocating.
    #[test]
    fn a_steady_transfer_cycles_through_its_buffers() {
        let mut r = ReadBuf::new(BytesMut::new());
        let mut held = grown(&mut r, 1000, 2);
        let before = allocations();
        for _ in 0..64 {
            held.push_back(fill(&mut r, 1000));
            held.pop_front();
        }
        assert_eq!(allocations(), before, "64 fills, no allocation");
        // The buffer in use, two held by frames, the idle ones.
        // The buffer in use and the spares' floor at most.
        assert!(r.capacity() <= RETIRED_FLOOR + 2 * (READ_CHUNK_MAX + 1000));
    }

    /// A spare found idle by one check (each retire checks them all) is
    /// still idle at the next: rewound once, it must not then read as held
    /// and never be reused. Frames here are dropped two fills at a time,
    /// so retires see spares idle before a take looks for them.
    #[test]
    fn a_spare_seen_idle_once_stays_reusable() {
        let mut r = ReadBuf::new(BytesMut::new());
        let mut before = 0;
        for i in 0..64 {
            if i == 16 {
                before = allocations();
            }
            let a = fill(&mut r, 1000);
            let b = fill(&mut r, 1000);
            drop((a, b));
        }
        assert_eq!(allocations(), before, "96 fills, no allocation");
    }

    /// Frames held long, beyond what the window lets frames hold: each
    /// fill allocates (the frames hold the memory, not the spares), the
    /// spares tracked stay within the floor, the oldest forgotten; once the
    /// frames are dropped what is kept idle is within it too.
    #[test]
    fn frames_held_long_cost_allocations_not_retention() {
        let mut r = ReadBuf::new(BytesMut::new());
        let mut held = Vec::new();
        for _ in 0..80 {
            held.push(fill(&mut r, 1000));
        }
        assert!(allocations() >= 64);
        let tracked: usize = spare_sizes(&r).iter().sum();
        assert!(tracked <= whole_frames(RETIRED_FLOOR, 0), "{tracked}");
        assert!(tracked > RETIRED_FLOOR - 2 * READ_CHUNK_MAX, "{tracked}");
        // The floor counts buffers of whole frames, not payload: as many
        // as its chunks.
        assert_eq!(spare_sizes(&r).len(), RETIRED_FLOOR / READ_CHUNK_MAX);
        drop(held);
        drop(fill(&mut r, 1000));
        assert!(r.capacity() <= RETIRED_FLOOR + 2 * (READ_CHUNK_MAX + 1000));
    }

    /// Under a transfer whose frames wait in stream queues for up to a
    /// large window (a task reading for every stream queues most of it
    /// before the streams' tasks run: 8 calls of 8 MiB), every buffer comes
    /// back: once warmed, fills allocate nothing, however many messages
    /// that is. Tracking a fixed count (64 buffers) allocated a buffer per
    /// fill here. The spares stay within the window.
    #[test]
    fn frames_waiting_for_a_whole_window_allocate_nothing_once_warm() {
        const WINDOW: usize = 64 * 1024 * 1024;
        // Fills whose frames wait: 48 MiB of 256 KiB buffers, in the
        // window.
        const DEPTH: usize = 192;
        let mut r = ReadBuf::new(BytesMut::new());
        let mut held = std::collections::VecDeque::new();
        for _ in 0..2 * DEPTH {
            held.push_back(fill_within(&mut r, 1000, WINDOW));
            if held.len() > DEPTH {
                held.pop_front();
            }
        }
        let before = allocations();
        for _ in 0..4 * DEPTH {
            held.push_back(fill_within(&mut r, 1000, WINDOW));
            held.pop_front();
        }
        assert_eq!(allocations(), before, "{} fills", 4 * DEPTH);
        drop(held);
        drop(fill_within(&mut r, 1000, WINDOW));
        assert!(r.capacity() <= WINDOW + 2 * (READ_CHUNK_MAX + 1000));
    }

    /// Under a transfer a buffer holds four whole default-size frames,
    /// headers included: no frame starts in one buffer and ends in the
    /// next, so nothing is moved at a fill.
    #[test]
    fn a_transfers_buffer_holds_whole_default_frames() {
        const FRAME: usize = HEADER_LEN + DEFAULT_MAX_PAYLOAD as usize;
        let mut r = ReadBuf::new(BytesMut::new());
        let _held = grown(&mut r, 0, 2);
        let room = r.make_room(no_window);
        assert_eq!(room % FRAME, 0, "a read of {room} bytes splits a frame");
        assert_eq!(room / FRAME, READ_CHUNK_MAX / DEFAULT_MAX_PAYLOAD as usize);
    }

    /// On an encrypted connection each record is a default frame and its
    /// 16-byte tag: a buffer holds whole records (one sized for plain
    /// frames moved all but 64 bytes of the fourth record at every fill),
    /// and no more bytes than a plain connection's, so one read is never
    /// larger than there.
    #[test]
    fn a_transfers_buffer_holds_whole_sealed_records() {
        const TAG: usize = 16;
        const RECORD: usize = HEADER_LEN + DEFAULT_MAX_PAYLOAD as usize + TAG;
        let mut r = ReadBuf::new(BytesMut::new()).with_record_overhead(TAG);
        let held = grown(&mut r, 0, 2);
        let room = r.make_room(no_window);
        assert_eq!(room % RECORD, 0, "a read of {room} bytes splits a record");
        assert!(room <= whole_frames(READ_CHUNK_MAX, 0), "{room} bytes");
        assert_eq!(room / RECORD, 3);
        drop(held);
        let before = allocations();
        for _ in 0..16 {
            drop(fill(&mut r, 0));
        }
        assert_eq!(allocations(), before, "whole fills reuse their buffers");
    }

    /// A pause in a transfer (a few small reads: the chunk halves once)
    /// keeps the transfer's spares: buffers of whole frames are a little
    /// over the chunk, and dropping those larger than two halved chunks
    /// dropped them all, so every pause cost the next burst new buffers
    /// (an 8 MiB echo allocated 10 to 43 times, against 17 to 28).
    #[test]
    fn one_halving_keeps_the_transfers_spares() {
        let mut r = ReadBuf::new(BytesMut::new());
        let held = grown(&mut r, 1000, 4);
        drop(held);
        let spares = spare_sizes(&r).len();
        assert!(spares >= 4, "{spares} spares");
        for _ in 0..SMALL_READS_TO_SHRINK {
            let room = r.make_room(no_window);
            r.note_read(10, room);
        }
        assert_eq!(r.chunk(), READ_CHUNK_MAX / 2);
        assert_eq!(spare_sizes(&r).len(), spares, "spares kept");
        let before = allocations();
        for _ in 0..16 {
            drop(fill(&mut r, 1000));
        }
        assert_eq!(allocations(), before, "the transfer resumed on its spares");
    }

    /// Small reads after a transfer halve the chunk and drop large spares;
    /// a quiet release gives everything back.
    #[test]
    fn small_reads_shrink_and_release_empties() {
        let mut r = ReadBuf::new(BytesMut::new());
        let mut held = Vec::new();
        for _ in 0..16 {
            held.push(fill(&mut r, 100));
        }
        assert_eq!(r.chunk(), READ_CHUNK_MAX);
        assert!(!spare_sizes(&r).is_empty(), "spares kept");
        for _ in 0..SMALL_READS_TO_SHRINK as usize * 4 {
            let room = r.make_room(no_window);
            r.note_read(10, room);
        }
        assert_eq!(r.chunk(), READ_CHUNK_MAX / 16);
        assert!(
            spare_sizes(&r).iter().all(|&s| s <= 2 * r.chunk()),
            "large spares dropped"
        );
        r.buf.clear();
        r.release();
        assert_eq!(r.capacity(), 0);
        assert_eq!(r.chunk(), READ_FIRST);
    }
}
