//! `Connection::open` calls waiting for a slot under the peer's stream
//! cap, first come, first served: a caller that finishes a call and opens
//! the next at once queues behind the callers already waiting instead of
//! taking the slot its own stream just freed (which starved them until
//! their deadlines passed). h2 keeps such streams in a FIFO too
//! (`pending_open`).

use std::collections::VecDeque;
use std::task::Waker;

/// The waiting opens, oldest first, each with its ticket.
#[derive(Debug, Default)]
pub(crate) struct OpenQueue {
    waiting: VecDeque<(u64, Waker)>,
    next: u64,
}

impl OpenQueue {
    /// Whether the open holding `ticket` (`None`: not queued) may go now,
    /// with `credit` slots free: only if fewer opens wait ahead of it than
    /// there are slots. It leaves the queue then (`ticket` cleared);
    /// otherwise it is queued, or its waker refreshed.
    pub(crate) fn admit(&mut self, ticket: &mut Option<u64>, credit: usize, waker: &Waker) -> bool {
        let at = ticket.and_then(|t| self.waiting.iter().position(|(x, _)| *x == t));
        let ahead = at.unwrap_or(self.waiting.len());
        if credit > ahead {
            if let Some(i) = at {
                self.waiting.remove(i);
            }
            *ticket = None;
            return true;
        }
        match at {
            Some(i) if self.waiting[i].1.will_wake(waker) => {}
            Some(i) => self.waiting[i].1 = waker.clone(),
            None => {
                let t = self.next;
                self.next += 1;
                self.waiting.push_back((t, waker.clone()));
                *ticket = Some(t);
            }
        }
        false
    }

    /// Whether an open not queued yet may go now with `credit` slots free
    /// (what [`admit`](Self::admit) says for a `None` ticket, without its
    /// side effects: it has none then): more slots than opens waiting.
    #[inline(always)]
    pub(crate) fn admits_new(&self, credit: usize) -> bool {
        credit > self.waiting.len()
    }

    /// Forgets `ticket` (its open was dropped, or cannot wait any more).
    pub(crate) fn cancel(&mut self, ticket: u64) {
        self.waiting.retain(|(t, _)| *t != ticket);
    }

    /// The wakers of the first `n` waiting opens.
    pub(crate) fn first(&self, n: usize) -> impl Iterator<Item = &Waker> {
        self.waiting.iter().take(n).map(|(_, w)| w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_come_first_served() {
        let mut q = OpenQueue::default();
        let w = Waker::noop();
        let (mut a, mut b, mut late) = (None, None, None);
        assert!(!q.admit(&mut a, 0, w), "no slot: a waits");
        assert!(!q.admit(&mut b, 0, w), "b waits behind a");
        assert!(!q.admit(&mut late, 1, w), "one slot, two ahead");
        assert_eq!(q.first(1).count(), 1);
        assert!(!q.admit(&mut b, 1, w), "a is ahead of b");
        assert!(q.admit(&mut a, 1, w), "a's turn");
        assert_eq!(a, None);
        assert!(q.admit(&mut b, 2, w), "b is first now");
        q.cancel(late.unwrap());
        assert!(q.admit(&mut None, 1, w), "nobody waits");
    }

    #[test]
    fn a_new_open_is_admitted_exactly_when_admit_would() {
        let w = Waker::noop();
        let mut q = OpenQueue::default();
        for waiting in 0..3 {
            for credit in 0..5 {
                let mut ticket = None;
                let quick = q.admits_new(credit);
                let mut probe = OpenQueue {
                    waiting: q.waiting.clone(),
                    next: q.next,
                };
                assert_eq!(
                    quick,
                    probe.admit(&mut ticket, credit, w),
                    "{waiting} waiting, {credit} free"
                );
                assert_eq!(ticket.is_none(), quick, "admitted opens hold no ticket");
            }
            assert!(!q.admit(&mut None, 0, w), "one more waits");
        }
    }
}
