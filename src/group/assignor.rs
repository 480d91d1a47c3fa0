//! Partition assignors: pure functions from (members, partition count) to an assignment.
//!
//! Members are always taken sorted by id, so every assignor is deterministic: the same
//! membership gives the same assignment, whoever computes it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a group deals its topic's partitions to its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Assignor {
    /// Partition `p` goes to member `p % members` (members sorted by id): Kafka's
    /// `RoundRobinAssignor` for one topic. The default.
    #[default]
    RoundRobin,
    /// Each member gets one contiguous range, the first `partitions % members` members one
    /// partition more: Kafka's `RangeAssignor`.
    Range,
}

/// Member id → its partitions, ascending. Every member appears, possibly with none.
pub type PartitionsByMember = BTreeMap<String, Vec<u32>>;

impl Assignor {
    /// Deals `partitions` partitions over `members` (any order; duplicates ignored).
    pub fn assign<'a>(
        self,
        members: impl IntoIterator<Item = &'a str>,
        partitions: u32,
    ) -> PartitionsByMember {
        let mut assignment: PartitionsByMember = members
            .into_iter()
            .map(|m| (m.to_owned(), Vec::new()))
            .collect();
        let n = assignment.len() as u32;
        if n == 0 {
            return assignment;
        }
        let mut slots: Vec<&mut Vec<u32>> = assignment.values_mut().collect();
        match self {
            Assignor::RoundRobin => {
                for p in 0..partitions {
                    slots[(p % n) as usize].push(p);
                }
            }
            Assignor::Range => {
                let (per, extra) = (partitions / n, partitions % n);
                let mut next = 0;
                for (i, slot) in slots.iter_mut().enumerate() {
                    let count = per + u32::from((i as u32) < extra);
                    slot.extend(next..next + count);
                    next += count;
                }
            }
        }
        assignment
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(a: &PartitionsByMember, partitions: u32) -> Vec<usize> {
        (0..partitions)
            .map(|p| a.values().filter(|ps| ps.contains(&p)).count())
            .collect()
    }

    #[test]
    fn round_robin_deals_in_member_id_order() {
        let a = Assignor::RoundRobin.assign(["b", "a"], 5);
        assert_eq!(a["a"], vec![0, 2, 4]);
        assert_eq!(a["b"], vec![1, 3]);
    }

    #[test]
    fn range_gives_contiguous_blocks_extra_to_the_first() {
        let a = Assignor::Range.assign(["c", "a", "b"], 7);
        assert_eq!(a["a"], vec![0, 1, 2]);
        assert_eq!(a["b"], vec![3, 4]);
        assert_eq!(a["c"], vec![5, 6]);
    }

    #[test]
    fn every_partition_has_exactly_one_owner_and_loads_differ_by_at_most_one() {
        for assignor in [Assignor::RoundRobin, Assignor::Range] {
            for members in 1..8usize {
                for partitions in 0..20u32 {
                    let ids: Vec<String> = (0..members).map(|i| format!("m{i}")).collect();
                    let a = assignor.assign(ids.iter().map(String::as_str), partitions);
                    assert_eq!(a.len(), members);
                    assert!(owners(&a, partitions).iter().all(|&o| o == 1));
                    let loads: Vec<usize> = a.values().map(Vec::len).collect();
                    let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
                    assert!(
                        max - min <= 1,
                        "{assignor:?} {members} members {partitions} partitions"
                    );
                }
            }
        }
    }

    #[test]
    fn members_beyond_the_partition_count_get_none() {
        let a = Assignor::RoundRobin.assign(["a", "b", "c"], 2);
        assert_eq!(a["c"], Vec::<u32>::new());
    }
}
