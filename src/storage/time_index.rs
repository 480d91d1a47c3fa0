//! The time index of one segment: `<base_offset:020>.timeindex`, Kafka's `TimeIndex`.
//!
//! # Bytes
//! A flat array of 12-byte entries, big-endian as Kafka writes them, no header:
//!
//! ```text
//! offset  size  field
//!      0     8  timestamp         i64, ms since the Unix epoch: the largest record timestamp
//!                                 of the segment up to and including the offset below
//!      8     4  relative_offset   u32: the last offset of the batch that carries that
//!                                 timestamp - segment base offset
//! ```
//!
//! # Meaning and invariants
//! An entry `(t, o)` says: the largest timestamp among the segment's records up to and
//! including offset `o` is `t`, and the batch holding `o` is the first to carry it. Entries
//! are strictly increasing in timestamp (an entry is only added when the segment's largest
//! timestamp grew), hence also in offset. So every batch before the one holding `o` has a
//! largest timestamp below `t`, and the search for the first record at or after a timestamp
//! starts at the batch holding the offset of the last entry at or before it (the segment's
//! first batch when there is none): under CreateTime, timestamps need not grow with offsets.
//!
//! # When entries are added
//! With each offset index entry (every [`super::index::INDEX_INTERVAL_BYTES`] of batches),
//! when the segment's largest timestamp grew since the last time entry: (largest timestamp so
//! far, last offset of the batch that carries it). And once more when the segment is rolled
//! (sealed), so that a sealed segment's last entry holds its largest timestamp: on open it is
//! read from here, and time-based lookups skip a whole segment without reading its log.
//!
//! # Crash story
//! As the offset index, this is derived data: never synced, cleared and rebuilt from the log
//! whenever the offset index is (`LogSegment::rebuild_index`), deleted with its segment, and
//! removed by recovery when its segment is gone. After a clean shutdown it is trusted after a
//! cheap check: its last entry's offset lies within the segment. A missing entry costs a
//! lookup a longer scan, never a wrong answer: any entry is a safe place to start.
//!
//! # Memory
//! Nothing but the last entry is kept in RAM: lookups binary-search the file with `pread`.

use std::path::Path;

use super::error::Result;
use super::fs::FileSystem;
use super::index::IndexFile;

/// Size of one time index entry.
pub const ENTRY_LEN: u64 = 12;

/// A timestamp and the offset that carries it: a time index entry with its offset made
/// absolute, or a segment's largest timestamp so far (Kafka's `TimestampOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// The last offset of the batch that carries `timestamp_ms`.
    pub offset: u64,
}

impl TimestampOffset {
    /// The largest timestamp so far after a batch whose largest timestamp is `timestamp_ms`
    /// and last offset `last_offset`: `so_far` unless the batch has a larger timestamp (on a
    /// tie, the earlier batch stays the first to carry it).
    pub fn after_batch(so_far: Option<Self>, timestamp_ms: u64, last_offset: u64) -> Option<Self> {
        match so_far {
            Some(max) if max.timestamp_ms >= timestamp_ms => Some(max),
            _ => Some(TimestampOffset {
                timestamp_ms,
                offset: last_offset,
            }),
        }
    }
}

/// An open `.timeindex` file.
#[derive(Debug)]
pub struct TimeIndex {
    file: IndexFile,
    base_offset: u64,
    last: Option<TimestampOffset>,
}

impl TimeIndex {
    /// Opens (creating if absent) the time index at `path`. Entries are trusted as they are;
    /// a file whose length is not a whole number of entries is cut back to whole entries.
    ///
    /// # Errors
    /// `Io`.
    pub fn open(fs: &dyn FileSystem, path: &Path, base_offset: u64) -> Result<Self> {
        let file = IndexFile::open(fs, path, ENTRY_LEN)?;
        let last = match file.entries() {
            0 => None,
            n => Some(read_entry(&file, base_offset, n - 1)?),
        };
        Ok(TimeIndex {
            file,
            base_offset,
            last,
        })
    }

    /// Creates an empty time index at `path`, replacing any file there.
    ///
    /// # Errors
    /// `Io`.
    pub fn create(fs: &dyn FileSystem, path: &Path, base_offset: u64) -> Result<Self> {
        IndexFile::truncate(fs, path)?;
        Self::open(fs, path, base_offset)
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The last entry: the largest timestamp the index knows of, and where it is.
    pub fn last_entry(&self) -> Option<TimestampOffset> {
        self.last
    }

    /// Queues `entry` if its timestamp is larger than the last entry's (otherwise the index
    /// already says as much); [`TimeIndex::write_pending`] writes the queue.
    pub fn maybe_push(&mut self, entry: TimestampOffset) {
        if self
            .last
            .is_some_and(|l| l.timestamp_ms >= entry.timestamp_ms)
        {
            return;
        }
        debug_assert!(self.last.is_none_or(|l| l.offset < entry.offset));
        let timestamp = i64::try_from(entry.timestamp_ms).unwrap_or(i64::MAX);
        let relative = (entry.offset - self.base_offset) as u32;
        let mut raw = [0u8; ENTRY_LEN as usize];
        raw[0..8].copy_from_slice(&timestamp.to_be_bytes());
        raw[8..12].copy_from_slice(&relative.to_be_bytes());
        self.file.push(&raw);
        self.last = Some(entry);
    }

    /// Writes the queued entries in one call. On failure they are dropped; the index stays
    /// valid, only sparser.
    ///
    /// # Errors
    /// `Io`.
    pub fn write_pending(&mut self) -> Result<()> {
        self.file.write_pending()
    }

    /// The last entry whose timestamp is at or before `timestamp_ms`: a search for the first
    /// record at or after `timestamp_ms` may start at the batch holding its offset. `None`
    /// when no entry is (start at the segment's first batch).
    ///
    /// # Errors
    /// `Io`.
    pub fn lookup(&self, timestamp_ms: u64) -> Result<Option<TimestampOffset>> {
        if let Some(last) = self.last.filter(|l| l.timestamp_ms <= timestamp_ms) {
            return Ok(Some(last));
        }
        self.file.last_where(|n| {
            let entry = read_entry(&self.file, self.base_offset, n)?;
            Ok((entry.timestamp_ms <= timestamp_ms).then_some(entry))
        })
    }

    /// Empties the index (before a rebuild).
    ///
    /// # Errors
    /// `Io`.
    pub fn clear(&mut self) -> Result<()> {
        self.file.clear()?;
        self.last = None;
        Ok(())
    }

    #[cfg(test)]
    /// Every entry, in order (tests compare indexes).
    pub fn entries(&self) -> Result<Vec<TimestampOffset>> {
        (0..self.file.entries())
            .map(|n| read_entry(&self.file, self.base_offset, n))
            .collect()
    }
}

fn read_entry(file: &IndexFile, base_offset: u64, n: u64) -> Result<TimestampOffset> {
    let mut raw = [0u8; ENTRY_LEN as usize];
    file.read_entry(n, &mut raw)?;
    let timestamp = i64::from_be_bytes(raw[0..8].try_into().expect("8 bytes"));
    let relative = u32::from_be_bytes(raw[8..12].try_into().expect("4 bytes"));
    Ok(TimestampOffset {
        // Written from non-negative timestamps only: a negative one is damage, and 0 claims
        // nothing (every timestamp is at least 0).
        timestamp_ms: timestamp.max(0) as u64,
        offset: base_offset + u64::from(relative),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::OsFs;

    fn at(timestamp_ms: u64, offset: u64) -> TimestampOffset {
        TimestampOffset {
            timestamp_ms,
            offset,
        }
    }

    fn index_with(entries: &[(u64, u64)]) -> (tempfile::TempDir, TimeIndex) {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TimeIndex::create(&OsFs, &dir.path().join("x.timeindex"), 100).unwrap();
        for &(timestamp_ms, offset) in entries {
            index.maybe_push(at(timestamp_ms, offset));
        }
        index.write_pending().unwrap();
        (dir, index)
    }

    #[test]
    fn entries_are_twelve_big_endian_bytes() {
        let (dir, index) = index_with(&[(0x0102_0304_0506, 107)]);
        drop(index);
        let bytes = std::fs::read(dir.path().join("x.timeindex")).unwrap();
        assert_eq!(
            bytes,
            [0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 7],
            "timestamp i64 then relative offset u32, big-endian"
        );
    }

    #[test]
    fn only_a_larger_timestamp_adds_an_entry() {
        let (_dir, index) = index_with(&[(1000, 110), (1000, 120), (900, 130), (1500, 140)]);
        assert_eq!(index.entries().unwrap(), [at(1000, 110), at(1500, 140)]);
        assert_eq!(index.last_entry(), Some(at(1500, 140)));
    }

    #[test]
    fn lookup_finds_the_last_entry_at_or_before_the_timestamp() {
        let (_dir, index) = index_with(&[(1000, 110), (2000, 125), (3000, 140), (4000, 160)]);
        let lookup = |timestamp_ms| index.lookup(timestamp_ms).unwrap();
        assert_eq!(lookup(999), None);
        assert_eq!(lookup(1000), Some(at(1000, 110)));
        assert_eq!(lookup(2999), Some(at(2000, 125)));
        assert_eq!(lookup(3000), Some(at(3000, 140)));
        assert_eq!(lookup(u64::MAX), Some(at(4000, 160)));
    }

    #[test]
    fn reopens_with_its_entries_and_cuts_a_partial_one() {
        let (dir, index) = index_with(&[(1000, 110), (2000, 125)]);
        drop(index);
        let path = dir.path().join("x.timeindex");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[9; 5]);
        std::fs::write(&path, bytes).unwrap();
        let reopened = TimeIndex::open(&OsFs, &path, 100).unwrap();
        assert_eq!(reopened.last_entry(), Some(at(2000, 125)));
        assert_eq!(reopened.lookup(1500).unwrap(), Some(at(1000, 110)));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * ENTRY_LEN);
    }

    #[test]
    fn clear_forgets_every_entry() {
        let (_dir, mut index) = index_with(&[(1000, 110)]);
        index.clear().unwrap();
        assert_eq!(index.last_entry(), None);
        assert_eq!(index.lookup(u64::MAX).unwrap(), None);
        index.maybe_push(at(5, 100));
        index.write_pending().unwrap();
        assert_eq!(index.entries().unwrap(), [at(5, 100)]);
    }
}
