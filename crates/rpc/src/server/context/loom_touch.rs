//! Model checks of a call entry's end with loom: every interleaving of
//! the real [`TouchCell`] code, a handle on one thread and the call's end
//! on another.
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p weft-rpc --lib -- loom`
//!
//! The entry is a list of numbers here: what a handle pushed (a header or
//! a trailer) must be in the end exactly when the handle was told it went
//! in. Each model names the bug it guards against.

use loom::sync::Arc;
use loom::thread;

use super::touch::{Ended, TouchCell};

type Cell = TouchCell<Vec<u32>>;

/// The entry an end takes: empty when no handle used it, `None` when the
/// call had ended already.
fn take(cell: &Cell) -> Option<Vec<u32>> {
    match cell.end() {
        Ended::Untouched => Some(Vec::new()),
        Ended::Used(entry) => Some(entry),
        Ended::Over => None,
    }
}

/// A handle's two uses of the entry (the first claims it, the second
/// finds it claimed), racing whoever else runs: which of them went in.
fn use_twice(cell: &Cell, first: u32, second: u32) -> Vec<u32> {
    let mut accepted = Vec::new();
    for n in [first, second] {
        if cell.with_live(|v| v.push(n)).is_some() {
            accepted.push(n);
        }
    }
    accepted
}

/// Guards against an end that ignores a touched entry (it would end the
/// call empty while the handle was told its header went in) and a handle
/// that uses the entry although its claim found the call over (told its
/// header went in, into an entry the end already left behind).
#[test]
fn loom_a_handle_racing_the_end_is_in_it_or_refused() {
    loom::model(|| {
        let cell = Arc::new(Cell::default());
        let handle = {
            let cell = cell.clone();
            thread::spawn(move || use_twice(&cell, 1, 2))
        };
        let end = take(&cell).expect("the first end takes the entry");
        let accepted = handle.join().unwrap();
        assert_eq!(end, accepted, "what the handle was told went in");
        assert!(
            accepted.is_empty() || accepted[0] == 1,
            "a later use went in where an earlier one was refused"
        );
        // After the end: a handle finds the call over, an end finds it ended.
        assert!(cell.is_over());
        assert!(
            cell.with_live(|v| v.push(9)).is_none(),
            "used after the end"
        );
        assert!(take(&cell).is_none(), "ended twice");
    });
}

/// Guards against a call ended twice (the server's end and its guard's):
/// of two ends racing a handle, exactly one takes the entry.
#[test]
fn loom_two_ends_take_the_entry_once() {
    loom::model(|| {
        let cell = Arc::new(Cell::default());
        let handle = {
            let cell = cell.clone();
            thread::spawn(move || cell.with_live(|v| v.push(1)).is_some())
        };
        let other = {
            let cell = cell.clone();
            thread::spawn(move || take(&cell))
        };
        let mine = take(&cell);
        let accepted = handle.join().unwrap();
        let theirs = other.join().unwrap();
        let taken: Vec<Vec<u32>> = mine.into_iter().chain(theirs).collect();
        assert_eq!(taken.len(), 1, "taken by both ends, or by none");
        assert_eq!(taken[0] == [1], accepted, "{taken:?}");
    });
}

/// Guards against the reuse of a cell (the connection's next call, once
/// nobody holds it) going wrong: a reused cell must be live again (its
/// touch state back to fresh, an entry taken from it renewed) and empty,
/// whichever way the last call's race went. A handle that claims after
/// its use, instead of before, fails here: refused, its write stays in
/// the entry the end left behind, and reaches the next call's end.
#[test]
fn loom_a_reused_cell_is_live_and_empty() {
    loom::model(|| {
        let mut cell = Arc::new(Cell::default());
        let handle = {
            let cell = cell.clone();
            thread::spawn(move || cell.with_live(|v| v.push(1)).is_some())
        };
        let first = take(&cell).expect("the first end takes the entry");
        // As `Calls::begin`: reused only once the handle let go of it,
        // which `Arc::get_mut` proves (here, possibly before the join).
        let renewed = Arc::get_mut(&mut cell).map(Cell::renew).is_some();
        let accepted = handle.join().unwrap();
        assert_eq!(first == [1], accepted, "{first:?}");
        if !renewed {
            Arc::get_mut(&mut cell)
                .expect("free after the join")
                .renew();
        }
        assert!(!cell.is_over(), "the next call starts over");
        // The next call: its server task uses the entry, a handle races
        // its end.
        assert_eq!(
            cell.with_live(|v| v.push(2)),
            Some(()),
            "refused on a live call"
        );
        let handle = {
            let cell = cell.clone();
            thread::spawn(move || cell.with_live(|v| v.push(3)).is_some())
        };
        let end = take(&cell).expect("the next call's end takes its entry");
        let accepted = handle.join().unwrap();
        let expected: &[u32] = if accepted { &[2, 3] } else { &[2] };
        assert_eq!(end, expected, "the next call's end: its own entries only");
    });
}
