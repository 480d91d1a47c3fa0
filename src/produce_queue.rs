//! [`ProduceQueue`]: what a partition has accepted and not yet written (the group commit),
//! and what `Backpressure::Block` parked, with the rules that move produces between them.
//! Plain Rust: the `PartitionActor` owns one, feeds it produces and the clock, and
//! schedules the flush and the expiry timers it asks for.
//!
//! # Rules
//! * A produce that can never be written (a record over the size limit; a record without a
//!   key on a compacted topic, see `CleanupPolicy`) is refused at once: parked or batched,
//!   it would fail its neighbours too. The key rule follows the topic's policy as of the
//!   offer, so the produce after an alter follows the new one.
//! * Backlog at `max_size`: `Reject` answers `PartitionFull`; `Block` parks the produce, as
//!   does any produce arriving while others are parked (they keep their order).
//! * Otherwise it joins the group commit: every produce accepted before the next flush shares
//!   one `write` (and one `fdatasync` under `FsyncPolicy::Always`), except that under the
//!   other policies batches past [`MERGE_MAX_BYTES`] together are written one after another
//!   as they came instead of being re-encoded into one. The owner flushes once its
//!   mailbox is drained, or at once past [`GROUP_COMMIT_MAX_BYTES`] or
//!   [`GROUP_COMMIT_MAX_REQUESTS`].
//! * Room freed by a commit, by retention or by an alter admits parked produces, oldest
//!   first. An alter also applies its key rule to them (a produce parked before an alter to
//!   `compact` and without a key is refused), and its backpressure (`Reject` answers those
//!   that still do not fit).
//! * A parked produce that waited `block_timeout` since its call is answered `Timeout` and
//!   never written.
//!
//! Every produce is answered exactly once, through its [`AppendAnswer`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::{Backpressure, CleanupPolicy};
use crate::error::{Error, Result};
use crate::metrics::PartitionMetrics;
use crate::partition::Partition;
use crate::routing::{key_required, keyless};
use crate::storage::log::check_batch_limits;
use crate::storage::{AppendInfo, CheckedKafkaBatch, KafkaAppend, RecordBatch};

/// A group commit waits for at most this many bytes (one `write` of ~1 MiB takes ~0.1 ms)...
pub const GROUP_COMMIT_MAX_BYTES: usize = 1 << 20;
/// ...or this many produce requests, so a mailbox that never drains cannot delay a flush.
pub const GROUP_COMMIT_MAX_REQUESTS: usize = 1024;

/// Bytes up to which the records of consecutive native produces are re-encoded into one
/// batch (one frame, one `write`). Past it each batch is appended as it came, one `write`
/// each: re-encoding parses and encodes every record into a buffer that grows, which for
/// batches of this size costs more than the `write` it saves. Under `FsyncPolicy::Always`
/// everything is merged all the same, so that the group shares one `fdatasync`.
const MERGE_MAX_BYTES: usize = 64 << 10;

/// Where a produce's answer goes (a lane's reply in the broker).
pub trait AppendAnswer: Sized {
    fn answer(self, result: Result<AppendInfo>);

    /// [`AppendAnswer::answer`], giving back the batch that was written (emptied or not),
    /// for the producer's next one; by default it is dropped.
    fn answer_giving_back(self, result: Result<AppendInfo>, spent: RecordBatch) {
        drop(spent);
        self.answer(result);
    }

    /// The answer to a Kafka client's batch; by default as [`AppendAnswer::answer`].
    fn answer_kafka(self, result: Result<KafkaAppend>) {
        self.answer(result.map(AppendInfo::from));
    }
}

/// What a produce writes: native records (coalesced with their neighbours into one batch),
/// or a Kafka client's record batch (written as it is, on its own).
#[derive(Debug)]
pub enum Produced {
    Records(RecordBatch),
    Kafka(bytes::Bytes),
}

/// A produce that passed [`ProduceQueue::offer`]'s checks: native records, or a Kafka
/// client's batch checked whole (its records are not read again when it is written).
#[derive(Debug)]
enum Checked {
    Records(RecordBatch),
    Kafka(CheckedKafkaBatch),
}

impl Checked {
    fn size_bytes(&self) -> usize {
        match self {
            Checked::Records(batch) => batch.size_bytes(),
            Checked::Kafka(batch) => batch.len(),
        }
    }

    /// The index of each record without a key.
    fn keyless(&self) -> Vec<u32> {
        match self {
            Checked::Records(records) => keyless(records),
            Checked::Kafka(batch) => batch.keyless().to_vec(),
        }
    }
}

#[derive(Debug)]
struct Queued<R> {
    batch: Checked,
    /// Records in `batch` as it came (a flush appends the others to the first).
    count: u64,
    /// When the produce was called (the block timeout counts from there); set once parked.
    since: Option<Instant>,
    reply: R,
}

/// What became of an offered produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// In the group commit; `flush_now` when it is large enough to write at once.
    Pending { flush_now: bool },
    /// Parked; call [`ProduceQueue::expire`] after `wake_in`.
    Parked { wake_in: Duration },
    /// Refused, and answered.
    Answered,
}

/// See the module docs.
#[derive(Debug)]
pub struct ProduceQueue<R> {
    backpressure: Backpressure,
    /// Whether records without a key are refused (a compacted topic).
    cleanup_policy: CleanupPolicy,
    block_timeout: Duration,
    /// The group commit: accepted, not yet written.
    pending: Vec<Queued<R>>,
    pending_records: u64,
    pending_bytes: usize,
    parked: VecDeque<Queued<R>>,
    /// The partition's produce counters and append latency, recorded here because every
    /// acknowledged produce passes through [`ProduceQueue::flush`] and nowhere else.
    metrics: PartitionMetrics,
}

impl<R: AppendAnswer> ProduceQueue<R> {
    pub fn new(backpressure: Backpressure, block_timeout: Duration) -> Self {
        ProduceQueue {
            backpressure,
            cleanup_policy: CleanupPolicy::default(),
            block_timeout,
            pending: Vec::new(),
            pending_records: 0,
            pending_bytes: 0,
            parked: VecDeque::new(),
            metrics: PartitionMetrics::default(),
        }
    }

    /// What the next produce that meets `max_size` gets (a topic altered while running).
    pub fn set_backpressure(&mut self, backpressure: Backpressure) {
        self.backpressure = backpressure;
    }

    /// The topic's policy, for the key rule of the next offer (a topic created or altered).
    pub fn set_cleanup_policy(&mut self, policy: CleanupPolicy) {
        self.cleanup_policy = policy;
    }

    /// Records produces and append latencies with `metrics` (none by default).
    pub fn with_metrics(mut self, metrics: PartitionMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// How many produces `Backpressure::Block` parked.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// Whether produces wait in the group commit.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Accepts `batch` into the group commit, refuses it, or parks it, per the rules. `since`
    /// is when the produce was called, if earlier than now (it waited in a lane); the clock is
    /// read only when the produce is parked.
    pub fn offer(
        &mut self,
        partition: &Partition,
        batch: Produced,
        reply: R,
        since: Option<Instant>,
    ) -> Offered {
        let kafka = matches!(batch, Produced::Kafka(_));
        let (batch, count) = match self.check(partition, batch) {
            Ok(checked) => checked,
            Err(e) => {
                match kafka {
                    false => reply.answer(Err(e)),
                    true => reply.answer_kafka(Err(e)),
                }
                return Offered::Answered;
            }
        };
        match (partition.full(self.pending_records), self.backpressure) {
            (Some(backlog), Backpressure::Reject) => {
                let (topic, number) = partition.id();
                reply.answer(Err(Error::PartitionFull {
                    topic: topic.to_owned(),
                    partition: number,
                    backlog,
                    max_size: partition.max_size().unwrap_or_default(),
                }));
                Offered::Answered
            }
            (None, _) if self.parked.is_empty() => Offered::Pending {
                flush_now: self.push_pending(Queued::new(batch, count, since, reply)),
            },
            _ => {
                let since = since.unwrap_or_else(Instant::now);
                self.parked
                    .push_back(Queued::new(batch, count, Some(since), reply));
                Offered::Parked {
                    wake_in: self.block_timeout.saturating_sub(since.elapsed()),
                }
            }
        }
    }

    /// The checks a produce must pass before it is parked or batched (see the module docs):
    /// the produce as it will be written, and its record count. A Kafka client's batch is
    /// checked whole here, every record decompressed once (the append does not read them
    /// again).
    fn check(&self, partition: &Partition, batch: Produced) -> Result<(Checked, u64)> {
        let checked = match batch {
            Produced::Records(records) => {
                check_batch_limits(&records, partition.max_record_bytes())?;
                Checked::Records(records)
            }
            Produced::Kafka(bytes) => Checked::Kafka(partition.check_kafka_batch(bytes)?),
        };
        self.check_keys(partition, &checked)?;
        let count = match &checked {
            Checked::Records(records) => records.len() as u64,
            Checked::Kafka(batch) => u64::from(batch.records_count()),
        };
        Ok((checked, count))
    }

    /// The key rule of the topic's policy (a compacted topic refuses records without a key).
    fn check_keys(&self, partition: &Partition, batch: &Checked) -> Result<()> {
        if !self.cleanup_policy.compacts() {
            return Ok(());
        }
        let (topic, number) = partition.id();
        key_required((topic, Some(number)), batch.keyless())
    }

    /// Adds to the group commit; whether it should be written at once.
    fn push_pending(&mut self, queued: Queued<R>) -> bool {
        self.pending_records += queued.count;
        self.pending_bytes += queued.batch.size_bytes();
        self.pending.push(queued);
        self.pending_bytes >= GROUP_COMMIT_MAX_BYTES
            || self.pending.len() >= GROUP_COMMIT_MAX_REQUESTS
    }

    /// Writes the group commit with one append and answers each produce with its own
    /// offsets; `Ok(true)` when records were written. `partition` is the open partition, or
    /// why there is none.
    ///
    /// Retention runs once, after the answers (see [`Partition::retain`]).
    ///
    /// # Errors
    /// The append's error, also answered to every produce of the group; after an `Io`
    /// error the owner must reopen the partition (the file's state is unknown).
    pub fn flush(&mut self, partition: Result<&mut Partition>, now_ms: u64) -> Result<bool> {
        let pending = std::mem::take(&mut self.pending);
        (self.pending_records, self.pending_bytes) = (0, 0);
        let partition = match partition {
            Ok(p) => p,
            Err(e) => {
                fail(pending, &e);
                return Err(e);
            }
        };
        let mut written = false;
        let mut queue = pending.into_iter().peekable();
        while let Some(first) = queue.next() {
            let Queued {
                batch,
                reply,
                count,
                ..
            } = first;
            match batch {
                Checked::Kafka(mut checked) => {
                    let started = Instant::now();
                    let appended = partition.append_checked_kafka_batch(&mut checked, now_ms);
                    self.metrics.append_took(started.elapsed());
                    match appended {
                        Ok(appended) => {
                            written |= !appended.duplicate;
                            if !appended.duplicate {
                                let records = appended.last_offset + 1 - appended.base_offset;
                                self.metrics.produced(records, checked.len());
                            }
                            reply.answer_kafka(Ok(appended));
                        }
                        // Only an I/O error leaves the file in doubt; any other refuses this
                        // batch alone.
                        Err(e @ Error::Io { .. }) => {
                            reply.answer_kafka(Err(e.clone()));
                            fail(queue.collect(), &e);
                            return Err(e);
                        }
                        Err(e) => reply.answer_kafka(Err(e)),
                    }
                }
                Checked::Records(mut records) => {
                    // One buffer for the run of native produces: the others' records go
                    // after the first's.
                    let mut group = vec![(reply, count)];
                    let one_sync = partition.syncs_each_append();
                    while let Some(Queued {
                        batch: Checked::Records(other),
                        ..
                    }) = queue.peek()
                    {
                        if !one_sync && records.size_bytes() + other.size_bytes() > MERGE_MAX_BYTES
                        {
                            break;
                        }
                        records.append(other);
                        let next = queue.next().expect("peeked");
                        group.push((next.reply, next.count));
                    }
                    let started = Instant::now();
                    let appended = partition.append(&mut records, now_ms);
                    self.metrics.append_took(started.elapsed());
                    match appended {
                        Ok(info) => {
                            written = true;
                            self.metrics.produced(info.count, records.size_bytes());
                            let mut next = info.base_offset;
                            // The buffer goes back to the first produce's sender, for its
                            // next batch.
                            let mut spent = Some(records);
                            for (reply, count) in group {
                                let answer = Ok(AppendInfo {
                                    base_offset: next,
                                    count,
                                    timestamp_ms: info.timestamp_ms,
                                });
                                match spent.take() {
                                    Some(batch) => reply.answer_giving_back(answer, batch),
                                    None => reply.answer(answer),
                                }
                                next += count;
                            }
                        }
                        Err(e) => {
                            for (reply, _) in group {
                                reply.answer(Err(e.clone()));
                            }
                            fail(queue.collect(), &e);
                            return Err(e);
                        }
                    }
                }
            }
        }
        // After the answers: a producer does not wait for the log start to move.
        partition.retain(now_ms);
        Ok(written)
    }

    /// Moves parked produces into the group commit, oldest first, while there is room;
    /// writes at once whenever the group commit grows large. Under `Reject` (an alter from
    /// `Block`) those still without room are answered `PartitionFull` instead of waiting.
    /// Returns whether produces wait in the group commit (the owner schedules a flush).
    ///
    /// # Errors
    /// As [`ProduceQueue::flush`].
    pub fn admit_parked(&mut self, partition: &mut Partition, now_ms: u64) -> Result<bool> {
        while !self.parked.is_empty() && partition.full(self.pending_records).is_none() {
            let parked = self.parked.pop_front().expect("not empty");
            if self.push_pending(parked) {
                self.flush(Ok(&mut *partition), now_ms)?;
            }
        }
        if self.backpressure == Backpressure::Reject {
            let backlog = partition.full(self.pending_records).unwrap_or_default();
            let (topic, number) = partition.id();
            for parked in self.parked.drain(..) {
                parked.fail(Error::PartitionFull {
                    topic: topic.to_owned(),
                    partition: number,
                    backlog,
                    max_size: partition.max_size().unwrap_or_default(),
                });
            }
        }
        Ok(self.has_pending())
    }

    /// Checks the parked produces against the key rule of the topic's policy as it is now
    /// (after an alter): one it refuses is answered `KeyRequired` and never written, the
    /// others keep their place. A produce parked before an alter to `compact` would otherwise
    /// be written without its key once there is room.
    pub fn recheck_parked(&mut self, partition: &Partition) {
        for queued in std::mem::take(&mut self.parked) {
            match self.check_keys(partition, &queued.batch) {
                Ok(()) => self.parked.push_back(queued),
                Err(e) => queued.fail(e),
            }
        }
    }

    /// Answers `Timeout` to every parked produce that has waited its block timeout (as of
    /// `now`); the others keep their place.
    pub fn expire(&mut self, (topic, partition): (&str, u32), now: Instant) {
        let timeout = self.block_timeout;
        let (expired, waiting) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|p: &Queued<R>| p.waited(now) >= timeout);
        self.parked = waiting;
        for parked in expired {
            let waited = parked.waited(now);
            parked.fail(Error::Timeout {
                topic: topic.to_owned(),
                partition,
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            });
        }
    }

    /// Answers every produce not written yet, pending or parked, with `error()` (a restart,
    /// a shutdown).
    pub fn fail_all(&mut self, error: impl Fn() -> Error) {
        (self.pending_records, self.pending_bytes) = (0, 0);
        for queued in self.pending.drain(..).chain(self.parked.drain(..)) {
            queued.fail(error());
        }
    }
}

/// Answers every produce of `queued` with `error`.
fn fail<R: AppendAnswer>(queued: Vec<Queued<R>>, error: &Error) {
    for q in queued {
        q.fail(error.clone());
    }
}

impl<R: AppendAnswer> Queued<R> {
    fn fail(self, error: Error) {
        match self.batch {
            Checked::Records(_) => self.reply.answer(Err(error)),
            Checked::Kafka(_) => self.reply.answer_kafka(Err(error)),
        }
    }
}

impl<R> Queued<R> {
    /// How long a parked produce has waited as of `now`.
    fn waited(&self, now: Instant) -> Duration {
        self.since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    /// A produce of `count` records (known from the batch, checked by `offer`).
    fn new(batch: Checked, count: u64, since: Option<Instant>, reply: R) -> Self {
        Queued {
            count,
            batch,
            since,
            reply,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::mpsc;

    use super::*;
    use crate::storage::LogConfig;

    const NOW: u64 = 1_700_000_000_000;

    /// Answers land in a channel the test reads.
    struct Probe(mpsc::Sender<Result<AppendInfo>>);
    impl AppendAnswer for Probe {
        fn answer(self, result: Result<AppendInfo>) {
            self.0.send(result).unwrap();
        }
    }

    fn open(dir: &Path, max_size: Option<u64>) -> Partition {
        let fs = crate::storage::fs::os();
        Partition::open(&fs, dir, ("t", 0), LogConfig::default(), max_size, NOW)
            .unwrap()
            .0
    }

    fn batch(n: usize) -> RecordBatch {
        let mut batch = RecordBatch::new();
        for i in 0..n {
            batch.push_raw(None, &[i as u8]);
        }
        batch
    }

    #[test]
    fn a_group_commit_writes_once_and_answers_each_produce_with_its_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), None);
        let mut q = ProduceQueue::new(Backpressure::Block, Duration::from_secs(1));
        let (tx, rx) = mpsc::channel();
        for n in [2, 3] {
            let offered = q.offer(&p, Produced::Records(batch(n)), Probe(tx.clone()), None);
            assert_eq!(offered, Offered::Pending { flush_now: false });
        }
        assert!(q.flush(Ok(&mut p), NOW).unwrap());
        let answers: Vec<(u64, u64)> = rx
            .try_iter()
            .map(|a| a.map(|i| (i.base_offset, i.count)).unwrap())
            .collect();
        assert_eq!(answers, [(0, 2), (2, 3)]);
        assert_eq!(p.log_end_offset(), 5);
        assert!(!q.flush(Ok(&mut p), NOW).unwrap(), "nothing left");
    }

    #[test]
    fn large_batches_of_one_group_commit_keep_their_offsets_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), None);
        let mut q = ProduceQueue::new(Backpressure::Block, Duration::from_secs(1));
        let (tx, rx) = mpsc::channel();
        // 300 records of 100 B: ~33 kB a batch, so no two of them are re-encoded into one.
        let large = |first: u8| {
            let mut batch = RecordBatch::new();
            for i in 0..300u32 {
                batch.push_raw(None, &[first.wrapping_add(i as u8); 100]);
            }
            batch
        };
        for (n, first) in [(300, 1), (2, 0), (300, 7)] {
            let batch = if n == 2 { batch(2) } else { large(first) };
            q.offer(&p, Produced::Records(batch), Probe(tx.clone()), None);
        }
        assert!(q.flush(Ok(&mut p), NOW).unwrap());
        let answers: Vec<(u64, u64)> = rx
            .try_iter()
            .map(|a| a.map(|i| (i.base_offset, i.count)).unwrap())
            .collect();
        assert_eq!(answers, [(0, 300), (300, 2), (302, 300)]);
        assert_eq!(p.log_end_offset(), 602);
        let mut values = Vec::new();
        while values.len() < 602 {
            let fetched = p.fetch("g", Some(values.len() as u64), 1000).unwrap();
            values.extend(fetched.to_raw().into_iter().map(|r| (r.offset, r.value[0])));
        }
        let expected: Vec<(u64, u8)> = (0..300u32)
            .map(|i| 1u8.wrapping_add(i as u8))
            .chain([0, 1])
            .chain((0..300u32).map(|i| 7u8.wrapping_add(i as u8)))
            .enumerate()
            .map(|(offset, value)| (offset as u64, value))
            .collect();
        assert_eq!(values, expected);
    }

    #[test]
    fn a_flush_applies_retention_once_its_produces_are_answered() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            retention: crate::storage::RetentionPolicy {
                records: Some(3),
                ..Default::default()
            },
            ..LogConfig::default()
        };
        let fs = crate::storage::fs::os();
        let mut p = Partition::open(&fs, dir.path(), ("t", 0), config, None, NOW)
            .unwrap()
            .0;
        // An append alone leaves retention to `retain`.
        p.append(&mut batch(4), NOW).unwrap();
        assert_eq!(p.log_start_offset(), 0);
        p.retain(NOW);
        assert_eq!(p.log_start_offset(), 1);
        // A flush answers, then applies it.
        let mut q = ProduceQueue::new(Backpressure::Block, Duration::from_secs(1));
        let (tx, rx) = mpsc::channel();
        q.offer(&p, Produced::Records(batch(5)), Probe(tx), None);
        assert!(q.flush(Ok(&mut p), NOW).unwrap());
        assert_eq!(rx.recv().unwrap().unwrap().base_offset, 4);
        assert_eq!(p.log_start_offset(), 6, "retention ran within the flush");
    }

    #[test]
    fn reject_refuses_and_block_parks_in_order_until_a_commit_admits_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), Some(2));
        let (tx, rx) = mpsc::channel();
        let mut reject = ProduceQueue::new(Backpressure::Reject, Duration::from_secs(1));
        reject.offer(&p, Produced::Records(batch(2)), Probe(tx.clone()), None);
        reject.flush(Ok(&mut p), NOW).unwrap();
        assert_eq!(
            reject.offer(&p, Produced::Records(batch(1)), Probe(tx.clone()), None),
            Offered::Answered
        );
        let _written = rx.recv().unwrap().unwrap();
        assert!(matches!(
            rx.recv().unwrap(),
            Err(Error::PartitionFull { backlog: 2, .. })
        ));

        let mut block = ProduceQueue::new(Backpressure::Block, Duration::from_secs(60));
        for _ in 0..2 {
            let offered = block.offer(&p, Produced::Records(batch(1)), Probe(tx.clone()), None);
            assert!(matches!(offered, Offered::Parked { .. }), "{offered:?}");
        }
        assert!(!block.admit_parked(&mut p, NOW).unwrap(), "still full");
        p.commit("g", 1).unwrap(); // backlog 0: room for two
        assert!(block.admit_parked(&mut p, NOW).unwrap());
        block.flush(Ok(&mut p), NOW).unwrap();
        let offsets: Vec<u64> = rx.try_iter().map(|a| a.unwrap().base_offset).collect();
        assert_eq!(offsets, [2, 3], "parked produces keep their order");
    }

    #[test]
    fn a_parked_produce_times_out_one_block_timeout_after_its_call() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), Some(1));
        p.append(&mut batch(1), NOW).unwrap();
        let (tx, rx) = mpsc::channel();
        let timeout = Duration::from_secs(10);
        let mut q = ProduceQueue::new(Backpressure::Block, timeout);
        let called = Instant::now();
        let earlier = called.checked_sub(Duration::from_secs(4)).unwrap_or(called);
        match q.offer(
            &p,
            Produced::Records(batch(1)),
            Probe(tx.clone()),
            Some(earlier),
        ) {
            Offered::Parked { wake_in } => assert!(wake_in <= Duration::from_secs(6)),
            other => panic!("{other:?}"),
        }
        q.offer(&p, Produced::Records(batch(1)), Probe(tx), Some(called));
        q.expire(("t", 0), earlier + timeout);
        assert!(matches!(rx.try_recv(), Ok(Err(Error::Timeout { .. }))));
        assert!(rx.try_recv().is_err(), "the later produce waits on");
        q.fail_all(|| Error::BrokerStopped);
        assert!(matches!(rx.try_recv(), Ok(Err(Error::BrokerStopped))));
        assert_eq!(p.log_end_offset(), 1, "nothing parked was written");
    }

    #[test]
    fn a_record_too_large_is_refused_before_it_is_parked_or_batched() {
        let dir = tempfile::tempdir().unwrap();
        let p = open(dir.path(), None);
        let (tx, rx) = mpsc::channel();
        let mut q = ProduceQueue::new(Backpressure::Block, Duration::from_secs(1));
        let mut huge = RecordBatch::new();
        huge.push_raw(None, &vec![0; (1 << 20) + 1]);
        assert_eq!(
            q.offer(&p, Produced::Records(huge), Probe(tx), None),
            Offered::Answered
        );
        assert!(matches!(
            rx.recv().unwrap(),
            Err(Error::RecordTooLarge { .. })
        ));
        assert!(!q.has_pending());
    }

    /// A Kafka client's batch is checked whole when it is offered: one that can never be
    /// written (here a record over the size limit) is refused at once, not parked behind a
    /// full partition to fail when room frees.
    #[test]
    fn a_kafka_batch_that_cannot_be_written_is_refused_before_it_is_parked() {
        use crate::storage::format::{encode_client_batch, ClientRecord};
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), Some(1));
        p.append(&mut keyed(1), NOW).unwrap();
        let (tx, rx) = mpsc::channel();
        let mut q = ProduceQueue::new(Backpressure::Block, Duration::from_secs(60));
        let value = vec![0; (1 << 20) + 1];
        let huge = encode_client_batch(&[ClientRecord {
            timestamp_ms: 1_000,
            key: Some(b"k"),
            value: Some(&value),
            headers: &[],
        }]);
        let offered = q.offer(&p, Produced::Kafka(huge.into()), Probe(tx), None);
        assert_eq!(offered, Offered::Answered);
        assert!(matches!(
            rx.recv().unwrap(),
            Err(Error::RecordTooLarge { .. })
        ));
        assert_eq!(q.parked(), 0);
    }

    #[test]
    fn a_compacted_topic_refuses_a_keyless_batch_before_it_is_batched_and_follows_an_alter() {
        use crate::storage::format::{encode_client_batch, ClientRecord};
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), None);
        let (tx, rx) = mpsc::channel();
        let mut q = ProduceQueue::new(Backpressure::Block, Duration::from_secs(1));
        q.set_cleanup_policy(CleanupPolicy::Compact);
        let mut mixed = RecordBatch::new();
        mixed.push_raw(Some(b"k"), b"v");
        mixed.push_raw(None, b"v");
        let record = |key| ClientRecord {
            timestamp_ms: 1_000,
            key,
            value: Some(b"v"),
            headers: &[],
        };
        let kafka = encode_client_batch(&[record(None), record(Some(b"k"))]);
        for batch in [
            Produced::Records(mixed),
            Produced::Kafka(kafka.clone().into()),
        ] {
            let offered = q.offer(&p, batch, Probe(tx.clone()), None);
            assert_eq!(offered, Offered::Answered);
        }
        for expected in [1u32, 0] {
            match rx.recv().unwrap() {
                Err(Error::KeyRequired {
                    partition: Some(0),
                    indexes,
                    ..
                }) => assert_eq!(indexes, [expected]),
                other => panic!("expected KeyRequired, got {other:?}"),
            }
        }
        assert!(!q.has_pending());
        assert_eq!(p.log_end_offset(), 0);
        // Keyed records pass; once the topic no longer compacts, keyless ones do too.
        let offered = q.offer(&p, Produced::Records(keyed(2)), Probe(tx.clone()), None);
        assert_eq!(offered, Offered::Pending { flush_now: false });
        q.set_cleanup_policy(CleanupPolicy::Delete);
        let offered = q.offer(&p, Produced::Kafka(kafka.into()), Probe(tx), None);
        assert_eq!(offered, Offered::Pending { flush_now: false });
        assert!(q.flush(Ok(&mut p), NOW).unwrap());
        assert_eq!(p.log_end_offset(), 4);
    }

    /// Produces parked before an alter follow the altered rules: once the topic compacts,
    /// those without a key are refused and never written (native and Kafka batches alike),
    /// the keyed one is written when room frees.
    #[test]
    fn parked_produces_without_a_key_are_refused_when_the_topic_is_altered_to_compact() {
        use crate::storage::format::{encode_client_batch, ClientRecord};
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), Some(1));
        p.append(&mut keyed(1), NOW).unwrap();
        let (tx, rx) = mpsc::channel();
        let mut q = ProduceQueue::new(Backpressure::Block, Duration::from_secs(60));
        let keyless_kafka = encode_client_batch(&[ClientRecord {
            timestamp_ms: 1_000,
            key: None,
            value: Some(b"v"),
            headers: &[],
        }]);
        let produces = [
            Produced::Records(batch(1)),
            Produced::Records(keyed(1)),
            Produced::Kafka(keyless_kafka.into()),
        ];
        for produce in produces {
            let offered = q.offer(&p, produce, Probe(tx.clone()), None);
            assert!(matches!(offered, Offered::Parked { .. }), "{offered:?}");
        }
        q.set_cleanup_policy(CleanupPolicy::Compact);
        q.recheck_parked(&p);
        for _ in 0..2 {
            let answer = rx.try_recv().expect("answered at once");
            assert!(
                matches!(answer, Err(Error::KeyRequired { .. })),
                "{answer:?}"
            );
        }
        assert_eq!(q.parked(), 1, "the keyed produce waits on");
        p.commit("g", 0).unwrap();
        assert!(q.admit_parked(&mut p, NOW).unwrap());
        q.flush(Ok(&mut p), NOW).unwrap();
        assert_eq!(rx.try_recv().unwrap().unwrap().base_offset, 1);
        assert_eq!(p.log_end_offset(), 2, "nothing without a key was written");
    }

    /// Produces parked under `Block` are answered `PartitionFull` once the topic is altered
    /// to `Reject` (as a new produce would be), not left to their block timeout.
    #[test]
    fn parked_produces_are_refused_when_backpressure_is_altered_to_reject() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), Some(1));
        p.append(&mut batch(1), NOW).unwrap();
        let (tx, rx) = mpsc::channel();
        let mut q = ProduceQueue::new(Backpressure::Block, Duration::from_secs(60));
        let offered = q.offer(&p, Produced::Records(batch(1)), Probe(tx), None);
        assert!(matches!(offered, Offered::Parked { .. }));
        q.set_backpressure(Backpressure::Reject);
        assert!(!q.admit_parked(&mut p, NOW).unwrap());
        assert!(matches!(
            rx.try_recv(),
            Ok(Err(Error::PartitionFull { backlog: 1, .. }))
        ));
        assert_eq!((q.parked(), p.log_end_offset()), (0, 1));
    }

    fn keyed(n: usize) -> RecordBatch {
        let mut batch = RecordBatch::new();
        for i in 0..n {
            batch.push_raw(Some(b"key"), &[i as u8]);
        }
        batch
    }
}
