//! [`StreamCommitter`]: commits for a [`RecordStream`](crate::RecordStream) made apart from
//! it, coalesced per partition and flushed on an interval, on demand, on a rebalance and when
//! the stream stops (Kafka's `commitAsync` with auto-commit's interval). The stream and its
//! committers share one [`Ledger`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Instant;

use crate::async_handle::AsyncNanoKafka;
use crate::error::{Error, Result};
use crate::messages::FencedCommit;
use crate::types::Record;

/// How many generations back a partition's yielded offsets are remembered, to fence the
/// commit of a record read before the latest rebalances. Older records' commits are
/// refused as not read by this stream.
pub(super) const GENERATIONS_REMEMBERED: usize = 8;

/// What a stream and its committers share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) topic: String,
    ledger: Mutex<Ledger>,
    /// Held while a flush sends, so that two flushes never reorder one partition's commits.
    flushing: tokio::sync::Mutex<()>,
    target: CommitTarget,
    /// A committer asked the stream to stop (it left the group).
    pub(super) leaving: AtomicBool,
    commits_sent: AtomicU64,
}

/// The stream's reading as commits need it: its generation, what it yielded in which
/// generation, and the commits asked for and not yet sent.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    generation: u64,
    /// Per partition, the offsets yielded in each of its last generations: `(generation,
    /// first, last)`, newest last. A commit looks the record's generation up here.
    yielded: BTreeMap<u32, VecDeque<(u64, u64, u64)>>,
    /// Per partition, the latest commit asked for: `(generation, offset)`.
    pending: BTreeMap<u32, (u64, u64)>,
    /// When the oldest commit now pending was asked for: the interval runs from there.
    pub(super) pending_since: Option<Instant>,
    /// The stream's task, woken when a first commit is pending (to arm its interval) or a
    /// committer left. Set only when the stream returns `Pending`.
    pub(super) waker: Option<Waker>,
}

/// Where commits go, per backend: one `match` per call.
#[derive(Debug, Clone)]
pub(super) enum CommitTarget {
    Embedded(EmbeddedTarget),
    #[cfg(feature = "kafka")]
    Kafka(crate::kafka::stream_member::KafkaCommits),
}

/// The embedded broker's member a stream reads as.
#[derive(Debug, Clone)]
pub(super) struct EmbeddedTarget {
    pub(super) handle: AsyncNanoKafka,
    pub(super) topic: String,
    pub(super) group: String,
    pub(super) member: String,
}

impl EmbeddedTarget {
    fn fenced(&self, generation: u64, partition: u32, offset: u64) -> FencedCommit {
        FencedCommit {
            topic: self.topic.clone(),
            group: self.group.clone(),
            member: self.member.clone(),
            generation,
            partition,
            offset,
        }
    }
}

impl Shared {
    pub(super) fn new(topic: &str, generation: u64, target: CommitTarget) -> Arc<Self> {
        Arc::new(Shared {
            topic: topic.to_owned(),
            ledger: Mutex::new(Ledger {
                generation,
                ..Ledger::default()
            }),
            flushing: tokio::sync::Mutex::new(()),
            target,
            leaving: AtomicBool::new(false),
            commits_sent: AtomicU64::new(0),
        })
    }

    /// The ledger; a panic while it was held left nothing half-changed worth refusing over.
    pub(super) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends every pending commit, each fenced by the generation its record was yielded in.
    /// Returns the first refusal; refused commits are dropped (their records are read
    /// again after the rebalance that fenced them).
    pub(super) async fn flush(&self) -> Result<()> {
        let _one_at_a_time = self.flushing.lock().await;
        let pending = {
            let mut ledger = self.ledger();
            ledger.pending_since = None;
            std::mem::take(&mut ledger.pending)
        };
        let mut refused = None;
        for (partition, (generation, offset)) in pending {
            self.commits_sent.fetch_add(1, Ordering::Relaxed);
            let committed = self.target.commit(generation, partition, offset).await;
            if let Err(e) = committed {
                refused.get_or_insert(e);
            }
        }
        refused.map_or(Ok(()), Err)
    }

    /// The pending commits, sent without waiting for their answers (a dropped stream's:
    /// they reach the coordinator before the leave it sends next).
    pub(super) fn send_pending_now(&self) {
        let pending = std::mem::take(&mut self.ledger().pending);
        for (partition, (generation, offset)) in pending {
            self.commits_sent.fetch_add(1, Ordering::Relaxed);
            self.target.send_now(generation, partition, offset);
        }
    }
}

impl Ledger {
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// The stream reads in `generation` now, holding `kept` of the partitions it held in the
    /// generation before. When `generation` directly follows the last one, nobody else owned
    /// a kept partition in between, so what was yielded of it still counts as read by this
    /// member: its pending commit and its yielded offsets move into the new generation, and
    /// the rebalance does not make the member read them again (as a Kafka member keeps its
    /// kept partitions' positions through a cooperative rebalance). A jump of more than one
    /// generation (an eviction, missed rebalances) moves nothing: the partition may have had
    /// another owner meanwhile, whose commits must not be overwritten.
    pub(super) fn entered(&mut self, generation: u64, kept: &[u32]) {
        let before = self.generation;
        self.generation = generation;
        if before.checked_add(1) != Some(generation) {
            return;
        }
        for partition in kept {
            if let Some((g, _)) = self
                .pending
                .get_mut(partition)
                .filter(|(g, _)| *g == before)
            {
                *g = generation;
            }
            let ranges = self.yielded.get_mut(partition).into_iter().flatten();
            for (g, _, _) in ranges.filter(|(g, _, _)| *g == before) {
                *g = generation;
            }
        }
    }

    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Keeps `waker` to wake when a first commit is pending or a committer leaves.
    pub(super) fn wake_on_commit(&mut self, waker: &Waker) {
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            self.waker = Some(waker.clone());
        }
    }

    /// The generation `offset` of `partition` was yielded in, the newest if several.
    pub(super) fn read_in(&self, partition: u32, offset: u64) -> Option<u64> {
        let ranges = self.yielded.get(&partition)?;
        ranges
            .iter()
            .rev()
            .find(|(_, first, last)| (*first..=*last).contains(&offset))
            .map(|(generation, _, _)| *generation)
    }

    /// Notes that offsets `first..=last` of `partition` are yielded in the current generation.
    pub(super) fn note_yielded(&mut self, partition: u32, first: u64, last: u64) {
        let generation = self.generation;
        let ranges = self.yielded.entry(partition).or_default();
        match ranges.back_mut() {
            Some((g, lo, hi)) if *g == generation => {
                *lo = (*lo).min(first);
                *hi = (*hi).max(last);
            }
            _ => {
                ranges.push_back((generation, first, last));
                if ranges.len() > GENERATIONS_REMEMBERED {
                    ranges.pop_front();
                }
            }
        }
    }

    /// Asks for the commit of `offset` of `partition` in `generation` (the latest asked for
    /// wins). Returns the waker to wake when it is the first pending commit.
    fn ask(&mut self, generation: u64, partition: u32, offset: u64) -> Option<Waker> {
        self.pending.insert(partition, (generation, offset));
        if self.pending_since.is_some() {
            return None;
        }
        self.pending_since = Some(Instant::now());
        self.waker.take()
    }
}

impl CommitTarget {
    async fn commit(&self, generation: u64, partition: u32, offset: u64) -> Result<()> {
        match self {
            CommitTarget::Embedded(e) => {
                let commit = e.fenced(generation, partition, offset);
                e.handle.fenced_commit(commit).await
            }
            #[cfg(feature = "kafka")]
            CommitTarget::Kafka(k) => k.commit(generation, partition, offset).await,
        }
    }

    fn send_now(&self, generation: u64, partition: u32, offset: u64) {
        match self {
            CommitTarget::Embedded(e) => {
                if let Ok(addr) = e.handle.addr() {
                    addr.do_send(e.fenced(generation, partition, offset));
                }
            }
            #[cfg(feature = "kafka")]
            CommitTarget::Kafka(k) => k.commit_detached(generation, partition, offset),
        }
    }

    async fn leave(&self) -> Result<()> {
        match self {
            CommitTarget::Embedded(e) => e.handle.leave_group(&e.topic, &e.group, &e.member).await,
            #[cfg(feature = "kafka")]
            CommitTarget::Kafka(k) => k.leave().await,
        }
    }
}

/// Commits for a [`RecordStream`](crate::RecordStream) made apart from it, so that the
/// stream can be handed to an actor's `ctx.add_stream` and still be committed and stopped
/// (from [`RecordStream::committer`](crate::RecordStream::committer); cheap to clone, `Send`
/// and `Sync`).
///
/// Commits are coalesced, as a Kafka consumer's `commitAsync` with auto-commit's interval:
/// [`StreamCommitter::commit`] notes the offset (per partition the latest asked for wins)
/// and the stream sends what is pending once
/// [`StreamOptions::commit_interval`](crate::StreamOptions::commit_interval) has passed
/// since the oldest of it, so N commits within an interval cost one coordinator commit per
/// partition. Pending commits are also sent by [`StreamCommitter::flush`] (which waits for
/// the answers), by [`StreamCommitter::leave`], when the stream sees a rebalance (before it
/// reads the new generation), and when the stream is dropped (sent before its leave,
/// without waiting). An offset is never committed before it was asked for: at-least-once
/// is unchanged, and a crash loses at most the last interval's commits (those records are
/// read again).
///
/// Each commit is fenced by the generation its record was yielded in, as
/// [`RecordStream::commit`](crate::RecordStream::commit) is; on the embedded broker, a
/// partition the member keeps into the very next generation carries its reads and pending
/// commit into it, so a rebalance that leaves it with the member does not make it read its
/// records again (Kafka's cooperative rebalance keeps them too). A commit the coordinator
/// refuses (`IllegalGeneration`: the group rebalanced first) is dropped, and the stream
/// yields that error as its next item (or `flush` returns it): its records are read again
/// from the committed offset, by this member or the partition's new owner.
#[derive(Debug, Clone)]
pub struct StreamCommitter {
    pub(super) shared: Arc<Shared>,
}

impl StreamCommitter {
    /// Asks for the commit of `offset` of `partition` (and everything before it), fenced by
    /// the generation the stream yielded it in (its current one if it did not). Sent with
    /// the next flush; a later commit of the partition replaces it.
    pub fn commit(&self, partition: u32, offset: u64) {
        let mut ledger = self.shared.ledger();
        let generation = ledger
            .read_in(partition, offset)
            .unwrap_or(ledger.generation);
        let waker = ledger.ask(generation, partition, offset);
        drop(ledger);
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Asks for the commit of `record` and everything before it in its partition, as
    /// [`StreamCommitter::commit`].
    ///
    /// # Errors
    /// `InvalidArgument` for a record the stream did not yield in its last 8 generations
    /// (nothing is pending then; [`StreamCommitter::commit`] commits its offset anyway).
    pub fn commit_record<T>(&self, record: &Record<T>) -> Result<()> {
        let mut ledger = self.shared.ledger();
        let generation = ledger
            .read_in(record.partition, record.offset)
            .ok_or_else(|| Error::InvalidArgument {
                name: "record",
                reason: format!(
                    "{}/{}@{} was not yielded by this stream in its last \
                     {GENERATIONS_REMEMBERED} generations; commit commits its offset anyway",
                    self.shared.topic, record.partition, record.offset
                ),
            })?;
        let waker = ledger.ask(generation, record.partition, record.offset);
        drop(ledger);
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// Sends the pending commits now and waits for the coordinator's answers.
    ///
    /// # Errors
    /// The first refusal (`IllegalGeneration`, `UnknownMember`, `PartitionNotAssigned`,
    /// `OffsetOutOfRange`, `Io`, `BrokerStopped`); the refused commits are dropped, the
    /// others are made.
    pub async fn flush(&self) -> Result<()> {
        self.shared.flush().await
    }

    /// Flushes, then leaves the group and waits for the answer; the stream ends (yields
    /// `None`, so an actor's `StreamHandler::finished` runs) and its drop sends nothing.
    ///
    /// # Errors
    /// The flush's refusal, or the leave's (`UnknownMember`: already evicted); the stream
    /// ends either way.
    pub async fn leave(&self) -> Result<()> {
        let flushed = self.shared.flush().await;
        self.shared.leaving.store(true, Ordering::Release);
        let waker = self.shared.ledger().waker.take();
        if let Some(waker) = waker {
            waker.wake();
        }
        let left = self.shared.target.leave().await;
        flushed.and(left)
    }

    /// Commits sent to the coordinator so far (one per partition per flush): what the
    /// coalescing saves shows against the commits asked for.
    pub fn commits_sent(&self) -> u64 {
        self.shared.commits_sent.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::Ledger;

    /// A ledger in generation 1 that yielded offsets 0..=9 of partitions 0 and 1 and has a
    /// commit of offset 9 pending on each.
    fn read_both() -> Ledger {
        let mut ledger = Ledger {
            generation: 1,
            ..Ledger::default()
        };
        for partition in [0, 1] {
            ledger.note_yielded(partition, 0, 9);
            ledger.ask(1, partition, 9);
        }
        ledger
    }

    #[test]
    fn the_next_generation_keeps_what_was_read_of_the_kept_partitions_only() {
        let mut ledger = read_both();
        ledger.entered(2, &[0]);
        assert_eq!(ledger.pending[&0], (2, 9));
        assert_eq!(ledger.read_in(0, 5), Some(2));
        // The partition that moved stays fenced by the generation it was read in.
        assert_eq!(ledger.pending[&1], (1, 9));
        assert_eq!(ledger.read_in(1, 5), Some(1));
    }

    #[test]
    fn a_jump_over_a_generation_keeps_nothing() {
        let mut ledger = read_both();
        // Generation 2 may have given partition 0 to another member, who read on.
        ledger.entered(3, &[0, 1]);
        assert_eq!(ledger.pending[&0], (1, 9));
        assert_eq!(ledger.read_in(0, 5), Some(1));
        // Entering the same generation again changes nothing either.
        ledger.entered(3, &[0, 1]);
        assert_eq!(ledger.read_in(1, 5), Some(1));
    }
}
