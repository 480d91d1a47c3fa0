//! `Partition`: one partition's log and committed offsets, with the rules that
//! need both (fetch at a group's committed offset, commit range checks, lag, backlog for
//! backpressure). Plain Rust: the `PartitionActor` owns one and adds waiting and parking.

mod cleaning;
pub use cleaning::CleaningPlan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, ErrorSource, Result};
use crate::group::StartFrom;
use crate::storage::fetch::RecordRef;
use crate::storage::fs::SharedFs;

use serde::de::DeserializeOwned;

use crate::storage::sync_worker::{completion, Completer, Completion};
use crate::storage::{
    AppendInfo, BatchRead, CheckedKafkaBatch, Committed, FetchedRecords, KafkaAppend, LogConfig,
    LogSyncJob, LogSynced, OffsetStore, OffsetsSyncJob, OffsetsSynced, PartitionLog, RecordBatch,
    RecoveryReport,
};
use crate::types::{CleanerSummary, PartitionStats, Record};

/// The most record bytes one fetch returns (at least one record always comes): bounds the
/// memory a `poll_batch` takes, like Kafka's `fetch.max.bytes`.
pub const FETCH_MAX_BYTES: usize = 8 << 20;

/// A record to produce, owned (it crosses threads in a message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRecord {
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
}

impl From<&[ProduceRecord]> for RecordBatch {
    fn from(records: &[ProduceRecord]) -> Self {
        let payload = records
            .iter()
            .map(|r| r.value.len() + r.key.as_ref().map_or(0, Vec::len))
            .sum();
        let mut batch = RecordBatch::with_capacity(records.len(), payload);
        for r in records {
            batch.push_raw(r.key.as_deref(), &r.value);
        }
        batch
    }
}

/// What one fetch read: the records, still in the buffer they were read into (verified).
/// The poll's caller turns them into what it returns, on its own thread: copies for a raw
/// poll, values decoded straight from the buffer for a typed one.
#[derive(Debug)]
pub struct Fetched {
    pub partition: u32,
    pub records: FetchedRecords,
}

impl Fetched {
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The records with their bytes copied out.
    pub fn to_raw(&self) -> Vec<Record<Vec<u8>>> {
        self.records
            .iter()
            .map(|r| self.record(r, r.value.to_vec()))
            .collect()
    }

    /// The records with their values decoded as `T` (MessagePack, as typed produces write),
    /// up to the first that does not decode: the records before it are returned, so one bad
    /// record never hides good ones. A read that starts at it reports it.
    ///
    /// # Errors
    /// `Decode`, naming the first record, when it is not a `T`.
    pub fn decode<T: DeserializeOwned>(&self, topic: &str) -> Result<Vec<Record<T>>> {
        let mut records = Vec::with_capacity(self.records.len());
        self.decode_each(topic, |record| records.push(record))?;
        Ok(records)
    }

    /// As [`Fetched::decode`], handing each record to `take` as it is decoded: a caller that
    /// keeps them elsewhere (the stream's buffer) does not copy them out of a `Vec` again.
    ///
    /// # Errors
    /// As [`Fetched::decode`].
    pub fn decode_each<T: DeserializeOwned>(
        &self,
        topic: &str,
        take: impl FnMut(Record<T>),
    ) -> Result<()> {
        self.decode_each_with(
            topic,
            |bytes: &[u8]| rmp_serde::from_slice::<T>(bytes),
            take,
        )
    }

    /// As [`Fetched::decode_each`], each value decoded by `decode` (a topic bound to a
    /// schema reads another format than MessagePack).
    ///
    /// `decode`'s own error type is kept until a record fails: on the hot path each value
    /// moves once, from the decoder's result into its `Record` (a `map_err` per record into
    /// the shared source type cost a copy of every result).
    ///
    /// # Errors
    /// As [`Fetched::decode`], with `decode`'s error as the source.
    pub fn decode_each_with<T, E>(
        &self,
        topic: &str,
        decode: impl Fn(&[u8]) -> std::result::Result<T, E>,
        mut take: impl FnMut(Record<T>),
    ) -> Result<()>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let mut decoded = false;
        for r in self.records.iter() {
            match decode(r.value) {
                Ok(value) => take(self.record(r, value)),
                Err(e) if !decoded => {
                    return Err(Error::Decode {
                        topic: topic.to_owned(),
                        partition: self.partition,
                        offset: r.offset,
                        source: Arc::new(e) as ErrorSource,
                    })
                }
                Err(_) => break,
            }
            decoded = true;
        }
        Ok(())
    }

    #[inline(always)]
    fn record<T>(&self, r: RecordRef<'_>, value: T) -> Record<T> {
        Record {
            partition: self.partition,
            offset: r.offset,
            timestamp_ms: r.timestamp_ms,
            key: r.key.map(<[u8]>::to_vec),
            value,
            headers: crate::types::Header::from_stored(r.headers),
        }
    }
}

/// Where a group reads next in a log spanning `[log_start, log_end)`: its committed offset,
/// brought into `[log start, log end]` (below the start, retention removed the records; above
/// the end, the log lost a tail the commit had covered); the log start without a commit.
pub fn read_position(committed: Option<u64>, (log_start, log_end): (u64, u64)) -> u64 {
    committed.map_or(log_start, |c| c.clamp(log_start, log_end))
}

/// A group's lag: `log end - max(committed, log start)` (0 past the end), the one formula
/// behind `lag()`, `stats()` and backpressure.
pub fn lag(committed: Option<u64>, (log_start, log_end): (u64, u64)) -> u64 {
    log_end - read_position(committed, (log_start, log_end))
}

/// One partition's log and offsets.
#[derive(Debug)]
pub struct Partition {
    /// The interval sync in flight, if any. First, so that it is dropped (waited for) before
    /// the files it syncs.
    in_flight: InFlight,
    topic: String,
    partition: u32,
    log: PartitionLog,
    offsets: OffsetStore,
    max_size: Option<u64>,
    /// Groups with members on this topic but no commit here yet: they count as reading from
    /// the log start when the backlog is computed.
    registered: BTreeSet<String>,
    /// Records were appended and retention has not run since (see [`Partition::retain`]).
    retention_due: bool,
    /// What the cleaner's passes did to this partition over its life (compacted topics):
    /// read from the log's `cleaner.totals` at the open, recorded there after each pass.
    cleaning: Option<CleanerSummary>,
    /// The last pass stopped short of its dirty section's end (its key map filled): the next
    /// one is due at once, whatever the dirty ratio of the rest.
    cleaning_unfinished: bool,
}

impl Partition {
    /// Opens (recovering) the partition's files in `dir`.
    ///
    /// # Errors
    /// `Io` when its files cannot be opened.
    pub fn open(
        fs: &SharedFs,
        dir: &Path,
        (topic, partition): (&str, u32),
        log_config: LogConfig,
        max_size: Option<u64>,
        now_ms: u64,
    ) -> Result<(Self, RecoveryReport)> {
        let (log, report) = PartitionLog::open_with(fs, dir, log_config, now_ms)?;
        let mut offsets = OffsetStore::open_with(fs, dir, log_config.fsync)?;
        clamp_commits_to(&mut offsets, log.log_end_offset(), dir)?;
        let cleaning = log.cleaner_totals().map(cleaning::summary_of);
        let partition = Partition {
            in_flight: InFlight(None),
            topic: topic.to_owned(),
            partition,
            log,
            offsets,
            max_size,
            registered: BTreeSet::new(),
            retention_due: false,
            cleaning,
            cleaning_unfinished: false,
        };
        Ok((partition, report))
    }

    /// See [`PartitionLog::set_worker`].
    pub fn set_worker(&mut self, worker: std::sync::Arc<crate::storage::sync_worker::SyncWorker>) {
        self.log.set_worker(worker);
    }

    /// See [`PartitionLog::set_max_decompressed_bytes`].
    pub fn set_max_decompressed_bytes(&mut self, bytes: usize) {
        self.log.set_max_decompressed_bytes(bytes);
    }

    pub fn log_end_offset(&self) -> u64 {
        self.log.log_end_offset()
    }

    /// Appends a batch (one write; its frames are sealed in place), returning where it went.
    /// Retention is left to [`Partition::retain`], so that the producers can be answered
    /// before it runs.
    ///
    /// # Errors
    /// As [`PartitionLog::append`].
    pub fn append(&mut self, batch: &mut RecordBatch, now_ms: u64) -> Result<AppendInfo> {
        let info = self.log.append_batch_unretained(batch, now_ms)?;
        self.retention_due |= info.count > 0;
        Ok(info)
    }

    /// Whether every append is synced before it returns (`FsyncPolicy::Always`): a group
    /// commit then shares one sync only if it is one append.
    pub fn syncs_each_append(&self) -> bool {
        self.log.config().fsync == crate::FsyncPolicy::Always
    }

    /// Applies retention if [`Partition::append`] appended since the last call (see
    /// [`PartitionLog::retain`]).
    pub fn retain(&mut self, now_ms: u64) {
        if std::mem::take(&mut self.retention_due) {
            self.log.retain(now_ms);
        }
    }

    /// The first offset from the log start whose record's timestamp is at least
    /// `timestamp_ms` (Kafka's offsets-for-times); `None` when no record's is.
    ///
    /// # Errors
    /// `Io`, `Corrupt`.
    pub fn offset_for_timestamp(&mut self, timestamp_ms: u64) -> Result<Option<u64>> {
        Ok(self.log.offset_for_timestamp(timestamp_ms)?)
    }

    /// Whole batches from the one holding `offset` (see `PartitionLog::read_batches`).
    ///
    /// # Errors
    /// `OffsetOutOfRange`, `Corrupt`, `Io`.
    pub fn read_batches(
        &mut self,
        offset: u64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<BatchRead> {
        Ok(self.log.read_batches(offset, max_bytes, min_one)?)
    }

    /// `(offset, timestamp)` of the first record whose timestamp is at least `timestamp_ms`.
    ///
    /// # Errors
    /// `Io`, `Corrupt`.
    pub fn record_for_timestamp(&mut self, timestamp_ms: u64) -> Result<Option<(u64, u64)>> {
        Ok(self.log.record_for_timestamp(timestamp_ms)?)
    }

    /// `(offset, timestamp)` of the first record with the largest timestamp from the log
    /// start on (Kafka's "max timestamp" ListOffsets); `None` for an empty log.
    ///
    /// # Errors
    /// `Io`, `Corrupt`.
    pub fn record_with_max_timestamp(&mut self) -> Result<Option<(u64, u64)>> {
        Ok(self.log.record_with_max_timestamp()?)
    }

    pub fn log_start_offset(&self) -> u64 {
        self.log.log_start_offset()
    }

    /// The idempotent producers this partition remembers.
    pub fn active_producers(&self) -> Vec<crate::storage::producer_state::ActiveProducer> {
        self.log.active_producers()
    }

    /// Moves the log start up to `before` (Kafka's DeleteRecords; see
    /// `PartitionLog::delete_records_before`). Committed offsets below it read from it, as
    /// after retention. Returns the log start after.
    ///
    /// # Errors
    /// `OffsetOutOfRange` past the log end (nothing changes); `Io`.
    pub fn delete_records_before(&mut self, before: u64) -> Result<u64> {
        Ok(self.log.delete_records_before(before)?)
    }

    /// Appends a Kafka client's record batch as it was sent (see
    /// `PartitionLog::append_kafka_batch`); the broker checks it first
    /// ([`Partition::check_kafka_batch`]).
    ///
    /// # Errors
    /// `InvalidBatch`, `RecordTooLarge`, `ProducerFenced`, `OutOfOrderSequence`, `Io`.
    #[cfg(test)]
    pub fn append_kafka_batch(&mut self, batch: &mut [u8], now_ms: u64) -> Result<KafkaAppend> {
        Ok(self.log.append_kafka_batch(batch, now_ms)?)
    }

    /// Checks a Kafka client's batch whole before it is queued (see
    /// `PartitionLog::check_kafka_batch`): appended later with
    /// [`Partition::append_checked_kafka_batch`], its records are not read again.
    ///
    /// # Errors
    /// `InvalidBatch`, `RecordTooLarge`.
    pub fn check_kafka_batch(&self, batch: bytes::Bytes) -> Result<CheckedKafkaBatch> {
        Ok(self.log.check_kafka_batch(batch)?)
    }

    /// Appends a batch [`Partition::check_kafka_batch`] checked (see
    /// `PartitionLog::append_checked_kafka_batch`).
    ///
    /// # Errors
    /// `InvalidTimestamp`, `ProducerFenced`, `OutOfOrderSequence`, `Io`.
    pub fn append_checked_kafka_batch(
        &mut self,
        batch: &mut CheckedKafkaBatch,
        now_ms: u64,
    ) -> Result<KafkaAppend> {
        Ok(self.log.append_checked_kafka_batch(batch, now_ms)?)
    }

    /// The largest key + value one record may have here.
    pub fn max_record_bytes(&self) -> usize {
        self.log.max_record_bytes()
    }

    /// The offset `group` reads next: its commit, or the log start if it has none or fell
    /// behind retention; never past the log end (see [`clamp_commits_to`]).
    pub fn position(&self, group: &str) -> u64 {
        read_position(self.offsets.get(group), self.log_bounds())
    }

    /// `(log start, log end)`.
    fn log_bounds(&self) -> (u64, u64) {
        (self.log.log_start_offset(), self.log.log_end_offset())
    }

    /// Records not yet committed by the slowest group (retained records when no group
    /// reads here).
    pub fn backlog(&self) -> u64 {
        let start = self.log.log_start_offset();
        let bounds = self.log_bounds();
        let slowest_commit = self
            .offsets
            .all()
            .map(|(_, c)| read_position(Some(c), bounds))
            .min();
        let uncommitted_group = self
            .registered
            .iter()
            .any(|g| self.offsets.get(g).is_none());
        let slowest = match slowest_commit {
            Some(c) if !uncommitted_group => c,
            _ => start,
        };
        self.log.log_end_offset().saturating_sub(slowest)
    }

    /// `Some(backlog)` when the backlog, counting `pending` records accepted but not yet
    /// written, has reached `max_size`.
    pub fn full(&self, pending: u64) -> Option<u64> {
        // Most topics have no max_size: skip the backlog's walk over the groups.
        let max = self.max_size?;
        let backlog = self.backlog() + pending;
        (backlog >= max).then_some(backlog)
    }

    /// Takes the altered settings of its topic: retention, timestamp type and segment size
    /// from `log_config` (see [`PartitionLog::set_retention`] and
    /// [`PartitionLog::set_segment_bytes`]) and the backlog bound, then applies retention as
    /// of `now_ms` (a lowered limit drops records at once).
    ///
    /// # Errors
    /// As [`PartitionLog::enforce_retention`]; the new settings hold anyway.
    pub fn reconfigure(
        &mut self,
        log_config: &LogConfig,
        max_size: Option<u64>,
        now_ms: u64,
    ) -> Result<()> {
        self.log
            .set_retention(log_config.retention, log_config.timestamp_type);
        self.log.set_segment_bytes(log_config.segment_bytes);
        self.max_size = max_size;
        self.enforce_retention(now_ms)
    }

    pub fn max_size(&self) -> Option<u64> {
        self.max_size
    }

    /// Where a read for `group` starts: `from` when the reader keeps its own position
    /// (clamped to the log start, like every read), else the group's committed offset.
    fn read_position(&self, group: &str, from: Option<u64>) -> u64 {
        // An own position past the log end stays there: the read refuses it as out of range.
        from.map_or_else(
            || self.position(group),
            |o| o.max(self.log.log_start_offset()),
        )
    }

    /// Whether there are records to read from `from` (or `group`'s committed offset).
    pub fn has_data_for(&self, group: &str, from: Option<u64>) -> bool {
        self.read_position(group, from) < self.log.log_end_offset()
    }

    /// Up to `max_records` consecutive records from `from`, or from `group`'s committed
    /// offset.
    ///
    /// # Errors
    /// `OffsetOutOfRange` when `from` is past the log end; `Corrupt`/`Io` from the log.
    pub fn fetch(&mut self, group: &str, from: Option<u64>, max_records: usize) -> Result<Fetched> {
        let position = self.read_position(group, from);
        Ok(Fetched {
            partition: self.partition,
            records: self.log.read(position, max_records, FETCH_MAX_BYTES)?,
        })
    }

    /// Reads ahead what the fetch after the last one (of `max_records`) will ask for, while
    /// the thread is idle: see `PartitionLog::read_ahead`.
    pub fn read_ahead(&mut self, max_records: usize) {
        self.log.read_ahead(max_records, FETCH_MAX_BYTES);
    }

    /// Whether [`Partition::read_ahead`] would find anything to read now (not after a fetch
    /// that reached the log end, nor one that left the rest of a compressed batch parsed).
    pub fn can_read_ahead(&self) -> bool {
        self.log.read_ahead_from().is_some()
    }

    /// Marks `offset` and everything before it processed by `group` (committed = offset + 1).
    ///
    /// # Errors
    /// `OffsetOutOfRange` when `offset >= log end` (nothing changes); `Io` when the commit
    /// cannot be written (not acknowledged).
    pub fn commit(&mut self, group: &str, offset: u64) -> Result<()> {
        let log_end_offset = self.log.log_end_offset();
        if offset >= log_end_offset {
            return Err(Error::OffsetOutOfRange {
                offset,
                log_start_offset: self.log.log_start_offset(),
                log_end_offset,
            });
        }
        Ok(self.offsets.commit(group, offset + 1)?)
    }

    /// Sets `group`'s committed offset to `offset` itself, with `metadata`: the next offset
    /// to read, Kafka's meaning (a Kafka client's OffsetCommit). Any offset is stored, as
    /// Kafka stores it: a rewind, one below the log start (the group reads from the log
    /// start, as after retention), one past the log end (reads and lag count from the log
    /// end until the log reaches it; a reopen brings it down to the log end, see
    /// [`clamp_commits_to`]). [`Partition::commit`] is the native API's checked commit.
    ///
    /// # Errors
    /// `OffsetMetadataTooLarge` past
    /// [`MAX_OFFSET_METADATA_BYTES`](crate::storage::MAX_OFFSET_METADATA_BYTES) (nothing changes); `Io`
    /// when the commit cannot be written (not acknowledged).
    pub fn set_committed(&mut self, group: &str, offset: u64, metadata: &str) -> Result<()> {
        Ok(self.offsets.commit_with_metadata(group, offset, metadata)?)
    }

    /// `group`'s committed offset here with its metadata, if it has one.
    pub fn committed_with_metadata(&self, group: &str) -> Option<Committed> {
        self.offsets.get_with_metadata(group).cloned()
    }

    /// Records `group` as reading this topic. Without a commit here, it starts at the log
    /// start (and counts for backpressure from there) or, with `StartFrom::Latest`, gets a
    /// committed offset at the log end.
    ///
    /// # Errors
    /// `Io` when the `Latest` position cannot be stored.
    pub fn register_group(&mut self, group: &str, start: StartFrom) -> Result<()> {
        if self.offsets.get(group).is_some() {
            return Ok(());
        }
        match start {
            StartFrom::Earliest => {
                self.registered.insert(group.to_owned());
                Ok(())
            }
            StartFrom::Latest => Ok(self.offsets.commit(group, self.log.log_end_offset())?),
        }
    }

    /// Forgets `group` here: its committed offset and its registration (backpressure no
    /// longer waits for it). `true` when it had either.
    ///
    /// # Errors
    /// `Io` when the offsets journal cannot be rewritten (nothing forgotten).
    pub fn forget_group(&mut self, group: &str) -> Result<bool> {
        let committed = self.offsets.forget(group)?;
        Ok(self.registered.remove(group) || committed)
    }

    /// `group`'s lag here (see [`lag`]), or `None` when the group neither committed here, nor
    /// was registered, nor `has_coordinator` on the topic (a group with one reads from the
    /// log start until it commits).
    pub fn lag(&self, group: &str, has_coordinator: bool) -> Option<u64> {
        let committed = self.offsets.get(group);
        (committed.is_some() || has_coordinator || self.registered.contains(group))
            .then(|| lag(committed, self.log_bounds()))
    }

    /// Applies time retention as of `now_ms` (size and count retention run on every append).
    ///
    /// # Errors
    /// As [`PartitionLog::enforce_retention`].
    pub fn enforce_retention(&mut self, now_ms: u64) -> Result<()> {
        Ok(self.log.enforce_retention(now_ms)?)
    }

    /// Starts the `FsyncPolicy::Interval` sync of what was written so far: returns the job to
    /// run on another thread ([`SyncJob::run`]), or `None` when there is nothing to sync or a
    /// sync is already in flight (at most one is). Its result is applied by
    /// [`Partition::poll_sync`] once done, or by [`Partition::close`], which waits for it; a
    /// partition dropped meanwhile waits too.
    ///
    /// # Errors
    /// `Io` (the last roll's sealing failed, or a file cannot be opened for the sync): the
    /// partition must be reopened.
    pub fn begin_sync(&mut self) -> Result<Option<SyncJob>> {
        if self.in_flight.0.is_some() {
            return Ok(None);
        }
        let log = self.log.begin_interval_sync()?;
        // On an error the log's job is dropped unrun: it claims nothing, and the partition is
        // reopened anyway.
        let offsets = self.offsets.begin_sync()?;
        if log.is_none() && offsets.is_none() {
            return Ok(None);
        }
        let (done, completer) = completion();
        self.in_flight.0 = Some(done);
        Ok(Some(SyncJob {
            log,
            offsets,
            completer,
        }))
    }

    /// Applies the interval sync in flight if it has finished: `Ok(true)` when one was
    /// applied. Never blocks.
    ///
    /// # Errors
    /// `Io` when the sync failed: the partition must be reopened (never retry a failed sync).
    pub fn poll_sync(&mut self) -> Result<bool> {
        let Some(answer) = self.in_flight.0.as_ref().and_then(Completion::try_take) else {
            return Ok(false);
        };
        self.in_flight.0 = None;
        self.finish_sync(answer.ok())?;
        Ok(true)
    }

    /// Waits for the interval sync in flight, if any, and applies it.
    fn wait_sync(&mut self) -> Result<()> {
        if let Some(done) = self.in_flight.0.take() {
            self.finish_sync(done.wait().ok())?;
        }
        Ok(())
    }

    /// Applies a sync's result to the log and the offsets (`None`: the job was abandoned).
    fn finish_sync(&mut self, done: Option<SyncDone>) -> Result<()> {
        let Some(SyncDone { log, offsets }) = done else {
            return Err(Error::io(
                "sync a partition in the background",
                self.log.dir(),
                std::io::Error::other("the sync job was abandoned (its thread panicked)"),
            ));
        };
        let log = log.map_or(Ok(()), |done| self.log.finish_interval_sync(done));
        let offsets = offsets.map_or(Ok(()), |done| self.offsets.finish_sync(done));
        log?;
        Ok(offsets?)
    }

    /// An interval sync is in flight (begun, not yet applied).
    #[cfg(test)]
    pub fn sync_in_flight(&self) -> bool {
        self.in_flight.0.is_some()
    }

    /// See [`PartitionLog::drain_sync_times`].
    pub fn drain_sync_times(&mut self, each: impl FnMut(std::time::Duration)) {
        self.log.drain_sync_times(each);
    }

    /// Clean shutdown: sync everything and write the clean-shutdown checkpoint.
    ///
    /// # Errors
    /// `Io`; the next open then scans the active segment.
    pub fn close(mut self) -> Result<()> {
        self.wait_sync()?;
        self.offsets.sync()?;
        Ok(self.log.close()?)
    }

    pub fn stats(&self) -> PartitionStats {
        PartitionStats {
            partition: self.partition,
            log_start_offset: self.log.log_start_offset(),
            log_end_offset: self.log.log_end_offset(),
            size_bytes: self.log.size_bytes(),
            segments: self.log.segment_count(),
            committed: self
                .offsets
                .all()
                .map(|(g, o)| (g.to_owned(), o))
                .collect::<BTreeMap<_, _>>(),
            restarts: 0,
            fsyncs: 0,
            parked_polls: 0,
            parked_produces: 0,
            failed: None,
            cleaner: self.cleaning,
        }
    }

    /// The topic's name and this partition's number.
    pub fn id(&self) -> (&str, u32) {
        (&self.topic, self.partition)
    }
}

/// The blocking half of a partition's interval sync (see [`Partition::begin_sync`]): the
/// log's and the offsets' syncs, run in that order on whatever thread calls
/// [`SyncJob::run`]. `Send`.
#[derive(Debug)]
pub struct SyncJob {
    log: Option<LogSyncJob>,
    offsets: Option<OffsetsSyncJob>,
    completer: Completer<SyncDone>,
}

impl SyncJob {
    /// Runs the syncs (blocking) and hands their results to the partition, which applies
    /// them at its next [`Partition::poll_sync`] (or wait).
    pub fn run(self) {
        let done = SyncDone {
            log: self.log.map(LogSyncJob::run),
            offsets: self.offsets.map(OffsetsSyncJob::run),
        };
        self.completer.complete(done);
    }
}

#[derive(Debug)]
struct SyncDone {
    log: Option<LogSynced>,
    offsets: Option<OffsetsSynced>,
}

/// The interval sync in flight. Dropped (the partition dropped without `close`, after a
/// crash of its actor), it waits for the job, so that a reopen never runs beside a sync of
/// the same files (a failed one writes their unsynced bytes again).
#[derive(Debug)]
struct InFlight(Option<Completion<SyncDone>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            let _ = done.wait();
        }
    }
}

/// Brings every committed offset above `log_end` down to it, persistently, and logs each.
///
/// A commit above the log end is one that outlived the records it covered: the journal and
/// the log are written back independently under `FsyncPolicy::Interval` and `Never`, so a
/// power loss can keep the one and lose the other's tail, and recovery may cut a torn tail.
/// Left as it is, the group would read nothing until the log grew past its old commit and
/// then skip every record produced up to it, and `log end - commit` would underflow. Stored
/// at the log end, the group reads every record produced from now on.
///
/// # Errors
/// `Io` when a clamped commit cannot be written.
fn clamp_commits_to(offsets: &mut OffsetStore, log_end: u64, dir: &Path) -> Result<()> {
    let above: Vec<(String, u64)> = offsets
        .all()
        .filter(|&(_, committed)| committed > log_end)
        .map(|(group, committed)| (group.to_owned(), committed))
        .collect();
    for (group, committed) in above {
        tracing::warn!(
            dir = %dir.display(), %group, committed, log_end,
            "committed offset above the log end (the log lost its tail, or a Kafka client \
             committed past it); clamped to the log end"
        );
        let metadata = offsets
            .get_with_metadata(&group)
            .map(|c| c.metadata.clone())
            .unwrap_or_default();
        offsets.commit_with_metadata(&group, log_end, &metadata)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    fn open(dir: &Path, max_size: Option<u64>) -> Partition {
        Partition::open(
            &crate::storage::fs::os(),
            dir,
            ("t", 0),
            LogConfig::default(),
            max_size,
            NOW,
        )
        .unwrap()
        .0
    }

    fn produce(p: &mut Partition, n: usize) {
        let records: Vec<ProduceRecord> = (0..n)
            .map(|i| ProduceRecord {
                key: None,
                value: vec![i as u8],
            })
            .collect();
        p.append(&mut RecordBatch::from(&records[..]), NOW).unwrap();
    }

    #[test]
    fn one_interval_sync_at_a_time_and_close_waits_for_it() {
        use crate::storage::sim::{GatedFs, SimFs, SyncGate};
        use std::time::Duration;
        let gate = SyncGate::new("/t_0/");
        let fs: SharedFs = std::sync::Arc::new(GatedFs::new(
            std::sync::Arc::new(SimFs::new(1)),
            gate.clone(),
        ));
        let config = LogConfig {
            fsync: crate::storage::FsyncPolicy::Interval(Duration::from_secs(3600)),
            ..LogConfig::default()
        };
        let dir = Path::new("/data/t_0");
        let mut p = Partition::open(&fs, dir, ("t", 0), config, None, NOW)
            .unwrap()
            .0;
        produce(&mut p, 2);
        p.commit("g", 0).unwrap();
        gate.close();
        let job = p.begin_sync().unwrap().expect("log and offsets are dirty");
        let running = std::thread::spawn(move || job.run());
        assert!(gate.wait_for_waiting(1, Duration::from_secs(10)));
        // Served meanwhile; and no second sync while one is in flight.
        produce(&mut p, 1);
        p.commit("g", 2).unwrap();
        assert_eq!(p.fetch("g", None, 5).unwrap().to_raw().len(), 0);
        assert!(p.begin_sync().unwrap().is_none());
        assert!(!p.poll_sync().unwrap(), "not done yet");
        assert!(p.sync_in_flight());
        // The log's sync, then the journal's.
        gate.let_through(2);
        running.join().unwrap();
        assert!(p.poll_sync().unwrap());
        let mut times = 0;
        p.drain_sync_times(|_| times += 1);
        assert_eq!(times, 1);
        // What came during the sync is synced by the next one; close waits for it.
        let job = p.begin_sync().unwrap().expect("dirty again");
        let running = std::thread::spawn(move || job.run());
        assert!(gate.wait_for_waiting(1, Duration::from_secs(10)));
        gate.open();
        p.close().unwrap();
        running.join().unwrap();
    }

    #[test]
    fn fetch_redelivers_until_commit() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), None);
        produce(&mut p, 3);
        assert_eq!(p.fetch("g", None, 1).unwrap().to_raw()[0].offset, 0);
        assert_eq!(p.fetch("g", None, 1).unwrap().to_raw()[0].offset, 0);
        p.commit("g", 0).unwrap();
        assert_eq!(
            p.fetch("g", None, 5)
                .unwrap()
                .to_raw()
                .iter()
                .map(|r| r.offset)
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(p.lag("g", false), Some(2));
    }

    #[test]
    fn commit_at_or_past_the_log_end_is_refused_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), None);
        produce(&mut p, 2);
        assert!(matches!(
            p.commit("g", 2),
            Err(Error::OffsetOutOfRange { offset: 2, .. })
        ));
        assert_eq!(p.lag("g", false), None);
        p.commit("g", 1).unwrap();
        assert_eq!(p.lag("g", false), Some(0));
    }

    #[test]
    fn a_kafka_commit_past_the_log_end_is_kept_and_reads_and_lag_clamp() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), Some(10));
        produce(&mut p, 2);
        p.set_committed("g", 42, "Hello world!").unwrap();
        let committed = p.committed_with_metadata("g").unwrap();
        assert_eq!(
            (committed.offset, committed.metadata.as_str()),
            (42, "Hello world!")
        );
        assert_eq!((p.position("g"), p.lag("g", false)), (2, Some(0)));
        assert_eq!(p.backlog(), 0);
        assert!(!p.has_data_for("g", None));
        // The native commit keeps its rule, beside it.
        assert!(matches!(
            p.commit("g", 2),
            Err(Error::OffsetOutOfRange { .. })
        ));
        assert_eq!(p.committed_with_metadata("g").unwrap().offset, 42);
        // A reopen brings it to the log end, metadata kept (see `clamp_commits_to`).
        drop(p);
        let p = open(dir.path(), Some(10));
        let committed = p.committed_with_metadata("g").unwrap();
        assert_eq!(
            (committed.offset, committed.metadata.as_str()),
            (2, "Hello world!")
        );
    }

    #[test]
    fn backlog_follows_the_slowest_group_and_registered_groups_count_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), Some(5));
        produce(&mut p, 5);
        assert_eq!(
            p.full(0),
            Some(5),
            "no group: every retained record is backlog"
        );
        p.commit("fast", 3).unwrap();
        assert_eq!(p.backlog(), 1);
        assert_eq!(p.full(0), None);
        p.register_group("new", StartFrom::Earliest).unwrap();
        assert_eq!(
            p.backlog(),
            5,
            "a group that has not committed reads from the start"
        );
        p.commit("new", 1).unwrap();
        assert_eq!(p.backlog(), 3);
    }

    #[test]
    fn a_latest_group_starts_at_the_log_end_and_keeps_it_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), None);
        produce(&mut p, 3);
        p.register_group("late", StartFrom::Latest).unwrap();
        assert_eq!(p.position("late"), 3);
        assert!(!p.has_data_for("late", None));
        produce(&mut p, 1);
        drop(p);
        let mut p = open(dir.path(), None);
        p.register_group("late", StartFrom::Latest).unwrap(); // a rejoin moves nothing
        assert_eq!(
            p.fetch("late", None, 10)
                .unwrap()
                .to_raw()
                .iter()
                .map(|r| r.offset)
                .collect::<Vec<_>>(),
            vec![3]
        );
    }

    #[test]
    fn a_reader_with_its_own_position_reads_from_it_not_from_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), None);
        produce(&mut p, 5);
        p.commit("g", 0).unwrap();
        assert_eq!(p.fetch("g", Some(3), 10).unwrap().to_raw()[0].offset, 3);
        assert!(p.has_data_for("g", Some(4)));
        assert!(!p.has_data_for("g", Some(5)));
        assert!(matches!(
            p.fetch("g", Some(6), 1),
            Err(Error::OffsetOutOfRange { .. })
        ));
    }

    #[test]
    fn commits_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = open(dir.path(), None);
        produce(&mut p, 4);
        p.commit("g", 2).unwrap();
        drop(p);
        let p = open(dir.path(), None);
        assert_eq!(p.position("g"), 3);
        assert_eq!(p.lag("g", false), Some(1));
    }
}
