//! The connection's state with a combining hand-off: one owner at a time,
//! and callers that only need something *done* never wait for it.
//!
//! [`Combiner::lock`] takes the state like a mutex. [`Combiner::submit`]
//! runs an operation now if the state is free and otherwise pushes it
//! onto a mailbox, without waiting; whoever holds the state applies the
//! mailbox when it takes the state and again when it lets go. Wake-ups the
//! owner collects are woken after the state is released ([`Woken`]).
//!
//! The hand-off that makes "somebody always applies it" true is a
//! store-buffering pair, so both sides use a `SeqCst` fence:
//!
//! ```text
//!  submitter                        owner letting go
//!  push op; pending = true          apply mailbox; unlock
//!  fence(SeqCst)                    fence(SeqCst)
//!  try_lock ─► ok: apply it         pending? ─► try_lock ─► apply
//!           └► busy: the holder         └► no: done
//!              sees `pending`
//! ```
//!
//! If the submitter's `try_lock` fails, the state was held and that
//! holder's look at `pending` comes after the fence, so it sees the push;
//! if the holder saw nothing, the submitter's `try_lock` comes after the
//! unlock and succeeds. `loom_tests` checks the hand-off; note that its
//! models still pass with the owner's fence removed (loom does not find
//! that reordering), so that side rests on the argument above, not on a
//! failing model.

use std::sync::atomic::Ordering;

use super::sync::{AtomicBool, Mutex, MutexGuard, fence, switch_point};
use super::wake::Woken;

/// State that can be owned through a [`Combiner`].
pub(crate) trait Owned {
    /// An operation submitted by a caller that does not wait for it.
    type Op;
    /// Applies submitted operations, oldest first.
    fn apply(&mut self, ops: &mut Vec<Self::Op>);
    /// Applies one operation submitted while the state was free.
    fn apply_now(&mut self, op: Self::Op);
    /// The operation "wake this task once the state is free".
    fn wake_op(waker: &std::task::Waker) -> Self::Op;
    /// The spare buffer the mailbox swaps with (keeps both capacities:
    /// no allocation per submitted operation once warm).
    fn spare(&mut self) -> &mut Vec<Self::Op>;
    /// The wake-ups collected while held, to wake after release.
    fn take_woken(&mut self) -> Woken;
    /// Whether [`take_woken`](Self::take_woken) would return any (a few
    /// field tests: the release of a state with nothing to wake skips it).
    fn has_woken(&self) -> bool;
}

/// The state, its mailbox, and the flag that says the mailbox has work.
pub(crate) struct Combiner<T: Owned> {
    state: Mutex<T>,
    pending: AtomicBool,
    ops: Mutex<Vec<T::Op>>,
}

/// The state, held. Dropping it applies the mailbox, releases the state
/// and wakes what was collected.
pub(crate) struct Guard<'a, T: Owned> {
    combiner: &'a Combiner<T>,
    state: Option<MutexGuard<'a, T>>,
}

impl<T: Owned> Combiner<T> {
    pub(crate) fn new(state: T) -> Self {
        Combiner {
            state: Mutex::new(state),
            pending: AtomicBool::new(false),
            ops: Mutex::new(Vec::new()),
        }
    }

    /// Takes the state, waiting while another caller holds it; operations
    /// submitted before are applied first.
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        let state = self.state.lock();
        self.held(state)
    }

    /// Takes the state only if nobody holds it.
    pub(crate) fn try_lock(&self) -> Option<Guard<'_, T>> {
        self.state.try_lock().map(|state| self.held(state))
    }

    #[inline]
    fn held<'a>(&'a self, mut state: MutexGuard<'a, T>) -> Guard<'a, T> {
        self.apply(&mut state);
        Guard {
            combiner: self,
            state: Some(state),
        }
    }

    /// Runs `op` now if the state is free, or leaves it for whoever holds
    /// it. Never waits for another caller.
    pub(crate) fn submit(&self, op: T::Op) {
        if let Some(mut state) = self.try_lock() {
            state.apply_now(op);
            return;
        }
        self.push(op);
        // Free now: apply it ourselves (`held` does). Busy: the holder
        // sees `pending` after it lets go.
        drop(self.try_lock());
    }

    /// Takes the state if it is free; if not, leaves a request to wake
    /// `waker` once the holder lets go and returns `None`: a task never
    /// waits for another caller, it is polled again instead.
    pub(crate) fn lock_or_wake(&self, waker: &std::task::Waker) -> Option<Guard<'_, T>> {
        if let Some(state) = self.try_lock() {
            return Some(state);
        }
        self.push(T::wake_op(waker));
        // Free by now: take it (applying the request wakes us once more,
        // spuriously, which costs one poll).
        self.try_lock()
    }

    fn push(&self, op: T::Op) {
        self.ops.lock().push(op);
        self.pending.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
    }

    /// Applies the mailbox, if it has anything (one load when it has not:
    /// this runs at every acquisition and release).
    #[inline]
    fn apply(&self, state: &mut T) {
        if self.pending.load(Ordering::Acquire) {
            self.apply_pending(state);
        }
    }

    #[cold]
    #[inline(never)]
    fn apply_pending(&self, state: &mut T) {
        self.pending.store(false, Ordering::Relaxed);
        let mut batch = std::mem::take(state.spare());
        std::mem::swap(&mut *self.ops.lock(), &mut batch);
        state.apply(&mut batch);
        batch.clear();
        *state.spare() = batch;
    }

    /// Lets go: applies the mailbox, releases the state, wakes what was
    /// collected, and takes the state back if something was submitted
    /// after the last look.
    ///
    /// Inline, the common case first: nobody to wake, so the first round
    /// of [`release_all`](Self::release_all)'s loop is only the unlock
    /// and the look at `pending` after the fence. (An out-of-line release
    /// cost about 50 instructions, six times per call.) `pending` is not
    /// looked at before the unlock: a submission made while the state was
    /// held is seen after the fence like one made during the unlock, and
    /// applied by [`retake`](Self::retake); that rare case pays a second
    /// acquisition so that the common one saves a load and a branch at
    /// every release.
    #[inline]
    fn release<'a>(&'a self, state: MutexGuard<'a, T>) {
        if state.has_woken() {
            return self.release_all(state);
        }
        switch_point();
        drop(state);
        fence(Ordering::SeqCst);
        if self.pending.load(Ordering::Relaxed) {
            self.retake();
        }
    }

    /// Something was submitted after the last look: take the state back
    /// and apply it, unless another holder has it (then it will).
    #[cold]
    #[inline(never)]
    fn retake(&self) {
        if let Some(state) = self.state.try_lock() {
            self.release_all(state);
        }
    }

    /// [`release`](Self::release) with work to do: apply, unlock, wake,
    /// and again while submissions keep coming.
    #[inline(never)]
    fn release_all<'a>(&'a self, mut state: MutexGuard<'a, T>) {
        loop {
            self.apply(&mut state);
            let woken = state.take_woken();
            switch_point();
            drop(state);
            if !woken.is_empty() {
                woken.wake_all();
            }
            fence(Ordering::SeqCst);
            if !self.pending.load(Ordering::Relaxed) {
                return;
            }
            state = match self.state.try_lock() {
                Some(state) => state,
                // The new holder applies it when it lets go.
                None => return,
            };
        }
    }
}

impl<T: Owned> Guard<'_, T> {
    /// Lets go, as dropping the guard does, with the release inline at
    /// the caller: dropping it calls the guard's drop glue out of line
    /// (about 10 instructions of call, frame and test beside the release,
    /// twice per unary call). For the hot paths that let go explicitly.
    #[inline(always)]
    pub(crate) fn unlock(mut self) {
        let combiner = self.combiner;
        let state = self.state.take();
        // Nothing left to release: the guard's drop would only find the
        // state taken.
        std::mem::forget(self);
        if let Some(state) = state {
            combiner.release(state);
        }
    }
}

impl<T: Owned> std::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.state.as_deref().expect("held until drop")
    }
}

impl<T: Owned> std::ops::DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.state.as_deref_mut().expect("held until drop")
    }
}

impl<T: Owned> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            self.combiner.release(state);
        }
    }
}

impl<T: Owned> std::fmt::Debug for Combiner<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Combiner").finish_non_exhaustive()
    }
}

impl<T: Owned> std::fmt::Debug for Guard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guard")
    }
}

#[cfg(all(test, loom))]
impl<T: Owned> Combiner<T> {
    /// The state, without applying the mailbox: what the owners left.
    pub(super) fn into_state(self) -> T {
        self.state.into_inner()
    }

    /// Submitted operations nobody applied.
    pub(super) fn stranded(&self) -> usize {
        self.ops.lock().len()
    }
}
