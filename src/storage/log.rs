//! `PartitionLog`: one partition's ordered, append-only, segmented log.
//!
//! # Shape
//! A directory of segments (`<base_offset:020>.log` of Kafka record batches, with its
//! `.index` and `.timeindex`), the last one active, plus a `checkpoint` and a
//! `log_start_offset` file (formats: [`super::checkpoint`]) and the idempotent producers'
//! snapshots ([`super::producer_state`]; appends of Kafka producers' batches are in
//! `log/producers.rs`). Offsets are contiguous from the log start offset to the log end
//! offset.
//!
//! # Durability
//! `append` encodes a whole batch into one buffer and hands it to the OS with one `write`
//! before returning, so an acknowledged record survives a process crash. Under
//! [`FsyncPolicy::Always`] it also `fdatasync`s once for the batch; under `Interval` the owner
//! syncs on a timer, off its own thread: [`PartitionLog::begin_interval_sync`] takes a
//! [`LogSyncJob`] that a worker runs, and [`PartitionLog::finish_interval_sync`] applies its
//! result (see `log/interval_sync.rs`); under `Never` it is left to the OS. A rolled
//! segment is synced and the checkpoint's recovery point moved past it, so after a crash only
//! the active segment is scanned. After a clean shutdown the checkpoint stays clean until the
//! first change (see [`super::checkpoint`]): an open of an untouched partition writes and
//! syncs nothing.
//!
//! # Retention
//! Three predicates over records (count, bytes, age) each give the first offset they would
//! keep; the log start offset becomes the largest of them, exactly, after every append and on
//! [`PartitionLog::enforce_retention`]. One routine then deletes every segment that lies wholly
//! below the log start; the active segment never is. Reads below the log start begin there.
//!
//! # Memory
//! Records live on disk. In RAM: one small struct per segment, a reusable encode buffer, and
//! the position of the last read (so a sequential consumer never searches the index).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::RecordBatch;
/// The size limits an append enforces, where the frame format defines them.
pub use super::batch::{check_batch_limits, DEFAULT_MAX_RECORD_BYTES, MAX_BATCH_BYTES};
use super::checkpoint::{Checkpoint, LogStartFile};
use super::cleaner::checkpoint::CleanerCheckpoint;
use super::compression::Compression;
use super::error::{Result, StorageError};
pub use super::fetch::FetchedRecords;
use super::fetch::{
    first_record_not_before, read_segment, Held, HeldBudget, Resume, SegmentRead, HELD_BUDGET,
};
use super::format::TimestampType;
use super::fs::{OpenMode, SharedFs, StorageFile};
use super::fsutil::{rewrite_unsynced, sync_dir};
use super::index::{IndexEntry, INDEX_INTERVAL_BYTES};
use super::policy::FsyncPolicy;
use super::producer_state::{self, ProducerState, SequenceCheck};
use super::recovery::{self, RecoveryReport};
use super::segment::{LogSegment, ScannedFrame};
use super::sync_worker::{completion, Abandoned, Completion, SyncWorker};

/// Kafka's default segment size is 1 GiB; 64 MiB keeps deletion by retention fine-grained and
/// a crash scan of the active segment short (~10 ms), at the cost of more files.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;
/// The largest `segment_bytes` (Kafka's maximum, `i32::MAX`). Index entries store a frame's
/// byte position in a `u32`, so a segment must stay addressable by one: a segment rolls before
/// a batch that would take it past `segment_bytes` (or holds that one batch alone), so with
/// this cap every frame starts below 2 GiB.
pub const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;

/// How far after the broker's clock a Kafka producer's timestamp may be (Kafka's
/// `log.message.timestamp.after.max.ms` default, one hour): native timestamps never go below
/// the largest in the log, so a producer's clock must not drag them far into the future.
pub const MAX_FUTURE_TIMESTAMP_MS: u64 = 60 * 60 * 1000;

/// How much a partition keeps. `None` everywhere keeps everything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Keep at most this many records.
    pub records: Option<u64>,
    /// Keep at most this many bytes of record frames.
    pub bytes: Option<u64>,
    /// Keep records for at most this many milliseconds past their timestamp (the append
    /// time for native records and under LogAppendTime, the producer's under CreateTime).
    /// Decided per batch, where Kafka decides per segment: the log start moves to the first
    /// batch whose largest timestamp is within this (its older records stay with it), and
    /// every batch after it is kept, older ones included.
    pub ms: Option<u64>,
}

/// Everything a `PartitionLog` needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// A segment rolls once it reaches this size (at most [`MAX_SEGMENT_BYTES`]).
    pub segment_bytes: u64,
    /// The largest key + value of one record an append takes.
    pub max_record_bytes: usize,
    pub fsync: FsyncPolicy,
    pub retention: RetentionPolicy,
    /// How native appends stamp their batches, and whether a client's batch keeps its
    /// timestamps (CreateTime) or gets the append time (LogAppendTime).
    pub timestamp_type: TimestampType,
    /// The codec every appended batch is stored with, recompressed when its own differs
    /// (the topic's `compression.type`); `None`: each batch is stored as produced.
    pub recompress: Option<Compression>,
    /// The largest batch an append takes, as produced and as stored (the topic's
    /// `max.message.bytes`); `None`: no limit but the record and batch limits.
    pub max_batch_bytes: Option<usize>,
}

impl Default for LogConfig {
    /// [`DEFAULT_SEGMENT_BYTES`] segments, [`DEFAULT_MAX_RECORD_BYTES`] records, the default
    /// fsync policy, no retention.
    fn default() -> Self {
        LogConfig {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            fsync: FsyncPolicy::default(),
            retention: RetentionPolicy::default(),
            timestamp_type: TimestampType::default(),
            recompress: None,
            max_batch_bytes: None,
        }
    }
}

/// The sealing of a segment after a roll to `new_base`; see [`PartitionLog::roll`].
#[derive(Debug, Clone)]
struct Sealing {
    fs: SharedFs,
    dir: PathBuf,
    sealed: PathBuf,
    /// The sealed segment's synced size and size at the roll: bytes in between were never
    /// proven durable, and are written again if the sync fails.
    synced_size: u64,
    size: u64,
    new_base: u64,
}

impl Sealing {
    /// Syncs the sealed segment (`file`, data and size) and the producer snapshot the roll
    /// wrote as of `new_base`, then the directory, then records `new_base` as the
    /// checkpoint's recovery point, and last removes the snapshots the synced one replaces.
    /// A failed sync first writes the unsynced bytes again (see [`rewrite_unsynced`]), as the
    /// active segment's does: the owner reopens after the failure, and recovery's sync must
    /// persist them for real.
    fn run(&self, file: &dyn StorageFile) -> Result<()> {
        if let Err(e) = file.sync_all() {
            rewrite_unsynced(file, &self.sealed, self.synced_size, self.size);
            return Err(StorageError::io("sync a sealed segment", &self.sealed, e));
        }
        let fs = self.fs.as_ref();
        producer_state::sync_snapshot(fs, &self.dir, self.new_base)?;
        sync_dir(fs, &self.dir)?;
        Checkpoint {
            clean: false,
            recovery_point: self.new_base,
            ..Checkpoint::default()
        }
        .write(fs, &self.dir)?;
        producer_state::remove_older_snapshots(fs, &self.dir, self.new_base)
    }
}

/// What an append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record of the batch.
    pub base_offset: u64,
    /// Number of records written.
    pub count: u64,
    /// The timestamp given to every record of the batch.
    pub timestamp_ms: u64,
}

/// The largest appended batch kept as a log's tail for more readers than one (see
/// [`PartitionLog::hold_for_reader_at_end`]): the batches of a trickle, where each reader
/// woken by an append would otherwise read back from the file the one batch it asks for.
/// A larger batch is read back by all but the first reader, its read cost spread over
/// its records; and a partition keeps at most this much between its appends.
pub(super) const MAX_SHARED_TAIL_BYTES: usize = 16 << 10;

/// Where the last read stopped, so the next sequential read skips the index.
#[derive(Debug)]
struct ReadHint {
    offset: u64,
    base_offset: u64,
    position: u64,
    /// Set when the last read stopped inside a batch it verified.
    resume: Option<Resume>,
    /// The length of the batch at `position`, when the last read saw its header.
    batch_len: Option<usize>,
    /// The rest of the batch the last read stopped in, in the buffer it read.
    held: Option<Box<Held>>,
}

/// One partition's log. Single owner: not `Sync`-shared; the partition actor owns it.
#[derive(Debug)]
pub struct PartitionLog {
    /// Where the files live (the OS, or a simulated disk in tests).
    fs: SharedFs,
    dir: PathBuf,
    config: LogConfig,
    /// By base offset; the last one is active. Never empty.
    segments: BTreeMap<u64, LogSegment>,
    log_start_offset: u64,
    log_start_file: LogStartFile,
    /// `(offset, base_offset, position)` of the log start, once located (bytes retention).
    start_position: Option<(u64, u64, u64)>,
    /// `(offset, timestamp)` of the record at the log start, once read (time retention).
    start_timestamp: Option<(u64, u64)>,
    /// The largest record timestamp the log held since it was opened, the largest of every
    /// segment's at the open: time retention expires nothing while it is within retention,
    /// and native appends and LogAppendTime are stamped with at least it, so timestamps never
    /// go backwards even if the wall clock does. A Kafka producer's CreateTime can raise it
    /// by at most [`MAX_FUTURE_TIMESTAMP_MS`] ahead of the clock. Retention never lowers it:
    /// it bounds the timestamps held from above, which is all those uses need (Kafka's
    /// "max timestamp" lookup takes the largest held: [`PartitionLog::record_with_max_timestamp`]).
    last_timestamp_ms: u64,
    /// Appended since the last sync.
    dirty: bool,
    /// How long each `fdatasync` of an appended segment took since the owner last drained
    /// them ([`PartitionLog::drain_sync_times`]): storage records no metrics itself, its
    /// owner reports these (usually none or one per call).
    sync_times: Vec<std::time::Duration>,
    read_hint: Option<ReadHint>,
    /// The batch the last append held for the reader at the log end, kept (sharing its
    /// bytes) for the other readers that were there too, with the base of its segment: see
    /// [`PartitionLog::hold_for_reader_at_end`].
    tail: Option<(u64, Box<Held>)>,
    /// The next read, done before it was asked for (see `read_ahead`).
    ahead: read_ahead::ReadAheads,
    /// What the rest of a batch kept in `read_hint` counts against (see `fetch::Held`).
    held_budget: &'static HeldBudget,
    /// The most bytes a client's compressed batch may decompress to before it is refused
    /// (at most the read side's `format::MAX_DECOMPRESSED_BYTES`, so whatever is appended can
    /// be read back).
    max_decompressed_bytes: usize,
    /// `(offset, segment base, position)` where the last [`PartitionLog::read_batches`]
    /// stopped: the next sequential fetch starts there without the index.
    batch_hint: Option<(u64, u64, u64)>,
    /// The sealing of the last rolled segment, on the worker or its own thread (see
    /// [`PartitionLog::roll`]).
    sealing: Option<Completion<Result<()>>>,
    /// Where sealings and deletions of segments run, when the owner gave one
    /// ([`PartitionLog::set_worker`]).
    worker: Option<Arc<SyncWorker>>,
    /// Deletions handed to `worker` and not yet seen done: segments below the log start (see
    /// [`PartitionLog::delete_segments_below_start`]) and segments a cleaned one replaced.
    deleting: Vec<Completion<Result<()>>>,
    /// A second handle to the active segment (by base offset), through which interval syncs
    /// run on another thread: a pooled handle is locked for the whole of a call, so a sync
    /// through the appending handle would hold up the appends.
    sync_file: Option<(u64, Arc<dyn StorageFile>)>,
    /// Idempotent producers' last batches (see [`producer_state`]).
    producers: ProducerState,
    /// `(segment base, byte position)` from which every frame was appended by this open: its
    /// bytes came from memory and its CRC was computed (or, for a client's batch, verified)
    /// here, so bytes retention need not read it back to verify it (see
    /// [`PartitionLog::trusted_from`]). Frames before it were found on disk at the open.
    appended_from: (u64, u64),
    /// The first offset no cleaning pass cleaned (see `log/cleaning.rs`): where the next
    /// pass's dirty section starts. Kept in the cleaner checkpoint
    /// (`cleaner/checkpoint.rs`) after each pass; an open without a valid one starts from
    /// 0, the whole log dirty (a reread, never a wrong result).
    first_dirty_offset: u64,
    /// The earliest delete horizon of a tombstone the cleaned section holds, as the passes
    /// left it (kept in the cleaner checkpoint too): a pass is due then, writes or not.
    delete_horizon_ms: Option<u64>,
    /// What the cleaner checkpoint on disk holds (`None`: no valid one), so that a pass that
    /// moved nothing writes nothing.
    cleaner_checkpoint: Option<CleanerCheckpoint>,
    /// The log was cleaned at least once (`cleaner::swap::CLEANED_MARKER` is on disk): every
    /// segment may hold gaps once sealed (see `LogSegment::may_have_gaps`).
    cleaned: bool,
    /// The checkpoint on disk says clean: the open trusted a clean shutdown and nothing has
    /// changed the files since. The first change writes the unclean checkpoint first
    /// ([`PartitionLog::mark_unclean`]), and a `close` with nothing changed writes nothing.
    clean_on_disk: bool,
}

impl PartitionLog {
    #[cfg(any(test, feature = "internals"))]
    /// Opens (creating if needed) the partition log in `dir`, recovering it as described in
    /// [`recovery`], then applies retention as of `now_ms`.
    ///
    /// # Errors
    /// `Io` when the directory cannot be read or written; `Corrupt` never: a bad tail is cut
    /// and reported instead.
    pub fn open(dir: &Path, config: LogConfig, now_ms: u64) -> Result<(Self, RecoveryReport)> {
        Self::open_with(&super::fs::os(), dir, config, now_ms)
    }

    /// As [`PartitionLog::open`], on the file system `fs` (tests pass a simulated one).
    ///
    /// # Errors
    /// As [`PartitionLog::open`].
    pub fn open_with(
        fs: &SharedFs,
        dir: &Path,
        config: LogConfig,
        now_ms: u64,
    ) -> Result<(Self, RecoveryReport)> {
        let recovery::Loaded {
            mut segments,
            report,
            names,
        } = recovery::load(fs, dir, INDEX_INTERVAL_BYTES)?;
        let (log_start_file, stored_start) = LogStartFile::open(fs.as_ref(), dir)?;
        let created_segment = segments.is_empty();
        if created_segment {
            let base = stored_start.unwrap_or(0);
            segments.insert(
                base,
                LogSegment::create(fs, dir, base, INDEX_INTERVAL_BYTES)?,
            );
        }
        let first_base = *segments.keys().next().expect("at least one segment");
        let active = segments.values().next_back().expect("at least one segment");
        let log_end = active.next_offset();
        let appended_from = (active.base_offset(), active.size());
        // The largest of every segment's: under CreateTime a later segment may hold older
        // records than an earlier one, and the active one may be empty (a crash just after a
        // roll). An underestimate would make time retention expire records within retention.
        let last_timestamp_ms = segments
            .values()
            .filter_map(LogSegment::last_timestamp_ms)
            .max()
            .unwrap_or(0);
        if stored_start.is_some_and(|start| start < first_base) {
            tracing::error!(
                dir = %dir.display(), from = stored_start, to = first_base,
                "the first segments are missing; the log now starts at the first one present"
            );
        }
        let log_start_offset = stored_start
            .unwrap_or(first_base)
            .clamp(first_base, log_end);
        let mut log = PartitionLog {
            fs: fs.clone(),
            dir: dir.to_owned(),
            config,
            segments,
            log_start_offset,
            log_start_file,
            start_position: None,
            start_timestamp: None,
            last_timestamp_ms,
            dirty: false,
            sync_times: Vec::new(),
            read_hint: None,
            tail: None,
            ahead: read_ahead::ReadAheads::default(),
            held_budget: &HELD_BUDGET,
            max_decompressed_bytes: crate::storage::format::MAX_DECOMPRESSED_BYTES,
            batch_hint: None,
            sealing: None,
            worker: None,
            deleting: Vec::new(),
            sync_file: None,
            producers: ProducerState::default(),
            appended_from,
            first_dirty_offset: 0,
            delete_horizon_ms: None,
            cleaner_checkpoint: None,
            cleaned: names
                .iter()
                .any(|n| n == crate::storage::cleaner::swap::CLEANED_MARKER),
            clean_on_disk: false,
        };
        log.load_cleaner_checkpoint(&names);
        let removed_snapshots = log.load_producers(&names)?;
        if stored_start != Some(log_start_offset) {
            log.log_start_file.store(log_start_offset)?;
        }
        // After a clean shutdown, with every file as that shutdown left it, the checkpoint
        // on disk still describes the log: it stays clean until the first change
        // (`mark_unclean`). Otherwise recovery or this open changed the directory: make the
        // names it created durable and record the recovery point now.
        let untouched = report.clean_shutdown
            && report.segments_scanned == 0
            && report.leftovers_removed.is_empty()
            && report.cleaner_files.is_empty()
            && !created_segment
            && !removed_snapshots;
        log.clean_on_disk = true;
        if !untouched {
            sync_dir(fs.as_ref(), dir)?;
            log.mark_unclean()?;
        }
        // Retention deletes old records; failing to do it now must not keep the partition
        // from opening (it would fail the same way on every restart). It is retried after the
        // next append. Segments wholly below the stored log start are files whose deletion a
        // crash interrupted (it runs after the start is stored, off the owner's thread): they
        // hold no live record, and are deleted here first.
        if let Err(e) = log
            .delete_segments_below_start()
            .and_then(|()| log.enforce_retention(now_ms))
        {
            tracing::warn!(dir = %dir.display(), error = %e, "retention failed at open; will retry");
        }
        Ok((log, report))
    }

    /// Writes the unclean checkpoint if the one on disk still says clean: called before
    /// anything changes the log's files (an append, a roll, retention), so that a crash from
    /// then on is recovered by a scan from the recovery point. Every record is synced at that
    /// moment (the clean shutdown synced them, and nothing was appended since), so the
    /// recovery point is the log end.
    ///
    /// # Errors
    /// `Io` when the checkpoint cannot be written; the caller then changes nothing.
    fn mark_unclean(&mut self) -> Result<()> {
        if self.clean_on_disk {
            Checkpoint {
                clean: false,
                recovery_point: self.log_end_offset(),
                ..Checkpoint::default()
            }
            .write(self.fs.as_ref(), &self.dir)?;
            self.clean_on_disk = false;
        }
        Ok(())
    }

    /// Whether the checkpoint on disk says clean: this open trusted a clean shutdown and
    /// nothing has changed the files since (see [`PartitionLog::open`]).
    #[cfg(any(test, feature = "internals"))]
    pub fn is_clean_on_disk(&self) -> bool {
        self.clean_on_disk
    }

    /// Lowers the cap on what a client's compressed batch may decompress to (see
    /// [`PartitionLog::append_kafka_batch`]); values above the read side's
    /// `format::MAX_DECOMPRESSED_BYTES` are taken as that.
    pub fn set_max_decompressed_bytes(&mut self, bytes: usize) {
        // A read ahead made under the old limit may not be what a read returns now.
        self.ahead.clear();
        self.max_decompressed_bytes = bytes.min(crate::storage::format::MAX_DECOMPRESSED_BYTES);
    }

    /// Counts what this log holds between reads against `budget` instead of the process's.
    #[cfg(test)]
    pub(super) fn set_held_budget(&mut self, budget: &'static HeldBudget) {
        self.read_hint = None;
        self.tail = None;
        self.ahead.clear();
        self.held_budget = budget;
    }
    /// The partition's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The settings the log was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// The first offset still readable.
    /// Replaces the retention rules and the timestamp type (a topic altered while open);
    /// the next [`PartitionLog::enforce_retention`] applies them. The fsync policy and the
    /// record size limit are fixed for the log's life; see also
    /// [`PartitionLog::set_segment_bytes`].
    pub fn set_retention(&mut self, retention: RetentionPolicy, timestamp_type: TimestampType) {
        self.config.retention = retention;
        self.config.timestamp_type = timestamp_type;
    }

    /// Replaces the size at which segments roll (a topic altered while open), as Kafka's
    /// `segment.bytes` changes: the active segment rolls before the next append that would
    /// take it past `bytes` (at once if it is already larger), sealed segments keep their
    /// size, and a cleaning pass groups its sources up to `bytes`. The caller checked it
    /// against [`MAX_SEGMENT_BYTES`] (`TopicConfig::validate`).
    pub fn set_segment_bytes(&mut self, bytes: u64) {
        self.config.segment_bytes = bytes;
    }

    pub fn log_start_offset(&self) -> u64 {
        self.log_start_offset
    }
    /// The offset the next record will get.
    pub fn log_end_offset(&self) -> u64 {
        self.active().next_offset()
    }
    /// Bytes of segment files on disk.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    /// The base offsets of the segments, the active one last.
    #[cfg(any(test, feature = "internals"))]
    pub fn segment_bases(&self) -> Vec<u64> {
        self.segments.keys().copied().collect()
    }
    #[cfg(any(test, feature = "internals"))]
    /// Records appended since the last sync (relevant under `Interval` and `Never`).
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// The base offset of the active segment.
    fn active_base(&self) -> u64 {
        *self
            .segments
            .keys()
            .next_back()
            .expect("a log always has a segment")
    }

    fn active(&self) -> &LogSegment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has a segment")
    }

    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has a segment")
    }

    #[cfg(any(test, feature = "internals"))]
    /// Appends `records` as one batch stamped `max(now_ms, last timestamp)`, then applies
    /// retention. Returns once the bytes are in the OS (and synced under `Always`).
    ///
    /// # Errors
    /// `RecordTooLarge` (nothing written) when a record's key + value exceeds the maximum
    /// record size or the batch exceeds [`MAX_BATCH_BYTES`]; `Io` when the write or sync
    /// fails: nothing of the batch is then acknowledged, and after a failed sync the log
    /// must be reopened (its page cache state is unknown).
    pub fn append(
        &mut self,
        records: &[super::batch::AppendRecord<'_>],
        now_ms: u64,
    ) -> Result<AppendInfo> {
        // Sizes are checked once the records are in the batch (`append_batch`).
        let mut batch: RecordBatch = records.iter().copied().collect();
        self.append_batch(&mut batch, now_ms)
    }

    /// As [`PartitionLog::append`], for records already laid out as frames: the batch is
    /// sealed in place (offsets, timestamp, checksums) and written as it is.
    ///
    /// # Errors
    /// As [`PartitionLog::append`].
    #[cfg(any(test, feature = "internals"))]
    pub fn append_batch(&mut self, batch: &mut RecordBatch, now_ms: u64) -> Result<AppendInfo> {
        let info = self.append_batch_unretained(batch, now_ms)?;
        if info.count > 0 {
            self.retain(now_ms);
        }
        Ok(info)
    }

    /// As [`PartitionLog::append_batch`], but leaves retention to the caller's
    /// [`PartitionLog::retain`], so that an owner can acknowledge the append first: at the
    /// retention limit every append moves the log start, which reads the batch it cuts at and
    /// now and then deletes a segment, none of which the producer needs to wait for.
    ///
    /// # Errors
    /// As [`PartitionLog::append`].
    pub fn append_batch_unretained(
        &mut self,
        batch: &mut RecordBatch,
        now_ms: u64,
    ) -> Result<AppendInfo> {
        let base_offset = self.log_end_offset();
        let timestamp_ms = now_ms.max(self.last_timestamp_ms);
        check_batch_limits(batch, self.config.max_record_bytes)?;
        self.check_batch_size(batch.size_bytes())?;
        if batch.is_empty() {
            return Ok(AppendInfo {
                base_offset,
                count: 0,
                timestamp_ms,
            });
        }
        batch.seal(base_offset, timestamp_ms, self.config.timestamp_type);
        // A native batch is uncompressed: a log with a codec stores it compressed.
        let compressed = match self.config.recompress {
            Some(codec) if codec != Compression::None => {
                let compressed = stored_batch::compressed_native(batch.bytes(), codec)?;
                self.check_batch_size(compressed.len())?;
                Some(compressed)
            }
            _ => None,
        };
        let stored = compressed.as_deref().unwrap_or(batch.bytes());
        self.mark_unclean()?;
        let active = self.active();
        if active.size() > 0 && active.size() + stored.len() as u64 > self.config.segment_bytes {
            self.roll()?;
        }
        let next_offset = base_offset + batch.len() as u64;
        let position = self.active().size();
        self.active_mut()
            .append(stored, next_offset, timestamp_ms)?;
        self.hold_for_reader_at_end(&[stored], position);
        self.last_timestamp_ms = timestamp_ms;
        if self.config.fsync == FsyncPolicy::Always {
            self.sync_active()?;
        } else {
            self.dirty = true;
        }
        Ok(AppendInfo {
            base_offset,
            count: batch.len() as u64,
            timestamp_ms,
        })
    }

    /// Applies retention as of `now_ms` after appends. An append is acknowledged whatever
    /// retention does: a failure (to read the batch to cut at, to delete an old segment) is
    /// logged and retried after the next append.
    pub fn retain(&mut self, now_ms: u64) {
        if let Err(e) = self.enforce_retention(now_ms) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "retention failed; will retry");
        }
    }

    /// Runs the sealing of rolled segments, the deletion of segments below the log start and
    /// of those a cleaned segment replaced on `worker` (the broker's sync thread) from now on:
    /// without one, a roll seals on a thread of its own and segments are deleted on the
    /// caller's thread. Unlinking a
    /// 64 MiB segment frees its page cache, which takes milliseconds the appends need not
    /// wait for.
    pub fn set_worker(&mut self, worker: Arc<SyncWorker>) {
        self.worker = Some(worker);
    }

    /// The largest key + value one record may have here.
    pub fn max_record_bytes(&self) -> usize {
        self.config.max_record_bytes
    }

    /// `fdatasync`s the active segment, timing it for [`PartitionLog::drain_sync_times`].
    fn sync_active(&mut self) -> Result<()> {
        let started = std::time::Instant::now();
        self.active_mut().sync()?;
        self.record_sync_time(started.elapsed());
        Ok(())
    }

    /// Keeps `took` for [`PartitionLog::drain_sync_times`].
    fn record_sync_time(&mut self, took: std::time::Duration) {
        // Bounded for owners that never drain (tools, benchmarks); the partition actor
        // drains after each group commit and each interval sync, far below the bound.
        if self.sync_times.len() < 64 {
            self.sync_times.push(took);
        }
    }

    /// Hands `each` the duration of every append's, `PartitionLog::sync`'s or interval
    /// sync's `fdatasync` since the last call, and forgets them.
    pub fn drain_sync_times(&mut self, each: impl FnMut(std::time::Duration)) {
        self.sync_times.drain(..).for_each(each);
    }

    /// `fdatasync`s the active segment if anything was appended since the last sync, here
    /// (the broker syncs on another thread: [`PartitionLog::begin_interval_sync`]).
    #[cfg(any(test, feature = "internals"))]
    pub fn sync(&mut self) -> Result<()> {
        // A segment created by a roll is durable once the roll's sealing has synced the
        // directory: synced records in it must not vanish with its name.
        self.finish_sealing()?;
        if self.dirty {
            self.sync_active()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Seals the active segment and starts a new one. Sealing means: the segment is synced,
    /// then so is the directory (the new segment's name), then the checkpoint's recovery point
    /// moves to the new segment, so that recovery need not scan the sealed one.
    ///
    /// Under `FsyncPolicy::Always` this happens here, before anything is appended to the new
    /// segment (each append is then acknowledged synced, name included). Otherwise appends
    /// promise no sync, so the sealing runs on its own thread, like Kafka's flush after a roll:
    /// syncing 64 MiB would stall the partition for tens of milliseconds. Until it finishes,
    /// the checkpoint keeps the older recovery point (a crash then scans a little more). At
    /// most one sealing runs: the next roll, a `sync` and `close` wait for it first.
    fn roll(&mut self) -> Result<()> {
        self.finish_sealing()?;
        self.active_mut().seal_time_index()?;
        let base = self.log_end_offset();
        let active = self.active();
        let (sealed, synced_size, size) = (
            active.log_path().to_owned(),
            active.synced_size(),
            active.size(),
        );
        let mut segment = LogSegment::create(&self.fs, &self.dir, base, INDEX_INTERVAL_BYTES)?;
        if self.cleaned {
            segment.allow_gaps();
        }
        self.active_mut().mark_sealed();
        self.segments.insert(base, segment);
        self.write_producer_snapshot(base)?;
        self.dirty = false;
        self.sync_file = None;
        tracing::debug!(dir = %self.dir.display(), base_offset = base, "rolled segment");
        // Opened here, so that retention deleting the sealed segment meanwhile is harmless.
        let file = self
            .fs
            .open(&sealed, OpenMode::Existing)
            .map_err(|e| StorageError::io("open a sealed segment", &sealed, e))?;
        let sealing = Sealing {
            fs: self.fs.clone(),
            dir: self.dir.clone(),
            sealed,
            synced_size,
            size,
            new_base: base,
        };
        if self.config.fsync == FsyncPolicy::Always {
            return sealing.run(file.as_ref());
        }
        let file: Arc<dyn StorageFile> = Arc::from(file);
        let (done, completer) = completion();
        let run = {
            let (sealing, file) = (sealing.clone(), file.clone());
            move || completer.complete(sealing.run(file.as_ref()))
        };
        let done = match &self.worker {
            Some(worker) => {
                worker.run(run);
                done
            }
            None => match std::thread::Builder::new()
                .name("nanokafka-seal".into())
                .spawn(run)
            {
                Ok(_) => done,
                // No thread to be had: seal here.
                Err(_) => {
                    let (done, completer) = completion();
                    completer.complete(sealing.run(file.as_ref()));
                    done
                }
            },
        };
        self.sealing = Some(done);
        Ok(())
    }

    /// Waits for the last roll's sealing; its failure is this call's.
    ///
    /// # Errors
    /// `Io` when the sealing could not sync or write the checkpoint.
    fn finish_sealing(&mut self) -> Result<()> {
        match self.sealing.take().map(|done| done.wait()) {
            None => Ok(()),
            Some(Ok(result)) => result,
            Some(Err(Abandoned)) => Err(StorageError::io(
                "seal a rolled segment",
                &self.dir,
                std::io::Error::other("the sealing job panicked"),
            )),
        }
    }

    /// Reads up to `max_records` records, and up to `max_bytes` of frames (but always at least
    /// one record when any is available), from `offset`. An offset below the log start reads
    /// from the log start; offsets missing in a gap are skipped. Records come from one segment
    /// per call.
    ///
    /// # Errors
    /// `OffsetOutOfRange` when `offset` is beyond the log end; `Corrupt` when a frame on disk
    /// does not verify (never returned as data); `Io` on a failed read. A read that meets a bad
    /// frame after good ones returns the good ones; the read of a damaged record fails, naming
    /// the bad frame's file and position. A read of a later record steps over the damage to
    /// the next valid frame (`LogSegment::resync`), so records after damage stay readable.
    pub fn read(
        &mut self,
        offset: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<FetchedRecords> {
        let log_end = self.log_end_offset();
        if offset > log_end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: log_end,
            });
        }
        if let Some(records) = self.take_read_ahead(offset, max_records, max_bytes) {
            return Ok(records);
        }
        let mut offset = offset.max(self.log_start_offset);
        loop {
            if offset >= log_end || max_records == 0 {
                return Ok(FetchedRecords::empty(offset));
            }
            let (&base, segment) = self
                .segments
                .range(..=offset)
                .next_back()
                .expect("log start is at or above the first segment's base");
            if offset >= segment.next_offset() {
                // A gap: continue at the next segment present.
                offset = self
                    .segments
                    .range(offset + 1..)
                    .next()
                    .map_or(log_end, |(&b, _)| b);
                continue;
            }
            // Where the last read stopped, when this one goes on from there (with what it
            // held of the batch there), else the log's tail when this read starts at it.
            let (held, resumed) = match self.read_hint.take() {
                Some(h) if h.offset == offset && h.base_offset == base => {
                    (h.held, Some((h.position, h.resume, h.batch_len)))
                }
                _ => (self.shared_tail(base, offset), None),
            };
            if let Some(held) = held {
                let batch_at = held.batch_position();
                // Nothing after the batch: a read of the file would stop there too.
                let last = held.batch_next_offset() == log_end;
                let served = held
                    .serve((max_records, max_bytes), last)
                    .map_err(|reason| {
                        StorageError::corrupt(segment.log_path(), batch_at, reason)
                    })?;
                if let Some((mut records, position)) = served {
                    self.set_read_hint(base, &mut records, position);
                    return Ok(records);
                }
            }
            let (mut from, mut resume, mut batch_len) = match resumed {
                Some(resumed) => resumed,
                None => (segment.lookup(offset)?.position, None, None),
            };
            let path = segment.log_path();
            let mut fell_back = false;
            let (records, end_position) = loop {
                let (position, expected, reason) = match read_segment(
                    segment,
                    from,
                    offset,
                    (max_records, max_bytes),
                    (resume.take(), batch_len.take()),
                    self.held_budget,
                )? {
                    SegmentRead::Done {
                        records,
                        end_position,
                    } => break (records, end_position),
                    SegmentRead::BadIndexEntry(reason) if from != 0 && !fell_back => {
                        tracing::warn!(
                            path = %path.display(), position = from, %reason,
                            "index entry does not match the log; scanning the segment from its start"
                        );
                        (from, fell_back) = (0, true);
                        continue;
                    }
                    // From the segment's start, the first frame is bad: damage at byte 0.
                    SegmentRead::BadIndexEntry(reason) if from == 0 => (0, base, reason),
                    SegmentRead::BadIndexEntry(reason) => {
                        return Err(StorageError::corrupt(path, from, reason))
                    }
                    SegmentRead::PastDamage {
                        position,
                        expected,
                        reason,
                    } => (position, expected, reason),
                };
                // Damage below the offset asked for: resume at the next valid frame if it is
                // at or before that offset (else the offset is one of the damaged ones).
                match segment.resync(position, expected..segment.next_offset())? {
                    Some((resumed, at)) if expected < offset && resumed <= offset => {
                        tracing::warn!(
                            path = %path.display(), position, first_offset = expected,
                            resumed_at = resumed, cause = %reason,
                            "read stepped over damaged records"
                        );
                        from = at;
                    }
                    _ => return Err(StorageError::corrupt(path, position, reason)),
                }
            };
            let mut records = records;
            if records.is_empty() && records.next_offset > offset {
                // The rest of a cleaned segment held nothing at or after `offset`.
                offset = records.next_offset;
                continue;
            }
            self.set_read_hint(base, &mut records, end_position);
            return Ok(records);
        }
    }

    /// After the batch `parts` (one after the other) was appended at `position` of the active
    /// segment: when the last
    /// read stopped exactly there (a reader caught up, usually parked in a long poll that
    /// this append wakes), the batch is held for its next read, which then copies it from
    /// memory instead of reading the file back (see `fetch::Held::appended`). Nothing is held
    /// for a reader elsewhere, nor for a batch too large for the held budget.
    ///
    /// Other readers caught up at the same offset (other groups, woken by the same append)
    /// read it from memory too: a batch of at most [`MAX_SHARED_TAIL_BYTES`] is also kept as
    /// the log's tail, sharing the held bytes, until the next append. Each read that starts
    /// at the batch gets its own hold of those bytes, so it returns what a read of the file
    /// would.
    fn hold_for_reader_at_end(&mut self, parts: &[&[u8]], position: u64) {
        self.tail = None;
        let base = self.active_base();
        let Some(hint) = self.read_hint.as_mut() else {
            return;
        };
        let at_end = (hint.base_offset, hint.position) == (base, position);
        if !at_end || hint.held.is_some() || hint.resume.is_some() {
            return;
        }
        if let Some(held) = Held::appended(parts, (position, hint.offset), self.held_budget) {
            let len = parts.iter().map(|p| p.len()).sum();
            if len <= MAX_SHARED_TAIL_BYTES {
                self.tail = held.share(self.held_budget).map(|tail| (base, tail));
            }
            hint.batch_len = Some(len);
            hint.held = Some(held);
        }
    }

    /// A hold of the log's tail (see [`PartitionLog::hold_for_reader_at_end`]) for a read
    /// from `offset` of the segment at `base`, when the tail batch starts there.
    fn shared_tail(&self, base: u64, offset: u64) -> Option<Box<Held>> {
        let (tail_base, tail) = self.tail.as_ref()?;
        let starts_here = *tail_base == base && tail.batch_first_offset() == offset;
        starts_here.then(|| tail.share(self.held_budget)).flatten()
    }

    /// Remembers where the read that returned `records` from the segment at `base` stopped
    /// (byte `end_position`), and takes the rest of a batch it held.
    fn set_read_hint(&mut self, base: u64, records: &mut FetchedRecords, end_position: u64) {
        self.read_hint = Some(ReadHint {
            offset: records.next_offset,
            base_offset: base,
            position: end_position,
            resume: records.resume.filter(|r| r.position == end_position),
            batch_len: records.next_batch_len,
            held: records.held.take(),
        });
    }

    /// Advances the log start as far as the retention rules require as of `now_ms`, then
    /// deletes the segments wholly below it (also one that fell below it while it was the
    /// active segment, once a roll has made it an older one).
    ///
    /// # Errors
    /// `Io`/`Corrupt` when the records that decide it cannot be read, or a file cannot be
    /// deleted; the log start is then left where it was proven to be.
    pub fn enforce_retention(&mut self, now_ms: u64) -> Result<()> {
        let RetentionPolicy { records, bytes, ms } = self.config.retention;
        let log_end = self.log_end_offset();
        let mut start = self.log_start_offset;
        if let Some(max_records) = records {
            start = start.max(log_end.saturating_sub(max_records));
        }
        if let Some(max_age) = ms {
            start = start.max(self.first_offset_not_before(now_ms.saturating_sub(max_age), start)?);
        }
        if let Some(max_bytes) = bytes {
            start = start.max(self.first_offset_within_bytes(max_bytes, start)?);
        }
        if start > self.log_start_offset {
            self.mark_unclean()?;
            self.log_start_offset = start;
            self.log_start_file.store(start)?;
        }
        self.delete_segments_below_start()
    }

    /// The idempotent producers this log remembers (Kafka's DescribeProducers).
    pub fn active_producers(&self) -> Vec<crate::storage::producer_state::ActiveProducer> {
        self.producers.active()
    }

    /// Moves the log start up to `before` (Kafka's DeleteRecords): the records below it are no
    /// longer read, and the segments wholly below it are deleted as retention deletes them.
    /// A `before` at or below the log start changes nothing. Returns the log start after.
    ///
    /// # Errors
    /// `OffsetOutOfRange` when `before` is past the log end (nothing changes); `Io` when the
    /// new log start cannot be stored (it is then not moved) or a segment not deleted.
    pub fn delete_records_before(&mut self, before: u64) -> Result<u64> {
        let log_end = self.log_end_offset();
        if before > log_end {
            return Err(StorageError::OffsetOutOfRange {
                offset: before,
                log_start_offset: self.log_start_offset,
                log_end_offset: log_end,
            });
        }
        if before > self.log_start_offset {
            self.mark_unclean()?;
            self.log_start_file.store(before)?;
            self.log_start_offset = before;
        }
        self.delete_segments_below_start()?;
        Ok(self.log_start_offset)
    }

    /// The one deletion routine: removes every segment whose records all lie below the log
    /// start. The active segment is never removed.
    ///
    /// With a worker ([`PartitionLog::set_worker`]) a segment leaves the log here and its files
    /// are deleted there, in the background (as Kafka deletes segments asynchronously); a
    /// failure there is logged. A crash in between leaves files wholly below the stored log
    /// start, which the next open deletes before anything reads them. `close` (and a drop)
    /// wait for the deletions in flight, so a log reopened in the same directory never races
    /// them.
    fn delete_segments_below_start(&mut self) -> Result<()> {
        self.reap_deletions(false);
        while self.segments.len() > 1 {
            let mut bases = self.segments.keys();
            let (&first, &second) = (
                bases.next().expect("len > 1"),
                bases.next().expect("len > 1"),
            );
            if second > self.log_start_offset {
                break;
            }
            let segment = self.segments.remove(&first).expect("key exists");
            tracing::debug!(path = %segment.log_path().display(), "deleting segment below the log start");
            self.delete_in_background(move || segment.delete())?;
        }
        Ok(())
    }

    /// Runs `delete` (the unlinking of files no longer in the log) on the worker when there
    /// is one ([`PartitionLog::set_worker`]), remembered until it is done (see
    /// [`PartitionLog::reap_deletions`]); here otherwise.
    ///
    /// # Errors
    /// `delete`'s, when it runs here.
    fn delete_in_background(
        &mut self,
        delete: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Result<()> {
        match &self.worker {
            Some(worker) => {
                let (done, completer) = completion();
                worker.run(move || completer.complete(delete()));
                self.deleting.push(done);
                Ok(())
            }
            None => delete(),
        }
    }

    /// Forgets the background deletions that are done (all of them, waiting, when `wait`),
    /// logging those that failed: their files (below the log start, or `.deleted` by a
    /// cleaner's swap) stay until the next open deletes them.
    fn reap_deletions(&mut self, wait: bool) {
        let dir = &self.dir;
        self.deleting.retain(|done| {
            let answer = if wait {
                Some(done.wait())
            } else {
                done.try_take()
            };
            match answer {
                None => true,
                Some(Ok(Ok(()))) => false,
                Some(Ok(Err(e))) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "deleting a segment in the background failed");
                    false
                }
                Some(Err(Abandoned)) => {
                    tracing::warn!(dir = %dir.display(), "deleting a segment in the background panicked");
                    false
                }
            }
        });
    }

    /// The first offset at or after `from` whose batch is not older than `cutoff_ms` (whose
    /// largest timestamp is at least it; `log_end` when none is): retention keeps whole
    /// batches. Segments older than the cutoff are passed over by their largest timestamp,
    /// unread; in the segment where the cut falls the time index leads to it. A damaged
    /// batch's timestamp is unknown: it counts as expired (the search steps over it).
    fn first_offset_not_before(&mut self, cutoff_ms: u64, from: u64) -> Result<u64> {
        let log_end = self.log_end_offset();
        if from >= log_end || self.last_timestamp_ms < cutoff_ms {
            return Ok(log_end);
        }
        if let Some((offset, ts)) = self.start_timestamp {
            if offset == from && ts >= cutoff_ms {
                return Ok(from);
            }
        }
        let found = self.first_batch_not_before(cutoff_ms, from)?;
        let (offset, ts) = found.map_or((log_end, u64::MAX), |(_, frame)| {
            (frame.offset.max(from), frame.timestamp_ms)
        });
        self.start_timestamp = Some((offset, ts));
        Ok(offset)
    }

    /// The first offset, from the log start on, whose record's timestamp is at least
    /// `timestamp_ms`; `None` when no record's is (Kafka's ListOffsets by timestamp).
    ///
    /// Segments whose largest timestamp is below are passed over unread; in a segment, the
    /// time index leads to the first batch whose largest timestamp is not below, and that
    /// batch's records are read for the first one that is not (under CreateTime neither the
    /// records of a batch nor the batches of a segment need be in timestamp order). Damaged
    /// batches are stepped over, as reads and retention do.
    ///
    /// # Errors
    /// `Io` when a segment or an index cannot be read.
    pub fn offset_for_timestamp(&mut self, timestamp_ms: u64) -> Result<Option<u64>> {
        Ok(self
            .record_for_timestamp(timestamp_ms)?
            .map(|(offset, _)| offset))
    }

    /// As [`PartitionLog::offset_for_timestamp`], with that record's timestamp: `(offset,
    /// timestamp_ms)`, what Kafka's ListOffsets answers.
    ///
    /// # Errors
    /// As [`PartitionLog::offset_for_timestamp`].
    pub fn record_for_timestamp(&mut self, timestamp_ms: u64) -> Result<Option<(u64, u64)>> {
        let mut from = self.log_start_offset;
        while let Some((segment, frame)) = self.first_batch_not_before(timestamp_ms, from)? {
            match first_record_not_before(segment, &frame, timestamp_ms, from) {
                Ok(Some(found)) => return Ok(Some(found)),
                // The log start is inside the batch, and its records from there are older.
                Ok(None) => {}
                Err(StorageError::Corrupt {
                    path,
                    position,
                    reason,
                }) => tracing::warn!(
                    path = %path.display(), position, first_offset = frame.offset, cause = %reason,
                    "stepped over a batch whose records do not parse looking up a timestamp"
                ),
                Err(e) => return Err(e),
            }
            from = frame.next_offset;
        }
        Ok(None)
    }

    /// The first valid batch holding an offset at or after `from` whose largest timestamp is
    /// at least `timestamp_ms`, with its segment; `None` when there is none. Each segment
    /// answers from its largest timestamp and its time index
    /// ([`LogSegment::find_batch_by_timestamp`]), so older segments are not read.
    fn first_batch_not_before(
        &self,
        timestamp_ms: u64,
        from: u64,
    ) -> Result<Option<(&LogSegment, ScannedFrame)>> {
        let (&first_base, _) = self
            .segments
            .range(..=from)
            .next_back()
            .expect("searches start at or above the log start, which is in a segment");
        for (_, segment) in self.segments.range(first_base..) {
            if let Some(frame) = segment.find_batch_by_timestamp(timestamp_ms, from)? {
                return Ok(Some((segment, frame)));
            }
        }
        Ok(None)
    }

    /// The first offset at or after `from` such that the frames from it to the log end take
    /// at most `max_bytes`. Whole segments are skipped by their sizes; in the segment where
    /// the cut falls, the index leads to it (see [`LogSegment::first_frame_from`]), so an
    /// append does not read back what retention drops.
    fn first_offset_within_bytes(&mut self, max_bytes: u64, from: u64) -> Result<u64> {
        let log_end = self.log_end_offset();
        if from >= log_end {
            return Ok(log_end);
        }
        let (base, position) = self.locate(from)?;
        let retained: u64 = self
            .segments
            .range(base..)
            .map(|(_, s)| s.size())
            .sum::<u64>()
            - position;
        if retained <= max_bytes {
            return Ok(from);
        }
        // The answer is the first frame starting `excess` bytes or more after `from`.
        let mut excess = retained - max_bytes;
        let mut start = position;
        // The log start's frame, a place to hop from in its own segment.
        let mut known = Some(IndexEntry {
            offset: from,
            position,
        });
        // The cut, and where it is: the next `locate` of the new log start needs no scan.
        let mut cut = None;
        for (&base, segment) in self.segments.range(base..) {
            let known = known.take();
            if excess == 0 {
                cut = Some((segment.base_offset(), base, 0));
                break;
            }
            let remaining = segment.size() - start;
            if excess >= remaining {
                (excess, start) = (excess - remaining, 0);
                continue;
            }
            let trusted_from = self.trusted_from(base);
            if let Some((offset, position)) =
                segment.first_frame_from(start + excess, trusted_from, known)?
            {
                cut = Some((offset, base, position));
                break;
            }
            // The cut is past this segment's last frame start: the next segment's first frame.
            (excess, start) = (0, 0);
        }
        self.start_position = cut;
        Ok(cut.map_or(log_end, |(offset, _, _)| offset))
    }

    /// The byte position in the segment at `base` from which its frames were appended by this
    /// open (`u64::MAX`: none were). Bytes retention verifies in full only the batch it cuts
    /// at before this position: a batch this process wrote has a CRC it computed over bytes
    /// from its memory, and reading 100 kB back to check it would cost as much as writing
    /// it. Its header is still checked (plausible, holding the offset expected), as the index
    /// that leads to it is trusted. Batches found on disk at the open are verified, so damage
    /// from an earlier run is stepped over at the cut as before.
    fn trusted_from(&self, base: u64) -> u64 {
        let (appended_base, position) = self.appended_from;
        match base.cmp(&appended_base) {
            std::cmp::Ordering::Less => u64::MAX,
            std::cmp::Ordering::Equal => position,
            std::cmp::Ordering::Greater => 0,
        }
    }

    /// Forgets which frames this open appended, so that bytes retention verifies every batch
    /// it cuts at (tests compare the two paths).
    #[cfg(any(test, feature = "internals"))]
    pub fn verify_all_at_cuts(&mut self) {
        self.appended_from = (u64::MAX, u64::MAX);
    }

    /// `(segment base, byte position)` of the frame holding `offset` (cached for the start).
    fn locate(&mut self, offset: u64) -> Result<(u64, u64)> {
        if let Some((o, base, position)) = self.start_position {
            if o == offset && self.segments.contains_key(&base) {
                return Ok((base, position));
            }
        }
        let (&base, segment) = self
            .segments
            .range(..=offset)
            .next_back()
            .expect("offset >= first base");
        let position = segment.position_of(offset)?.unwrap_or(segment.size());
        self.start_position = Some((offset, base, position));
        Ok((base, position))
    }

    /// Clean shutdown: sync, then record the checkpoint that lets the next open skip the scan.
    ///
    /// # Errors
    /// `Io` when the sync or the checkpoint write fails; the next open then scans.
    pub fn close(mut self) -> Result<()> {
        self.reap_deletions(true);
        self.finish_sealing()?;
        if self.clean_on_disk {
            // Nothing changed since the clean shutdown this open trusted: its checkpoint and
            // producer snapshot still describe the files.
            return Ok(());
        }
        let log_end = self.log_end_offset();
        self.write_producer_snapshot(log_end)?;
        producer_state::sync_snapshot(self.fs.as_ref(), &self.dir, log_end)?;
        self.active_mut().sync_all()?;
        sync_dir(self.fs.as_ref(), &self.dir)?;
        producer_state::remove_older_snapshots(self.fs.as_ref(), &self.dir, log_end)?;
        self.dirty = false;
        Checkpoint {
            clean: true,
            recovery_point: log_end,
            log_end_offset: log_end,
            active_size: self.active().size(),
        }
        .write(self.fs.as_ref(), &self.dir)
    }
}

/// A log dropped without `close` (a crash of its actor) still waits for its sealing and its
/// deletions, so that a reopen never runs beside a checkpoint being written or a file being
/// deleted.
impl Drop for PartitionLog {
    fn drop(&mut self) {
        self.reap_deletions(true);
        if let Err(e) = self.finish_sealing() {
            tracing::warn!(dir = %self.dir.display(), error = %e, "sealing a rolled segment failed");
        }
    }
}

#[cfg(test)]
mod time_tests;

// Until the broker runs cleaning passes (compacted topics), only the tests call these.
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
mod cleaning;
mod interval_sync;
mod kafka_read;
#[cfg(test)]
mod producer_tests;
mod producers;
mod read_ahead;
mod stored_batch;
pub use interval_sync::{LogSyncJob, LogSynced};
pub use kafka_read::BatchRead;
pub use producers::{CheckedKafkaBatch, KafkaAppend};

#[cfg(test)]
mod tests;
