//! The stream table's index: stream id to `V`, an open-addressing table
//! with linear probing, made for the one key it holds.
//!
//! Why not `HashMap` (even with a cheap hasher, as it was): every call
//! inserts a stream and removes it again on each side, and hashbrown's
//! general insert (look the key up, then look for a free slot, then
//! account for growth and tombstones) and remove cost 80 to 90
//! instructions each on the round-trip path, its lookups about 25. Here
//! a key is a `u32` hashed by one multiplication (Fibonacci
//! hashing: ids a side opens are sequential, and consecutive keys land
//! far apart, so probes rarely go past the home slot), the table is at
//! most a quarter full, and a removal shifts the entries behind it back
//! instead of leaving a tombstone (Knuth's algorithm R), so a lookup
//! stops at the first empty slot and no clean-up pass is ever due.
//!
//! Hostile ids: the peer picks the ids of the streams it opens, and the
//! hash has no secret, so it could choose ids that share a home slot.
//! Such a cluster is at most as long as the streams it may have open at
//! once (the stream cap, 128 by default), and every probe is a compare:
//! the worst lookup costs a few hundred instructions, bounded, never a
//! spin. (A per-connection random multiplier would remove even that, but
//! would make the instruction counts the gate relies on vary by run.)

/// Fibonacci hashing's multiplier: 2^64 / the golden ratio, odd.
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

/// Slots of the first table (a power of two).
const FIRST_SLOTS: usize = 16;

/// Where an entry sits in an [`IdMap`], from [`IdMap::get_at`]: valid
/// until the map is next changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct At(usize);

/// Map from a stream id to `V`.
pub(crate) struct IdMap<V> {
    /// A power of two many slots (none before the first insert), at most
    /// a quarter of them used: a probe always ends at an empty slot, and
    /// a removal's backward shift mostly finds the next slot empty (at
    /// half full, with 64 calls in flight, it looked at an occupied one
    /// about every other time: 10 to 13 instructions a call more, for
    /// 16 bytes a slot: 8 KiB at the default cap of 128 streams).
    /// (A boxed slice and `u32` counts: the connection's shared state
    /// must stay within its allocator size class, see `driver::tests`.)
    slots: Box<[Option<(u32, V)>]>,
    /// Entries (never more than the `u32` ids there are).
    len: u32,
    /// `64 - log2(slots.len())`: a hash's top bits are its home slot.
    shift: u32,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            slots: Box::default(),
            len: 0,
            shift: 64,
        }
    }
}

impl<V> IdMap<V> {
    /// Where a probe for `id` starts. With no slots yet (`shift` 64,
    /// which a wrapping shift takes as 0) it is past the end, so a lookup
    /// needs no test of its own for the empty table.
    #[inline]
    fn home(&self, id: u32) -> usize {
        u64::from(id).wrapping_mul(FIB).wrapping_shr(self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `id`. (`get` rather than indexing: the empty
    /// table's home is out of range, and a probe stays in range because
    /// it wraps with the mask.)
    #[inline]
    fn find(&self, id: u32) -> Option<usize> {
        let mut i = self.home(id);
        loop {
            match self.slots.get(i)? {
                Some((k, _)) if *k == id => return Some(i),
                Some(_) => i = (i + 1) & self.mask(),
                None => return None,
            }
        }
    }

    /// Puts `value` under `id`, returning the value it replaces. Always
    /// inline (the growth is apart): it runs once per stream and side.
    #[inline(always)]
    pub(crate) fn insert(&mut self, id: u32, value: V) -> Option<V> {
        if (self.len as usize + 1) * 4 > self.slots.len() {
            self.grow();
        }
        let mask = self.mask();
        let mut i = self.home(id);
        loop {
            match &mut self.slots[i] {
                Some((k, v)) if *k == id => return Some(std::mem::replace(v, value)),
                Some(_) => i = (i + 1) & mask,
                empty @ None => {
                    // Not an assignment: that ran the old value's drop
                    // glue, a call per insert (a `None`, so nothing to
                    // drop) once the values were an enum of boxes.
                    let was = empty.replace((id, value));
                    debug_assert!(was.is_none());
                    std::mem::forget(was);
                    self.len += 1;
                    return None;
                }
            }
        }
    }

    /// Takes `id`'s value out. The entries probed past it move back into
    /// the hole, so the table never holds a tombstone. Always inline: it
    /// runs once per stream and side, from one place (`StreamTable`).
    #[inline(always)]
    pub(crate) fn remove(&mut self, id: &u32) -> Option<V> {
        let at = self.find(*id)?;
        self.remove_at(At(at))
    }

    /// Where `id`'s value is, and the value: [`remove_at`](Self::remove_at)
    /// then takes it out without probing again, as long as nothing was
    /// inserted or removed in between (the caller holds the map borrowed
    /// or changes it only through that removal).
    #[inline]
    pub(crate) fn get_at(&mut self, id: u32) -> Option<(At, &mut V)> {
        let i = self.find(id)?;
        self.slots[i].as_mut().map(|(_, v)| (At(i), v))
    }

    /// Takes the value at `at` out (see [`get_at`](Self::get_at)).
    #[inline(always)]
    pub(crate) fn remove_at(&mut self, at: At) -> Option<V> {
        let mut hole = at.0;
        let (_, value) = self.slots.get_mut(hole)?.take()?;
        self.len -= 1;
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some((k, _)) = &self.slots[j] else {
                return Some(value);
            };
            // The entry at `j` probed from its home to `j`; it may fill
            // the hole if the hole lies on that path (cyclically).
            let home = self.home(*k);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
    }

    /// Twice the slots (or the first ones), every entry placed anew.
    #[cold]
    fn grow(&mut self) {
        let slots = (self.slots.len() * 2).max(FIRST_SLOTS);
        let fresh = std::iter::repeat_with(|| None).take(slots).collect();
        let old = std::mem::replace(&mut self.slots, fresh);
        self.shift = 64 - slots.trailing_zeros();
        let mask = slots - 1;
        for (k, v) in old.into_vec().into_iter().flatten() {
            let mut i = self.home(k);
            while self.slots[i].is_some() {
                i = (i + 1) & mask;
            }
            self.slots[i] = Some((k, v));
        }
    }

    #[inline]
    pub(crate) fn get(&self, id: &u32) -> Option<&V> {
        let i = self.find(*id)?;
        self.slots[i].as_ref().map(|(_, v)| v)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: &u32) -> Option<&mut V> {
        let i = self.find(*id)?;
        self.slots[i].as_mut().map(|(_, v)| v)
    }

    pub(crate) fn contains_key(&self, id: &u32) -> bool {
        self.find(*id).is_some()
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ids, in no particular order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &u32> {
        self.iter().map(|(k, _)| k)
    }

    /// The entries, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u32, &V)> {
        self.slots.iter().flatten().map(|(k, v)| (k, v))
    }

    /// The entries, in no particular order.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut V)> {
        self.slots.iter_mut().flatten().map(|(k, v)| (&*k, v))
    }
}

impl<V: std::fmt::Debug> std::fmt::Debug for IdMap<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Checks `m` against the model after every operation: the same
    /// entries, and each reachable from its home slot.
    fn check(m: &IdMap<u64>, model: &HashMap<u32, u64>) {
        assert_eq!(m.len(), model.len());
        assert_eq!(m.is_empty(), model.is_empty());
        for (k, v) in model {
            assert_eq!(m.get(k), Some(v), "id {k}");
        }
        let mut seen: Vec<(u32, u64)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        let mut want: Vec<(u32, u64)> = model.iter().map(|(k, v)| (*k, *v)).collect();
        seen.sort_unstable();
        want.sort_unstable();
        assert_eq!(seen, want);
        assert!(m.len() * 4 <= m.slots.len() || m.slots.is_empty());
    }

    /// A small deterministic generator (xorshift), so a failure repeats.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Ids that share a home slot in a table of `slots` slots: the
    /// clusters backward-shift deletion must keep reachable, wrapping
    /// around the table's end too.
    fn colliding(slots: usize, home: usize, n: usize) -> Vec<u32> {
        let shift = 64 - slots.trailing_zeros();
        (1u32..)
            .filter(|id| (u64::from(*id).wrapping_mul(FIB) >> shift) as usize == home)
            .take(n)
            .collect()
    }

    #[test]
    fn agrees_with_a_hash_map_under_random_operations() {
        for (seed, range) in [(1u64, 64u64), (7, 1 << 31), (99, 300)] {
            let mut rng = Rng(seed);
            let mut m = IdMap::default();
            let mut model = HashMap::new();
            for step in 0..20_000u64 {
                let id = (rng.next() % range) as u32 + 1;
                match rng.next() % 3 {
                    0 | 1 => assert_eq!(m.insert(id, step), model.insert(id, step)),
                    _ => assert_eq!(m.remove(&id), model.remove(&id)),
                }
                if step % 64 == 0 {
                    check(&m, &model);
                }
                if let Some(v) = m.get_mut(&id) {
                    *v += 1;
                    *model.get_mut(&id).expect("present in both") += 1;
                }
                // A removal where a lookup found the entry, now and then.
                if rng.next().is_multiple_of(8)
                    && let Some((at, v)) = m.get_at(id)
                {
                    let v = *v;
                    assert_eq!(m.remove_at(at), Some(v));
                    assert_eq!(model.remove(&id), Some(v));
                }
                assert_eq!(m.contains_key(&id), model.contains_key(&id));
            }
            check(&m, &model);
        }
    }

    #[test]
    fn a_removal_inside_a_cluster_keeps_the_rest_reachable() {
        // The table six entries grow it to (a quarter full at most).
        let slots = 2 * FIRST_SLOTS;
        let last = slots - 1;
        // Homes at the table's last slot: the cluster wraps to the front.
        for home in [3, last] {
            let ids = colliding(slots, home, 5);
            for victim in 0..ids.len() {
                let mut m = IdMap::default();
                let mut model = HashMap::new();
                for (n, id) in ids.iter().enumerate() {
                    m.insert(*id, n as u64);
                    model.insert(*id, n as u64);
                }
                // A neighbour homed just after the cluster's start, which
                // must not move in front of its own home.
                let other = colliding(slots, (home + 1) & last, 1)[0];
                m.insert(other, 77);
                model.insert(other, 77);
                assert_eq!(m.slots.len(), slots, "the table the homes are for");
                assert_eq!(m.remove(&ids[victim]), model.remove(&ids[victim]));
                check(&m, &model);
            }
        }
    }

    #[test]
    fn sequential_ids_mostly_sit_in_their_home_slot() {
        let mut m = IdMap::default();
        for id in (1..=129u32).step_by(2) {
            m.insert(id, 0u64);
        }
        let displaced = m
            .slots
            .iter()
            .enumerate()
            .filter(|(i, s)| s.as_ref().is_some_and(|(k, _)| m.home(*k) != *i))
            .count();
        assert!(displaced <= 4, "{displaced} of 65 ids off their home slot");
        assert_eq!(m.remove(&0), None);
        assert_eq!(m.remove(&2), None);
        // A table with no slots yet answers every id (its home is out of
        // range) without a test of its own.
        let mut empty = IdMap::<u8>::default();
        for id in [0, 1, 2, u32::MAX] {
            assert_eq!(empty.get(&id), None);
            assert_eq!(empty.get_mut(&id), None);
            assert!(!empty.contains_key(&id));
            assert_eq!(empty.remove(&id), None);
        }
        assert!(format!("{m:?}").starts_with('{'));
    }
}
