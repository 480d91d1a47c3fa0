//! The sparse offset index of one segment: `<base_offset:020>.index`.
//!
//! # Bytes
//! A flat array of 8-byte entries, little-endian, no header:
//!
//! ```text
//! offset  size  field
//!      0     4  relative_offset   record offset - segment base offset
//!      4     4  position          byte position of that record's frame in the .log file
//! ```
//!
//! An entry is added whenever at least `index_interval_bytes` of frames were appended since
//! the previous one, so a lookup is a binary search here plus a scan of at most one interval in
//! the log. The first record of a segment needs no entry: position 0 is implied.
//!
//! # Invariants
//! Entries are strictly increasing in both fields; each `position` is the start of a frame
//! whose offset is `base_offset + relative_offset`.
//!
//! # Crash story
//! The index is never synced: it is derived data. After an unclean shutdown the index of every
//! segment that recovery scans is rebuilt from the log; a clean shutdown's index is trusted
//! after a cheap check of its length and last entry (`recovery`). A read that lands on a bad
//! position re-scans the segment from byte 0 rather than trusting it.
//!
//! # Memory
//! Nothing but the last entry is kept in RAM: lookups binary-search the file with `pread`
//! (about 14 reads for a full 64 MiB segment), so RAM does not grow with the log.

use std::path::{Path, PathBuf};

use super::error::{Result, StorageError};
use super::fs::{FileSystem, OpenMode, StorageFile};

/// An index entry every 4 KiB of frames: a lookup then scans at most ~4 KiB, and the index
/// costs 8 bytes per 4 KiB of log (0.2%), like Kafka's `index.interval.bytes`.
pub const INDEX_INTERVAL_BYTES: u64 = 4096;
/// Size of one index entry.
pub const ENTRY_LEN: u64 = 8;

/// One index entry, with the offset made absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub offset: u64,
    pub position: u64,
}

/// An open `.index` file.
#[derive(Debug)]
pub struct OffsetIndex {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    base_offset: u64,
    entries: u64,
    last: Option<IndexEntry>,
    /// Encoded entries of the current append, written with one `write`.
    pending: Vec<u8>,
}

impl OffsetIndex {
    /// Opens (creating if absent) the index at `path`. Entries are trusted as they are; a file
    /// whose length is not a whole number of entries is cut back to whole entries.
    pub fn open(fs: &dyn FileSystem, path: &Path, base_offset: u64) -> Result<Self> {
        let file = fs
            .open(path, OpenMode::CreateIfMissing)
            .map_err(|e| StorageError::io("open index", path, e))?;
        let len = file
            .size()
            .map_err(|e| StorageError::io("stat index", path, e))?;
        if len % ENTRY_LEN != 0 {
            file.set_len(len - len % ENTRY_LEN)
                .map_err(|e| StorageError::io("truncate index", path, e))?;
        }
        let mut index = OffsetIndex {
            path: path.to_owned(),
            file,
            base_offset,
            entries: len / ENTRY_LEN,
            last: None,
            pending: Vec::new(),
        };
        index.last = match index.entries {
            0 => None,
            n => Some(index.entry_at(n - 1)?),
        };
        Ok(index)
    }

    /// Creates an empty index at `path`, replacing any file there.
    pub fn create(fs: &dyn FileSystem, path: &Path, base_offset: u64) -> Result<Self> {
        fs.open(path, OpenMode::Truncate)
            .map_err(|e| StorageError::io("create index", path, e))?;
        Self::open(fs, path, base_offset)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    #[cfg(test)]
    /// The last entry, if any.
    pub fn last_entry(&self) -> Option<IndexEntry> {
        self.last
    }

    /// Queues an entry; [`OffsetIndex::write_pending`] writes the queue.
    pub fn push(&mut self, entry: IndexEntry) {
        debug_assert!(self.last.is_none_or(|l| l.offset < entry.offset));
        let relative = (entry.offset - self.base_offset) as u32;
        self.pending.extend_from_slice(&relative.to_le_bytes());
        self.pending
            .extend_from_slice(&(entry.position as u32).to_le_bytes());
        self.last = Some(entry);
        self.entries += 1;
    }

    /// Writes the queued entries in one call.
    pub fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let first_pending = self.entries - (self.pending.len() as u64) / ENTRY_LEN;
        let result = self
            .file
            .write_all_at(&self.pending, first_pending * ENTRY_LEN);
        self.pending.clear();
        result.map_err(|e| StorageError::io("write index", &self.path, e))
    }

    /// The last indexed frame at or before `offset`; the segment's first frame (position 0,
    /// the base offset) when none is.
    pub fn lookup(&self, offset: u64) -> Result<IndexEntry> {
        self.last_entry_where(|entry| entry.offset <= offset)
    }

    /// The last indexed frame starting at or before byte `position`; the segment's first
    /// frame when none is.
    pub fn lookup_position(&self, position: u64) -> Result<IndexEntry> {
        self.last_entry_where(|entry| entry.position <= position)
    }

    /// Binary search for the last entry that satisfies `at_or_before`, which must hold for a
    /// prefix of the entries (offsets and positions both grow).
    fn last_entry_where(&self, at_or_before: impl Fn(&IndexEntry) -> bool) -> Result<IndexEntry> {
        let mut best = IndexEntry {
            offset: self.base_offset,
            position: 0,
        };
        if let Some(last) = self.last.filter(&at_or_before) {
            return Ok(last);
        }
        let (mut lo, mut hi) = (0u64, self.entries);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let entry = self.entry_at(mid)?;
            if at_or_before(&entry) {
                best = entry;
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(best)
    }

    /// Empties the index (used before a rebuild and by truncation).
    pub fn clear(&mut self) -> Result<()> {
        self.file
            .set_len(0)
            .map_err(|e| StorageError::io("truncate index", &self.path, e))?;
        self.entries = 0;
        self.last = None;
        self.pending.clear();
        Ok(())
    }

    fn entry_at(&self, n: u64) -> Result<IndexEntry> {
        let mut raw = [0u8; ENTRY_LEN as usize];
        self.file
            .read_exact_at(&mut raw, n * ENTRY_LEN)
            .map_err(|e| StorageError::io("read index", &self.path, e))?;
        let relative = u32::from_le_bytes(raw[0..4].try_into().expect("4 bytes"));
        let position = u32::from_le_bytes(raw[4..8].try_into().expect("4 bytes"));
        Ok(IndexEntry {
            offset: self.base_offset + u64::from(relative),
            position: u64::from(position),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;
    use std::io::Write;

    use super::*;
    use crate::storage::fs::OsFs;

    fn index_with(entries: &[(u64, u64)]) -> (tempfile::TempDir, OffsetIndex) {
        let dir = tempfile::tempdir().unwrap();
        let mut index = OffsetIndex::create(&OsFs, &dir.path().join("x.index"), 100).unwrap();
        for &(offset, position) in entries {
            index.push(IndexEntry { offset, position });
        }
        index.write_pending().unwrap();
        (dir, index)
    }

    #[test]
    fn lookup_finds_the_last_entry_at_or_before() {
        let (_dir, index) = index_with(&[(110, 4096), (125, 8200), (140, 12300)]);
        let at = |offset| index.lookup(offset).unwrap();
        assert_eq!(
            at(100),
            IndexEntry {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(at(109).position, 0);
        assert_eq!(
            at(110),
            IndexEntry {
                offset: 110,
                position: 4096
            }
        );
        assert_eq!(
            at(130),
            IndexEntry {
                offset: 125,
                position: 8200
            }
        );
        assert_eq!(at(1_000).position, 12300);
    }

    #[test]
    fn reopens_with_its_entries() {
        let (dir, index) = index_with(&[(110, 4096), (125, 8200)]);
        drop(index);
        let reopened = OffsetIndex::open(&OsFs, &dir.path().join("x.index"), 100).unwrap();
        assert_eq!(
            reopened.last_entry(),
            Some(IndexEntry {
                offset: 125,
                position: 8200
            })
        );
        assert_eq!(reopened.lookup(120).unwrap().position, 4096);
    }

    #[test]
    fn a_partial_entry_is_cut_on_open() {
        let (dir, index) = index_with(&[(110, 4096)]);
        drop(index);
        let path = dir.path().join("x.index");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        let reopened = OffsetIndex::open(&OsFs, &path, 100).unwrap();
        assert_eq!(reopened.last_entry().unwrap().position, 4096);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
    }
}
