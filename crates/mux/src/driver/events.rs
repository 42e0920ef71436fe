//! The session's events turned into wake-ups, collected in the
//! [`WakeList`](super::wake::WakeList) and woken once the state is
//! released, and into the connection's metrics.

use super::Inner;
use super::wake::Waiter;
use crate::session::Event;

impl Inner {
    /// Turns the session's events into wake-ups. The test inline: most
    /// pumps find none, and the call alone cost its loop's stack frame.
    #[inline]
    pub(super) fn dispatch_events(&mut self) {
        if self.session.has_event() {
            self.dispatch_some_events();
        }
    }

    /// [`dispatch_events`](Self::dispatch_events) between two reads of a
    /// burst: whether anyone has something to act on now — a task owed a
    /// wake-up, the reading task's own stream ended (`own_end`: its frames
    /// raise no event), or the acceptor reading got a stream.
    #[inline]
    pub(super) fn dispatch_read_events(&mut self, own_end: bool) -> bool {
        let own = (self.session.has_event() && self.dispatch_some_events()) || own_end;
        own || !self.wakers.list.is_empty()
    }

    /// Returns whether an event was for the task reading now (it needs no
    /// wake-up, but has input to act on).
    #[inline(never)]
    fn dispatch_some_events(&mut self) -> bool {
        let reading_for = self.reader.reading_for;
        let mut own = false;
        while let Some(ev) = self.session.poll_event() {
            match ev {
                Event::Readable(id) if reading_for == Some(Waiter::Stream(id)) => own = true,
                Event::Readable(id) => {
                    // The stream's task waits as the socket waiter, with an
                    // event waker, or both: wake each. (An event waker can
                    // be stale — a stream's first `recv` may run on another
                    // task, as the rpc server's inline first poll does — so
                    // it never stands in for the socket waiter.)
                    let event = self.session.wakers_mut(id).and_then(|w| w.recv.take());
                    let socket = self.wakers.read.take_recv(Some(Waiter::Stream(id)));
                    self.wakers.wake_either(event, socket);
                }
                Event::Writable(id) => {
                    if let Some(w) = self.session.wakers_mut(id).and_then(|w| w.send.take()) {
                        self.wakers.list.push(w);
                    }
                }
                // The acceptor reads now and looks at its queue next.
                Event::Incoming if reading_for == Some(Waiter::Acceptor) => own = true,
                Event::Incoming => self.wakers.wake_acceptor(),
                // Opens waiting for a slot fail now, retry-safe.
                Event::GoingAway => {
                    self.wakers.wake_acceptor();
                    self.wake_open_waiters();
                }
                Event::OpenCredit => self.wake_open_waiters(),
                Event::Closed => self.wakers.wake_everyone(),
                Event::Refused => metrics::counter!(crate::STREAMS_REFUSED).increment(1),
            }
        }
        own
    }

    fn wake_open_waiters(&mut self) {
        let all = self.session.is_going_away() || self.session.is_closed();
        let n = self.opens_due(all);
        self.wakers.wake_open_waiters(n);
    }

    /// How many waiting opens to wake: as many as slots are free, or
    /// every one (`all`: they fail now).
    pub(super) fn opens_due(&self, all: bool) -> usize {
        if all {
            usize::MAX
        } else {
            self.session.open_credit()
        }
    }
}
