//! Every waker the connection keeps outside its streams ([`Wakers`]): who
//! gets woken when the socket has bytes ([`ReadWake`], [`Waiter`]), the
//! acceptor, waiting opens, `closed` waiters and the connection task; and
//! wake-ups deferred until the connection's state is released
//! ([`WakeList`], [`Woken`]). (A stream's own `recv` and `send` wakers
//! live with the stream, in the session's table.)

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Wake, Waker};

use super::opens::OpenQueue;
use super::sync::{AtomicBool, AtomicU32, Mutex, MutexGuard};

/// The connection's wakers, and the wake-ups owed once the state is
/// released. Only the state's owner touches them (the socket's
/// [`ReadWake`] has its own lock, being woken from outside).
#[derive(Debug)]
pub(super) struct Wakers {
    /// The waker every socket read registers (see [`ReadWake`]); `Shared`
    /// keeps a clone, so a dropped wait can hand the socket back without
    /// taking the state.
    pub(super) read: Arc<ReadWake>,
    /// `read` as a `Waker`, built once.
    pub(super) read_waker: Waker,
    /// `Incoming::accept`'s event waker (when it does not wait as the
    /// socket waiter).
    pub(super) accept: Option<Waker>,
    /// Tasks waiting for room under the peer's stream cap
    /// (`Connection::poll_open_ready`).
    pub(super) open_ready: Vec<Waker>,
    /// `Connection::open` calls waiting for a slot, in turn.
    pub(super) opens: OpenQueue,
    /// `Connection::closed` calls waiting for the transport's end.
    pub(super) closed: Vec<Waker>,
    /// The connection task's waker (whether it is owed a wake-up is the
    /// task's [`Link`](super::task::Link)'s to say).
    pub(super) driver: Waker,
    /// Wake-ups owed, woken once the state is released.
    pub(super) list: WakeList,
}

impl Wakers {
    pub(super) fn new(read: Arc<ReadWake>) -> Wakers {
        Wakers {
            read_waker: Waker::from(read.clone()),
            read,
            accept: None,
            open_ready: Vec::new(),
            opens: OpenQueue::default(),
            closed: Vec::new(),
            driver: Waker::noop().clone(),
            list: WakeList::default(),
        }
    }

    /// The connection task polls with `waker` now.
    pub(super) fn set_driver(&mut self, waker: &Waker) {
        if !self.driver.will_wake(waker) {
            self.driver = waker.clone();
        }
        self.read.set_driver(waker);
    }

    /// Wakes both wakers, or one if they wake the same task.
    ///
    /// One arm per case: the common one (a reply for a task waiting as
    /// the socket waiter) is a single push, where a chained iterator over
    /// both options cost about 25 instructions per call. Always inline:
    /// out of line, passing two options and saving registers around the
    /// wakers' drops cost about 20 more, once per reply.
    #[inline(always)]
    pub(super) fn wake_either(&mut self, event: Option<Waker>, socket: Option<Waker>) {
        match (event, socket) {
            (Some(e), Some(s)) => {
                if !e.will_wake(&s) {
                    self.list.push(e);
                }
                self.list.push(s);
            }
            (Some(w), None) | (None, Some(w)) => self.list.push(w),
            (None, None) => {}
        }
    }

    /// Wakes `accept`, which waits as the socket waiter, with its event
    /// waker, or both (like a stream's `recv`).
    pub(super) fn wake_acceptor(&mut self) {
        let event = self.accept.take();
        let socket = self.read.take_recv(Some(Waiter::Acceptor));
        self.wake_either(event, socket);
    }

    /// Wakes the first `n` waiting opens (those whose turn it is).
    pub(super) fn wake_opens(&mut self, n: usize) {
        for w in self.opens.first(n) {
            self.list.push(w.clone());
        }
    }

    /// Wakes `poll_open_ready` waiters, and the first `n` waiting opens.
    pub(super) fn wake_open_waiters(&mut self, n: usize) {
        for w in self.open_ready.drain(..) {
            self.list.push(w);
        }
        self.wake_opens(n);
    }

    /// The connection closed: wakes the acceptor, waiting opens and the
    /// socket waiter. Each stream's own wakers need nothing here: the
    /// session raised `Readable` and `Writable` for every stream before
    /// `Closed`.
    pub(super) fn wake_everyone(&mut self) {
        if let Some(w) = self.accept.take() {
            self.list.push(w);
        }
        self.wake_open_waiters(usize::MAX);
        if let Some(w) = self.read.take_recv(None) {
            self.list.push(w);
        }
    }

    /// The transport is gone: wakes `Connection::closed` waiters.
    pub(super) fn wake_closed(&mut self) {
        for w in std::mem::take(&mut self.closed) {
            self.list.push(w);
        }
    }

    /// Registers `waker` to learn when the transport is gone.
    pub(super) fn wait_closed(&mut self, waker: &Waker) {
        if !self.closed.iter().any(|w| w.will_wake(waker)) {
            self.closed.push(waker.clone());
        }
    }

    /// Registers `waker` to learn when the peer's stream cap has room.
    pub(super) fn wait_open_ready(&mut self, waker: &Waker) {
        if !self.open_ready.iter().any(|w| w.will_wake(waker)) {
            self.open_ready.push(waker.clone());
        }
    }

    /// The wake-ups owed, to wake after the state is released; with
    /// `driver`, the connection task's too.
    #[inline]
    pub(super) fn take_woken(&mut self, driver: bool) -> Woken {
        if driver {
            self.list.push(self.driver.clone());
        }
        self.list.take()
    }
}

/// A task that waits for socket bytes and reads them itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// A stream's `recv`.
    Stream(u32),
    /// `Incoming::accept`.
    Acceptor,
}

/// [`ReadWake::waiter_code`]'s encoding: 0 none, a stream id (below
/// 2^31), or this for the acceptor.
const ACCEPTOR_CODE: u32 = u32::MAX;

impl Waiter {
    fn code(self) -> u32 {
        match self {
            Waiter::Stream(id) => id,
            Waiter::Acceptor => ACCEPTOR_CODE,
        }
    }
}

/// The one waker the socket's reads register. On wake it wakes the task
/// of the [`Waiter`] registered for socket bytes, if any (that task reads
/// the socket itself), otherwise the connection task. It never takes the
/// connection's state (a wake may come from inside another connection's).
#[derive(Debug, Default)]
pub(crate) struct ReadWake {
    /// The socket woke since the last read was started.
    pub(super) fired: AtomicBool,
    /// The registered waiter's code, readable without the lock (0: none).
    waiter_code: AtomicU32,
    waiters: Mutex<ReadWaiters>,
}

#[derive(Debug, Default)]
struct ReadWaiters {
    recv: Option<(Waiter, Waker)>,
    driver: Option<Waker>,
}

impl ReadWake {
    fn waiters(&self) -> MutexGuard<'_, ReadWaiters> {
        self.waiters.lock()
    }

    pub(super) fn set_driver(&self, waker: &Waker) {
        let mut w = self.waiters();
        if !w.driver.as_ref().is_some_and(|d| d.will_wake(waker)) {
            w.driver = Some(waker.clone());
        }
    }

    /// `who` waits for socket bytes in the task of `waker`. Returns the
    /// other waiter it displaces, which the caller keeps as that waiter's
    /// event waker (so its data, read by someone else, still wakes it).
    ///
    /// The same waiter again (every `recv` poll of a call waiting for its
    /// reply) displaces nobody and leaves `waiter_code`, which always
    /// names the registered waiter, as it is.
    ///
    /// Why a new waiter displaces the old one rather than wait behind it
    /// as an event waiter only (cheaper by the lock and the park): the
    /// registered waiter may be stale, its future alive but no longer
    /// polled (left behind by a `select!`, or its task busy elsewhere).
    /// The socket's wake would then go to a task that never reads, and the
    /// new waiter, relying on it, would sleep with bytes unread
    /// (`loom_a_new_waiter_never_misses_the_socket_wake` fails so). Only
    /// the newest waiter is known to be polled.
    #[inline(always)]
    fn set_recv(&self, who: Waiter, waker: &Waker) -> Option<(Waiter, Waker)> {
        let mut w = self.waiters();
        if let Some((i, old)) = &mut w.recv
            && *i == who
        {
            old.clone_from(waker); // a clone only if another task
            return None;
        }
        let displaced = w.recv.replace((who, waker.clone()));
        self.waiter_code.store(who.code(), Ordering::Release);
        displaced
    }

    /// Whether the socket may hold bytes nobody has read: the last read
    /// did not end armed (`Pending`), or the socket fired since.
    pub(super) fn may_have_bytes(&self, armed: bool) -> bool {
        !armed || self.fired.load(Ordering::Acquire)
    }

    /// `who` waits for socket bytes in the task of `waker`: registered
    /// first, checked second. A wake that fired before we were the waiter
    /// went to the old waiter, which may never read (its task may be gone),
    /// so the caller must read if this says the socket may hold bytes.
    /// Also returns the waiter displaced (see [`set_recv`](Self::set_recv)).
    ///
    /// Always inline: its one caller, `wait_for_socket`, runs once per call
    /// waiting for a reply. Out of line, the displaced waker and the flag
    /// came back through memory, with registers saved and restored on each
    /// side: about 25 instructions per call in a build without LTO. The
    /// release build's LTO had mostly inlined it already (1 to 3 there).
    #[inline(always)]
    pub(super) fn register(
        &self,
        who: Waiter,
        waker: &Waker,
        armed: bool,
    ) -> (Option<(Waiter, Waker)>, bool) {
        let displaced = self.set_recv(who, waker);
        (displaced, self.may_have_bytes(armed))
    }

    /// `who`'s wait returned: it is no longer the waiter. Returns whether
    /// the socket may hold bytes nobody will read — it woke us (and we
    /// return without reading), or a read stopped at its budget — so the
    /// caller must hand reading to the connection task.
    pub(super) fn leave(&self, who: Waiter, armed: bool) -> bool {
        self.clear_recv(who, false);
        self.may_have_bytes(armed)
    }

    /// Takes the waiter if it is `who` (`None`: whoever it is).
    pub(super) fn take_recv(&self, who: Option<Waiter>) -> Option<Waker> {
        let current = self.waiter_code.load(Ordering::Acquire);
        if current == 0 || who.is_some_and(|w| w.code() != current) {
            return None;
        }
        let mut w = self.waiters();
        match w.recv.take() {
            Some((i, t)) if who.is_none_or(|who| who == i) => {
                self.waiter_code.store(0, Ordering::Release);
                Some(t)
            }
            other => {
                w.recv = other;
                None
            }
        }
    }

    /// `who` no longer waits (it completed or was dropped); with `handoff`
    /// the connection task is woken in case bytes arrived meanwhile.
    ///
    /// The test is inline: most returns from a wait find the waiter was
    /// someone else (or taken by the wake), and a call that set up the
    /// locking path's frame for that cost about 20 instructions, twice a
    /// call.
    #[inline]
    pub(super) fn clear_recv(&self, who: Waiter, handoff: bool) {
        if !handoff && self.waiter_code.load(Ordering::Acquire) != who.code() {
            return; // not ours (or already taken by a wake): no lock needed
        }
        self.clear_recv_locked(who, handoff);
    }

    #[inline(never)]
    fn clear_recv_locked(&self, who: Waiter, handoff: bool) {
        let mut w = self.waiters();
        if w.recv.as_ref().is_some_and(|(i, _)| *i == who) {
            w.recv = None;
            self.waiter_code.store(0, Ordering::Release);
        }
        if handoff && let Some(d) = &w.driver {
            d.wake_by_ref();
        }
    }

    /// The socket has bytes: wake whoever reads them.
    pub(super) fn fire(&self) {
        self.fired.store(true, Ordering::Release);
        let target = {
            let mut w = self.waiters();
            match w.recv.take() {
                Some((_, t)) => {
                    self.waiter_code.store(0, Ordering::Release);
                    Some(t)
                }
                None => w.driver.clone(),
            }
        };
        if let Some(t) = target {
            t.wake();
        }
    }
}

impl Wake for ReadWake {
    fn wake(self: Arc<Self>) {
        self.fire();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fire();
    }
}

/// Wake-ups collected while the connection's state is held.
#[derive(Debug, Default)]
pub(crate) struct WakeList(Vec<Waker>);

/// The most wakers a kept spare buffer may have room for (a connection's
/// wakes per release are usually a handful; 1 KiB of `Waker`s).
const SPARE_KEEP: usize = 64;

thread_local! {
    /// A drained buffer to swap in for the one being woken, so neither
    /// side allocates once warm.
    static SPARE: Cell<Vec<Waker>> = const { Cell::new(Vec::new()) };
}

impl WakeList {
    pub(crate) fn push(&mut self, waker: Waker) {
        self.0.push(waker);
    }

    /// Whether nothing was collected.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Takes what was collected, to wake once the state is released.
    #[inline]
    pub(crate) fn take(&mut self) -> Woken {
        if self.0.is_empty() {
            return Woken(Vec::new());
        }
        self.take_some()
    }

    #[inline(never)]
    fn take_some(&mut self) -> Woken {
        Woken(std::mem::replace(&mut self.0, SPARE.take()))
    }
}

/// Wake-ups taken from a [`WakeList`]; woken by [`wake_all`](Self::wake_all).
#[derive(Debug, Default)]
#[must_use]
pub(crate) struct Woken(Vec<Waker>);

impl Woken {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    #[inline(never)]
    pub(crate) fn wake_all(mut self) {
        self.0.drain(..).for_each(Waker::wake);
        // Keep the larger of the two buffers as the spare, unless it grew
        // past `SPARE_KEEP`: one wake of many (every stream of a closing
        // connection) must not leave each worker thread holding a buffer
        // that size for ever.
        let other = SPARE.take();
        let keep = if other.capacity() > self.0.capacity() {
            other
        } else {
            self.0
        };
        if keep.capacity() <= SPARE_KEEP {
            SPARE.set(keep);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A task that counts its wake-ups.
    #[derive(Default)]
    struct Task(AtomicUsize);

    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn task() -> (Arc<Task>, Waker) {
        let t = Arc::new(Task::default());
        (t.clone(), Waker::from(t))
    }

    fn woken(t: &Task) -> usize {
        t.0.load(Ordering::Relaxed)
    }

    /// Every case of a reply's two wakers: a task waiting both as the
    /// socket waiter and with an event waker is woken once, two tasks
    /// each once, a lone waker once, and nothing wakes nobody.
    #[test]
    fn wake_either_wakes_each_task_once() {
        let mut wakers = Wakers::new(Arc::new(ReadWake::default()));
        let (a, wa) = task();
        let (b, wb) = task();
        let cases: [(Option<&Waker>, Option<&Waker>, usize, usize); 6] = [
            (Some(&wa), Some(&wa), 1, 0),
            (Some(&wa), Some(&wb), 1, 1),
            (Some(&wa), None, 1, 0),
            (None, Some(&wb), 0, 1),
            (None, None, 0, 0),
            (Some(&wb), Some(&wa), 1, 1),
        ];
        for (event, socket, want_a, want_b) in cases {
            let (before_a, before_b) = (woken(&a), woken(&b));
            wakers.wake_either(event.cloned(), socket.cloned());
            wakers.list.take().wake_all();
            assert_eq!(
                (woken(&a) - before_a, woken(&b) - before_b),
                (want_a, want_b),
                "event {:?}, socket {:?}",
                event.map(|w| w.will_wake(&wa)),
                socket.map(|w| w.will_wake(&wa)),
            );
        }
    }

    /// A waiter registering again from another task (a stream polled from
    /// a new task) moves the socket's wake-up there, displacing nobody;
    /// from the same task it changes nothing. Another waiter displaces it.
    #[test]
    fn registering_again_moves_the_wake_to_the_new_task() {
        let rw = Arc::new(ReadWake::default());
        let socket = Waker::from(rw.clone());
        let (a, wa) = task();
        let (b, wb) = task();
        let me = Waiter::Stream(1);
        assert!(rw.register(me, &wa, true).0.is_none());
        assert!(rw.register(me, &wa, true).0.is_none(), "same task");
        assert!(rw.register(me, &wb, true).0.is_none(), "same waiter");
        socket.wake_by_ref();
        assert_eq!((woken(&a), woken(&b)), (0, 1), "the latest task is woken");

        assert!(rw.register(me, &wa, true).0.is_none());
        let displaced = rw.register(Waiter::Acceptor, &wb, true).0;
        assert!(displaced.is_some_and(|(who, w)| who == me && w.will_wake(&wa)));
        assert!(rw.take_recv(Some(me)).is_none(), "no longer the waiter");
        assert!(
            rw.take_recv(Some(Waiter::Acceptor))
                .is_some_and(|w| w.will_wake(&wb))
        );
    }
}
