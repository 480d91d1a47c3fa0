//! [`KafkaMember`]: one member of a Kafka consumer group, reading one topic with manual
//! commits. Behind `Consumer<T>`, the flat `join_group` / `poll` / `commit` calls and
//! subscriptions on the Kafka backend.
//!
//! # How it maps the embedded member
//! - **Joining.** librdkafka joins in the background; `join` polls until the first
//!   assignment arrives (records read meanwhile are kept for the first `poll_batch`). A
//!   member therefore joins only while the group's other members keep polling, as in Kafka.
//! - **Generations.** librdkafka does not expose the group's generation id, so
//!   [`Assignment::generation`] counts the assignments this member received: it grows on
//!   every rebalance, which is what callers use it for.
//! - **Batches.** Kafka's poll interleaves partitions; `poll_batch` returns consecutive
//!   records of one partition, as the embedded broker does, and keeps the others for the
//!   next call.
//! - **Commits.** The API commits a record ("this one and everything before it"); Kafka
//!   stores the next offset to read, so `commit(p, o)` stores `o + 1`. A commit for a
//!   partition this member does not own is refused (`PartitionNotAssigned`), as on the
//!   embedded broker, before it reaches the cluster.
//! - **Positions.** Kafka's consumer advances its position with each poll: an uncommitted
//!   record is read again only after a rebalance or a new member, not on the next poll.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, RebalanceProtocol,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::ClientContext;

use super::admin::{partition_count, partition_id};
use super::{kafka_error, topic_error, KafkaConfig};
use crate::error::{Error, Result};
use crate::group::delivery::AttemptNote;
use crate::group::{Assignment, GroupOptions};
use crate::types::{Header, Record};

/// What the rebalance callbacks learned: the assignments received and the current one.
#[derive(Debug, Default)]
struct Rebalances {
    generation: u64,
    partitions: Vec<u32>,
}

/// Records each rebalance's outcome for [`KafkaMember::assignment`].
#[derive(Debug)]
struct MemberContext {
    topic: String,
    state: Mutex<Rebalances>,
}

impl ClientContext for MemberContext {}

impl Rebalances {
    /// Follows `rebalance` of `topic` from the list librdkafka hands the callback: an
    /// assignment adds its partitions (and counts), a revocation removes its own (an eager
    /// revocation names the whole assignment, a cooperative one what moves), and a failed
    /// rebalance, which rdkafka answers by unassigning, leaves none.
    fn follow(&mut self, topic: &str, rebalance: &Rebalance<'_>) {
        let of_topic = |list: &TopicPartitionList| -> Vec<u32> {
            list.elements_for_topic(topic)
                .iter()
                .filter_map(|e| u32::try_from(e.partition()).ok())
                .collect()
        };
        match rebalance {
            Rebalance::Assign(list) => {
                self.partitions.extend(of_topic(list));
                self.partitions.sort_unstable();
                self.partitions.dedup();
                self.generation += 1;
            }
            Rebalance::Revoke(list) => {
                let revoked = of_topic(list);
                self.partitions.retain(|p| !revoked.contains(p));
            }
            Rebalance::Error(_) => self.partitions.clear(),
        }
    }
}

impl ConsumerContext for MemberContext {
    /// rdkafka's rebalance (assign or unassign, incremental under a cooperative protocol),
    /// then [`Rebalances::follow`], with two guards against librdkafka requests that wait
    /// without a timeout on the group's thread, which stops answering once the consumer
    /// has closed (a rebalance can still be served after that, while a drop polls the
    /// consumer until closed):
    /// - a rebalance served once the consumer is closed changes nothing (there is no
    ///   assignment left to change);
    /// - the assignment is learned from the rebalance's list alone, never asked for
    ///   (`rd_kafka_assignment`);
    /// - a leaving member serves its queued rebalances before the close begins
    ///   ([`KafkaMember::leave`]): the first guard alone leaves a window, between its check
    ///   and the call, in which the group's thread can terminate.
    ///
    /// Without them a member dropped while its group rebalanced could hang its drop for good.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        list: &mut TopicPartitionList,
    ) {
        if consumer.closed() {
            return;
        }
        let rebalance = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => Rebalance::Assign(list),
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => Rebalance::Revoke(list),
            other => Rebalance::Error(KafkaError::Rebalance(other.into())),
        };
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        // A revocation or a failure unassigns: what rdkafka's own handler does.
        let done = match (&rebalance, cooperative) {
            (Rebalance::Assign(list), true) => consumer.incremental_assign(list),
            (Rebalance::Assign(list), false) => consumer.assign(list),
            (_, true) => consumer.incremental_unassign(list),
            (_, false) => consumer.unassign(),
        };
        if let Err(e) = done {
            tracing::warn!(topic = %self.topic, error = %e, "a rebalance failed to apply");
        }
        if let Ok(mut state) = self.state.lock() {
            state.follow(&self.topic, &rebalance);
        }
    }
}

/// See the module docs.
pub(crate) struct KafkaMember {
    consumer: BaseConsumer<MemberContext>,
    topic: String,
    group: String,
    member: String,
    /// Records read but not yet returned: another partition's, or read while joining.
    pending: VecDeque<Record<Vec<u8>>>,
    timeout: Duration,
    /// The highest offset `commit_forward` committed per partition, and the generation it
    /// was committed in.
    forward: (u64, BTreeMap<u32, u64>),
    /// The partitions paused in librdkafka for a subscription (`poll_batch_holding`), and
    /// the generation they were paused in.
    paused: (u64, BTreeSet<u32>),
}

impl std::fmt::Debug for KafkaMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaMember")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("member", &self.member)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl KafkaMember {
    /// Joins `group` as `member` on `topic` and waits for the first assignment (up to the
    /// request timeout). Blocking.
    ///
    /// # Errors
    /// `InvalidId` for an empty or overlong id, `UnknownTopic`, `Timeout`-like `Kafka` when
    /// no assignment came within the request timeout.
    pub(crate) fn join(
        config: &KafkaConfig,
        topic: &str,
        group: &str,
        member: &str,
        options: GroupOptions,
    ) -> Result<Self> {
        crate::config::validate_id("group", group)?;
        crate::config::validate_id("member", member)?;
        let context = MemberContext {
            topic: topic.to_owned(),
            state: Mutex::new(Rebalances::default()),
        };
        let consumer: BaseConsumer<MemberContext> = config
            .consumer(group, member, options)
            .create_with_context(context)
            .map_err(|e| kafka_error("create consumer", e))?;
        partition_count(&consumer, topic, config.request_timeout)?;
        consumer
            .subscribe(&[topic])
            .map_err(|e| topic_error("subscribe", topic, e))?;
        let mut joined = KafkaMember {
            consumer,
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            pending: VecDeque::new(),
            timeout: config.request_timeout,
            forward: (0, BTreeMap::new()),
            paused: (0, BTreeSet::new()),
        };
        joined.wait_for_assignment()?;
        Ok(joined)
    }

    fn wait_for_assignment(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        while self.generation() == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Kafka {
                    op: "join group",
                    reason: format!(
                        "{} of group {} got no assignment of {} within {:?}",
                        self.member, self.group, self.topic, self.timeout
                    ),
                });
            }
            self.poll_one(left.min(Duration::from_millis(100)))?;
        }
        Ok(())
    }

    fn generation(&self) -> u64 {
        self.consumer
            .context()
            .state
            .lock()
            .map_or(0, |state| state.generation)
    }

    /// The member's current assignment (see the module docs for its generation).
    pub(crate) fn assignment(&self) -> Assignment {
        self.consumer
            .context()
            .state
            .lock()
            .map(|state| Assignment {
                generation: state.generation,
                partitions: state.partitions.clone(),
            })
            .unwrap_or(Assignment {
                generation: 0,
                partitions: Vec::new(),
            })
    }

    /// Serves librdkafka's callbacks (rebalances) without waiting; records that arrive are
    /// kept for the next `poll_batch`. The member's sign of life, as Kafka's heartbeats run
    /// in librdkafka's own thread.
    ///
    /// # Errors
    /// As [`KafkaMember::poll_batch`].
    pub(crate) fn heartbeat(&mut self) -> Result<Assignment> {
        self.poll_one(Duration::ZERO)?;
        Ok(self.assignment())
    }

    /// Up to `max_records` consecutive records of one assigned partition, waiting up to
    /// `timeout` for the first (at most `MAX_WAIT`). Advances this member's position
    /// past them.
    ///
    /// # Errors
    /// `UnknownTopic` when the topic was deleted, `Kafka` for a consumer error.
    pub(crate) fn poll_batch(
        &mut self,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<Vec<u8>>>> {
        self.poll_batch_holding(max_records, timeout, &BTreeSet::new())
    }

    /// As [`KafkaMember::poll_batch`], never returning records of the `held` partitions: a
    /// subscription holds a partition while a batch of it is unanswered or waits for a
    /// retry. They are paused in librdkafka (no fetching) and resumed once no longer held;
    /// records of theirs already read stay pending, in order.
    ///
    /// # Errors
    /// As [`KafkaMember::poll_batch`]; `Kafka` when librdkafka refuses a pause or resume.
    pub(crate) fn poll_batch_holding(
        &mut self,
        max_records: usize,
        timeout: Duration,
        held: &BTreeSet<u32>,
    ) -> Result<Vec<Record<Vec<u8>>>> {
        self.pause_only(held)?;
        let deadline = Instant::now() + timeout.min(super::MAX_WAIT);
        loop {
            self.forget_unassigned();
            if self.pending.iter().any(|r| !held.contains(&r.partition)) {
                // Whatever else is already in librdkafka's queue joins the batch.
                while self.pending.len() < max_records && self.poll_one(Duration::ZERO)? {}
                return Ok(self.take_run(max_records, held));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if !self.poll_one(left)? && left.is_zero() {
                return Ok(Vec::new());
            }
        }
    }

    /// Polls librdkafka once for up to `timeout`; a record read is added to `pending`.
    /// Returns whether one was.
    fn poll_one(&mut self, timeout: Duration) -> Result<bool> {
        match self.consumer.poll(timeout) {
            None => Ok(false),
            Some(Ok(message)) => {
                self.pending.push_back(record_of(&message));
                Ok(true)
            }
            Some(Err(KafkaError::PartitionEOF(_))) => Ok(false),
            Some(Err(e)) => Err(topic_error("poll", &self.topic, e)),
        }
    }

    /// Drops pending records of partitions this member lost in a rebalance: their new owner
    /// reads them from the committed offset.
    fn forget_unassigned(&mut self) {
        let owned = self.assignment().partitions;
        self.pending.retain(|r| owned.contains(&r.partition));
    }

    /// Pauses the assigned partitions in `held` and resumes the others paused before (all
    /// of them are unpaused by a rebalance).
    fn pause_only(&mut self, held: &BTreeSet<u32>) -> Result<()> {
        let assignment = self.assignment();
        if self.paused.0 != assignment.generation {
            self.paused = (assignment.generation, BTreeSet::new());
        }
        let held: BTreeSet<u32> = assignment
            .partitions
            .iter()
            .copied()
            .filter(|p| held.contains(p))
            .collect();
        if held == self.paused.1 {
            return Ok(());
        }
        let list = |partitions: &mut dyn Iterator<Item = &u32>| {
            let mut list = TopicPartitionList::new();
            for &p in partitions {
                list.add_partition(&self.topic, partition_id(p));
            }
            list
        };
        let resume = list(&mut self.paused.1.difference(&held));
        let pause = list(&mut held.difference(&self.paused.1));
        if resume.count() > 0 {
            self.consumer
                .resume(&resume)
                .map_err(|e| kafka_error("resume", e))?;
        }
        if pause.count() > 0 {
            self.consumer
                .pause(&pause)
                .map_err(|e| kafka_error("pause", e))?;
        }
        self.paused.1 = held;
        Ok(())
    }

    /// Takes up to `max` pending records of the first pending record's partition that is
    /// not `held`, in order.
    fn take_run(&mut self, max: usize, held: &BTreeSet<u32>) -> Vec<Record<Vec<u8>>> {
        let first = self.pending.iter().find(|r| !held.contains(&r.partition));
        let Some(partition) = first.map(|r| r.partition) else {
            return Vec::new();
        };
        let mut run = Vec::new();
        let mut rest = VecDeque::with_capacity(self.pending.len());
        for record in self.pending.drain(..) {
            if record.partition == partition && run.len() < max {
                run.push(record);
            } else {
                rest.push_back(record);
            }
        }
        self.pending = rest;
        run
    }

    fn not_assigned(&self, partition: u32) -> Option<Error> {
        let assignment = self.assignment();
        (!assignment.partitions.contains(&partition)).then(|| Error::PartitionNotAssigned {
            topic: self.topic.clone(),
            group: self.group.clone(),
            member: self.member.clone(),
            partition,
            generation: assignment.generation,
        })
    }

    /// Commits `offset` of `partition` and everything before it (Kafka's committed offset
    /// `offset + 1`), synchronously.
    ///
    /// # Errors
    /// `PartitionNotAssigned` for a partition this member does not own; `IllegalGeneration`
    /// when the group is rebalancing (poll again, re-process from the committed offset);
    /// `Kafka` for other refusals.
    pub(crate) fn commit(&self, partition: u32, offset: u64) -> Result<()> {
        if let Some(refused) = self.not_assigned(partition) {
            return Err(refused);
        }
        let next = i64::try_from(offset.saturating_add(1)).unwrap_or(i64::MAX);
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&self.topic, partition_id(partition), Offset::Offset(next))
            .map_err(|e| kafka_error("commit", e))?;
        self.consumer
            .commit(&list, CommitMode::Sync)
            .map_err(|e| self.commit_error(e))
    }

    /// As [`KafkaMember::commit`], but never backwards within a generation: a commit at or
    /// below one this method already made is skipped. Kafka keeps the last commit, not the
    /// highest, and a subscription's acks run on several threads, so two commits of one
    /// partition could land out of order and move the group back.
    ///
    /// # Errors
    /// As [`KafkaMember::commit`].
    pub(crate) fn commit_forward(&mut self, partition: u32, offset: u64) -> Result<()> {
        if self.committed_through(partition, offset) {
            return Ok(());
        }
        self.commit(partition, offset)?;
        self.forward.1.insert(partition, offset);
        Ok(())
    }

    /// Whether this generation already committed `partition` through `offset` (a
    /// [`KafkaMember::commit_forward`] or [`KafkaMember::commit_note`] at or past it); a new
    /// generation forgets the earlier ones' commits first.
    fn committed_through(&mut self, partition: u32, offset: u64) -> bool {
        let generation = self.generation();
        if self.forward.0 != generation {
            self.forward = (generation, BTreeMap::new());
        }
        self.forward
            .1
            .get(&partition)
            .is_some_and(|&done| done >= offset)
    }

    /// Commits `next` as `partition`'s committed offset (Kafka's: the next record to read)
    /// with `note` as the commit's metadata: a retried record's attempt count. Skipped when
    /// this generation already committed past `next` (as `commit_forward`); a note of the
    /// same offset with a later attempt is made.
    ///
    /// # Errors
    /// As [`KafkaMember::commit`].
    pub(crate) fn commit_note(
        &mut self,
        partition: u32,
        next: u64,
        note: AttemptNote,
    ) -> Result<()> {
        if self.committed_through(partition, next) {
            return Ok(());
        }
        if let Some(refused) = self.not_assigned(partition) {
            return Err(refused);
        }
        let mut list = TopicPartitionList::new();
        let mut element = list.add_partition(&self.topic, partition_id(partition));
        let at = Offset::Offset(i64::try_from(next).unwrap_or(i64::MAX));
        element
            .set_offset(at)
            .map_err(|e| kafka_error("commit", e))?;
        element.set_metadata(note.metadata());
        self.consumer
            .commit(&list, CommitMode::Sync)
            .map_err(|e| self.commit_error(e))?;
        if let Some(done) = next.checked_sub(1) {
            let highest = self.forward.1.entry(partition).or_insert(done);
            *highest = (*highest).max(done);
        }
        Ok(())
    }

    /// Each of `partitions` with its committed offset and the attempt note the commit
    /// carries, when it has both (see [`AttemptNote`]).
    ///
    /// # Errors
    /// `Kafka` when the committed offsets cannot be read.
    pub(crate) fn committed_notes(&self, partitions: &[u32]) -> Result<CommittedNotes> {
        let mut list = TopicPartitionList::new();
        for &partition in partitions {
            list.add_partition(&self.topic, partition_id(partition));
        }
        let committed = self
            .consumer
            .committed_offsets(list, self.timeout)
            .map_err(|e| topic_error("committed offsets", &self.topic, e))?;
        let note_of = |partition: u32| {
            let element = committed.find_partition(&self.topic, partition_id(partition))?;
            let Offset::Offset(at) = element.offset() else {
                return None;
            };
            Some((
                u64::try_from(at).ok()?,
                AttemptNote::parse(element.metadata())?,
            ))
        };
        Ok(partitions.iter().map(|&p| (p, note_of(p))).collect())
    }

    /// Puts `records`, taken from this member by a poll and not handed over, back first in
    /// line, in order (a subscription's partition held until its attempt counts are read).
    pub(crate) fn unread(&mut self, records: Vec<Record<Vec<u8>>>) {
        for record in records.into_iter().rev() {
            self.pending.push_front(record);
        }
    }

    /// Commits `list` (Kafka's next offsets) as this member, without the ownership check:
    /// the flat `commit`, which names no member.
    ///
    /// # Errors
    /// As [`KafkaMember::commit`], without `PartitionNotAssigned`.
    pub(crate) fn commit_list(&self, list: &TopicPartitionList) -> Result<()> {
        self.consumer
            .commit(list, CommitMode::Sync)
            .map_err(|e| self.commit_error(e))
    }

    fn commit_error(&self, e: KafkaError) -> Error {
        match e.rdkafka_error_code() {
            Some(
                RDKafkaErrorCode::IllegalGeneration
                | RDKafkaErrorCode::RebalanceInProgress
                | RDKafkaErrorCode::UnknownMemberId,
            ) => {
                let generation = self.generation();
                Error::IllegalGeneration {
                    topic: self.topic.clone(),
                    group: self.group.clone(),
                    member: self.member.clone(),
                    generation,
                    current: generation + 1,
                }
            }
            _ => topic_error("commit", &self.topic, e),
        }
    }

    /// Moves this member's position in `partition` to `offset` (the next record read).
    ///
    /// # Errors
    /// `PartitionNotAssigned`; `Kafka` when librdkafka refuses the seek.
    pub(crate) fn seek(&mut self, partition: u32, offset: u64) -> Result<()> {
        if let Some(refused) = self.not_assigned(partition) {
            return Err(refused);
        }
        self.pending.retain(|r| r.partition != partition);
        let at = Offset::Offset(i64::try_from(offset).unwrap_or(i64::MAX));
        self.consumer
            .seek(&self.topic, partition_id(partition), at, self.timeout)
            .map_err(|e| topic_error("seek", &self.topic, e))
    }

    /// The next offset this member reads in `partition`, when librdkafka knows one.
    pub(crate) fn position(&self, partition: u32) -> Option<u64> {
        let pending = self.pending.iter().find(|r| r.partition == partition);
        if let Some(record) = pending {
            return Some(record.offset);
        }
        let positions = self.consumer.position().ok()?;
        let element = positions.find_partition(&self.topic, partition_id(partition))?;
        match element.offset() {
            Offset::Offset(o) => u64::try_from(o).ok(),
            _ => None,
        }
    }
}

/// Partitions with their committed offset and its attempt note, when they have both.
pub(crate) type CommittedNotes = Vec<(u32, Option<(u64, AttemptNote)>)>;

/// The longest a leaving member serves its consumer before librdkafka closes it (see
/// [`KafkaMember::leave`]).
const LEAVE_SERVE: Duration = Duration::from_secs(2);

/// A leaving member's queue that stays empty this long, with nothing assigned, is drained.
const LEAVE_QUIET: Duration = Duration::from_millis(10);

impl KafkaMember {
    /// Leaves the group, so its partitions move to the other members at once. Blocking.
    ///
    /// Then it serves the consumer until nothing is assigned and its queue is quiet (up to
    /// [`LEAVE_SERVE`]): the rebalances already queued (a member that stopped polling while
    /// its group rebalanced has some) and the revocation the unsubscribe causes. Their
    /// callbacks call librdkafka's assign, which waits without a timeout for the group's
    /// thread. Now that thread answers. Served later, by the close in the consumer's drop,
    /// a rebalance the group no longer waits for could meet a group thread that has
    /// terminated in the meantime: it drops the call unanswered, and the drop waits forever.
    pub(crate) fn leave(&mut self) {
        self.pending.clear();
        self.consumer.unsubscribe();
        let deadline = Instant::now() + LEAVE_SERVE;
        while Instant::now() < deadline {
            let quiet = self.consumer.poll(LEAVE_QUIET).is_none();
            if quiet && self.assignment().partitions.is_empty() {
                break;
            }
        }
    }
}

impl Drop for KafkaMember {
    /// Leaves the group (librdkafka then closes the consumer). Blocking: the backend drops
    /// members on blocking threads.
    fn drop(&mut self) {
        self.leave();
    }
}

/// A Kafka record as the API's raw record. A null value (a tombstone) reads as empty
/// bytes, as on the embedded broker; a record without a timestamp has 0.
pub(crate) fn record_of(message: &BorrowedMessage<'_>) -> Record<Vec<u8>> {
    // Read through librdkafka's C accessors: the binding's own panics on a key that is not
    // UTF-8, which any client may send. Such a key is shown with replacement characters, as
    // the embedded broker shows it.
    let headers = super::client::headers(message)
        .into_iter()
        .map(|(key, value)| Header {
            key: String::from_utf8_lossy(&key).into_owned(),
            value,
        })
        .collect();
    Record {
        partition: u32::try_from(message.partition()).unwrap_or_default(),
        offset: u64::try_from(message.offset()).unwrap_or_default(),
        timestamp_ms: message
            .timestamp()
            .to_millis()
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0),
        key: message.key().map(<[u8]>::to_vec),
        value: message.payload().map(<[u8]>::to_vec).unwrap_or_default(),
        headers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(topic: &str, partitions: &[i32]) -> TopicPartitionList {
        let mut list = TopicPartitionList::new();
        for &p in partitions {
            list.add_partition(topic, p);
        }
        list
    }

    #[test]
    fn the_assignment_follows_each_rebalance_list() {
        let mut state = Rebalances::default();
        let (all, other) = (list("t", &[0, 1, 2]), list("other", &[7]));
        state.follow("t", &Rebalance::Assign(&all));
        state.follow("t", &Rebalance::Assign(&other));
        assert_eq!(
            (state.generation, &state.partitions[..]),
            (2, &[0, 1, 2][..])
        );
        // Cooperative: only what moves is revoked, then added back elsewhere.
        state.follow("t", &Rebalance::Revoke(&list("t", &[1])));
        assert_eq!(state.partitions, [0, 2]);
        state.follow("t", &Rebalance::Assign(&list("t", &[3])));
        assert_eq!(
            (state.generation, &state.partitions[..]),
            (3, &[0, 2, 3][..])
        );
        // Eager: the revocation names the whole assignment.
        state.follow("t", &Rebalance::Revoke(&list("t", &[0, 2, 3])));
        assert!(state.partitions.is_empty());
        state.follow("t", &Rebalance::Assign(&list("t", &[1])));
        let failed = KafkaError::Rebalance(RDKafkaErrorCode::Fail);
        state.follow("t", &Rebalance::Error(failed));
        assert!(state.partitions.is_empty());
        assert_eq!(state.generation, 4);
    }
}
