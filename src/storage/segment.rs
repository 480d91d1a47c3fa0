//! One segment of a partition log: `<base_offset:020>.log` plus its `.index`.
//!
//! The `.log` file is frames back to back (format: [`super::record`]), offsets contiguous from
//! `base_offset`. A segment is only ever appended to while it is the active (last) one, and
//! only ever truncated by recovery. Its in-memory state is its size and the offset its next
//! record will get; everything else is on disk.

use std::path::{Path, PathBuf};

use super::batch::frame_ranges;
use super::fs::{OpenMode, SharedFs, StorageFile};
use super::fsutil::AlignedBuf;
use super::index::{IndexEntry, OffsetIndex};
use super::record::{self, Decoded, HEADER_LEN};
use crate::error::{Error, Result};

/// Bytes read per step when a segment is scanned from start to end (recovery, retention).
const SCAN_CHUNK: usize = 256 << 10;

/// The file names of a segment with this base offset: 20 digits, so they sort by offset.
pub fn file_names(base_offset: u64) -> (String, String) {
    (
        format!("{base_offset:020}.log"),
        format!("{base_offset:020}.index"),
    )
}

/// A frame found by [`LogSegment::scan`].
#[derive(Debug, Clone, Copy)]
pub struct ScannedFrame {
    pub offset: u64,
    pub timestamp_ms: u64,
    pub position: u64,
    pub frame_len: u64,
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
    /// Position after the last valid frame.
    pub valid_len: u64,
    /// Offset the next record would get.
    pub next_offset: u64,
    /// Timestamp of the last valid frame scanned, if any.
    pub last_timestamp_ms: Option<u64>,
    /// Set when invalid or torn bytes follow `valid_len`.
    pub stopped: Option<ScanStop>,
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
    /// `size` at the last successful sync (at open: all of it, recovery syncs what it keeps).
    synced_size: u64,
    /// Offset the next appended record gets: base_offset + records in this segment, as far
    /// as is known (a sealed segment loaded after a clean shutdown learns it from its tail).
    next_offset: u64,
    /// Timestamp of the last record, when known.
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
            .map_err(|e| Error::io("create segment", &log_path, e))?;
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
            .map_err(|e| Error::io("open segment", &log_path, e))?;
        let size = log
            .size()
            .map_err(|e| Error::io("stat segment", &log_path, e))?;
        let index = OffsetIndex::open(fs.as_ref(), &dir.join(index_name), base_offset)?;
        Ok(LogSegment {
            base_offset,
            log_path,
            log,
            fs: fs.clone(),
            index,
            size,
            synced_size: size,
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
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub fn index_path(&self) -> &Path {
        self.index.path()
    }

    /// Appends already-encoded frames with one `write`, then their index entries.
    /// `frames` holds records `next_offset..next_offset + count`, whole frames back to back.
    /// On a failed write the file is cut back to its old size.
    pub fn append(&mut self, frames: &[u8], count: u64, timestamp_ms: u64) -> Result<()> {
        let start = self.size;
        if let Err(e) = self.log.write_all_at(frames, start) {
            // A partial write must not be left behind a later, successful one.
            let _ = self.log.set_len(start);
            self.synced_size = self.synced_size.min(start);
            return Err(Error::io("append to segment", &self.log_path, e));
        }
        for (i, frame) in frame_ranges(frames).enumerate() {
            if self.bytes_since_index >= self.index_interval_bytes {
                self.index.push(IndexEntry {
                    offset: self.next_offset + i as u64,
                    position: start + frame.start as u64,
                });
                self.bytes_since_index = 0;
            }
            self.bytes_since_index += frame.len() as u64;
        }
        self.size = start + frames.len() as u64;
        self.next_offset += count;
        self.last_timestamp_ms = Some(timestamp_ms);
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
                Err(Error::io("fdatasync segment", &self.log_path, e))
            }
        }
    }

    /// After a failed sync the kernel may have marked the written pages clean without
    /// persisting them (fsyncgate, Rebello et al. ATC'20): no later sync would write them,
    /// and a power loss would leave a hole before every record written after. Writing the
    /// unsynced bytes again makes their pages dirty, so the next sync persists them. Best
    /// effort: if this fails too, the owner's reopen validates the file.
    fn redirty_unsynced(&mut self) {
        let (from, len) = (self.synced_size, (self.size - self.synced_size) as usize);
        let mut unsynced = vec![0u8; len];
        let rewritten = self
            .log
            .read_exact_at(&mut unsynced, from)
            .and_then(|()| self.log.set_len(from))
            .and_then(|()| self.log.write_all_at(&unsynced, from));
        if let Err(e) = rewritten {
            tracing::error!(path = %self.log_path.display(), error = %e, "cannot rewrite unsynced bytes after a failed sync");
        }
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
            .map_err(|e| Error::io("read segment", &self.log_path, e))?;
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
        self.scan_in_chunks(position, expected_offset, SCAN_CHUNK, visit)
    }

    /// The first frame that starts at or after byte `position`, as `(offset, position)`;
    /// `None` when no frame of this segment does. One index lookup and a scan of about one
    /// index interval.
    ///
    /// # Errors
    /// `Corrupt` when a frame on the way does not verify; `Io`.
    pub fn first_frame_from(&self, position: u64) -> Result<Option<(u64, u64)>> {
        let entry = self.index.lookup_position(position)?;
        self.find_frame(entry, |frame| frame.position >= position)
    }

    /// Where the frame holding `offset` starts, `None` when this segment does not hold it.
    /// One index lookup and a scan of about one index interval.
    ///
    /// # Errors
    /// `Corrupt` when a frame on the way does not verify; `Io`.
    pub fn position_of(&self, offset: u64) -> Result<Option<u64>> {
        let entry = self.index.lookup(offset)?;
        let found = self.find_frame(entry, |frame| frame.offset >= offset)?;
        Ok(found
            .filter(|&(o, _)| o == offset)
            .map(|(_, position)| position))
    }

    /// The first frame from `entry` on that `is_it` accepts, as `(offset, position)`.
    fn find_frame(
        &self,
        entry: IndexEntry,
        is_it: impl Fn(&ScannedFrame) -> bool,
    ) -> Result<Option<(u64, u64)>> {
        let mut found = None;
        let chunk = 2 * self.index_interval_bytes as usize;
        let outcome = self.scan_in_chunks(entry.position, entry.offset, chunk, |frame| {
            if is_it(frame) {
                found = Some((frame.offset, frame.position));
            }
            found.is_none()
        })?;
        match outcome.stopped {
            Some(stop) => Err(Error::corrupt(&self.log_path, stop.position, stop.reason)),
            None => Ok(found),
        }
    }

    /// [`LogSegment::scan`], reading `chunk` bytes at a time (more for a larger frame).
    fn scan_in_chunks(
        &self,
        mut position: u64,
        mut expected_offset: u64,
        chunk: usize,
        mut visit: impl FnMut(&ScannedFrame) -> bool,
    ) -> Result<ScanOutcome> {
        let mut buf = AlignedBuf::default();
        let mut want = chunk;
        let mut last_timestamp_ms = None;
        while position < self.size {
            let chunk = self.read_into(&mut buf, position, want)?;
            let mut at = 0usize;
            let mut stop = None;
            while at < chunk.len() {
                match record::decode(&chunk[at..]) {
                    Decoded::Record { record, frame_len } => {
                        if record.offset != expected_offset {
                            stop = Some(format!(
                                "offset {} where {expected_offset} was expected",
                                record.offset
                            ));
                            break;
                        }
                        let frame = ScannedFrame {
                            offset: record.offset,
                            timestamp_ms: record.timestamp_ms,
                            position: position + at as u64,
                            frame_len: frame_len as u64,
                        };
                        at += frame_len;
                        expected_offset += 1;
                        last_timestamp_ms = Some(record.timestamp_ms);
                        if !visit(&frame) {
                            return Ok(ScanOutcome {
                                valid_len: position + at as u64,
                                next_offset: expected_offset,
                                last_timestamp_ms,
                                stopped: None,
                            });
                        }
                    }
                    Decoded::Incomplete { frame_len } => {
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
            if let Some(reason) = stop {
                return Ok(ScanOutcome {
                    valid_len: position,
                    next_offset: expected_offset,
                    last_timestamp_ms,
                    stopped: Some(ScanStop { position, reason }),
                });
            }
        }
        Ok(ScanOutcome {
            valid_len: position,
            next_offset: expected_offset,
            last_timestamp_ms,
            stopped: None,
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

    /// Rewrites the index from a scan of the whole log and learns `next_offset`, stopping at
    /// the first frame that does not verify. Cuts nothing: see [`LogSegment::truncate_to`].
    pub fn rebuild_index(&mut self) -> Result<ScanOutcome> {
        self.index.clear()?;
        let interval = self.index_interval_bytes;
        let mut since_entry = 0u64;
        let mut entries = Vec::new();
        let outcome = self.scan(0, self.base_offset, |frame| {
            if since_entry >= interval {
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
        Ok(outcome)
    }

    /// Cuts the log file to `len` bytes (recovery, after [`LogSegment::rebuild_index`] found
    /// where the valid frames end).
    pub fn truncate_to(&mut self, len: u64) -> Result<()> {
        if len < self.size {
            self.log
                .set_len(len)
                .map_err(|e| Error::io("truncate segment", &self.log_path, e))?;
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
            .map_err(|e| Error::io("delete segment", &self.log_path, e))?;
        match self.fs.remove_file(&index_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("delete index", index_path, e))
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
                Err(Error::io("fsync segment", &self.log_path, e))
            }
        }
    }
}
