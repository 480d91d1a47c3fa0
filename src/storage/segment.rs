//! One segment of a partition log: `<base_offset:020>.log` plus its `.index` and
//! `.timeindex`.
//!
//! The `.log` file is Kafka record batches back to back (format: [`super::format`]), offsets
//! contiguous from `base_offset`. In this module a "frame" is one batch: the unit that is
//! written, checksummed, indexed, scanned and cut as a whole. A segment is only ever appended to while it is the active (last) one, and
//! only ever truncated by recovery. Its in-memory state is its size, the offset its next
//! record will get and its largest timestamp; everything else is on disk. Walking its
//! batches and stepping over damage is in `segment/scan.rs`.

mod scan;

use std::path::{Path, PathBuf};

use super::error::{Result, StorageError};
use super::fs::{OpenMode, SharedFs, StorageFile};
use super::fsutil::{rewrite_unsynced, AlignedBuf};
use super::index::{IndexEntry, OffsetIndex};
use super::time_index::{TimeIndex, TimestampOffset};
pub use scan::{ScanOutcome, ScannedFrame, StepOver};

/// Bytes read per step when a segment is scanned from start to end (recovery, retention).
const SCAN_CHUNK: usize = 256 << 10;
/// Up to this size a batch given in parts is copied into one buffer and written with one
/// system call (which costs more than copying a few KiB); above it each part is written as it
/// is, from the caller's buffer.
const GATHER_BYTES: usize = 16 << 10;

/// The file names of a segment with this base offset: 20 digits, so they sort by offset.
pub fn file_names(base_offset: u64) -> (String, String) {
    (
        format!("{base_offset:020}.log"),
        format!("{base_offset:020}.index"),
    )
}

/// The file name of the time index of the segment with this base offset.
pub fn time_index_name(base_offset: u64) -> String {
    format!("{base_offset:020}.timeindex")
}

/// The three files of a segment: its `.log` and its two indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentPaths {
    pub log: PathBuf,
    pub index: PathBuf,
    pub time_index: PathBuf,
}

impl SegmentPaths {
    /// The files of the segment with this base offset in `dir`.
    pub fn new(dir: &Path, base_offset: u64) -> Self {
        let (log, index) = file_names(base_offset);
        SegmentPaths {
            log: dir.join(log),
            index: dir.join(index),
            time_index: dir.join(time_index_name(base_offset)),
        }
    }

    /// The same files with `suffix` appended to each name (`.cleaned`, `.swap`).
    pub fn with_suffix(&self, suffix: &str) -> Self {
        SegmentPaths {
            log: super::fs::with_suffix(&self.log, suffix),
            index: super::fs::with_suffix(&self.index, suffix),
            time_index: super::fs::with_suffix(&self.time_index, suffix),
        }
    }
}

/// A `.log` file and its indexes.
#[derive(Debug)]
pub struct LogSegment {
    base_offset: u64,
    log_path: PathBuf,
    log: Box<dyn StorageFile>,
    fs: SharedFs,
    index: OffsetIndex,
    time_index: TimeIndex,
    /// Bytes of frames in the file (the file is never longer once opened).
    size: u64,
    /// `size` at the last successful sync of this segment by this process; what a failed
    /// sync writes again from. 0 at open: a previous process may have left unsynced pages (or
    /// pages a failed sync marked clean) anywhere in the file, so the first failed sync, be it
    /// recovery's, rewrites all of it.
    synced_size: u64,
    /// Offset the next appended record gets: base_offset + records in this segment, as far
    /// as is known (a sealed segment loaded after a clean shutdown learns it from its tail).
    next_offset: u64,
    /// The largest batch timestamp and the batch that first carries it, when known: what
    /// the time index's next entry records.
    max_timestamp: Option<TimestampOffset>,
    /// Frame bytes appended since the last index entry.
    bytes_since_index: u64,
    index_interval_bytes: u64,
    /// A later segment follows (set by a roll, by recovery for every segment but the last,
    /// and for the log cleaner's output): no append reaches it again.
    sealed: bool,
    /// The log was cleaned at least once (`cleaner::swap::CLEANED_MARKER`), so a sealed
    /// segment's batches may be separated by gaps the cleaner left (see
    /// [`LogSegment::may_have_gaps`]).
    gaps_allowed: bool,
}

impl LogSegment {
    /// Creates an empty segment in `dir`, replacing any files of that name.
    pub fn create(
        fs: &SharedFs,
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<Self> {
        Self::create_at(
            fs,
            &SegmentPaths::new(dir, base_offset),
            base_offset,
            index_interval_bytes,
        )
    }

    /// Creates an empty segment whose three files are at `paths` (the log cleaner writes its
    /// output under temporary names: see `cleaner.rs`), replacing any files of those names.
    pub fn create_at(
        fs: &SharedFs,
        paths: &SegmentPaths,
        base_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<Self> {
        let log_path = paths.log.clone();
        let log = fs
            .open(&log_path, OpenMode::Truncate)
            .map_err(|e| StorageError::io("create segment", &log_path, e))?;
        let index = OffsetIndex::create(fs.as_ref(), &paths.index, base_offset)?;
        let time_index = TimeIndex::create(fs.as_ref(), &paths.time_index, base_offset)?;
        Ok(LogSegment {
            base_offset,
            log_path,
            log,
            fs: fs.clone(),
            index,
            time_index,
            size: 0,
            synced_size: 0,
            next_offset: base_offset,
            max_timestamp: None,
            bytes_since_index: 0,
            index_interval_bytes,
            sealed: false,
            gaps_allowed: false,
        })
    }

    /// Opens an existing segment without validating it; `recovery` decides what to check.
    /// `next_offset` and the largest timestamp are unknown until [`LogSegment::load_tail`] or
    /// [`LogSegment::rebuild_index`] sets them.
    pub fn open(
        fs: &SharedFs,
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<Self> {
        let (log_name, index_name) = file_names(base_offset);
        let log_path = dir.join(log_name);
        let log = fs
            .open(&log_path, OpenMode::Existing)
            .map_err(|e| StorageError::io("open segment", &log_path, e))?;
        let size = log
            .size()
            .map_err(|e| StorageError::io("stat segment", &log_path, e))?;
        let index = OffsetIndex::open(fs.as_ref(), &dir.join(index_name), base_offset)?;
        let time_index_path = dir.join(time_index_name(base_offset));
        let time_index = TimeIndex::open(fs.as_ref(), &time_index_path, base_offset)?;
        Ok(LogSegment {
            base_offset,
            log_path,
            log,
            fs: fs.clone(),
            index,
            time_index,
            size,
            synced_size: 0,
            next_offset: base_offset,
            max_timestamp: None,
            bytes_since_index: 0,
            index_interval_bytes,
            sealed: false,
            gaps_allowed: false,
        })
    }

    pub fn base_offset(&self) -> u64 {
        self.base_offset
    }
    /// Whether a later segment follows (see the field).
    pub fn is_sealed(&self) -> bool {
        self.sealed
    }
    /// Records that a later segment follows: nothing is appended here again.
    pub fn mark_sealed(&mut self) {
        self.sealed = true;
    }
    /// Whether the log cleaner may have removed batches from this segment, leaving gaps
    /// between the others (within its offsets): a sealed segment of a log that was cleaned.
    /// Anywhere else a batch that does not follow the one before is damage: a log never
    /// cleaned keeps the strict check, which also catches a damaged base offset (outside the
    /// CRC) that moves a batch forward.
    pub fn may_have_gaps(&self) -> bool {
        self.sealed && self.gaps_allowed
    }
    /// Records that the log was cleaned (see [`LogSegment::may_have_gaps`]).
    pub fn allow_gaps(&mut self) {
        self.gaps_allowed = true;
    }
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }
    /// The largest batch timestamp of the segment; `None` when it holds no valid batch.
    pub fn last_timestamp_ms(&self) -> Option<u64> {
        self.max_timestamp.map(|max| max.timestamp_ms)
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    /// What the last successful sync proved durable (see the field).
    pub fn synced_size(&self) -> u64 {
        self.synced_size
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub fn index_path(&self) -> &Path {
        self.index.path()
    }

    /// Appends one verified batch holding records `next_offset..next_offset_after`, whose
    /// largest timestamp is `max_timestamp_ms`, with one `write`, then its index entries when
    /// they are due. On a failed write the file is cut back to its old size.
    pub fn append(
        &mut self,
        batch: &[u8],
        next_offset_after: u64,
        max_timestamp_ms: u64,
    ) -> Result<()> {
        self.append_parts(&[batch], next_offset_after, max_timestamp_ms)
    }

    /// [`Segment::append`] of a batch given in `parts` (a rewritten header, then the records
    /// as a client sent them), written one after the other: gathered into one `write` when
    /// small, where a second system call would cost more than the copy.
    pub fn append_parts(
        &mut self,
        parts: &[&[u8]],
        next_offset_after: u64,
        max_timestamp_ms: u64,
    ) -> Result<()> {
        let start = self.size;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let written = if parts.len() > 1 && len <= GATHER_BYTES {
            self.log.write_all_at(&parts.concat(), start)
        } else {
            let mut at = start;
            parts.iter().try_for_each(|part| {
                self.log.write_all_at(part, at)?;
                at += part.len() as u64;
                Ok(())
            })
        };
        if let Err(e) = written {
            // A partial write must not be left behind a later, successful one.
            let _ = self.log.set_len(start);
            self.synced_size = self.synced_size.min(start);
            return Err(StorageError::io("append to segment", &self.log_path, e));
        }
        self.max_timestamp = TimestampOffset::after_batch(
            self.max_timestamp,
            max_timestamp_ms,
            next_offset_after - 1,
        );
        if self.bytes_since_index >= self.index_interval_bytes {
            let entry = IndexEntry {
                offset: self.next_offset,
                position: start,
            };
            self.push_index_entries(entry, self.max_timestamp);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += len as u64;
        self.size = start + len as u64;
        self.next_offset = next_offset_after;
        // The indexes are derived data: a failed index write is repaired by the next recovery.
        let offsets = self.index.write_pending();
        offsets.and(self.time_index.write_pending())
    }

    /// Queues an offset index entry for the batch at `entry`, and with it a time index entry
    /// if the largest timestamp so far (that batch included) grew since the last one. Live
    /// appends and rebuilds add entries here alike, so that a rebuilt index equals the one
    /// written live.
    fn push_index_entries(&mut self, entry: IndexEntry, max_so_far: Option<TimestampOffset>) {
        self.index.push(entry);
        if let Some(max) = max_so_far {
            self.time_index.maybe_push(max);
        }
    }

    /// Puts the segment's largest timestamp in its time index, when it is not yet the last
    /// entry: done when the segment is rolled (and when recovery rebuilds a sealed one), so
    /// that a sealed segment's largest timestamp is on disk.
    ///
    /// # Errors
    /// `Io` when the entry cannot be written.
    pub fn seal_time_index(&mut self) -> Result<()> {
        if let Some(max) = self.max_timestamp {
            self.time_index.maybe_push(max);
        }
        self.time_index.write_pending()
    }

    /// `fdatasync`s the log file. After a failure, see `LogSegment::redirty_unsynced`.
    pub fn sync(&mut self) -> Result<()> {
        match self.log.sync_data() {
            Ok(()) => {
                self.synced_size = self.size;
                Ok(())
            }
            Err(e) => {
                self.redirty_unsynced();
                Err(StorageError::io("fdatasync segment", &self.log_path, e))
            }
        }
    }

    /// Records that a sync made from another handle, begun when the segment was `size` bytes
    /// long, succeeded: those bytes are durable (the bytes appended since are not known to be).
    pub fn mark_synced(&mut self, size: u64) {
        self.synced_size = self.synced_size.max(size.min(self.size));
    }

    /// After a failed sync: see [`rewrite_unsynced`].
    pub fn redirty_unsynced(&mut self) {
        rewrite_unsynced(
            self.log.as_ref(),
            &self.log_path,
            self.synced_size,
            self.size,
        );
    }

    /// Where to start scanning for `offset`: the index entry at or before it.
    pub fn lookup(&self, offset: u64) -> Result<IndexEntry> {
        self.index.lookup(offset)
    }

    /// Reads `len` bytes at `position` into `buf` (page-aligned), clamped to the segment.
    pub fn read_into<'b>(
        &self,
        buf: &'b mut AlignedBuf,
        position: u64,
        len: usize,
    ) -> Result<&'b [u8]> {
        let len = len.min(self.size.saturating_sub(position) as usize);
        buf.read(len, |raw| {
            self.log.read_exact_at_appending(raw, len, position)
        })
        .map_err(|e| StorageError::io("read segment", &self.log_path, e))
    }

    /// Reads exactly `buf.len()` bytes at `position` into `buf`, which must lie within the
    /// segment: the read of a Kafka fetch, straight into the buffer that is sent.
    pub fn read_exact_at(&self, buf: &mut [u8], position: u64) -> Result<()> {
        self.log
            .read_exact_at(buf, position)
            .map_err(|e| StorageError::io("read segment", &self.log_path, e))
    }

    /// The first valid frame that starts at or after byte `position`, as `(offset, position)`;
    /// `None` when no frame of this segment does. One index lookup and a scan of about one
    /// index interval; damage on the way is stepped over (bytes retention drops it anyway).
    /// Batches larger than the scan's chunk are stepped over by their headers alone, and only
    /// the one found is read whole (see `LogSegment::hop_to_frame`); not even that one when it
    /// starts at or after `trusted_from`, where the caller vouches for the bytes (it wrote
    /// them in this open: see `PartitionLog::trusted_from`; `u64::MAX` trusts nothing).
    ///
    /// `known` is a frame start before `position` that the caller knows (the log start,
    /// where the last cut fell). When it lies at least a large batch back (the hop's
    /// threshold, two index intervals) and the hop from it finds the frame, the index is not
    /// searched: bytes retention cuts an append's worth further on at every append, so after
    /// an append of large batches its last cut is a batch or two back, where the index's
    /// binary search would cost a `pread` per step. After small appends, the index leads.
    ///
    /// # Errors
    /// `Io`.
    pub fn first_frame_from(
        &self,
        position: u64,
        trusted_from: u64,
        known: Option<IndexEntry>,
    ) -> Result<Option<(u64, u64)>> {
        let hop_from = known.filter(|k| {
            k.position <= position && position - k.position >= 2 * self.index_interval_bytes
        });
        if let Some(known) = hop_from {
            if let Some(found) = self.hop_to_frame(known, position, trusted_from)? {
                return Ok(Some(found));
            }
        }
        let entry = self.index.lookup_position(position)?;
        if let Some(found) = self.hop_to_frame(entry, position, trusted_from)? {
            return Ok(Some(found));
        }
        let found = self.find_frame(entry, |frame| frame.position >= position)?;
        Ok(found.map(|frame| (frame.offset, frame.position)))
    }

    /// Where the first valid batch holding `offset` or a later one starts: the batch holding
    /// `offset`, or, when that batch is damaged, the first valid batch after the damage.
    /// `None` when no such frame is in this segment. One index lookup and a scan of about one
    /// index interval.
    ///
    /// # Errors
    /// `Io`.
    pub fn position_of(&self, offset: u64) -> Result<Option<u64>> {
        let entry = self.index.lookup(offset)?;
        let found = self.find_frame(entry, |frame| frame.next_offset > offset)?;
        Ok(found.map(|frame| frame.position))
    }

    /// The first valid batch holding an offset at or after `from` whose largest timestamp is
    /// at least `timestamp_ms`; `None` when no batch of this segment is. A segment whose
    /// largest timestamp is below is answered without a read; otherwise the time index gives
    /// the offset to start from, the offset index its position, and the scan from there
    /// steps over damage (a damaged batch's timestamp is unknown: it is never the answer).
    ///
    /// # Errors
    /// `Io`.
    pub fn find_batch_by_timestamp(
        &self,
        timestamp_ms: u64,
        from: u64,
    ) -> Result<Option<ScannedFrame>> {
        if self
            .max_timestamp
            .is_none_or(|max| max.timestamp_ms < timestamp_ms)
            || from >= self.next_offset
        {
            return Ok(None);
        }
        let start = self
            .time_index
            .lookup(timestamp_ms)?
            .map_or(self.base_offset, |entry| entry.offset)
            .max(from);
        let entry = self.index.lookup(start)?;
        self.find_frame(entry, |frame| {
            frame.next_offset > from && frame.timestamp_ms >= timestamp_ms
        })
    }

    /// The first valid frame from `entry` on that `is_it` accepts, stepping over damage.
    fn find_frame(
        &self,
        entry: IndexEntry,
        is_it: impl Fn(&ScannedFrame) -> bool,
    ) -> Result<Option<ScannedFrame>> {
        let mut found = None;
        let chunk = 2 * self.index_interval_bytes as usize;
        // Past damage, only to a frame this segment can hold (a damaged base offset can
        // verify at an offset far past its end).
        let step_over = StepOver {
            offset_limit: self.next_offset,
            ..StepOver::ALWAYS
        };
        let outcome =
            self.scan_in_chunks(entry.position, entry.offset, chunk, step_over, |frame| {
                if is_it(frame) {
                    found = Some(*frame);
                }
                found.is_none()
            })?;
        for damage in &outcome.damaged {
            tracing::warn!(
                path = %self.log_path.display(), position = damage.position,
                first_offset = damage.first_offset, cause = %damage.reason,
                "stepped over damaged records looking for a frame"
            );
        }
        Ok(found)
    }

    /// Scans from the last index entry to the end to learn `next_offset`: the cheap check of
    /// a segment trusted after a clean shutdown. The largest timestamp is the time index's
    /// last entry's, or a larger one of the batches scanned (the time index has entries up
    /// to the last offset index entry; a sealed segment's last one holds its largest).
    /// `Ok(Err(reason))` when the tail or an index does not check out and the segment needs
    /// [`LogSegment::rebuild_index`].
    pub fn load_tail(&mut self) -> Result<Result<(), String>> {
        let entry = self.index.lookup(u64::MAX)?;
        if entry.position > self.size || (entry.position == self.size && self.size > 0) {
            return Ok(Err("last index entry points past the end of the log".into()));
        }
        // Entries are due every `index_interval_bytes`: more unindexed bytes than that after
        // the last entry means a short index.
        let interval = self.index_interval_bytes;
        let mut since_entry = 0u64;
        let mut index_short = false;
        let mut max_timestamp = self.time_index.last_entry();
        let outcome = self.scan(entry.position, entry.offset, |frame| {
            index_short |= since_entry >= interval;
            since_entry += frame.frame_len;
            max_timestamp = TimestampOffset::after_batch(
                max_timestamp,
                frame.timestamp_ms,
                frame.next_offset - 1,
            );
            true
        })?;
        if let Some(stop) = outcome.stopped {
            return Ok(Err(format!(
                "tail does not verify at byte {}: {}",
                stop.position, stop.reason
            )));
        }
        if index_short {
            return Ok(Err("index is missing entries".into()));
        }
        if let Some(last) = self.time_index.last_entry() {
            if last.offset >= outcome.next_offset {
                return Ok(Err(format!(
                    "time index's last entry is at offset {}, past the log's last record",
                    last.offset
                )));
            }
        }
        self.next_offset = outcome.next_offset;
        self.max_timestamp = max_timestamp;
        self.bytes_since_index = since_entry;
        Ok(Ok(()))
    }

    /// Rewrites both indexes from a scan of the whole log (entries added as a live append
    /// adds them) and learns `next_offset` and the largest timestamp. A bad frame
    /// that should have held an offset below `step_over.below` is stepped over (the frame
    /// the scan resumes at, below `step_over.offset_limit`, always gets an index entry, so
    /// that lookups of the offsets after the damage start past it); the scan stops at any
    /// other. Cuts nothing: see
    /// [`LogSegment::truncate_to`]. When nothing valid follows the last damage, `next_offset`
    /// is the first damaged offset and the next append gets an index entry, so that it can
    /// be found behind the damage; the caller may set a better known `next_offset`.
    pub fn rebuild_index(&mut self, step_over: StepOver) -> Result<ScanOutcome> {
        self.index.clear()?;
        self.time_index.clear()?;
        let interval = self.index_interval_bytes;
        let mut since_entry = 0u64;
        // The frames that get an offset index entry, with the largest timestamp so far.
        let mut entries = Vec::new();
        let mut max_timestamp = None;
        let outcome = self.scan_in_chunks(0, self.base_offset, SCAN_CHUNK, step_over, |frame| {
            max_timestamp = TimestampOffset::after_batch(
                max_timestamp,
                frame.timestamp_ms,
                frame.next_offset - 1,
            );
            if since_entry >= interval || frame.after_damage {
                let entry = IndexEntry {
                    offset: frame.offset,
                    position: frame.position,
                };
                entries.push((entry, max_timestamp));
                since_entry = 0;
            }
            since_entry += frame.frame_len;
            true
        })?;
        for (entry, max_so_far) in entries {
            self.push_index_entries(entry, max_so_far);
        }
        self.index.write_pending()?;
        self.time_index.write_pending()?;
        self.next_offset = outcome.next_offset;
        self.max_timestamp = max_timestamp;
        self.bytes_since_index = since_entry;
        if outcome
            .damaged
            .last()
            .is_some_and(|d| d.resumed_at.is_none())
        {
            self.bytes_since_index = interval;
        }
        Ok(outcome)
    }

    /// Cuts the log file to `len` bytes (recovery, after [`LogSegment::rebuild_index`] found
    /// where the valid frames end). The indexes need no cut: the rebuild indexed only the
    /// frames before `len`.
    pub fn truncate_to(&mut self, len: u64) -> Result<()> {
        if len < self.size {
            self.log
                .set_len(len)
                .map_err(|e| StorageError::io("truncate segment", &self.log_path, e))?;
            self.size = len;
            self.synced_size = self.synced_size.min(len);
        }
        Ok(())
    }

    /// Sets `next_offset` when it is known from elsewhere (the next segment's base).
    pub fn set_next_offset(&mut self, next_offset: u64) {
        self.next_offset = next_offset;
    }

    /// Deletes the log file and its indexes.
    pub fn delete(self) -> Result<()> {
        let index_paths = [
            self.index.path().to_owned(),
            self.time_index.path().to_owned(),
        ];
        // Every handle closed first: a handle alive across the removal of its file is kept
        // open (and reopened if its descriptor was pooled away) so it can still reach it.
        drop(self.log);
        drop(self.index);
        drop(self.time_index);
        self.fs
            .remove_file(&self.log_path)
            .map_err(|e| StorageError::io("delete segment", &self.log_path, e))?;
        for path in index_paths {
            match self.fs.remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(StorageError::io("delete index", path, e))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Closes the segment and renames its files, `suffix` appended to each name (an index
    /// file that is missing is passed over); returns their new paths. How the log cleaner
    /// retires the segments a cleaned one replaces: a rename is cheap, and the unlink, which
    /// frees the file's page cache, is left to another thread.
    pub fn retire(self, suffix: &str) -> Result<SegmentPaths> {
        let from = SegmentPaths {
            log: self.log_path.clone(),
            index: self.index.path().to_owned(),
            time_index: self.time_index.path().to_owned(),
        };
        let to = from.with_suffix(suffix);
        // Every handle closed first, as for `delete`.
        drop(self.log);
        drop(self.index);
        drop(self.time_index);
        self.fs
            .rename(&from.log, &to.log)
            .map_err(|e| StorageError::io("rename a replaced segment", &from.log, e))?;
        for (from, to) in [(&from.index, &to.index), (&from.time_index, &to.time_index)] {
            match self.fs.rename(from, to) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(StorageError::io("rename a replaced index", from, e))
                }
                _ => {}
            }
        }
        Ok(to)
    }

    /// `fsync`s the log file, metadata included (clean shutdown, roll, recovery).
    pub fn sync_all(&mut self) -> Result<()> {
        match self.log.sync_all() {
            Ok(()) => {
                self.synced_size = self.size;
                Ok(())
            }
            Err(e) => {
                self.redirty_unsynced();
                Err(StorageError::io("fsync segment", &self.log_path, e))
            }
        }
    }
}
