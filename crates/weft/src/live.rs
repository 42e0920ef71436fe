//! The server's registry of established connections, so a shutdown can
//! reach each one.

use std::collections::HashMap;

use weft_mux::Connection;

/// Established connections by id. Its table shrinks as connections close,
/// so a server that once held many does not keep their table for ever.
/// (Generic for its tests; the server holds [`Connection`]s.)
#[derive(Debug)]
pub(crate) struct Live<C = Connection> {
    conns: HashMap<u64, C>,
}

impl<C> Default for Live<C> {
    fn default() -> Self {
        Live {
            conns: HashMap::new(),
        }
    }
}

/// Smallest table [`Live::remove`] shrinks; below it, shrinking saves less
/// than it costs.
const SHRINK_FLOOR: usize = 64;

impl<C: Clone> Live<C> {
    pub(crate) fn insert(&mut self, id: u64, conn: C) {
        self.conns.insert(id, conn);
    }

    /// Removes `id`; once a quarter or less of the table is in use, halves
    /// the room kept (amortised O(1): a table shrinks only after as many
    /// removals as it has room for three quarters of).
    pub(crate) fn remove(&mut self, id: u64) {
        self.conns.remove(&id);
        let cap = self.conns.capacity();
        if cap > SHRINK_FLOOR && self.conns.len() <= cap / 4 {
            self.conns.shrink_to(self.conns.len() * 2);
        }
    }

    /// Every connection, for a shutdown.
    pub(crate) fn all(&self) -> Vec<C> {
        self.conns.values().cloned().collect()
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.conns.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shrinks_as_connections_close() {
        let mut live = Live::<u32>::default();
        for id in 0..10_000 {
            live.insert(id, 7);
        }
        let peak = live.capacity();
        assert!(peak >= 10_000, "{peak}");
        for id in 0..10_000 {
            live.remove(id);
        }
        assert!(live.all().is_empty());
        assert!(
            live.capacity() <= SHRINK_FLOOR,
            "{} of {peak}",
            live.capacity()
        );
        // Most closed: the rest still reachable, the room about twice them.
        for id in 0..1_000 {
            live.insert(id, 7);
        }
        for id in 0..800 {
            live.remove(id);
        }
        assert_eq!(live.all().len(), 200);
        assert!(live.capacity() < 1_000, "{}", live.capacity());
    }
}
