//! Consumer-group membership: members, generation, assignment, liveness. Plain Rust; the
//! `GroupCoordinatorActor` owns one `GroupState` and feeds it the clock.
//!
//! # Model (Kafka's, simplified to one process)
//! * Joining adds a member; leaving or going silent for longer than the session timeout
//!   removes it. Each change is a rebalance: the generation goes up by one and the topic's
//!   partitions are dealt again by the group's [`Assignor`] over the members sorted by id.
//! * Joining again as a current member is a heartbeat, not a change.
//! * Any poll, commit or heartbeat from a member is a sign of life.
//! * Memberships are not persisted: after a broker restart members join again. Committed
//!   offsets are (they live with the partitions).
//! * A Kafka client's member (one the Kafka listener joins for it) learns of a rebalance
//!   only at its next heartbeat and keeps reading until it has joined again, so a partition
//!   taken from it is withheld from its new owner until then: the group tracks what each
//!   Kafka member's client may still hold (what it was dealt since its last join, and what
//!   that join says it kept), and a member owns only the partitions of its share that no
//!   other member holds. When a Kafka member gives partitions up, their new owners get them
//!   in a new generation. This is incremental cooperative rebalancing's rule (KIP-429): a
//!   partition that changes owner goes to the new one only after the old one revoked it.

pub mod assignor;
pub(crate) mod classic;
pub(crate) mod consumer_protocol;
pub(crate) mod dead_letter;
pub(crate) mod delivery;
mod positions;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
pub use crate::group_options::{Assignor, GroupOptions, StartFrom};
pub use assignor::PartitionsByMember;
pub use positions::Positions;

/// A member's share of its group, as of one generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The group's rebalance counter when this assignment was made.
    pub generation: u64,
    /// The partitions this member owns, ascending (empty when members outnumber partitions).
    pub partitions: Vec<u32>,
}

#[derive(Debug, Clone)]
struct Member {
    last_seen_ms: u64,
    /// Where the next poll starts in the member's partition list (round-robin).
    poll_cursor: usize,
}

/// One consumer group of one topic.
#[derive(Debug, Clone)]
pub struct GroupState {
    topic: String,
    group: String,
    partitions: u32,
    assignor: Assignor,
    session_timeout_ms: u64,
    generation: u64,
    members: BTreeMap<String, Member>,
    /// The assignor's dealing: each member's share, withheld partitions included.
    target: PartitionsByMember,
    /// Kafka members → the partitions their client may still be reading: those the member
    /// owned since its last join, plus what that join said it kept. Native members have no
    /// entry: they read only what they own, as of their poll.
    held: BTreeMap<String, BTreeSet<u32>>,
    /// What each member owns (reads and commits) now: its share of `target` less the
    /// partitions another member holds.
    assignment: PartitionsByMember,
}

impl GroupState {
    pub fn new(
        topic: &str,
        group: &str,
        partitions: u32,
        assignor: Assignor,
        session_timeout_ms: u64,
    ) -> Self {
        GroupState {
            topic: topic.to_owned(),
            group: group.to_owned(),
            partitions,
            assignor,
            session_timeout_ms,
            generation: 0,
            members: BTreeMap::new(),
            target: PartitionsByMember::new(),
            held: BTreeMap::new(),
            assignment: PartitionsByMember::new(),
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn assignor(&self) -> Assignor {
        self.assignor
    }

    /// Every member's partitions: what it owns now (withheld partitions are nobody's).
    pub fn assignment(&self) -> &PartitionsByMember {
        &self.assignment
    }

    /// Adds `member` (a rebalance) or, if it is one already, counts a sign of life.
    pub fn join(&mut self, member: &str, now_ms: u64) -> Assignment {
        self.evict_expired(now_ms);
        match self.members.get_mut(member) {
            Some(m) => m.last_seen_ms = now_ms,
            None => {
                self.members.insert(
                    member.to_owned(),
                    Member {
                        last_seen_ms: now_ms,
                        poll_cursor: 0,
                    },
                );
                self.rebalance(&format!("{member} joined"));
            }
        }
        self.assignment_of(member)
    }

    /// Adds or refreshes a Kafka client's member whose client still holds `holding` (what it
    /// kept when it joined again: nothing after an eager protocol's revocation, its last
    /// assignment under a cooperative one). A new member rebalances; partitions this member
    /// no longer holds go to their owners, in a new generation.
    pub fn join_kafka_member(
        &mut self,
        member: &str,
        holding: &BTreeSet<u32>,
        now_ms: u64,
    ) -> Assignment {
        self.evict_expired(now_ms);
        let kept = holding.iter().copied().filter(|&p| p < self.partitions);
        self.held.insert(member.to_owned(), kept.collect());
        match self.members.get_mut(member) {
            Some(m) => {
                m.last_seen_ms = now_ms;
                self.hand_over(&format!("{member} joined again holding {holding:?}"));
            }
            None => {
                let joined = Member {
                    last_seen_ms: now_ms,
                    poll_cursor: 0,
                };
                self.members.insert(member.to_owned(), joined);
                self.rebalance(&format!("{member} joined"));
            }
        }
        self.assignment_of(member)
    }

    /// The topic grew to `partitions` partitions: the members (if any) rebalance over them
    /// all. A count that does not grow changes nothing.
    pub fn grow(&mut self, partitions: u32) {
        if partitions <= self.partitions {
            return;
        }
        self.partitions = partitions;
        if !self.members.is_empty() {
            self.rebalance(&format!("topic grew to {partitions} partitions"));
        }
    }

    /// Removes `member` and rebalances.
    ///
    /// # Errors
    /// `UnknownMember` when it is not a member.
    pub fn leave(&mut self, member: &str, now_ms: u64) -> Result<()> {
        self.evict_expired(now_ms);
        if self.members.remove(member).is_none() {
            return Err(self.unknown_member(member));
        }
        self.held.remove(member);
        self.rebalance(&format!("{member} left"));
        Ok(())
    }

    /// A sign of life from `member`; returns its current assignment.
    ///
    /// # Errors
    /// `UnknownMember` when it is not (or no longer) a member.
    pub fn heartbeat(&mut self, member: &str, now_ms: u64) -> Result<Assignment> {
        self.touch(member, now_ms)?;
        Ok(self.assignment_of(member))
    }

    /// A sign of life from `member`, and the order in which its poll should try its
    /// partitions: starting just after the partition that served its last poll (see
    /// [`GroupState::served`]), so the partitions that have data take turns.
    ///
    /// # Errors
    /// `UnknownMember` when it is not (or no longer) a member.
    pub fn poll_order(&mut self, member: &str, now_ms: u64) -> Result<Vec<u32>> {
        self.touch(member, now_ms)?;
        let partitions = &self.assignment[member];
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        let start = self.members[member].poll_cursor % partitions.len();
        Ok(partitions[start..]
            .iter()
            .chain(&partitions[..start])
            .copied()
            .collect())
    }

    /// Records that `partition` served `member`'s poll: its next poll starts at the
    /// member's following partition. Advancing past the partition that answered, rather
    /// than one step per poll, keeps an empty partition from handing its turn to its
    /// neighbour (which would then be read twice as often as the others). Ignored when the
    /// member or the partition is no longer its (a rebalance in between).
    pub fn served(&mut self, member: &str, partition: u32) {
        let Some(index) = self
            .assignment
            .get(member)
            .and_then(|ps| ps.iter().position(|&p| p == partition))
        else {
            return;
        };
        if let Some(m) = self.members.get_mut(member) {
            m.poll_cursor = index + 1;
        }
    }

    /// A sign of life from `member` that also proves it acts on the current generation, and
    /// (for a commit) owns `partition` in it.
    ///
    /// # Errors
    /// `UnknownMember`; `IllegalGeneration` when `generation` is not the current one;
    /// `PartitionNotAssigned` when it does not own `partition`.
    pub fn check_fenced(
        &mut self,
        member: &str,
        generation: u64,
        partition: Option<u32>,
        now_ms: u64,
    ) -> Result<()> {
        self.touch(member, now_ms)?;
        if generation != self.generation {
            return Err(Error::IllegalGeneration {
                topic: self.topic.clone(),
                group: self.group.clone(),
                member: member.to_owned(),
                generation,
                current: self.generation,
            });
        }
        match partition {
            Some(p) if !self.assignment[member].contains(&p) => Err(Error::PartitionNotAssigned {
                topic: self.topic.clone(),
                group: self.group.clone(),
                member: member.to_owned(),
                partition: p,
                generation,
            }),
            _ => Ok(()),
        }
    }

    /// Removes every member silent for longer than the session timeout (one rebalance for
    /// all of them). Returns who was evicted.
    pub fn evict_expired(&mut self, now_ms: u64) -> Vec<String> {
        let timeout = self.session_timeout_ms;
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| now_ms.saturating_sub(m.last_seen_ms) > timeout)
            .map(|(id, _)| id.clone())
            .collect();
        if !expired.is_empty() {
            for id in &expired {
                self.members.remove(id);
                self.held.remove(id);
            }
            self.rebalance(&format!("session timeout of {expired:?}"));
        }
        expired
    }

    fn touch(&mut self, member: &str, now_ms: u64) -> Result<()> {
        self.evict_expired(now_ms);
        match self.members.get_mut(member) {
            Some(m) => {
                m.last_seen_ms = now_ms;
                Ok(())
            }
            None => Err(self.unknown_member(member)),
        }
    }

    fn assignment_of(&self, member: &str) -> Assignment {
        Assignment {
            generation: self.generation,
            partitions: self.assignment.get(member).cloned().unwrap_or_default(),
        }
    }

    fn rebalance(&mut self, cause: &str) {
        // A Kafka member reads what it owns until it has joined again.
        for (member, held) in &mut self.held {
            held.extend(self.assignment.get(member).into_iter().flatten());
        }
        let before = std::mem::take(&mut self.assignment);
        self.generation += 1;
        self.target = self.assignor.assign(
            self.members.keys().map(String::as_str),
            self.partitions,
            &self.target,
        );
        self.assignment = self.owned();
        tracing::info!(
            topic = %self.topic, group = %self.group, generation = self.generation, cause,
            ?before, after = ?self.assignment, held = ?self.held, "rebalanced"
        );
    }

    /// After a Kafka member's holdings shrank: the partitions it gave up go to their owners,
    /// in a new generation (nothing changes when none was withheld).
    fn hand_over(&mut self, cause: &str) {
        let owned = self.owned();
        if owned == self.assignment {
            return;
        }
        let before = std::mem::replace(&mut self.assignment, owned);
        self.generation += 1;
        tracing::info!(
            topic = %self.topic, group = %self.group, generation = self.generation, cause,
            ?before, after = ?self.assignment, held = ?self.held, "handed partitions over"
        );
    }

    /// Each member's share of `target` less the partitions another member holds.
    fn owned(&self) -> PartitionsByMember {
        let held_by_other = |member: &str, p: u32| {
            self.held
                .iter()
                .any(|(holder, held)| holder != member && held.contains(&p))
        };
        self.target
            .iter()
            .map(|(member, share)| {
                let owned = share.iter().copied().filter(|&p| !held_by_other(member, p));
                (member.clone(), owned.collect())
            })
            .collect()
    }

    fn unknown_member(&self, member: &str) -> Error {
        Error::UnknownMember {
            topic: self.topic.clone(),
            group: self.group.clone(),
            member: member.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: u64 = 1000;

    fn group(partitions: u32) -> GroupState {
        GroupState::new("t", "g", partitions, Assignor::RoundRobin, SESSION)
    }

    #[test]
    fn join_and_leave_rebalance_and_bump_the_generation() {
        let mut g = group(3);
        let a = g.join("b", 0);
        assert_eq!((a.generation, a.partitions), (1, vec![0, 1, 2]));
        let a = g.join("a", 0);
        assert_eq!((a.generation, a.partitions), (2, vec![0, 2]));
        assert_eq!(g.heartbeat("b", 0).unwrap().partitions, vec![1]);
        g.leave("a", 0).unwrap();
        assert_eq!(g.generation(), 3);
        assert_eq!(g.heartbeat("b", 0).unwrap().partitions, vec![0, 1, 2]);
    }

    #[test]
    fn a_topic_that_grows_rebalances_its_members_over_every_partition() {
        let mut g = group(2);
        g.join("a", 0);
        g.join("b", 0);
        g.grow(2);
        assert_eq!(
            g.generation(),
            2,
            "a count that does not grow changes nothing"
        );
        g.grow(4);
        assert_eq!(g.generation(), 3);
        assert_eq!(g.heartbeat("a", 0).unwrap().partitions, vec![0, 2]);
        assert_eq!(g.heartbeat("b", 0).unwrap().partitions, vec![1, 3]);
    }

    #[test]
    fn fencing_refuses_old_generations_and_partitions_owned_by_others() {
        let mut g = group(2);
        let first = g.join("a", 0).generation;
        g.join("b", 0); // a rebalance: a now owns only partition 0
        let current = g.generation();
        assert!(matches!(
            g.check_fenced("a", first, Some(0), 0),
            Err(Error::IllegalGeneration { generation, current: c, .. }) if generation == first && c == current
        ));
        assert!(matches!(
            g.check_fenced("a", current, Some(1), 0),
            Err(Error::PartitionNotAssigned { partition: 1, .. })
        ));
        assert!(g.check_fenced("a", current, Some(0), 0).is_ok());
        assert!(matches!(
            g.check_fenced("zed", current, None, 0),
            Err(Error::UnknownMember { .. })
        ));
    }

    #[test]
    fn joining_twice_is_a_heartbeat_not_a_rebalance() {
        let mut g = group(2);
        g.join("a", 0);
        let again = g.join("a", 10);
        assert_eq!(again.generation, 1);
    }

    #[test]
    fn non_members_are_told_so() {
        let mut g = group(1);
        assert!(matches!(
            g.heartbeat("x", 0),
            Err(Error::UnknownMember { .. })
        ));
        assert!(matches!(g.leave("x", 0), Err(Error::UnknownMember { .. })));
        assert!(matches!(
            g.poll_order("x", 0),
            Err(Error::UnknownMember { .. })
        ));
    }

    #[test]
    fn a_silent_member_is_evicted_after_the_session_timeout() {
        let mut g = group(2);
        g.join("a", 0);
        g.join("b", 0);
        g.heartbeat("a", SESSION).unwrap(); // a stays alive; b is silent
        assert_eq!(
            g.evict_expired(SESSION),
            Vec::<String>::new(),
            "exactly the timeout is still alive"
        );
        assert_eq!(g.evict_expired(SESSION + 1), vec!["b".to_owned()]);
        assert_eq!(
            g.heartbeat("a", SESSION + 1).unwrap().partitions,
            vec![0, 1]
        );
        assert!(matches!(
            g.poll_order("b", SESSION + 1),
            Err(Error::UnknownMember { .. })
        ));
        // It can come back.
        assert_eq!(g.join("b", SESSION + 2).partitions, vec![1]);
    }

    fn set(partitions: &[u32]) -> BTreeSet<u32> {
        partitions.iter().copied().collect()
    }

    #[test]
    fn a_partition_taken_from_a_kafka_member_waits_until_it_joins_again() {
        let mut g = group(2);
        assert_eq!(
            g.join_kafka_member("a", &set(&[]), 0).partitions,
            vec![0, 1]
        );
        // A native member joins: its share is partition 1, which "a" reads until it joins
        // again.
        let joined = g.join("n", 0);
        assert_eq!((joined.generation, joined.partitions), (2, vec![]));
        assert!(g.poll_order("n", 0).unwrap().is_empty());
        assert!(matches!(
            g.check_fenced("n", 2, Some(1), 0),
            Err(Error::PartitionNotAssigned { partition: 1, .. })
        ));
        assert_eq!(g.heartbeat("a", 0).unwrap().partitions, vec![0]);
        // "a" joins again having revoked everything (an eager protocol): "n" gets partition
        // 1 in a new generation.
        let again = g.join_kafka_member("a", &set(&[]), 0);
        assert_eq!((again.generation, again.partitions), (3, vec![0]));
        assert_eq!(g.poll_order("n", 0).unwrap(), vec![1]);
        assert!(g.check_fenced("n", 3, Some(1), 0).is_ok());
    }

    #[test]
    fn a_cooperative_handover_takes_two_generations() {
        let mut g = GroupState::new("t", "g", 2, Assignor::Sticky, SESSION);
        g.join_kafka_member("a", &set(&[]), 0);
        // "b" joins while "a" keeps both partitions (it has not revoked anything yet).
        g.join_kafka_member("b", &set(&[]), 0);
        let a = g.join_kafka_member("a", &set(&[0, 1]), 0);
        assert_eq!((a.generation, a.partitions), (2, vec![0]));
        assert_eq!(g.heartbeat("b", 0).unwrap().partitions, Vec::<u32>::new());
        assert_eq!(
            g.generation(),
            2,
            "a member keeping what it held changes nothing"
        );
        // "a" revoked partition 1 and joins again: "b" owns it in the next generation.
        g.join_kafka_member("b", &set(&[]), 0);
        g.join_kafka_member("a", &set(&[0]), 0);
        let b = g.heartbeat("b", 0).unwrap();
        assert_eq!((b.generation, b.partitions), (3, vec![1]));
        assert_eq!(g.heartbeat("a", 0).unwrap().partitions, vec![0]);
    }

    #[test]
    fn a_kafka_member_that_leaves_or_is_evicted_holds_nothing() {
        let mut g = group(2);
        g.join_kafka_member("a", &set(&[]), 0);
        g.join("n", 0);
        g.leave("a", 0).unwrap();
        assert_eq!(g.poll_order("n", 0).unwrap(), vec![0, 1]);

        let mut g = group(2);
        g.join_kafka_member("a", &set(&[]), 0);
        g.join("n", 0);
        g.heartbeat("n", SESSION).unwrap();
        assert_eq!(g.evict_expired(SESSION + 1), vec!["a".to_owned()]);
        assert_eq!(g.poll_order("n", SESSION + 1).unwrap(), vec![0, 1]);
    }

    #[test]
    fn a_kafka_members_holdings_outside_the_topic_are_ignored() {
        let mut g = group(2);
        g.join_kafka_member("a", &set(&[]), 0);
        g.join("n", 0);
        g.join_kafka_member("a", &set(&[0, 7]), 0);
        assert_eq!(g.poll_order("n", 0).unwrap(), vec![1]);
        // Partition 7 comes later; "a" never held it.
        g.grow(8);
        assert_eq!(g.poll_order("n", 0).unwrap(), vec![1, 3, 5, 7]);
    }

    #[test]
    fn poll_order_starts_after_the_partition_that_served_last() {
        let mut g = group(3);
        g.join("a", 0);
        assert_eq!(g.poll_order("a", 0).unwrap(), vec![0, 1, 2]);
        g.served("a", 0);
        assert_eq!(g.poll_order("a", 0).unwrap(), vec![1, 2, 0]);
        // Partition 1 was empty and 2 answered: 0 is next, not 2 again.
        g.served("a", 2);
        assert_eq!(g.poll_order("a", 0).unwrap(), vec![0, 1, 2]);
        // An empty poll (nothing served) leaves the turn where it is.
        assert_eq!(g.poll_order("a", 0).unwrap(), vec![0, 1, 2]);
        // A partition the member does not own (rebalanced away) changes nothing.
        g.join("b", 0);
        let before = g.poll_order("a", 0).unwrap();
        g.served("a", 1);
        assert_eq!(g.poll_order("a", 0).unwrap(), before);
    }
}
