//! One segment of a partition log: `<base_offset:020>.log` plus its `.index`.
//!
//! The `.log` file is Kafka record batches back to back (format: [`super::format`]), offsets
//! contiguous from `base_offset`. In this module a "frame" is one batch: the unit that is
//! written, checksummed, indexed, scanned and cut as a whole. A segment is only ever appended to while it is the active (last) one, and
//! only ever truncated by recovery. Its in-memory state is its size and the offset its next
//! record will get; everything else is on disk.
//!
//! # Damage
//! A frame that does not verify is never served. Scans either stop at it (the unsynced tail
//! recovery cuts) or step over it ([`LogSegment::resync`]): first to where the bad frame's
//! own length field says the next frame starts, if a valid frame with an offset at least the
//! expected one starts there, otherwise to the next byte position where such a frame decodes
//! with a valid CRC. The offsets in between are damaged; the frame found is indexed (see
//! [`LogSegment::rebuild_index`]), so lookups of later offsets start after the damage.

use std::path::{Path, PathBuf};

use super::error::{Result, StorageError};
use super::format::{self, BatchHeader, Decoded, HEADER_LEN, LOG_OVERHEAD, MAGIC, MAX_BATCH_LEN};
use super::fs::{OpenMode, SharedFs, StorageFile};
use super::fsutil::{rewrite_unsynced, AlignedBuf};
use super::index::{IndexEntry, OffsetIndex};

/// Bytes read per step when a segment is scanned from start to end (recovery, retention).
const SCAN_CHUNK: usize = 256 << 10;

/// The file names of a segment with this base offset: 20 digits, so they sort by offset.
pub fn file_names(base_offset: u64) -> (String, String) {
    (
        format!("{base_offset:020}.log"),
        format!("{base_offset:020}.index"),
    )
}

/// A batch found by [`LogSegment::scan`].
#[derive(Debug, Clone, Copy)]
pub struct ScannedFrame {
    /// The batch's first offset.
    pub offset: u64,
    /// The offset after the batch's last record.
    pub next_offset: u64,
    /// The batch's largest timestamp (0 for none).
    pub timestamp_ms: u64,
    pub position: u64,
    pub frame_len: u64,
    /// The scan stepped over damage right before this batch.
    pub after_damage: bool,
    pub header: BatchHeader,
}

impl ScannedFrame {
    fn new(header: BatchHeader, position: u64, after_damage: bool) -> Self {
        ScannedFrame {
            offset: header.base_offset,
            next_offset: header.next_offset(),
            timestamp_ms: header.max_timestamp.max(0) as u64,
            position,
            frame_len: header.batch_len as u64,
            after_damage,
            header,
        }
    }
}

/// Bytes a scan stepped over: a frame that did not verify, up to the next valid one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRange {
    /// Where the bad frame starts.
    pub position: u64,
    /// Where the next valid frame starts, or the end of the file when none does.
    pub end: u64,
    /// The offset the bad frame should have held: the first damaged one.
    pub first_offset: u64,
    /// The offset of the valid frame at `end`; `None` when no valid frame follows.
    pub resumed_at: Option<u64>,
    pub reason: String,
}

/// Why a scan stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanStop {
    pub position: u64,
    pub reason: String,
}

/// What a full scan found.
#[derive(Debug)]
pub struct ScanOutcome {
    /// Offset the next record would get.
    pub next_offset: u64,
    /// The largest timestamp of the valid batches scanned, if any.
    pub last_timestamp_ms: Option<u64>,
    /// Set when invalid or torn bytes follow the last valid frame.
    pub stopped: Option<ScanStop>,
    /// Damage the scan stepped over, in file order (only scans told to step over damage).
    pub damaged: Vec<DamagedRange>,
}

/// A `.log` file and its index.
#[derive(Debug)]
pub struct LogSegment {
    base_offset: u64,
    log_path: PathBuf,
    log: Box<dyn StorageFile>,
    fs: SharedFs,
    index: OffsetIndex,
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
    /// The largest record timestamp, when known.
    last_timestamp_ms: Option<u64>,
    /// Frame bytes appended since the last index entry.
    bytes_since_index: u64,
    index_interval_bytes: u64,
}

impl LogSegment {
    /// Creates an empty segment in `dir`, replacing any files of that name.
    pub fn create(
        fs: &SharedFs,
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<Self> {
        let (log_name, index_name) = file_names(base_offset);
        let log_path = dir.join(log_name);
        let log = fs
            .open(&log_path, OpenMode::Truncate)
            .map_err(|e| StorageError::io("create segment", &log_path, e))?;
        let index = OffsetIndex::create(fs.as_ref(), &dir.join(index_name), base_offset)?;
        Ok(LogSegment {
            base_offset,
            log_path,
            log,
            fs: fs.clone(),
            index,
            size: 0,
            synced_size: 0,
            next_offset: base_offset,
            last_timestamp_ms: None,
            bytes_since_index: 0,
            index_interval_bytes,
        })
    }

    /// Opens an existing segment without validating it; `recovery` decides what to check.
    /// `next_offset` is unknown until [`LogSegment::load_tail`] or a scan sets it.
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
        Ok(LogSegment {
            base_offset,
            log_path,
            log,
            fs: fs.clone(),
            index,
            size,
            synced_size: 0,
            next_offset: base_offset,
            last_timestamp_ms: None,
            bytes_since_index: 0,
            index_interval_bytes,
        })
    }

    pub fn base_offset(&self) -> u64 {
        self.base_offset
    }
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }
    pub fn last_timestamp_ms(&self) -> Option<u64> {
        self.last_timestamp_ms
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

    /// Appends one verified batch holding records `next_offset..next_offset_after` with one
    /// `write`, then its index entry when one is due. On a failed write the file is cut back
    /// to its old size.
    pub fn append(
        &mut self,
        batch: &[u8],
        next_offset_after: u64,
        max_timestamp_ms: u64,
    ) -> Result<()> {
        let start = self.size;
        if let Err(e) = self.log.write_all_at(batch, start) {
            // A partial write must not be left behind a later, successful one.
            let _ = self.log.set_len(start);
            self.synced_size = self.synced_size.min(start);
            return Err(StorageError::io("append to segment", &self.log_path, e));
        }
        if self.bytes_since_index >= self.index_interval_bytes {
            self.index.push(IndexEntry {
                offset: self.next_offset,
                position: start,
            });
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += batch.len() as u64;
        self.size = start + batch.len() as u64;
        self.next_offset = next_offset_after;
        self.last_timestamp_ms = Some(
            self.last_timestamp_ms
                .map_or(max_timestamp_ms, |t| t.max(max_timestamp_ms)),
        );
        // The index is derived data: a failed index write is repaired by the next recovery.
        self.index.write_pending()
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

    /// After a failed sync: see [`rewrite_unsynced`].
    fn redirty_unsynced(&mut self) {
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
        let slice = buf.prepare(len);
        self.log
            .read_exact_at(slice, position)
            .map_err(|e| StorageError::io("read segment", &self.log_path, e))?;
        Ok(buf.as_slice())
    }

    /// Walks every frame from `position` (which must start a frame holding `expected_offset`)
    /// to the end of the file, verifying checksums and offset contiguity, calling `visit` for
    /// each valid frame until it returns `false`. Stops at the first invalid or torn frame and
    /// says where and why; never returns data past it.
    pub fn scan(
        &self,
        position: u64,
        expected_offset: u64,
        visit: impl FnMut(&ScannedFrame) -> bool,
    ) -> Result<ScanOutcome> {
        self.scan_in_chunks(position, expected_offset, SCAN_CHUNK, 0, visit)
    }

    /// As [`LogSegment::scan`], but steps over every damaged range (see the module docs)
    /// instead of stopping at it; `ScanOutcome::damaged` lists them. For scans that must reach
    /// the records after damage (retention, which counts damaged records as expired).
    pub fn scan_over_damage(
        &self,
        position: u64,
        expected_offset: u64,
        visit: impl FnMut(&ScannedFrame) -> bool,
    ) -> Result<ScanOutcome> {
        self.scan_in_chunks(position, expected_offset, SCAN_CHUNK, u64::MAX, visit)
    }

    /// The first valid frame that starts at or after byte `position`, as `(offset, position)`;
    /// `None` when no frame of this segment does. One index lookup and a scan of about one
    /// index interval; damage on the way is stepped over (bytes retention drops it anyway).
    ///
    /// # Errors
    /// `Io`.
    pub fn first_frame_from(&self, position: u64) -> Result<Option<(u64, u64)>> {
        let entry = self.index.lookup_position(position)?;
        self.find_frame(entry, |frame| frame.position >= position)
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
        Ok(found.map(|(_, position)| position))
    }

    /// The first valid frame from `entry` on that `is_it` accepts, as `(offset, position)`,
    /// stepping over damage.
    fn find_frame(
        &self,
        entry: IndexEntry,
        is_it: impl Fn(&ScannedFrame) -> bool,
    ) -> Result<Option<(u64, u64)>> {
        let mut found = None;
        let chunk = 2 * self.index_interval_bytes as usize;
        let outcome =
            self.scan_in_chunks(entry.position, entry.offset, chunk, u64::MAX, |frame| {
                if is_it(frame) {
                    found = Some((frame.offset, frame.position));
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

    /// Whether `offset` can be a record of this segment: at or above its base, and within
    /// what the index's `u32` relative offsets can hold.
    fn holds_offset(&self, offset: u64) -> bool {
        offset
            .checked_sub(self.base_offset)
            .is_some_and(|relative| relative <= u64::from(u32::MAX))
    }

    /// The length of the batch whose header starts `bytes`, when that header could be one of
    /// this segment holding an offset of at least `min_offset` (its CRC not yet checked). A
    /// cheap filter, so that searching damaged bytes rarely computes a CRC.
    fn plausible_frame(&self, bytes: &[u8], min_offset: u64) -> Option<usize> {
        let header = BatchHeader::parse(bytes)?;
        let plausible = (HEADER_LEN..=MAX_BATCH_LEN).contains(&header.batch_len)
            && bytes[16] == MAGIC
            && header.base_offset >= min_offset
            && self.holds_offset(header.base_offset);
        plausible.then_some(header.batch_len)
    }

    /// The offset of the valid batch at `position`, if one with an offset of at least
    /// `min_offset` starts there.
    fn valid_frame_at(&self, position: u64, min_offset: u64) -> Result<Option<u64>> {
        let mut buf = AlignedBuf::default();
        let header = self.read_into(&mut buf, position, HEADER_LEN)?;
        let Some(frame_len) = self.plausible_frame(header, min_offset) else {
            return Ok(None);
        };
        if position + frame_len as u64 > self.size {
            return Ok(None);
        }
        let frame = self.read_into(&mut buf, position, frame_len)?;
        Ok(match format::decode(frame) {
            Decoded::Batch(header) if header.base_offset >= min_offset => Some(header.base_offset),
            _ => None,
        })
    }

    /// Where scanning resumes after the bad frame at `position`, which should have held
    /// `min_offset`: the first valid frame after it holding `min_offset` or a later offset,
    /// as `(offset, position)`; `None` when no valid frame follows.
    ///
    /// The bad frame's own length field is tried first (a flipped bit in a key or value
    /// leaves it intact, and the next frame starts where it says); failing that, every later
    /// byte position is tried. Only a frame with a verified CRC and an offset no lower than
    /// the one expected is accepted, so stale or garbage bytes are not taken for records.
    ///
    /// # Errors
    /// `Io`.
    pub fn resync(&self, position: u64, min_offset: u64) -> Result<Option<(u64, u64)>> {
        let mut buf = AlignedBuf::default();
        let header = self.read_into(&mut buf, position, LOG_OVERHEAD)?;
        if header.len() == LOG_OVERHEAD {
            let length = u64::from(u32::from_be_bytes(header[8..12].try_into().expect("4")));
            let next = position + LOG_OVERHEAD as u64 + length;
            if (HEADER_LEN as u64..=MAX_BATCH_LEN as u64).contains(&(length + LOG_OVERHEAD as u64))
                && next < self.size
            {
                if let Some(offset) = self.valid_frame_at(next, min_offset)? {
                    return Ok(Some((offset, next)));
                }
            }
        }
        let mut from = position + 1;
        while from + HEADER_LEN as u64 <= self.size {
            let chunk = self.read_into(&mut buf, from, SCAN_CHUNK)?;
            let mut i = 0usize;
            while i + HEADER_LEN <= chunk.len() {
                if let Some(frame_len) = self.plausible_frame(&chunk[i..], min_offset) {
                    let at = from + i as u64;
                    let offset = match chunk.get(i..i + frame_len).map(format::decode) {
                        Some(Decoded::Batch(header)) if header.base_offset >= min_offset => {
                            Some(header.base_offset)
                        }
                        Some(_) => None,
                        // The frame runs past this chunk: read it on its own.
                        None => self.valid_frame_at(at, min_offset)?,
                    };
                    if let Some(offset) = offset {
                        return Ok(Some((offset, at)));
                    }
                }
                i += 1;
            }
            // The next chunk starts at the first position whose header did not fit in this one.
            from += i as u64;
        }
        Ok(None)
    }

    /// [`LogSegment::scan`], reading `chunk` bytes at a time (more for a larger frame). A bad
    /// frame that should have held an offset below `step_over_below` is stepped over with
    /// [`LogSegment::resync`] (and listed in `ScanOutcome::damaged`); any other stops the scan.
    fn scan_in_chunks(
        &self,
        mut position: u64,
        mut expected_offset: u64,
        chunk_len: usize,
        step_over_below: u64,
        mut visit: impl FnMut(&ScannedFrame) -> bool,
    ) -> Result<ScanOutcome> {
        let mut buf = AlignedBuf::default();
        let mut want = chunk_len;
        let mut last_timestamp_ms = None;
        let mut damaged = Vec::new();
        let mut after_damage = false;
        while position < self.size {
            let chunk = self.read_into(&mut buf, position, want)?;
            let mut at = 0usize;
            let mut stop = None;
            while at < chunk.len() {
                match format::decode(&chunk[at..]) {
                    Decoded::Batch(header) => {
                        let here = position + at as u64;
                        let offset = header.base_offset;
                        // The base offset is outside the CRC: a batch that verifies at
                        // another offset than the expected one most likely has a damaged
                        // base offset, so it is a bad batch like any other (stepped over
                        // below the recovery point, cut above it), never a jump of the log.
                        if offset != expected_offset {
                            stop = Some(format!(
                                "offset {offset} where {expected_offset} was expected"
                            ));
                            break;
                        }
                        let frame = ScannedFrame::new(header, here, after_damage);
                        after_damage = false;
                        at += header.batch_len;
                        expected_offset = frame.next_offset;
                        last_timestamp_ms = Some(
                            last_timestamp_ms
                                .map_or(frame.timestamp_ms, |t: u64| t.max(frame.timestamp_ms)),
                        );
                        if !visit(&frame) {
                            return Ok(ScanOutcome {
                                next_offset: expected_offset,
                                last_timestamp_ms,
                                stopped: None,
                                damaged,
                            });
                        }
                    }
                    Decoded::Incomplete {
                        batch_len: frame_len,
                    } => {
                        let frame_end = position + (at + frame_len.unwrap_or(HEADER_LEN)) as u64;
                        if frame_end > self.size {
                            stop = Some(format!(
                                "torn frame: needs {} bytes, the file has {}",
                                frame_end - position - at as u64,
                                self.size - position - at as u64
                            ));
                        } else {
                            // The frame straddles the chunk: read again from its start.
                            want = want.max(frame_len.unwrap_or(HEADER_LEN));
                        }
                        break;
                    }
                    Decoded::Invalid { reason } => {
                        stop = Some(reason);
                        break;
                    }
                }
            }
            position += at as u64;
            let Some(reason) = stop else { continue };
            if expected_offset >= step_over_below {
                return Ok(ScanOutcome {
                    next_offset: expected_offset,
                    last_timestamp_ms,
                    stopped: Some(ScanStop { position, reason }),
                    damaged,
                });
            }
            let resumed = self.resync(position, expected_offset)?;
            damaged.push(DamagedRange {
                position,
                end: resumed.map_or(self.size, |(_, at)| at),
                first_offset: expected_offset,
                resumed_at: resumed.map(|(offset, _)| offset),
                reason,
            });
            match resumed {
                Some((offset, at)) => {
                    (position, expected_offset) = (at, offset);
                    after_damage = true;
                    want = chunk_len;
                }
                // Nothing valid follows: the rest of the file is the damaged range.
                None => break,
            }
        }
        Ok(ScanOutcome {
            next_offset: expected_offset,
            last_timestamp_ms,
            stopped: None,
            damaged,
        })
    }

    /// Scans from the last index entry to the end to learn `next_offset`: the cheap check of
    /// a segment trusted after a clean shutdown. `Ok(Err(reason))` when the tail or the index
    /// does not check out and the segment needs [`LogSegment::rebuild_index`].
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
        let outcome = self.scan(entry.position, entry.offset, |frame| {
            index_short |= since_entry >= interval;
            since_entry += frame.frame_len;
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
        self.next_offset = outcome.next_offset;
        self.last_timestamp_ms = outcome.last_timestamp_ms;
        self.bytes_since_index = since_entry;
        Ok(Ok(()))
    }

    /// Rewrites the index from a scan of the whole log and learns `next_offset`. A bad frame
    /// that should have held an offset below `step_over_below` is stepped over (the frame
    /// the scan resumes at always gets an index entry, so that lookups of the offsets after
    /// the damage start past it); the scan stops at any other. Cuts nothing: see
    /// [`LogSegment::truncate_to`]. When nothing valid follows the last damage, `next_offset`
    /// is the first damaged offset and the next append gets an index entry, so that it can
    /// be found behind the damage; the caller may set a better known `next_offset`.
    pub fn rebuild_index(&mut self, step_over_below: u64) -> Result<ScanOutcome> {
        self.index.clear()?;
        let interval = self.index_interval_bytes;
        let mut since_entry = 0u64;
        let mut entries = Vec::new();
        let outcome =
            self.scan_in_chunks(0, self.base_offset, SCAN_CHUNK, step_over_below, |frame| {
                if since_entry >= interval || frame.after_damage {
                    entries.push(IndexEntry {
                        offset: frame.offset,
                        position: frame.position,
                    });
                    since_entry = 0;
                }
                since_entry += frame.frame_len;
                true
            })?;
        for entry in entries {
            self.index.push(entry);
        }
        self.index.write_pending()?;
        self.next_offset = outcome.next_offset;
        self.last_timestamp_ms = outcome.last_timestamp_ms;
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
    /// where the valid frames end).
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

    /// Deletes both files.
    pub fn delete(self) -> Result<()> {
        let index_path = self.index.path().to_owned();
        // Both handles closed first: a handle alive across the removal of its file is kept
        // open (and reopened if its descriptor was pooled away) so it can still reach it.
        drop(self.log);
        drop(self.index);
        self.fs
            .remove_file(&self.log_path)
            .map_err(|e| StorageError::io("delete segment", &self.log_path, e))?;
        match self.fs.remove_file(&index_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StorageError::io("delete index", index_path, e))
            }
            _ => Ok(()),
        }
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
