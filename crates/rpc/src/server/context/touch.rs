//! A call's entry that its handles use under a lock and its end takes,
//! with no lock at all when no handle got to it first.
//!
//! Most calls set no header or trailer and ask for no cancellation
//! signal, yet their end locked the entry (a mutex round trip and its
//! poison check) and moved the empty entry out, and the cell's reuse
//! dropped it. [`TouchCell`] keeps a small atomic state beside the mutex
//! ([`Touch`]) that says whether a handle has used the entry:
//!
//! ```text
//!          handle, holding the lock: claim FRESH -> TOUCHED, then use the entry
//!   FRESH ──────────────────────────────────────────────────────► TOUCHED
//!     │                                                               │
//!     │ end, no lock: claim FRESH -> OVER;                            │ end: lock, store OVER,
//!     │ the entry is empty, a new empty one is returned               │ take the entry
//!     ▼                                                               ▼
//!   OVER ◄────────────────────────────────────────────────────────────┘
//!     └─► FRESH: renewed for the cell's next call, once nobody else holds it
//! ```
//!
//! Why the race between a handle and the end is safe:
//! - Both claims are compare-exchanges of one atomic, so they are
//!   ordered whatever the memory ordering: of a handle's first claim and
//!   the end's, exactly one succeeds.
//! - A handle claims *before* it uses the entry, and uses it only if its
//!   claim did not find `OVER`: an end that won its claim leaves behind
//!   nothing a handle wrote.
//! - A handle claims while it holds the lock, and keeps it until its use
//!   is done; an end that finds `TOUCHED` takes the lock, so it comes
//!   after that use, and the mutex publishes what the handle wrote.
//! - A handle after the end finds `OVER` by its claim (the end took an
//!   untouched entry) or the entry over under the lock (the end took a
//!   touched one, and stored both under the lock).
//!
//! The entry itself only moves under the lock, so the atomic publishes
//! nothing: its Acquire/Release orderings are not what the protocol rests
//! on (the models pass with `Relaxed` too). They are kept anyway: on x86
//! they cost nothing over `Relaxed` (a compare-exchange is one locked
//! instruction either way), and a later change that reads the entry on
//! the strength of the state alone would need them.
//!
//! `loom_touch` checks every interleaving of this code with loom:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p weft-rpc --lib -- loom`.

use std::sync::atomic::Ordering;

#[cfg(loom)]
use loom::sync::atomic::AtomicU8;
#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::atomic::AtomicU8;
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};

/// A call's entry (`T`, empty by default) while the call is live, and
/// who of a handle and the call's end got to it first.
#[derive(Debug, Default)]
pub(crate) struct TouchCell<T> {
    touch: AtomicU8,
    state: Mutex<Stage<T>>,
}

/// The values of [`TouchCell`]'s `touch`: whether a handle has used the
/// entry. Constants of a `u8` rather than an enum, as the atomic holds
/// them.
struct Touch;

impl Touch {
    /// No handle has used the entry: it is live and empty.
    const FRESH: u8 = 0;
    /// A handle has: the entry is under the lock.
    const TOUCHED: u8 = 1;
    /// The call ended.
    const OVER: u8 = 2;
}

/// What the end of a call found of its entry ([`TouchCell::end`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended<T> {
    /// No handle used it: it was empty, and is over now.
    Untouched,
    /// A handle used it: what it held, taken.
    Used(T),
    /// The call had ended already.
    Over,
}

/// Whether a call is still on, under the lock.
#[derive(Debug)]
enum Stage<T> {
    Live(T),
    Over,
}

impl<T: Default> Default for Stage<T> {
    fn default() -> Stage<T> {
        Stage::Live(T::default())
    }
}

impl<T: Default> TouchCell<T> {
    fn lock(&self) -> MutexGuard<'_, Stage<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Uses the entry while the call is live; `None` once it is over.
    pub(crate) fn with_live<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let mut state = self.lock();
        // Claimed before use and under the lock: see the module's docs.
        let claimed = self.touch.compare_exchange(
            Touch::FRESH,
            Touch::TOUCHED,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if claimed == Err(Touch::OVER) {
            return None;
        }
        match &mut *state {
            Stage::Live(live) => Some(f(live)),
            Stage::Over => None,
        }
    }

    /// Ends the call: the entry, taken, if a handle used it. An entry no
    /// handle touched is empty: nothing is taken (no empty entry to build
    /// and move out, and no lock).
    pub(crate) fn end(&self) -> Ended<T> {
        let ended = self.touch.compare_exchange(
            Touch::FRESH,
            Touch::OVER,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        match ended {
            Ok(_) => Ended::Untouched,
            Err(Touch::OVER) => Ended::Over,
            Err(_) => {
                let mut state = self.lock();
                self.touch.store(Touch::OVER, Ordering::Release);
                match std::mem::replace(&mut *state, Stage::Over) {
                    Stage::Live(live) => Ended::Used(live),
                    Stage::Over => Ended::Over,
                }
            }
        }
    }

    /// Makes the entry live and empty for the cell's next call. Takes
    /// `&mut`: the caller proves nobody else holds the cell (with
    /// `Arc::get_mut`, whose Acquire pairs with every other holder's drop).
    pub(crate) fn renew(&mut self) {
        let touch = reset(&mut self.touch);
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        // An entry no handle used is still live and empty, ended or not:
        // only one a handle used is renewed (and its contents dropped).
        if touch == Touch::TOUCHED || matches!(state, Stage::Over) {
            *state = Stage::default();
        }
    }

    /// Whether the call is over.
    #[cfg(test)]
    pub(crate) fn is_over(&self) -> bool {
        self.touch.load(Ordering::Acquire) == Touch::OVER
    }
}

/// `touch` set back to `FRESH`, returning what it was (no atomic
/// operation: the cell is the caller's alone). loom's atomics have no
/// `get_mut`, only `with_mut`.
#[cfg(not(loom))]
fn reset(touch: &mut AtomicU8) -> u8 {
    std::mem::replace(touch.get_mut(), Touch::FRESH)
}

#[cfg(loom)]
fn reset(touch: &mut AtomicU8) -> u8 {
    touch.with_mut(|t| std::mem::replace(t, Touch::FRESH))
}
