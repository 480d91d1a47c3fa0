//! [`Deliveries`]: the rules a push subscription follows per partition: which partitions it
//! may read now, what a subscriber's answer commits, where reading resumes, and when a
//! record has had its last attempt. Plain Rust, so the embedded and the Kafka subscription
//! actors follow the same rules; the actors turn the outcomes into commits, produces and
//! timers.
//!
//! **Order per partition.** A partition is *held* from the moment a batch of it is handed
//! to the subscriber until the subscriber answered it (and, after a `Retry`, until the retry
//! delay has passed; after a last attempt, until the record is dead-lettered and committed
//! past). A held partition is not read, so the subscriber never sees a record of a partition
//! while an earlier record of it is unanswered or waiting for a retry. Other partitions are
//! read meanwhile.
//!
//! **Attempts** are counted per `(partition, offset)` for records that were retried: the
//! first delivery is attempt 1. A retry's commit carries the count ([`AttemptNote`], in the
//! commit's metadata), so it outlives the member: at a new generation (a rebalance, a
//! rejoin, a restart) the counts in memory are dropped and each assigned partition is held
//! until its count is read back from its commit ([`Deliveries::restore`]). A count is
//! forgotten once its record is committed past (a commit without a note replaces it).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::dead_letter::DeadLetterReason;

/// The retry count a commit carries in its metadata string (Kafka's OffsetCommit metadata,
/// made for a consumer's own state): `nanokafka.attempt=<n>`, `n` decimal, the attempt the
/// next delivery of the record at the committed offset is. Any other metadata (a Kafka
/// client's own) reads as no note: the record is on attempt 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptNote(pub u32);

impl AttemptNote {
    const PREFIX: &'static str = "nanokafka.attempt=";

    /// The metadata string of a commit that carries this note.
    pub fn metadata(self) -> String {
        format!("{}{}", Self::PREFIX, self.0)
    }

    /// The note in a commit's metadata, if it has one.
    pub fn parse(metadata: &str) -> Option<Self> {
        let n = metadata.strip_prefix(Self::PREFIX)?.parse().ok()?;
        (n > 1).then_some(AttemptNote(n))
    }
}

/// A subscriber's answer to one batch (the actor face's `Ack`, without actix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Commit the whole batch.
    Commit,
    /// Commit nothing; read on after the batch.
    Defer,
    /// Commit up to this offset; read the rest of the batch again at once.
    CommitUpTo(u64),
    /// Commit the records before `offset`; read again from `offset` after `after`.
    Retry { offset: u64, after: Duration },
    /// Commit the records before `offset`; dead-letter `offset` (`reason`) at once.
    DeadLetter { offset: u64, reason: String },
}

/// A batch handed to the subscriber: its partition, first and last offsets, and the
/// generation it was read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub partition: u32,
    pub first: u64,
    pub last: u64,
    pub generation: u64,
}

/// What to do once a batch is answered. Every `commit` is inclusive: it marks that offset
/// and everything before it processed (the committed offset becomes `commit + 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Commit `commit` (if any); the partition is free and is read from `resume` (`None`:
    /// where it was, after the batch).
    Go {
        commit: Option<u64>,
        resume: Option<u64>,
    },
    /// Commit `commit` (if any), with the record at `from` on `attempt` next (the commit's
    /// [`AttemptNote`]); the partition stays held for `delay`, then [`Deliveries::wake`]
    /// with `token` frees it and it is read from `from`.
    Wait {
        commit: Option<u64>,
        from: u64,
        attempt: u32,
        delay: Duration,
        token: u64,
    },
    /// The record at `offset` is to be dead-lettered (`reason`) after `attempts` deliveries:
    /// dead-letter it, then commit it, then [`Deliveries::release`] the partition (which
    /// stays held until then) and read it from `offset + 1`.
    DeadLetter {
        offset: u64,
        attempts: u32,
        reason: DeadLetterReason,
    },
    /// The subscriber dead-lettered the record at `offset`, but no dead-letter topic is
    /// named: commit `commit` (the records before it, if any) and end the subscription; the
    /// record stays uncommitted.
    NoDeadLetterTopic { commit: Option<u64>, offset: u64 },
    /// As `DeadLetter`, but no dead-letter topic is named: commit `commit` (the records
    /// before it, if any) and end the subscription; the record stays uncommitted.
    Exhausted {
        commit: Option<u64>,
        offset: u64,
        attempts: u32,
    },
}

/// Why a partition is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// A batch is with the subscriber, unanswered.
    Unanswered,
    /// Waiting for a retry delay; `token` tells this wait from an older one.
    Waiting { token: u64 },
    /// The actor is working on it (dead-lettering a record).
    Busy,
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Deliveries {
    max_attempts: u32,
    dead_letter: bool,
    generation: u64,
    held: BTreeMap<u32, Hold>,
    /// The attempt the next delivery of each retried record is.
    attempts: BTreeMap<(u32, u64), u32>,
    /// Partitions held until their attempt counts are read back from their commits.
    restoring: BTreeSet<u32>,
    next_token: u64,
}

impl Deliveries {
    /// Rules for a subscription in `generation` whose records get `max_attempts` deliveries
    /// at most (at least 1), with a dead-letter topic or not.
    pub fn new(generation: u64, max_attempts: u32, dead_letter: bool) -> Self {
        Deliveries {
            max_attempts: max_attempts.max(1),
            dead_letter,
            generation,
            held: BTreeMap::new(),
            attempts: BTreeMap::new(),
            restoring: BTreeSet::new(),
            next_token: 0,
        }
    }

    /// The partitions a poll must skip now.
    pub fn held(&self) -> BTreeSet<u32> {
        let held = self.held.keys().copied();
        held.chain(self.restoring.iter().copied()).collect()
    }

    /// Whether `partition` is held (a poll that read it anyway must drop what it read).
    pub fn is_held(&self, partition: u32) -> bool {
        self.held.contains_key(&partition) || self.restoring.contains(&partition)
    }

    /// Holds `partitions` until [`Deliveries::restored`] tells each one's attempt count, read
    /// from its commit in the current generation.
    pub fn restore(&mut self, partitions: &[u32]) {
        self.restoring = partitions.iter().copied().collect();
    }

    /// `partition`'s commit, read in `generation`: the record at `committed` is on the
    /// attempt its `note` says. Frees the partition; whether it was held for this (a read
    /// of an older generation changes nothing).
    pub fn restored(
        &mut self,
        generation: u64,
        partition: u32,
        commit: Option<(u64, AttemptNote)>,
    ) -> bool {
        if generation != self.generation || !self.restoring.remove(&partition) {
            return false;
        }
        if let Some((committed, AttemptNote(attempt))) = commit {
            self.attempts.insert((partition, committed), attempt);
        }
        true
    }

    /// The subscription is in `generation` now: a new one forgets the attempt counts and the
    /// retry waits (reading resumes at the committed offsets). Batches still with the
    /// subscriber, and records being dead-lettered, keep their partitions held until they are
    /// answered or done (reading such a partition meanwhile would deliver or dead-letter a
    /// record twice).
    pub fn enter(&mut self, generation: u64) {
        if generation == self.generation {
            return;
        }
        self.generation = generation;
        self.attempts.clear();
        self.restoring.clear();
        self.held
            .retain(|_, hold| !matches!(hold, Hold::Waiting { .. }));
    }

    /// `batch` was handed to the subscriber: its partition is held until it is answered.
    pub fn delivered(&mut self, batch: Batch) {
        self.held.insert(batch.partition, Hold::Unanswered);
    }

    /// Whether a record is being dead-lettered (a partition held by [`Deliveries::hold`]
    /// or an [`Outcome::DeadLetter`] and not released yet).
    pub fn busy(&self) -> bool {
        self.held.values().any(|hold| *hold == Hold::Busy)
    }

    /// Holds `partition` while the actor works on it (see [`Outcome::DeadLetter`]).
    pub fn hold(&mut self, partition: u32) {
        self.held.insert(partition, Hold::Busy);
    }

    /// Frees a partition held by [`Deliveries::hold`] or an [`Outcome::DeadLetter`]; its
    /// record at `offset` is committed past, so its attempts are forgotten.
    pub fn release(&mut self, partition: u32, offset: u64) {
        if self.held.get(&partition) == Some(&Hold::Busy) {
            self.held.remove(&partition);
        }
        self.forget_through(partition, offset);
    }

    /// A retry delay ended: frees the partition when `token` is its current wait (a wait
    /// dropped by a rebalance or replaced since frees nothing). Returns whether it did.
    pub fn wake(&mut self, partition: u32, token: u64) -> bool {
        if self.held.get(&partition) == Some(&Hold::Waiting { token }) {
            self.held.remove(&partition);
            return true;
        }
        false
    }

    /// The subscriber answered `batch`. A batch of an earlier generation only frees its
    /// partition and asks for its commit (which the broker refuses: the actor reports it);
    /// its retries and dead letters are left to the partition's owner in the new generation.
    ///
    /// Offsets outside the batch are brought into it: `CommitUpTo` below the batch commits
    /// nothing and reads the whole batch again, above it commits the batch; `Retry` below
    /// the batch retries its first record, above it its last.
    pub fn answered(&mut self, batch: Batch, answer: Answer) -> Outcome {
        if self.held.get(&batch.partition) == Some(&Hold::Unanswered) {
            self.held.remove(&batch.partition);
        }
        let stale = batch.generation != self.generation;
        let outcome = self.outcome(batch, answer, stale);
        if let Outcome::DeadLetter { .. } = outcome {
            self.held.insert(batch.partition, Hold::Busy);
        }
        let committed = match &outcome {
            Outcome::Go { commit, .. }
            | Outcome::Wait { commit, .. }
            | Outcome::Exhausted { commit, .. }
            | Outcome::NoDeadLetterTopic { commit, .. } => *commit,
            Outcome::DeadLetter { .. } => None,
        };
        if let (Some(offset), false) = (committed, stale) {
            self.forget_through(batch.partition, offset);
        }
        outcome
    }

    fn outcome(&mut self, batch: Batch, answer: Answer, stale: bool) -> Outcome {
        let before = |offset: u64| (offset > batch.first).then(|| offset - 1);
        match answer {
            Answer::Commit => Outcome::Go {
                commit: Some(batch.last),
                resume: None,
            },
            Answer::Defer => Outcome::Go {
                commit: None,
                resume: None,
            },
            Answer::CommitUpTo(offset) if offset >= batch.last => Outcome::Go {
                commit: Some(batch.last),
                resume: None,
            },
            Answer::CommitUpTo(offset) => {
                let next = offset.saturating_add(1).max(batch.first);
                Outcome::Go {
                    commit: before(next),
                    resume: (!stale).then_some(next),
                }
            }
            Answer::Retry { offset, .. } if stale => Outcome::Go {
                commit: before(offset.clamp(batch.first, batch.last)),
                resume: None,
            },
            Answer::Retry { offset, after } => {
                let offset = offset.clamp(batch.first, batch.last);
                self.retry(batch.partition, offset, after, before(offset))
            }
            Answer::DeadLetter { offset, .. } if stale => Outcome::Go {
                commit: before(offset.clamp(batch.first, batch.last)),
                resume: None,
            },
            Answer::DeadLetter { offset, reason } => {
                let offset = offset.clamp(batch.first, batch.last);
                match self.dead_letter {
                    true => Outcome::DeadLetter {
                        offset,
                        attempts: self.attempt(batch.partition, offset),
                        reason: DeadLetterReason::Rejected(reason),
                    },
                    false => Outcome::NoDeadLetterTopic {
                        commit: before(offset),
                        offset,
                    },
                }
            }
        }
    }

    /// A retry of `offset`: another attempt after `delay`, or its last one is over.
    fn retry(
        &mut self,
        partition: u32,
        offset: u64,
        delay: Duration,
        commit: Option<u64>,
    ) -> Outcome {
        let attempts = self.attempt(partition, offset);
        if attempts >= self.max_attempts {
            return match self.dead_letter {
                true => Outcome::DeadLetter {
                    offset,
                    attempts,
                    reason: DeadLetterReason::RetriesExhausted,
                },
                false => Outcome::Exhausted {
                    commit,
                    offset,
                    attempts,
                },
            };
        }
        self.attempts.insert((partition, offset), attempts + 1);
        self.next_token += 1;
        let token = self.next_token;
        self.held.insert(partition, Hold::Waiting { token });
        Outcome::Wait {
            commit,
            from: offset,
            attempt: attempts + 1,
            delay,
            token,
        }
    }

    /// `offset` of `partition` and everything before it are committed: their attempt counts
    /// go.
    fn forget_through(&mut self, partition: u32, offset: u64) {
        self.attempts
            .retain(|&(p, o), _| p != partition || o > offset);
    }

    /// The attempt a delivery of the record at `offset` of `partition` is (1 for a record
    /// never retried).
    pub fn attempt(&self, partition: u32, offset: u64) -> u32 {
        self.attempts
            .get(&(partition, offset))
            .copied()
            .unwrap_or(1)
    }
}

/// A rebalance as differences: the partitions in `old` and not in `new` (revoked), and those
/// in `new` and not in `old` (assigned), each ascending.
pub fn rebalance(old: &[u32], new: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let (old_set, new_set): (BTreeSet<u32>, BTreeSet<u32>) =
        (old.iter().copied().collect(), new.iter().copied().collect());
    (
        old_set.difference(&new_set).copied().collect(),
        new_set.difference(&old_set).copied().collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn batch(partition: u32, first: u64, last: u64) -> Batch {
        Batch {
            partition,
            first,
            last,
            generation: 1,
        }
    }

    fn retry(offset: u64) -> Answer {
        Answer::Retry {
            offset,
            after: SECOND,
        }
    }

    #[test]
    fn a_partition_is_held_while_its_batch_is_unanswered_and_others_are_not() {
        let mut d = Deliveries::new(1, 3, false);
        d.delivered(batch(0, 0, 9));
        assert!(d.is_held(0) && !d.is_held(1));
        assert_eq!(d.held(), BTreeSet::from([0]));
        let done = d.answered(batch(0, 0, 9), Answer::Commit);
        assert_eq!(
            done,
            Outcome::Go {
                commit: Some(9),
                resume: None
            }
        );
        assert!(d.held().is_empty());
    }

    #[test]
    fn defer_commits_nothing_and_reads_on() {
        let mut d = Deliveries::new(1, 3, false);
        d.delivered(batch(0, 0, 9));
        assert_eq!(
            d.answered(batch(0, 0, 9), Answer::Defer),
            Outcome::Go {
                commit: None,
                resume: None
            }
        );
    }

    #[test]
    fn commit_up_to_commits_through_the_record_and_reads_the_rest_again() {
        let mut d = Deliveries::new(1, 3, false);
        let b = batch(0, 10, 19);
        assert_eq!(
            d.answered(b, Answer::CommitUpTo(14)),
            Outcome::Go {
                commit: Some(14),
                resume: Some(15)
            }
        );
        // At or past the last record: the whole batch.
        for offset in [19, 40] {
            assert_eq!(
                d.answered(b, Answer::CommitUpTo(offset)),
                Outcome::Go {
                    commit: Some(19),
                    resume: None
                }
            );
        }
        // Below the batch: nothing committed, all of it again.
        for offset in [0, 9] {
            assert_eq!(
                d.answered(b, Answer::CommitUpTo(offset)),
                Outcome::Go {
                    commit: None,
                    resume: Some(10)
                }
            );
        }
    }

    #[test]
    fn a_retry_commits_what_came_before_and_holds_the_partition_for_its_delay() {
        let mut d = Deliveries::new(1, 3, false);
        let b = batch(0, 10, 19);
        d.delivered(b);
        let Outcome::Wait {
            commit,
            from,
            attempt,
            delay,
            token,
        } = d.answered(b, retry(13))
        else {
            panic!("a wait")
        };
        assert_eq!((commit, from, attempt, delay), (Some(12), 13, 2, SECOND));
        assert!(d.is_held(0), "held during the delay");
        assert!(!d.wake(0, token + 1), "another wait's timer frees nothing");
        assert!(d.wake(0, token));
        assert!(!d.is_held(0));
        assert_eq!(d.attempt(0, 13), 2);
        // Retrying the first record of the batch commits nothing new.
        let again = batch(0, 13, 19);
        let Outcome::Wait { commit, .. } = d.answered(again, retry(13)) else {
            panic!("a wait")
        };
        assert_eq!(commit, None);
    }

    #[test]
    fn the_last_attempt_dead_letters_the_record_and_keeps_the_partition_held() {
        let mut d = Deliveries::new(1, 3, true);
        let b = batch(0, 5, 8);
        for _ in 0..2 {
            assert!(matches!(d.answered(b, retry(6)), Outcome::Wait { .. }));
        }
        assert_eq!(
            d.answered(b, retry(6)),
            Outcome::DeadLetter {
                offset: 6,
                attempts: 3,
                reason: DeadLetterReason::RetriesExhausted
            }
        );
        assert!(d.is_held(0), "held until dead-lettered and committed");
        d.release(0, 6);
        assert!(!d.is_held(0));
        assert_eq!(d.attempt(0, 6), 1, "forgotten once committed past");
    }

    #[test]
    fn without_a_dead_letter_topic_the_last_attempt_ends_after_committing_what_came_before() {
        let mut d = Deliveries::new(1, 1, false);
        assert_eq!(
            d.answered(batch(0, 5, 8), retry(7)),
            Outcome::Exhausted {
                commit: Some(6),
                offset: 7,
                attempts: 1
            }
        );
    }

    #[test]
    fn a_commit_past_a_retried_record_forgets_its_attempts() {
        let mut d = Deliveries::new(1, 3, true);
        let _ = d.answered(batch(0, 0, 4), retry(2));
        assert_eq!(d.attempt(0, 2), 2);
        let _ = d.answered(batch(0, 2, 4), Answer::Commit);
        assert_eq!(d.attempt(0, 2), 1);
    }

    #[test]
    fn retry_offsets_outside_the_batch_are_brought_into_it() {
        let mut d = Deliveries::new(1, 3, false);
        let b = batch(0, 10, 19);
        let Outcome::Wait { from, commit, .. } = d.answered(b, retry(3)) else {
            panic!("a wait")
        };
        assert_eq!((from, commit), (10, None));
        let Outcome::Wait { from, commit, .. } = d.answered(b, retry(99)) else {
            panic!("a wait")
        };
        assert_eq!((from, commit), (19, Some(18)));
    }

    #[test]
    fn a_new_generation_forgets_attempts_and_waits_but_not_unanswered_batches() {
        let mut d = Deliveries::new(1, 2, true);
        let Outcome::Wait { token, .. } = d.answered(batch(0, 0, 4), retry(1)) else {
            panic!("a wait")
        };
        d.delivered(batch(1, 0, 4));
        d.hold(2);
        d.enter(2);
        assert!(!d.is_held(0) && d.is_held(1) && d.is_held(2));
        d.release(2, 0);
        assert!(!d.wake(0, token));
        assert_eq!(d.attempt(0, 1), 1);
        // The old generation's batch: its commit is asked for (and will be refused), no retry.
        assert_eq!(
            d.answered(batch(1, 0, 4), retry(2)),
            Outcome::Go {
                commit: Some(1),
                resume: None
            }
        );
        assert!(d.held().is_empty());
    }

    #[test]
    fn a_dead_letter_answer_dead_letters_at_once_or_ends_without_a_topic() {
        let mut d = Deliveries::new(1, 3, true);
        let b = batch(0, 5, 8);
        let _ = d.answered(b, retry(6));
        let reject = |offset| Answer::DeadLetter {
            offset,
            reason: "no".into(),
        };
        assert_eq!(
            d.answered(batch(0, 6, 8), reject(6)),
            Outcome::DeadLetter {
                offset: 6,
                attempts: 2,
                reason: DeadLetterReason::Rejected("no".into())
            }
        );
        assert!(d.is_held(0), "held until dead-lettered and committed");
        let mut without = Deliveries::new(1, 3, false);
        assert_eq!(
            without.answered(b, reject(7)),
            Outcome::NoDeadLetterTopic {
                commit: Some(6),
                offset: 7
            }
        );
    }

    #[test]
    fn attempt_counts_are_read_back_from_the_commit_of_the_generation() {
        assert_eq!(AttemptNote(3).metadata(), "nanokafka.attempt=3");
        assert_eq!(
            AttemptNote::parse("nanokafka.attempt=3"),
            Some(AttemptNote(3))
        );
        for other in [
            "",
            "client state",
            "nanokafka.attempt=x",
            "nanokafka.attempt=1",
        ] {
            assert_eq!(AttemptNote::parse(other), None, "{other:?}");
        }
        let mut d = Deliveries::new(1, 3, true);
        d.enter(2);
        d.restore(&[0, 1]);
        assert_eq!(d.held(), BTreeSet::from([0, 1]));
        assert!(!d.restored(1, 0, None), "an older generation's read");
        assert!(d.restored(2, 0, Some((7, AttemptNote(3)))));
        assert!(d.restored(2, 1, None));
        assert!(d.held().is_empty());
        assert_eq!((d.attempt(0, 7), d.attempt(1, 7)), (3, 1));
        // Its last attempt: dead-lettered, never delivered again.
        assert!(matches!(
            d.answered(
                Batch {
                    generation: 2,
                    ..batch(0, 7, 9)
                },
                retry(7)
            ),
            Outcome::DeadLetter {
                offset: 7,
                attempts: 3,
                ..
            }
        ));
    }

    #[test]
    fn a_rebalance_is_told_as_differences() {
        assert_eq!(rebalance(&[0, 1, 2], &[1, 3]), (vec![0, 2], vec![3]));
        assert_eq!(rebalance(&[], &[0, 1]), (vec![], vec![0, 1]));
        assert_eq!(rebalance(&[4], &[4]), (vec![], vec![]));
    }
}
