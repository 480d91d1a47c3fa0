//! [`Positions`]: where a member that keeps its own positions reads next, per partition, in
//! one generation (Kafka's consumer positions). Plain Rust; the `Consumer` handle and the
//! `SubscriptionActor` each own one.
//!
//! Positions belong to a generation: once the group rebalances (or the member rejoins after
//! an eviction or a coordinator restart), they are dropped and reading resumes at the
//! committed offsets, so a partition that moved to another member and back is never read
//! from a stale position.

use std::collections::BTreeMap;

/// A member's generation and its next offset per partition read in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Positions {
    generation: u64,
    next: BTreeMap<u32, u64>,
}

impl Positions {
    /// No positions yet, in `generation` (the member's join).
    pub fn new(generation: u64) -> Self {
        Positions {
            generation,
            next: BTreeMap::new(),
        }
    }

    /// The generation the positions belong to.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The next offset to read in `partition`, if read in this generation.
    pub fn get(&self, partition: u32) -> Option<u64> {
        self.next.get(&partition).copied()
    }

    /// Every position, as a poll sends them.
    pub fn all(&self) -> &BTreeMap<u32, u64> {
        &self.next
    }

    /// The member is in `generation` now (a poll's answer, a heartbeat, a rejoin): a new
    /// generation drops the positions.
    pub fn enter(&mut self, generation: u64) {
        if generation != self.generation {
            self.next.clear();
            self.generation = generation;
        }
    }

    /// `last_offset` of `partition` was delivered: read on after it.
    pub fn delivered(&mut self, partition: u32, last_offset: u64) {
        self.next.insert(partition, last_offset.saturating_add(1));
    }

    /// `offset` of `partition` was committed: never read again below it (that would
    /// re-deliver committed records).
    pub fn committed(&mut self, partition: u32, offset: u64) {
        let next = self
            .next
            .entry(partition)
            .or_insert(offset.saturating_add(1));
        *next = (*next).max(offset.saturating_add(1));
    }

    /// Reads `partition` from `offset` next.
    pub fn seek(&mut self, partition: u32, offset: u64) {
        self.next.insert(partition, offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_generation_drops_the_positions_and_the_same_keeps_them() {
        let mut p = Positions::new(1);
        p.delivered(0, 9);
        p.enter(1);
        assert_eq!(p.get(0), Some(10));
        p.enter(2);
        assert_eq!((p.generation(), p.get(0)), (2, None));
    }

    #[test]
    fn a_commit_never_moves_a_position_back() {
        let mut p = Positions::new(1);
        p.delivered(0, 20);
        p.committed(0, 5);
        assert_eq!(p.get(0), Some(21));
        p.committed(1, 5);
        assert_eq!(p.get(1), Some(6));
        p.seek(0, 3);
        assert_eq!(p.get(0), Some(3));
    }

    #[test]
    fn the_last_offset_there_is_does_not_overflow() {
        let mut p = Positions::new(1);
        p.delivered(0, u64::MAX);
        p.committed(1, u64::MAX);
        assert_eq!((p.get(0), p.get(1)), (Some(u64::MAX), Some(u64::MAX)));
    }
}
