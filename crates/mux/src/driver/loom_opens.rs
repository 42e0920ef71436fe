//! Model check of the open queue's hand-off with loom: the real
//! [`OpenQueue`], used as `Inner::must_wait_to_open`, a stream's release
//! (`Event::OpenCredit`) and a dropped `Opening` (`Deferred::CancelOpen`)
//! use it, under a lock, with the wakers woken after the lock is let go.
//! A lost wake-up leaves a waiting open asleep for ever: loom reports the
//! deadlock.
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p weft-mux --lib -- loom`

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use loom::sync::{Arc, Mutex};
use loom::thread;

use super::opens::OpenQueue;

/// The peer's cap as the session counts it, and the waiting opens.
struct Cap {
    free: usize,
    queue: OpenQueue,
}

type Shared = Arc<Mutex<Cap>>;

fn wake(ws: Vec<Waker>) {
    ws.into_iter().for_each(Waker::wake);
}

/// One poll of an open (as `Inner::must_wait_to_open` polls it): admitted
/// when a slot is free and no open waits ahead (then it takes the slot,
/// and hands any slot left over to the next waiters), else queued with
/// its waker.
fn poll_open(cap: &Shared, ticket: &mut Option<u64>, cx: &mut Context<'_>) -> Poll<()> {
    let mut c = cap.lock().unwrap();
    let queued = ticket.is_some();
    let free = c.free;
    // The driver's inline shortcut first: a new open with a slot free past
    // the waiting ones goes without `admit`.
    let admitted =
        (ticket.is_none() && c.queue.admits_new(free)) || c.queue.admit(ticket, free, cx.waker());
    if !admitted {
        return Poll::Pending;
    }
    c.free -= 1;
    let next: Vec<Waker> = if queued {
        c.queue.first(free - 1).cloned().collect()
    } else {
        Vec::new()
    };
    drop(c);
    wake(next);
    Poll::Ready(())
}

/// Opens, waiting for its turn.
fn open(cap: &Shared) -> impl Future<Output = ()> + '_ {
    let mut ticket = None;
    std::future::poll_fn(move |cx| poll_open(cap, &mut ticket, cx))
}

/// A stream of ours finished: its slot is free, the first waiters' turn.
fn release(cap: &Shared) {
    let mut c = cap.lock().unwrap();
    c.free += 1;
    let next: Vec<Waker> = c.queue.first(c.free).cloned().collect();
    drop(c);
    wake(next);
}

/// A waiting open was dropped: it leaves the queue, and the slot it may
/// have been owed goes to the next waiters.
fn cancel(cap: &Shared, ticket: u64) {
    let mut c = cap.lock().unwrap();
    c.queue.cancel(ticket);
    let next: Vec<Waker> = c.queue.first(c.free).cloned().collect();
    drop(c);
    wake(next);
}

fn full_cap() -> Shared {
    Arc::new(Mutex::new(Cap {
        free: 0,
        queue: OpenQueue::default(),
    }))
}

/// Two opens wait on a full cap of one; the holder lets go. Each gets
/// the slot in turn (each lets it go after its call), none sleeps for ever.
#[test]
fn loom_waiting_opens_all_get_the_freed_slot_in_turn() {
    loom::model(|| {
        let cap = full_cap();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let cap = cap.clone();
                thread::spawn(move || {
                    loom::future::block_on(open(&cap));
                    release(&cap);
                })
            })
            .collect();
        release(&cap);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(cap.lock().unwrap().free, 1);
    });
}

/// An open queued first is dropped while the slot comes free: the open
/// behind it is woken all the same.
#[test]
fn loom_a_dropped_waiting_open_passes_its_turn_on() {
    loom::model(|| {
        let cap = full_cap();
        // Queued first, on a full cap.
        let mut ticket = None;
        {
            let mut first = pin!(std::future::poll_fn(|cx| {
                poll_open(&cap, &mut ticket, cx)
            }));
            let mut cx = Context::from_waker(Waker::noop());
            assert!(first.as_mut().poll(&mut cx).is_pending());
        }
        let first = ticket.expect("queued");
        let second = {
            let cap = cap.clone();
            thread::spawn(move || loom::future::block_on(open(&cap)))
        };
        let dropper = {
            let cap = cap.clone();
            thread::spawn(move || cancel(&cap, first))
        };
        release(&cap);
        dropper.join().unwrap();
        second.join().unwrap();
        assert_eq!(
            cap.lock().unwrap().free,
            0,
            "the second open holds the slot"
        );
    });
}
