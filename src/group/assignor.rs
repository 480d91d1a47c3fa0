//! Partition assignors: pure functions from (members, partition count, previous assignment)
//! to a new assignment.
//!
//! Members are always taken sorted by id, so every assignor is deterministic: the same inputs
//! give the same assignment, whoever computes it. Every assignor gives each partition exactly
//! one owner and makes loads differ by at most one.

use std::collections::{BTreeMap, BTreeSet};

use crate::group_options::Assignor;

/// Member id → its partitions, ascending. Every member appears, possibly with none.
pub type PartitionsByMember = BTreeMap<String, Vec<u32>>;

impl Assignor {
    /// Deals `partitions` partitions over `members` (any order; duplicates ignored).
    /// `previous` is the assignment before this rebalance (only `Sticky` reads it).
    pub fn assign<'a>(
        self,
        members: impl IntoIterator<Item = &'a str>,
        partitions: u32,
        previous: &PartitionsByMember,
    ) -> PartitionsByMember {
        let mut assignment: PartitionsByMember = members
            .into_iter()
            .map(|m| (m.to_owned(), Vec::new()))
            .collect();
        let n = assignment.len() as u32;
        if n == 0 {
            return assignment;
        }
        match self {
            Assignor::RoundRobin => {
                let mut slots: Vec<&mut Vec<u32>> = assignment.values_mut().collect();
                for p in 0..partitions {
                    slots[(p % n) as usize].push(p);
                }
            }
            Assignor::Range => {
                let (per, extra) = (partitions / n, partitions % n);
                let mut next = 0;
                for (i, slot) in assignment.values_mut().enumerate() {
                    let count = per + u32::from((i as u32) < extra);
                    slot.extend(next..next + count);
                    next += count;
                }
            }
            Assignor::Sticky => assign_sticky(&mut assignment, partitions, previous),
        }
        assignment
    }
}

/// Sticky dealing. Fair shares are `partitions / n`, plus one for `partitions % n` members:
/// the extra goes to the members that held the most before (ties: lower id), which keeps the
/// most partitions in place. Each member keeps its previous partitions (lowest first) up to
/// its share; every other partition goes to the member furthest below its share.
fn assign_sticky(
    assignment: &mut PartitionsByMember,
    partitions: u32,
    previous: &PartitionsByMember,
) {
    let n = assignment.len() as u32;
    let (per, extra) = (partitions / n, partitions % n);
    let held = |member: &str| -> Vec<u32> {
        let mut held: Vec<u32> = previous
            .get(member)
            .map(|ps| ps.iter().copied().filter(|&p| p < partitions).collect())
            .unwrap_or_default();
        held.sort_unstable();
        held
    };
    let mut by_previous_load: Vec<&String> = assignment.keys().collect();
    by_previous_load.sort_by_key(|m| std::cmp::Reverse(held(m).len()));
    let share: BTreeMap<String, usize> = by_previous_load
        .iter()
        .enumerate()
        .map(|(i, m)| ((*m).clone(), (per + u32::from((i as u32) < extra)) as usize))
        .collect();

    let mut taken = BTreeSet::new();
    for (member, owned) in assignment.iter_mut() {
        for p in held(member) {
            if owned.len() < share[member] && taken.insert(p) {
                owned.push(p);
            }
        }
    }
    for p in (0..partitions).filter(|p| !taken.contains(p)) {
        let (_, owned) = assignment
            .iter_mut()
            .filter(|(m, owned)| owned.len() < share[*m])
            .max_by_key(|(m, owned)| (share[*m] - owned.len(), std::cmp::Reverse((*m).clone())))
            .expect("shares add up to the partition count");
        owned.push(p);
    }
    for owned in assignment.values_mut() {
        owned.sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn assign(assignor: Assignor, members: &[&str], partitions: u32) -> PartitionsByMember {
        assignor.assign(
            members.iter().copied(),
            partitions,
            &PartitionsByMember::new(),
        )
    }

    #[test]
    fn round_robin_deals_in_member_id_order() {
        let a = assign(Assignor::RoundRobin, &["b", "a"], 5);
        assert_eq!(a["a"], vec![0, 2, 4]);
        assert_eq!(a["b"], vec![1, 3]);
    }

    #[test]
    fn range_gives_contiguous_blocks_extra_to_the_first() {
        let a = assign(Assignor::Range, &["c", "a", "b"], 7);
        assert_eq!(a["a"], vec![0, 1, 2]);
        assert_eq!(a["b"], vec![3, 4]);
        assert_eq!(a["c"], vec![5, 6]);
    }

    #[test]
    fn members_beyond_the_partition_count_get_none() {
        let a = assign(Assignor::RoundRobin, &["a", "b", "c"], 2);
        assert_eq!(a["c"], Vec::<u32>::new());
    }

    #[test]
    fn sticky_moves_only_what_a_new_member_needs() {
        let before = assign(Assignor::Sticky, &["a", "b"], 6);
        let after = Assignor::Sticky.assign(["a", "b", "c"], 6, &before);
        for m in ["a", "b"] {
            assert_eq!(after[m].len(), 2);
            assert!(
                after[m].iter().all(|p| before[m].contains(p)),
                "{m} kept its own"
            );
        }
        assert_eq!(after["c"].len(), 2);
    }

    #[test]
    fn sticky_hands_a_departed_members_partitions_to_the_others() {
        let before = assign(Assignor::Sticky, &["a", "b", "c"], 6);
        let after = Assignor::Sticky.assign(["a", "c"], 6, &before);
        assert!(before["a"].iter().all(|p| after["a"].contains(p)));
        assert!(before["c"].iter().all(|p| after["c"].contains(p)));
        assert_eq!(after["a"].len() + after["c"].len(), 6);
    }

    fn members(count: usize) -> Vec<String> {
        (0..count).map(|i| format!("m{i}")).collect()
    }

    /// Owners per partition and the load spread of an assignment.
    fn check_balanced(a: &PartitionsByMember, partitions: u32) -> Result<(), TestCaseError> {
        for p in 0..partitions {
            let owners = a.values().filter(|ps| ps.contains(&p)).count();
            prop_assert_eq!(owners, 1, "partition {} has {} owners", p, owners);
        }
        let loads: Vec<usize> = a.values().map(Vec::len).collect();
        let (min, max) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        prop_assert!(max - min <= 1, "loads {:?}", loads);
        Ok(())
    }

    /// The fewest moves any balanced assignment needs from `previous` to `now_members`:
    /// try every choice of which members get the extra partition.
    fn fewest_moves(
        previous: &PartitionsByMember,
        now_members: &[String],
        partitions: u32,
    ) -> usize {
        let n = now_members.len();
        let (per, extra) = ((partitions as usize) / n, (partitions as usize) % n);
        let held: Vec<usize> = now_members
            .iter()
            .map(|m| previous.get(m).map_or(0, Vec::len))
            .collect();
        let still_owned: usize = held.iter().sum();
        let mut best_kept = 0;
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize != extra {
                continue;
            }
            let kept: usize = (0..n)
                .map(|i| held[i].min(per + usize::from(mask & (1 << i) != 0)))
                .sum();
            best_kept = best_kept.max(kept);
        }
        still_owned - best_kept
    }

    proptest! {
        #[test]
        fn every_assignor_is_balanced_with_one_owner_per_partition(
            count in 1usize..8, partitions in 0u32..24, which in 0usize..3,
        ) {
            let assignor = [Assignor::RoundRobin, Assignor::Range, Assignor::Sticky][which];
            let ids = members(count);
            let a = assignor.assign(ids.iter().map(String::as_str), partitions, &PartitionsByMember::new());
            prop_assert_eq!(a.len(), count);
            check_balanced(&a, partitions)?;
        }

        #[test]
        fn sticky_moves_no_more_partitions_than_balance_requires(
            before_count in 1usize..7, partitions in 0u32..20,
            leave in proptest::collection::vec(any::<bool>(), 7), join in 0usize..3,
        ) {
            let before_ids = members(before_count);
            let before = Assignor::Sticky.assign(before_ids.iter().map(String::as_str), partitions, &PartitionsByMember::new());
            let mut now: Vec<String> = before_ids.iter().zip(&leave).filter(|(_, &l)| !l).map(|(m, _)| m.clone()).collect();
            now.extend((0..join).map(|i| format!("new{i}")));
            prop_assume!(!now.is_empty());
            let after = Assignor::Sticky.assign(now.iter().map(String::as_str), partitions, &before);
            check_balanced(&after, partitions)?;
            let moved = now
                .iter()
                .map(|m| before.get(m).map_or(0, |ps| ps.iter().filter(|p| !after[m].contains(p)).count()))
                .sum::<usize>();
            prop_assert_eq!(moved, fewest_moves(&before, &now, partitions));
        }
    }
}
