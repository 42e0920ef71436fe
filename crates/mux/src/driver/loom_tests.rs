//! Model checks of the driver's hand-off protocols with loom: every
//! interleaving of the real `Combiner` and `ReadWake` code.
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p weft-mux --lib -- loom`
//!
//! Each test names the bug it guards against; the two `ReadWake` ones are
//! the lost read wake-ups the soak test found, written as models.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

use loom::sync::Arc;
use loom::thread;

use super::combine::{Combiner, Owned};
use super::wake::{ReadWake, Waiter, Woken};

/// A state that records which operations were applied, and how.
#[derive(Default)]
struct Log {
    applied: Vec<u32>,
    spare: Vec<u32>,
}

impl Owned for Log {
    type Op = u32;
    fn apply(&mut self, ops: &mut Vec<u32>) {
        self.applied.append(ops);
    }
    fn apply_now(&mut self, op: u32) {
        self.applied.push(op);
    }
    fn wake_op(_: &Waker) -> u32 {
        1000
    }
    fn spare(&mut self) -> &mut Vec<u32> {
        &mut self.spare
    }
    fn take_woken(&mut self) -> Woken {
        Woken::default()
    }
    fn has_woken(&self) -> bool {
        false
    }
}

fn finish(c: Arc<Combiner<Log>>) -> Vec<u32> {
    let c = Arc::try_unwrap(c).unwrap_or_else(|_| panic!("threads still hold it"));
    assert_eq!(
        c.stranded(),
        0,
        "an operation was left with nobody to apply it"
    );
    let mut applied = c.into_state().applied;
    applied.sort_unstable();
    applied
}

#[test]
fn loom_a_submission_while_the_owner_lets_go_is_applied() {
    loom::model(|| {
        let c = Arc::new(Combiner::new(Log::default()));
        let owner = {
            let c = c.clone();
            thread::spawn(move || drop(c.lock()))
        };
        c.submit(7);
        owner.join().unwrap();
        assert_eq!(finish(c), [7]);
    });
}

#[test]
fn loom_two_submitters_and_an_owner_lose_nothing() {
    loom::model(|| {
        let c = Arc::new(Combiner::new(Log::default()));
        let submitter = {
            let c = c.clone();
            thread::spawn(move || c.submit(1))
        };
        let owner = {
            let c = c.clone();
            thread::spawn(move || {
                let mut g = c.lock();
                g.applied.push(100);
            })
        };
        c.submit(2);
        submitter.join().unwrap();
        owner.join().unwrap();
        assert_eq!(finish(c), [1, 2, 100]);
    });
}

/// A poll that finds the state held leaves a wake request: the holder
/// must apply it (the driver's `Wake` op pushes the waker for after
/// release), or the task would never be polled again.
#[test]
fn loom_a_poll_that_finds_the_state_held_is_polled_again() {
    loom::model(|| {
        let c = Arc::new(Combiner::new(Log::default()));
        let owner = {
            let c = c.clone();
            thread::spawn(move || c.lock().applied.push(100))
        };
        let got = c.lock_or_wake(Waker::noop()).is_some();
        owner.join().unwrap();
        let applied = finish(c);
        assert!(
            got || applied.contains(&1000),
            "refused the state and never asked to be woken: {applied:?}"
        );
    });
}

/// The same with the state surely held when the poll comes (loom does
/// not by itself explore a failing `try_lock`): the owner holds it until
/// told the poll happened, then lets go.
#[test]
fn loom_a_poll_refused_while_held_is_woken_by_the_release() {
    loom::model(|| {
        let c = Arc::new(Combiner::new(Log::default()));
        let got = while_held(&c, || c.lock_or_wake(Waker::noop()).is_some());
        assert!(!got, "the state was held");
        assert_eq!(finish(c), [100, 1000], "the wake request was not applied");
    });
}

/// A submission while the state is surely held is applied by the owner
/// when it lets go.
#[test]
fn loom_a_submission_while_held_is_applied_by_the_owner() {
    loom::model(|| {
        let c = Arc::new(Combiner::new(Log::default()));
        while_held(&c, || c.submit(7));
        assert_eq!(finish(c), [7, 100]);
    });
}

/// Steps two threads agree on (loom has no barrier).
type Steps = (loom::sync::Mutex<u8>, loom::sync::Condvar);

fn wait_for(steps: &Steps, n: u8) {
    let mut s = steps.0.lock().unwrap();
    while *s < n {
        s = steps.1.wait(s).unwrap();
    }
}

fn tell(steps: &Steps, n: u8) {
    *steps.0.lock().unwrap() = n;
    steps.1.notify_all();
}

/// Runs `f` while another thread holds the state (it records 100), then
/// lets that owner go and waits for it.
fn while_held<R>(c: &Arc<Combiner<Log>>, f: impl FnOnce() -> R) -> R {
    let steps = Arc::new((loom::sync::Mutex::new(0u8), loom::sync::Condvar::new()));
    let owner = {
        let (c, steps) = (c.clone(), steps.clone());
        thread::spawn(move || {
            let mut g = c.lock();
            g.applied.push(100);
            tell(&steps, 1);
            wait_for(&steps, 2);
        })
    };
    wait_for(&steps, 1);
    let out = f();
    tell(&steps, 2);
    owner.join().unwrap();
    out
}

/// Counts wake-ups (std atomics: read only after the threads are joined).
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn counter() -> (std::sync::Arc<Count>, Waker) {
    let c = std::sync::Arc::new(Count::default());
    (c.clone(), Waker::from(c))
}

fn woken(c: &Count) -> usize {
    c.0.load(Ordering::Relaxed)
}

/// Lost wake-up 2 (found by the soak test): a `recv` that checked for unread bytes before it
/// registered lost the wake-up to the previous waiter (a task that never
/// reads). Registered first, checked second, the new waiter either reads
/// or is woken.
#[test]
fn loom_a_new_waiter_never_misses_the_socket_wake() {
    loom::model(|| {
        let rw = Arc::new(ReadWake::default());
        let (driver, driver_waker) = counter();
        let (_stale, stale_waker) = counter();
        let (me, my_waker) = counter();
        rw.set_driver(&driver_waker);
        // The last read ended armed; a stale task is the registered waiter.
        let armed = true;
        let _ = rw.register(Waiter::Stream(3), &stale_waker, armed);
        let socket = {
            let rw = rw.clone();
            thread::spawn(move || rw.fire())
        };
        let (_, reads) = rw.register(Waiter::Stream(1), &my_waker, armed);
        socket.join().unwrap();
        assert!(
            reads || woken(&me) > 0 || woken(&driver) > 0,
            "the socket fired and nobody who reads was told"
        );
    });
}

/// Lost wake-up 1 (found by the soak test): a `recv` woken by the socket that found its data
/// already queued returned without reading; with its task gone, nobody
/// read the socket again. Leaving, it hands reading on.
#[test]
fn loom_a_waiter_leaving_hands_unread_bytes_on() {
    loom::model(|| {
        let rw = Arc::new(ReadWake::default());
        let (driver, driver_waker) = counter();
        let (_me, my_waker) = counter();
        rw.set_driver(&driver_waker);
        let armed = true;
        let _ = rw.register(Waiter::Stream(1), &my_waker, armed);
        let socket = {
            let rw = rw.clone();
            thread::spawn(move || rw.fire())
        };
        // Our data came through another task's read: we return now.
        let hand_on = rw.leave(Waiter::Stream(1), armed);
        socket.join().unwrap();
        assert!(
            hand_on || woken(&driver) > 0,
            "the socket fired after our last read and nobody will read it"
        );
    });
}

/// A cancelled `recv` (its future dropped while it was the waiter) racing
/// the reply's arrival: the connection task takes the watch back.
#[test]
fn loom_a_cancelled_wait_racing_a_reply_hands_the_socket_back() {
    loom::model(|| {
        let rw = Arc::new(ReadWake::default());
        let (driver, driver_waker) = counter();
        let (me, my_waker) = counter();
        rw.set_driver(&driver_waker);
        let _ = rw.register(Waiter::Stream(1), &my_waker, true);
        let socket = {
            let rw = rw.clone();
            thread::spawn(move || rw.fire())
        };
        rw.clear_recv(Waiter::Stream(1), true);
        socket.join().unwrap();
        assert!(woken(&driver) > 0, "nobody watches the socket");
        assert!(woken(&me) <= 1);
    });
}
