//! The session's events turned into wake-ups, collected in the
//! [`WakeList`](super::wake::WakeList) and woken once the state is
//! released.

use std::task::Waker;

use super::Inner;
use super::wake::{Waiter, Woken};
use crate::session::Event;

impl Inner {
    pub(super) fn dispatch_events(&mut self) {
        while let Some(ev) = self.session.poll_event() {
            match ev {
                Event::Readable(id) if self.reading_for == Some(Waiter::Stream(id)) => {}
                Event::Readable(id) => {
                    // The stream's task waits as the socket waiter, with an
                    // event waker, or both: wake each. (An event waker can
                    // be stale — a stream's first `recv` may run on another
                    // task, as the rpc server's inline first poll does — so
                    // it never stands in for the socket waiter.)
                    let event = self.session.wakers_mut(id).and_then(|w| w.recv.take());
                    let socket = self.read_wake.take_recv(Some(Waiter::Stream(id)));
                    self.wake_either(event, socket);
                }
                Event::Writable(id) => {
                    if let Some(w) = self.session.wakers_mut(id).and_then(|w| w.send.take()) {
                        self.wake_list.push(w);
                    }
                }
                // The acceptor reads now and looks at its queue next.
                Event::Incoming if self.reading_for == Some(Waiter::Acceptor) => {}
                Event::Incoming => self.wake_acceptor(),
                // Opens waiting for a slot fail now, retry-safe.
                Event::GoingAway => {
                    self.wake_acceptor();
                    self.wake_open_waiters();
                }
                Event::OpenCredit => self.wake_open_waiters(),
                Event::Closed => self.wake_everyone(),
            }
        }
    }

    /// Wakes `accept`, which waits as the socket waiter, with its event
    /// waker, or both (like a stream's `recv`, see `Readable`).
    fn wake_acceptor(&mut self) {
        let event = self.accept_waker.take();
        let socket = self.read_wake.take_recv(Some(Waiter::Acceptor));
        self.wake_either(event, socket);
    }

    /// Wakes both wakers, or one if they wake the same task.
    fn wake_either(&mut self, event: Option<Waker>, socket: Option<Waker>) {
        match (event, socket) {
            (Some(e), Some(s)) if e.will_wake(&s) => self.wake_list.push(s),
            (e, s) => e.into_iter().chain(s).for_each(|w| self.wake_list.push(w)),
        }
    }

    fn wake_open_waiters(&mut self) {
        for w in self.open_waiters.drain(..) {
            self.wake_list.push(w);
        }
        self.wake_opens(self.session.is_going_away() || self.session.is_closed());
    }

    /// Wakes the waiting opens whose turn it is (as many as slots are
    /// free), or every one (`all`: they fail now).
    pub(super) fn wake_opens(&mut self, all: bool) {
        let n = if all {
            usize::MAX
        } else {
            self.session.open_credit()
        };
        for w in self.opens.first(n) {
            self.wake_list.push(w.clone());
        }
    }

    fn wake_everyone(&mut self) {
        if let Some(w) = self.accept_waker.take() {
            self.wake_list.push(w);
        }
        self.wake_open_waiters();
        if let Some(w) = self.read_wake.take_recv(None) {
            self.wake_list.push(w);
        }
        // Each stream's own waiters need nothing here: the session raised
        // `Readable` and `Writable` for every stream before `Closed`.
    }

    /// Wakes the connection task (it reads the socket on every poll) once
    /// the state is released, so it does not start only to find it held.
    pub(super) fn wake_driver(&mut self) {
        self.driver_owed = true;
    }

    /// The wake-ups owed, to wake after the state is released.
    #[inline]
    pub(super) fn take_woken(&mut self) -> Woken {
        if std::mem::take(&mut self.driver_owed) {
            self.wake_list.push(self.driver_waker.clone());
        }
        self.wake_list.take()
    }
}
