//! Model check of the connection task's wake-up with loom: asked for any
//! number of times, it is sent once until the task next holds the state
//! (`Link`'s `Owed::Sent`), and no request is lost to that.
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p weft-mux --lib -- loom`
//!
//! The state is the real `Combiner` and the real `Link`; the release
//! collects the owed wake-up as `Inner`'s `has_woken`/`take_woken` do, and
//! the connection task is a thread that parks between polls (an unpark
//! before its park is kept, as a task's wake-up before it returns
//! `Pending` makes the runtime poll it again).

use std::task::{Wake, Waker};

use loom::sync::Arc;
use loom::thread;

use super::combine::{Combiner, Owned};
use super::task::Link;
use super::wake::{WakeList, Woken};

/// Work for the connection task, its link, and the wake-ups to send.
struct Conn {
    link: Link,
    list: WakeList,
    driver: Waker,
    /// Requests made by application calls, each asking for the task.
    asked: usize,
    spare: Vec<()>,
}

impl Owned for Conn {
    type Op = ();
    fn apply(&mut self, ops: &mut Vec<()>) {
        ops.clear();
    }
    fn apply_now(&mut self, _: ()) {}
    fn wake_op(_: &Waker) {}
    fn spare(&mut self) -> &mut Vec<()> {
        &mut self.spare
    }
    fn take_woken(&mut self) -> Woken {
        if self.link.take_owed() {
            self.list.push(self.driver.clone());
        }
        self.list.take()
    }
    fn has_woken(&self) -> bool {
        self.link.is_owed() || !self.list.is_empty()
    }
}

/// Unparks the connection task's thread.
struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// Two application calls each ask for the connection task once; the task
/// polls whenever it is woken and must see both requests. With the reset
/// at the task's acquisition (`Link::polled`) removed, the second request
/// finds `Sent` left from the first and sends nothing: the task parks for
/// ever and loom reports the deadlock.
#[test]
fn loom_a_wake_up_asked_for_after_the_task_polled_is_sent() {
    loom::model(|| {
        let task = thread::current();
        let c = Arc::new(Combiner::new(Conn {
            link: Link::new(),
            list: WakeList::default(),
            driver: Waker::from(std::sync::Arc::new(Unpark(task))),
            asked: 0,
            spare: Vec::new(),
        }));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let c = c.clone();
                thread::spawn(move || {
                    let mut g = c.lock();
                    g.asked += 1;
                    g.link.wake_driver();
                })
            })
            .collect();
        // The connection task: poll (take the state, see what was asked),
        // park until woken, until both requests were seen.
        loop {
            let seen = {
                let mut g = c.lock();
                g.link.polled();
                g.asked
            };
            if seen == 2 {
                break;
            }
            thread::park();
        }
        for t in callers {
            t.join().unwrap();
        }
    });
}
