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
    file: IndexFile,
    base_offset: u64,
    last: Option<IndexEntry>,
}

impl OffsetIndex {
    /// Opens (creating if absent) the index at `path`. Entries are trusted as they are; a file
    /// whose length is not a whole number of entries is cut back to whole entries.
    pub fn open(fs: &dyn FileSystem, path: &Path, base_offset: u64) -> Result<Self> {
        let file = IndexFile::open(fs, path, ENTRY_LEN)?;
        let last = match file.entries() {
            0 => None,
            n => Some(read_entry(&file, base_offset, n - 1)?),
        };
        Ok(OffsetIndex {
            file,
            base_offset,
            last,
        })
    }

    /// Creates an empty index at `path`, replacing any file there.
    pub fn create(fs: &dyn FileSystem, path: &Path, base_offset: u64) -> Result<Self> {
        IndexFile::truncate(fs, path)?;
        Self::open(fs, path, base_offset)
    }

    pub fn path(&self) -> &Path {
        self.file.path()
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
        let mut raw = [0u8; ENTRY_LEN as usize];
        raw[0..4].copy_from_slice(&relative.to_le_bytes());
        raw[4..8].copy_from_slice(&(entry.position as u32).to_le_bytes());
        self.file.push(&raw);
        self.last = Some(entry);
    }

    /// Writes the queued entries in one call. On failure they are dropped (see
    /// [`IndexFile::write_pending`]); the index stays valid, only sparser.
    pub fn write_pending(&mut self) -> Result<()> {
        self.file.write_pending()
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
        if let Some(last) = self.last.filter(&at_or_before) {
            return Ok(last);
        }
        let found = self.file.last_where(|n| {
            let entry = read_entry(&self.file, self.base_offset, n)?;
            Ok(at_or_before(&entry).then_some(entry))
        })?;
        Ok(found.unwrap_or(IndexEntry {
            offset: self.base_offset,
            position: 0,
        }))
    }

    /// Empties the index (used before a rebuild and by truncation).
    pub fn clear(&mut self) -> Result<()> {
        self.file.clear()?;
        self.last = None;
        Ok(())
    }
}

fn read_entry(file: &IndexFile, base_offset: u64, n: u64) -> Result<IndexEntry> {
    let mut raw = [0u8; ENTRY_LEN as usize];
    file.read_entry(n, &mut raw)?;
    let relative = u32::from_le_bytes(raw[0..4].try_into().expect("4 bytes"));
    let position = u32::from_le_bytes(raw[4..8].try_into().expect("4 bytes"));
    Ok(IndexEntry {
        offset: base_offset + u64::from(relative),
        position: u64::from(position),
    })
}

/// The file under an index (this one, or a segment's time index): fixed-size entries back to
/// back, queued and written with one `write` per append, read one at a time with `pread`.
#[derive(Debug)]
pub(super) struct IndexFile {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    entry_len: u64,
    /// Entries in the file, the queued ones included.
    entries: u64,
    /// Encoded entries of the current append, written with one `write`.
    pending: Vec<u8>,
}

impl IndexFile {
    /// Opens (creating if absent) the file at `path`, cutting a length that is not a whole
    /// number of `entry_len` entries back to whole entries (a torn last write).
    pub(super) fn open(fs: &dyn FileSystem, path: &Path, entry_len: u64) -> Result<Self> {
        let file = fs
            .open(path, OpenMode::CreateIfMissing)
            .map_err(|e| StorageError::io("open index", path, e))?;
        let len = file
            .size()
            .map_err(|e| StorageError::io("stat index", path, e))?;
        if len % entry_len != 0 {
            file.set_len(len - len % entry_len)
                .map_err(|e| StorageError::io("truncate index", path, e))?;
        }
        Ok(IndexFile {
            path: path.to_owned(),
            file,
            entry_len,
            entries: len / entry_len,
            pending: Vec::new(),
        })
    }

    /// Empties (creating if absent) the file at `path`.
    pub(super) fn truncate(fs: &dyn FileSystem, path: &Path) -> Result<()> {
        fs.open(path, OpenMode::Truncate)
            .map_err(|e| StorageError::io("create index", path, e))?;
        Ok(())
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Entries in the file, the queued ones included.
    pub(super) fn entries(&self) -> u64 {
        self.entries
    }

    /// Queues one encoded entry.
    pub(super) fn push(&mut self, entry: &[u8]) {
        debug_assert_eq!(entry.len() as u64, self.entry_len);
        self.pending.extend_from_slice(entry);
        self.entries += 1;
    }

    /// Writes the queued entries in one call. On failure they are dropped and the file is
    /// cut back to the entries before them, so that no hole or torn entry is left below
    /// entries written later: the index only misses them, which costs lookups a longer scan.
    pub(super) fn write_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let queued = self.pending.len() as u64 / self.entry_len;
        let start = (self.entries - queued) * self.entry_len;
        let result = self.file.write_all_at(&self.pending, start);
        self.pending.clear();
        if let Err(e) = result {
            self.entries -= queued;
            // Best effort: a failed cut leaves bytes the next write overwrites.
            let _ = self.file.set_len(start);
            return Err(StorageError::io("write index", &self.path, e));
        }
        Ok(())
    }

    /// Reads entry `n` (written, not queued) into `raw`.
    pub(super) fn read_entry(&self, n: u64, raw: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(raw, n * self.entry_len)
            .map_err(|e| StorageError::io("read index", &self.path, e))
    }

    /// Binary search over the entries for the last one `accept` returns `Some` for; `accept`
    /// must accept a prefix of the entries.
    pub(super) fn last_where<T>(
        &self,
        mut accept: impl FnMut(u64) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let mut best = None;
        let (mut lo, mut hi) = (
            0u64,
            self.entries - self.pending.len() as u64 / self.entry_len,
        );
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match accept(mid)? {
                Some(found) => {
                    best = Some(found);
                    lo = mid + 1;
                }
                None => hi = mid,
            }
        }
        Ok(best)
    }

    /// Empties the file and the queue.
    pub(super) fn clear(&mut self) -> Result<()> {
        self.file
            .set_len(0)
            .map_err(|e| StorageError::io("truncate index", &self.path, e))?;
        self.entries = 0;
        self.pending.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;
    use std::io::Write;

    use super::*;
    use crate::storage::fs::OsFs;
    use crate::storage::sim::{FaultOp, SimFs};

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

    #[test]
    fn a_failed_write_leaves_no_hole_before_later_entries() {
        let sim = SimFs::new(1);
        let path = Path::new("/p/x.index");
        let mut index = OffsetIndex::create(&sim, path, 100).unwrap();
        let entry = |offset, position| IndexEntry { offset, position };
        index.push(entry(110, 4096));
        index.write_pending().unwrap();
        index.push(entry(125, 8200));
        sim.inject(
            "x.index",
            FaultOp::Write,
            std::io::ErrorKind::StorageFull,
            1,
        );
        assert!(index.write_pending().is_err());
        index.push(entry(140, 12300));
        index.write_pending().unwrap();
        drop(index);
        assert_eq!(sim.contents(path).unwrap().len(), 16, "two whole entries");
        let reopened = OffsetIndex::open(&sim, path, 100).unwrap();
        assert_eq!(reopened.lookup(130).unwrap(), entry(110, 4096));
        assert_eq!(reopened.lookup(140).unwrap(), entry(140, 12300));
    }
}
