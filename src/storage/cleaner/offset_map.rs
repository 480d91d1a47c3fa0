//! [`OffsetMap`]: key hash → the latest offset of that key in the dirty section, in a fixed
//! budget of memory (Kafka's `SkimpyOffsetMap`).
//!
//! # Layout and bound
//! One flat array of slots allocated once: a 128-bit hash of the key (two `u64`) and the
//! offset (a `u64`). Open addressing with linear probing; at most [`LOAD_FACTOR`] of the
//! slots are filled, so a probe ends quickly at an empty slot. The keys themselves are never
//! stored: a key of any size costs 24 bytes. A pass sizes its map by what it can meet
//! ([`OffsetMap::for_keys`]: one key per offset of the dirty section at most), within the
//! budget, so a small dirty section never allocates the whole budget.
//!
//! # The hash, and what a collision costs
//! Kafka hashes keys with MD5 (128 bits). Here: SipHash-1-3 (std's `RandomState`) run twice
//! with two independent random keys, drawn afresh for each map, giving 128 bits (one bit is
//! forced to 1 to tell a used slot from an empty one). Two distinct keys of one cleaning
//! collide with probability about `n² / 2^128` for `n` keys: for a billion keys, about
//! `10^-21`. A collision would make a record look superseded by another key's later record
//! (that key's latest value would be removed). Random per-map keys mean a producer cannot
//! craft colliding keys ahead of time, as it could against a fixed hash such as MD5 or a
//! 64-bit one (a birthday search over 2^32 keys).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// The most a map fills its slots (Kafka's `log.cleaner.io.buffer.load.factor` default):
/// linear probing stays short below it.
pub const LOAD_FACTOR: f64 = 0.9;

/// Bytes one slot takes: the 128-bit hash and the offset.
pub const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// A used slot's hash is never all zeros (see [`OffsetMap::hash`]).
const EMPTY: [u64; 2] = [0, 0];

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    hash: [u64; 2],
    offset: u64,
}

/// The map is full: the key is not in it and there is no room for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Key hash → latest offset; see the module docs.
#[derive(Debug)]
pub struct OffsetMap {
    slots: Vec<Slot>,
    entries: usize,
    max_entries: usize,
    hashers: [RandomState; 2],
}

impl OffsetMap {
    /// A map in `budget_bytes` of slots (at least two slots, so that one key fits).
    pub fn new(budget_bytes: usize) -> Self {
        Self::with_slots(budget_bytes / SLOT_BYTES)
    }

    /// A map that holds `keys` keys if `budget_bytes` allows it, else the most that fit in
    /// the budget (as [`OffsetMap::new`]).
    pub fn for_keys(keys: u64, budget_bytes: usize) -> Self {
        // `keys / LOAD_FACTOR` slots, rounded up, and one more: the map never fills every
        // slot, so that a probe always ends.
        let wanted = keys.saturating_mul(10) / 9 + 2;
        let slots = usize::try_from(wanted).unwrap_or(usize::MAX);
        Self::with_slots(slots.min(budget_bytes / SLOT_BYTES))
    }

    /// A map of `slots` slots (at least two, so that one key fits).
    fn with_slots(slots: usize) -> Self {
        let slots = slots.max(2);
        let max_entries = ((slots as f64 * LOAD_FACTOR) as usize).clamp(1, slots - 1);
        OffsetMap {
            slots: vec![Slot::default(); slots],
            entries: 0,
            max_entries,
            hashers: [RandomState::new(), RandomState::new()],
        }
    }

    /// How many keys the map holds at most.
    pub fn capacity(&self) -> usize {
        self.max_entries
    }

    /// The memory of its slots, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * SLOT_BYTES
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The hash `key` has in this map. A caller with many keys hashes them all first, then
    /// calls [`OffsetMap::put_hash`] or [`OffsetMap::get_hash`] for each: a probe of a large
    /// map is a cache miss, and probes with nothing else between them overlap their misses
    /// (the cleaner's pass spent most of its time waiting on them one at a time).
    pub fn hash(&self, key: &[u8]) -> [u64; 2] {
        let [a, b] = &self.hashers;
        let mut first = a.build_hasher();
        first.write(key);
        let mut second = b.build_hasher();
        second.write(key);
        [first.finish() | 1, second.finish()]
    }

    /// The slot holding `hash`, or the empty slot where it would go.
    fn find(&self, hash: [u64; 2]) -> usize {
        let mut i = (hash[0] % self.slots.len() as u64) as usize;
        loop {
            let slot = &self.slots[i];
            if slot.hash == hash || slot.hash == EMPTY {
                return i;
            }
            i = (i + 1) % self.slots.len();
        }
    }

    /// Records `offset` as the latest of `key` (offsets are put in ascending order).
    ///
    /// # Errors
    /// `Full` when `key` is new and the map holds [`OffsetMap::capacity`] keys already.
    pub fn put(&mut self, key: &[u8], offset: u64) -> Result<(), Full> {
        self.put_hash(self.hash(key), offset)
    }

    /// [`OffsetMap::put`] of the key whose [`OffsetMap::hash`] is `hash`.
    ///
    /// # Errors
    /// As [`OffsetMap::put`].
    pub fn put_hash(&mut self, hash: [u64; 2], offset: u64) -> Result<(), Full> {
        let i = self.find(hash);
        if self.slots[i].hash == EMPTY {
            if self.entries == self.max_entries {
                return Err(Full);
            }
            self.entries += 1;
        }
        self.slots[i] = Slot { hash, offset };
        Ok(())
    }

    /// The latest offset of `key` put here, if any.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.get_hash(self.hash(key))
    }

    /// [`OffsetMap::get`] of the key whose [`OffsetMap::hash`] is `hash`.
    pub fn get_hash(&self, hash: [u64; 2]) -> Option<u64> {
        let slot = self.slots[self.find(hash)];
        (slot.hash != EMPTY).then_some(slot.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_offset_of_each_key_is_kept_until_the_budget_is_full() {
        let mut map = OffsetMap::new(100 * SLOT_BYTES);
        assert_eq!(map.capacity(), 90);
        for i in 0..90u64 {
            map.put(&i.to_be_bytes(), i).unwrap();
        }
        map.put(&7u64.to_be_bytes(), 1000).unwrap();
        assert_eq!(map.put(b"one more key", 1001), Err(Full));
        assert_eq!(map.len(), 90);
        assert_eq!(map.get(&7u64.to_be_bytes()), Some(1000));
        assert_eq!(map.get(&8u64.to_be_bytes()), Some(8));
        assert_eq!(map.get(b"one more key"), None);
    }

    #[test]
    fn a_map_for_a_few_keys_takes_room_for_them_and_no_more_than_the_budget() {
        for keys in [0u64, 1, 9, 10, 100, 12_345] {
            let map = OffsetMap::for_keys(keys, 1 << 30);
            assert!(map.capacity() as u64 >= keys.max(1), "{keys} keys");
            assert!(map.memory_bytes() <= (keys as usize * 10 / 9 + 2) * SLOT_BYTES);
        }
        let capped = OffsetMap::for_keys(1_000_000, 100 * SLOT_BYTES);
        assert_eq!(capped.memory_bytes(), 100 * SLOT_BYTES);
        assert_eq!(
            capped.capacity(),
            OffsetMap::new(100 * SLOT_BYTES).capacity()
        );
        let mut exact = OffsetMap::for_keys(50, 1 << 30);
        for i in 0..50u64 {
            exact.put(&i.to_be_bytes(), i).unwrap();
        }
    }

    #[test]
    fn a_budget_too_small_for_two_slots_still_holds_one_key() {
        let mut map = OffsetMap::new(0);
        map.put(b"k", 3).unwrap();
        assert_eq!(map.put(b"other", 4), Err(Full));
        assert_eq!(map.get(b"k"), Some(3));
    }
}
