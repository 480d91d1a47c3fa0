//! `OffsetStore`: the committed offset of every consumer group in one partition, persisted in
//! `offsets.journal` in the partition's directory.
//!
//! # Why a journal
//! Commits can be as frequent as records, so a commit must cost one small `write`, not a file
//! rewrite. Each commit appends one entry; the last entry of a group wins. On open the journal
//! is replayed. On open and after a commit, once it has grown past [`COMPACT_RATIO`] times its
//! live content, it is rewritten with one entry per group (temp file, fsync, rename). A
//! compaction is an optimisation: when it fails, the uncompacted journal stays valid and in
//! use, the failure is logged (never returned for the commit that took effect, never failing
//! the open), and it is retried later. The alternative, write-temp + rename
//! per commit, costs an fsync of the file and of the directory per commit to be crash-safe
//! (`cargo bench --bench storage -- commit` compares the two).
//!
//! # Bytes of one entry (little-endian)
//!
//! ```text
//! offset  size  field
//!      0     4  length     bytes after the crc: 2 + group_len + 8 [+ 2 + metadata_len]
//!      4     4  crc        CRC32C of bytes [8, 8 + length)
//!      8     2  group_len
//!     10     -  group id (UTF-8), then the committed offset as u64
//!            2  metadata_len    only when the commit has metadata
//!            -  metadata (UTF-8, at most MAX_OFFSET_METADATA_BYTES)
//! ```
//!
//! The length tells the two forms apart: exactly `2 + group_len + 8` is a commit without
//! metadata (the only form journals written before metadata was kept hold, so they read as
//! they are); anything else must be `2 + group_len + 8 + 2 + metadata_len`. A commit without
//! metadata (every native commit) is still written in the short form, so a version that
//! predates metadata reads such a journal; it would take a long entry for a torn tail and cut
//! the journal there, so a data directory whose Kafka clients committed metadata cannot go
//! back to such a version.
//!
//! # Crash story
//! The directory is synced when an open creates the journal, so the file itself survives a
//! power loss; a journal found at open gets its directory synced with its first synced
//! commit (the process that created it may have died before its sync), not at open, so an
//! open costs no fsync. An entry is written with one `write` before the commit is
//! acknowledged, so it survives a process crash; under `FsyncPolicy::Always` it is also
//! `fdatasync`ed first; under `Interval` the owner syncs on a timer, off its thread
//! ([`OffsetStore::begin_sync`], [`OffsetsSyncJob::run`], [`OffsetStore::finish_sync`]: the
//! same split as the log's, see `log/interval_sync.rs`). A torn last entry (a crash mid-write, or unsynced data lost to a power
//! failure) fails its length or CRC and is cut on open: that commit was never acknowledged,
//! or was within the documented loss window, and the group re-reads from its previous commit
//! (at-least-once).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{Result, StorageError};
use super::fs::{with_suffix, OpenMode, SharedFs, StorageFile};
use super::fsutil::{rewrite_unsynced, sync_dir, write_synced, TMP_SUFFIX};
use super::policy::FsyncPolicy;

pub const JOURNAL_FILE: &str = "offsets.journal";
/// Compact once the journal is this many times larger than one entry per group...
pub const COMPACT_RATIO: u64 = 64;
/// ...and at least this large, so small journals are never rewritten.
pub const COMPACT_MIN_BYTES: u64 = 1 << 20;
/// After a failed compaction the journal grows by this much before the next attempt: a disk
/// that keeps failing (full, say) costs one temp-file write per 128 KiB of commits, not one
/// per commit.
pub const COMPACT_RETRY_BYTES: u64 = COMPACT_MIN_BYTES / 8;
/// Bytes of an entry besides the group id (and metadata, when it has some).
const ENTRY_OVERHEAD: usize = 4 + 4 + 2 + 8;
/// Kafka's `offset.metadata.max.bytes` default: the longest metadata string a commit may
/// carry. Bounds what the journal holds per group (and fits its `u16` length).
pub const MAX_OFFSET_METADATA_BYTES: usize = 4096;

/// A group's committed offset and the metadata string its committer attached (empty for a
/// native commit).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Committed {
    /// The next offset the group reads.
    pub offset: u64,
    /// Free text from a Kafka client's OffsetCommit, returned by OffsetFetch.
    pub metadata: String,
}

/// Committed offsets of the groups of one partition.
#[derive(Debug)]
pub struct OffsetStore {
    path: PathBuf,
    file: Box<dyn StorageFile>,
    fs: SharedFs,
    committed: BTreeMap<String, Committed>,
    journal_len: u64,
    /// `journal_len` at the last successful sync by this process; what a failed sync writes
    /// again from. 0 at open: entries a previous process wrote may never have been synced.
    synced_len: u64,
    fsync: FsyncPolicy,
    dirty: bool,
    /// A compaction renamed its file over the journal but could not sync the directory: the
    /// next sync does that first, or a power loss could bring back the old journal without
    /// the commits written since.
    rename_unsynced: bool,
    /// The journal existed at open: the open that created it synced the directory, unless
    /// that process died first. Its first sync of a commit syncs the directory too, once, so
    /// a synced commit never depends on a name nobody synced (and an open costs no fsync).
    name_unproven: bool,
    /// No compaction below this journal length: set after a failed one (see
    /// [`COMPACT_RETRY_BYTES`]).
    compact_retry_len: u64,
    scratch: Vec<u8>,
    /// Counts the files that have been the journal (a compaction replaces it): the result of
    /// an interval sync of an older one says nothing about the current one.
    generation: u64,
    /// A second handle to the journal (of `generation`) for interval syncs on another
    /// thread, so that they never hold up a commit's write (a pooled handle is locked for the
    /// whole of a call).
    sync_file: Option<(u64, Arc<dyn StorageFile>)>,
}

/// The blocking half of an interval sync of the journal (see [`OffsetStore::begin_sync`]).
#[derive(Debug)]
pub struct OffsetsSyncJob {
    fs: SharedFs,
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    /// Sync the directory first (the journal's name is not proven durable yet).
    sync_dir_first: bool,
    len: u64,
    generation: u64,
}

/// What an [`OffsetsSyncJob`] did, for [`OffsetStore::finish_sync`].
#[derive(Debug)]
pub struct OffsetsSynced {
    synced_dir: bool,
    len: u64,
    generation: u64,
    result: Result<()>,
}

impl OffsetsSyncJob {
    /// Syncs the directory if needed, then `fdatasync`s the journal. Blocks.
    pub fn run(self) -> OffsetsSynced {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let result = if self.sync_dir_first {
            sync_dir(self.fs.as_ref(), dir)
        } else {
            Ok(())
        };
        let result = result.and_then(|()| {
            self.file
                .sync_data()
                .map_err(|e| StorageError::io("fdatasync offsets journal", &self.path, e))
        });
        OffsetsSynced {
            synced_dir: self.sync_dir_first,
            len: self.len,
            generation: self.generation,
            result,
        }
    }
}

impl OffsetStore {
    #[cfg(any(test, feature = "internals"))]
    /// Opens (creating) `dir/offsets.journal`, replays it, cuts a torn tail and compacts it
    /// when it is mostly superseded entries.
    ///
    /// # Errors
    /// `Io` when the file cannot be read, cut or rewritten.
    pub fn open(dir: &Path, fsync: FsyncPolicy) -> Result<Self> {
        Self::open_with(&super::fs::os(), dir, fsync)
    }

    /// As [`OffsetStore::open`], on the file system `fs`.
    ///
    /// # Errors
    /// As [`OffsetStore::open`].
    pub fn open_with(fs: &SharedFs, dir: &Path, fsync: FsyncPolicy) -> Result<Self> {
        let path = dir.join(JOURNAL_FILE);
        let (file, created) = open_journal(fs, &path)?;
        let bytes = read_whole(file.as_ref(), &path)?;
        let (committed, valid_len) = replay(&bytes);
        if valid_len < bytes.len() {
            tracing::warn!(
                path = %path.display(), position = valid_len, bytes_cut = bytes.len() - valid_len,
                "cut a torn entry from the offsets journal"
            );
            file.set_len(valid_len as u64)
                .map_err(|e| StorageError::io("truncate offsets journal", &path, e))?;
        }
        // A journal just created is lost with its directory entry unless the directory is
        // synced: every commit in it, however well synced, would go with it.
        if created {
            sync_dir(fs.as_ref(), dir)?;
        }
        let mut store = OffsetStore {
            path,
            file,
            fs: fs.clone(),
            committed,
            journal_len: valid_len as u64,
            synced_len: 0,
            fsync,
            dirty: false,
            rename_unsynced: false,
            name_unproven: !created,
            compact_retry_len: 0,
            scratch: Vec::new(),
            generation: 0,
            sync_file: None,
        };
        // The journal as it is serves: a compaction that fails does not fail the open.
        store.compact_if_due();
        Ok(store)
    }

    /// The committed offset of `group`: the offset it will read next.
    pub fn get(&self, group: &str) -> Option<u64> {
        self.committed.get(group).map(|c| c.offset)
    }

    /// The committed offset of `group` with its metadata.
    pub fn get_with_metadata(&self, group: &str) -> Option<&Committed> {
        self.committed.get(group)
    }

    /// Every group with a commit, and its committed offset.
    pub fn all(&self) -> impl Iterator<Item = (&str, u64)> {
        self.committed.iter().map(|(g, c)| (g.as_str(), c.offset))
    }

    /// Records `group`'s committed offset, without metadata. Returns once the entry is in
    /// the OS (and synced under `Always`). The caller has validated the group id and the
    /// offset.
    ///
    /// # Errors
    /// `Io` when the write fails; the commit is then not recorded.
    pub fn commit(&mut self, group: &str, committed_offset: u64) -> Result<()> {
        self.commit_with_metadata(group, committed_offset, "")
    }

    /// As [`OffsetStore::commit`], keeping `metadata` with the offset (a commit replaces
    /// both).
    ///
    /// # Errors
    /// `OffsetMetadataTooLarge` past [`MAX_OFFSET_METADATA_BYTES`] (nothing written); `Io`
    /// when the write fails (the commit is then not recorded).
    pub fn commit_with_metadata(
        &mut self,
        group: &str,
        committed_offset: u64,
        metadata: &str,
    ) -> Result<()> {
        if metadata.len() > MAX_OFFSET_METADATA_BYTES {
            return Err(StorageError::OffsetMetadataTooLarge {
                size: metadata.len(),
                max: MAX_OFFSET_METADATA_BYTES,
            });
        }
        self.scratch.clear();
        encode_entry(&mut self.scratch, group, committed_offset, metadata);
        if let Err(e) = self.file.write_all_at(&self.scratch, self.journal_len) {
            // Cut a partial entry so the next one is not appended behind garbage.
            let _ = self.file.set_len(self.journal_len);
            self.synced_len = self.synced_len.min(self.journal_len);
            return Err(StorageError::io("append to offsets journal", &self.path, e));
        }
        self.journal_len += self.scratch.len() as u64;
        if self.fsync == FsyncPolicy::Always {
            self.sync_journal()?;
        } else {
            self.dirty = true;
        }
        let committed = Committed {
            offset: committed_offset,
            metadata: metadata.to_owned(),
        };
        self.committed.insert(group.to_owned(), committed);
        // The commit took effect whatever the compaction does.
        self.compact_if_due();
        Ok(())
    }

    /// Forgets `group`'s committed offset (Kafka's OffsetDelete and DeleteGroups): the
    /// journal is rewritten without it (temp file, fsync, rename, directory sync), so a
    /// deletion is rare and costs a rewrite. `false` when the group had no commit here.
    ///
    /// # Errors
    /// `Io` when the journal cannot be rewritten; the group then keeps its commit.
    pub fn forget(&mut self, group: &str) -> Result<bool> {
        let Some(old) = self.committed.remove(group) else {
            return Ok(false);
        };
        let generation = self.generation;
        match self.compact() {
            Ok(()) => Ok(true),
            // The rewritten journal replaced the old one; only the directory sync failed,
            // which the next sync does first (`rename_unsynced`).
            Err(e) if self.generation != generation => {
                tracing::warn!(path = %self.path.display(), error = %e, "offsets journal rewritten without a group; its directory sync is retried");
                Ok(true)
            }
            Err(e) => {
                self.committed.insert(group.to_owned(), old);
                Err(e)
            }
        }
    }

    /// `fdatasync`s the journal if a commit was written since the last sync.
    ///
    /// # Errors
    /// `Io` when the sync (or a compaction's pending directory sync) fails.
    pub fn sync(&mut self) -> Result<()> {
        if self.dirty || self.rename_unsynced {
            self.sync_journal()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Starts an interval sync: the job that syncs the commits written so far (and the
    /// directory, when the journal's name is not proven durable), or `None` when there is
    /// nothing to sync. The journal counts as clean from here on until the next commit; the
    /// owner keeps at most one job in flight and hands its result to
    /// [`OffsetStore::finish_sync`].
    ///
    /// # Errors
    /// `Io` when the journal cannot be opened for the sync.
    pub fn begin_sync(&mut self) -> Result<Option<OffsetsSyncJob>> {
        if !(self.dirty || self.rename_unsynced) {
            return Ok(None);
        }
        let file = match &self.sync_file {
            Some((generation, file)) if *generation == self.generation => file.clone(),
            _ => {
                let file: Arc<dyn StorageFile> = self
                    .fs
                    .open(&self.path, OpenMode::Existing)
                    .map_err(|e| StorageError::io("open offsets journal to sync", &self.path, e))?
                    .into();
                self.sync_file = Some((self.generation, file.clone()));
                file
            }
        };
        self.dirty = false;
        Ok(Some(OffsetsSyncJob {
            fs: self.fs.clone(),
            file,
            path: self.path.clone(),
            sync_dir_first: self.rename_unsynced || self.name_unproven,
            len: self.journal_len,
            generation: self.generation,
        }))
    }

    /// Applies a finished [`OffsetsSyncJob`]: on success the commits it covered count as
    /// synced (unless a compaction replaced the journal meanwhile: the new one was synced by
    /// the compaction).
    ///
    /// # Errors
    /// `Io` when the sync failed: the unsynced entries have been written again and the store
    /// must be reopened (a failed sync is never retried).
    pub fn finish_sync(&mut self, done: OffsetsSynced) -> Result<()> {
        let current = done.generation == self.generation;
        match done.result {
            Ok(()) if current => {
                self.synced_len = self.synced_len.max(done.len.min(self.journal_len));
                if done.synced_dir {
                    self.rename_unsynced = false;
                    self.name_unproven = false;
                }
                Ok(())
            }
            Ok(()) => Ok(()),
            Err(e) => {
                if current {
                    rewrite_unsynced(
                        self.file.as_ref(),
                        &self.path,
                        self.synced_len,
                        self.journal_len,
                    );
                }
                self.dirty = true;
                Err(e)
            }
        }
    }

    /// `fdatasync`s the journal. After a failure the unsynced entries are written again, so
    /// their pages are dirty and the next sync persists them (see [`rewrite_unsynced`]).
    fn sync_journal(&mut self) -> Result<()> {
        if self.rename_unsynced || self.name_unproven {
            sync_dir(self.fs.as_ref(), self.dir())?;
            self.rename_unsynced = false;
            self.name_unproven = false;
        }
        match self.file.sync_data() {
            Ok(()) => {
                self.synced_len = self.journal_len;
                Ok(())
            }
            Err(e) => {
                rewrite_unsynced(
                    self.file.as_ref(),
                    &self.path,
                    self.synced_len,
                    self.journal_len,
                );
                Err(StorageError::io("fdatasync offsets journal", &self.path, e))
            }
        }
    }

    fn live_len(&self) -> u64 {
        self.committed
            .iter()
            .map(|(g, c)| entry_len(g, &c.metadata) as u64)
            .sum()
    }

    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    fn needs_compaction(&self) -> bool {
        self.journal_len >= COMPACT_MIN_BYTES.max(self.compact_retry_len)
            && self.journal_len > COMPACT_RATIO * self.live_len()
    }

    /// Compacts when the journal is due for it. A failure is logged, never returned: the
    /// uncompacted journal is valid, and the compaction is tried again once the journal has
    /// grown by [`COMPACT_RETRY_BYTES`] (or at the next open).
    fn compact_if_due(&mut self) {
        if !self.needs_compaction() {
            return;
        }
        if let Err(e) = self.compact() {
            self.compact_retry_len = self.journal_len + COMPACT_RETRY_BYTES;
            tracing::warn!(
                path = %self.path.display(), error = %e, retry_at_bytes = self.compact_retry_len,
                "cannot compact the offsets journal; it stays valid as it is, will retry"
            );
        }
    }

    /// Rewrites the journal with one entry per group: temp file, fsync, rename, directory
    /// sync. The temp file's handle becomes the journal's, so once the rename is done every
    /// later commit goes to the compacted file, whatever fails after.
    fn compact(&mut self) -> Result<()> {
        let mut bytes = Vec::with_capacity(self.live_len() as usize);
        for (group, c) in &self.committed {
            encode_entry(&mut bytes, group, c.offset, &c.metadata);
        }
        let tmp = with_suffix(&self.path, TMP_SUFFIX);
        let file = write_synced(self.fs.as_ref(), &tmp, &bytes)?;
        self.fs
            .rename(&tmp, &self.path)
            .map_err(|e| StorageError::io("rename", &self.path, e))?;
        tracing::debug!(path = %self.path.display(), from = self.journal_len, to = bytes.len(), "compacted offsets journal");
        self.file = file;
        self.generation += 1;
        self.sync_file = None;
        self.journal_len = bytes.len() as u64;
        self.synced_len = self.journal_len;
        self.dirty = false;
        self.compact_retry_len = 0;
        self.rename_unsynced = true;
        sync_dir(self.fs.as_ref(), self.dir())?;
        self.rename_unsynced = false;
        self.name_unproven = false;
        Ok(())
    }
}

/// Opens the journal at `path`, creating it if absent; `true` when it was created.
fn open_journal(fs: &SharedFs, path: &Path) -> Result<(Box<dyn StorageFile>, bool)> {
    let opened = match fs.open(path, OpenMode::Existing) {
        Ok(file) => Ok((file, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs
            .open(path, OpenMode::CreateIfMissing)
            .map(|file| (file, true)),
        Err(e) => Err(e),
    };
    opened.map_err(|e| StorageError::io("open offsets journal", path, e))
}

/// The whole content of `file`.
fn read_whole(file: &dyn StorageFile, path: &Path) -> Result<Vec<u8>> {
    let read = file.size().and_then(|len| {
        let mut bytes = vec![0; len as usize];
        file.read_exact_at(&mut bytes, 0).map(|()| bytes)
    });
    read.map_err(|e| StorageError::io("read offsets journal", path, e))
}

/// The bytes of `group`'s entry with `metadata`.
fn entry_len(group: &str, metadata: &str) -> usize {
    let metadata_len = match metadata.len() {
        0 => 0,
        n => 2 + n,
    };
    ENTRY_OVERHEAD + group.len() + metadata_len
}

/// Appends one entry; the short form when `metadata` is empty (see the module docs). The
/// caller keeps `metadata` within [`MAX_OFFSET_METADATA_BYTES`].
fn encode_entry(buf: &mut Vec<u8>, group: &str, offset: u64, metadata: &str) {
    let length = (entry_len(group, metadata) - 8) as u32;
    let start = buf.len();
    buf.extend_from_slice(&length.to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&(group.len() as u16).to_le_bytes());
    buf.extend_from_slice(group.as_bytes());
    buf.extend_from_slice(&offset.to_le_bytes());
    if !metadata.is_empty() {
        buf.extend_from_slice(&(metadata.len() as u16).to_le_bytes());
        buf.extend_from_slice(metadata.as_bytes());
    }
    let crc = crc32c::crc32c(&buf[start + 8..]);
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Replays entries until the first one that does not verify; returns the offsets and the
/// length of the valid prefix.
fn replay(bytes: &[u8]) -> (BTreeMap<String, Committed>, usize) {
    let mut committed = BTreeMap::new();
    let mut at = 0;
    while let Some((group, commit, len)) = decode_entry(&bytes[at..]) {
        committed.insert(group, commit);
        at += len;
    }
    (committed, at)
}

fn decode_entry(buf: &[u8]) -> Option<(String, Committed, usize)> {
    let length = u32::from_le_bytes(buf.get(0..4)?.try_into().ok()?) as usize;
    let body = buf.get(8..8usize.checked_add(length)?)?;
    if length < 10 || u32::from_le_bytes(buf[4..8].try_into().ok()?) != crc32c::crc32c(body) {
        return None;
    }
    let group_len = u16::from_le_bytes(body[0..2].try_into().ok()?) as usize;
    let offset_end = 2 + group_len + 8;
    let metadata = match length.checked_sub(offset_end)? {
        0 => String::new(),
        _ => {
            let metadata_len =
                u16::from_le_bytes(body.get(offset_end..offset_end + 2)?.try_into().ok()?);
            let metadata_len = metadata_len as usize;
            if offset_end + 2 + metadata_len != length || metadata_len > MAX_OFFSET_METADATA_BYTES {
                return None;
            }
            std::str::from_utf8(&body[offset_end + 2..])
                .ok()?
                .to_owned()
        }
    };
    let group = std::str::from_utf8(&body[2..2 + group_len])
        .ok()?
        .to_owned();
    let offset = u64::from_le_bytes(body[2 + group_len..offset_end].try_into().ok()?);
    Some((group, Committed { offset, metadata }, 8 + length))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_survive_reopen_and_last_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        store.commit("g1", 5).unwrap();
        store.commit("g2", 7).unwrap();
        store.commit("g1", 9).unwrap();
        drop(store); // no clean shutdown needed: every commit is already in the OS
        let store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        assert_eq!(store.get("g1"), Some(9));
        assert_eq!(store.get("g2"), Some(7));
        assert_eq!(store.get("g3"), None);
    }

    #[test]
    fn metadata_is_kept_with_its_offset_across_reopen_and_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        store
            .commit_with_metadata("kafka", 42, "Hello\0world!")
            .unwrap();
        store.commit_with_metadata("replaced", 1, "first").unwrap();
        store.commit("replaced", 2).unwrap(); // a commit replaces both
        let longest = "m".repeat(MAX_OFFSET_METADATA_BYTES);
        store.commit_with_metadata("longest", 3, &longest).unwrap();
        let too_long = "m".repeat(MAX_OFFSET_METADATA_BYTES + 1);
        let len = store.journal_len;
        let refused = store.commit_with_metadata("kafka", 43, &too_long);
        assert!(matches!(
            refused,
            Err(StorageError::OffsetMetadataTooLarge { size, max: MAX_OFFSET_METADATA_BYTES })
                if size == MAX_OFFSET_METADATA_BYTES + 1
        ));
        assert_eq!(store.journal_len, len, "nothing written");
        let expect = |store: &OffsetStore| {
            let kafka = store.get_with_metadata("kafka").unwrap();
            assert_eq!(
                (kafka.offset, kafka.metadata.as_str()),
                (42, "Hello\0world!")
            );
            let replaced = store.get_with_metadata("replaced").unwrap();
            assert_eq!((replaced.offset, replaced.metadata.as_str()), (2, ""));
            assert_eq!(
                store.get_with_metadata("longest").unwrap().metadata,
                longest
            );
        };
        expect(&store);
        drop(store);
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        expect(&store);
        store.compact().unwrap();
        drop(store);
        expect(&OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap());
    }

    /// A journal as written before commits had metadata: every entry in the short form,
    /// spelled out here byte by byte rather than by today's encoder.
    #[test]
    fn a_journal_from_before_metadata_reads_and_takes_commits_with_metadata() {
        let mut old = Vec::new();
        for (group, offset) in [("g1", 5u64), ("g2", 7), ("g1", 9)] {
            let mut body = Vec::new();
            body.extend_from_slice(&(group.len() as u16).to_le_bytes());
            body.extend_from_slice(group.as_bytes());
            body.extend_from_slice(&offset.to_le_bytes());
            old.extend_from_slice(&(body.len() as u32).to_le_bytes());
            old.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
            old.extend_from_slice(&body);
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(JOURNAL_FILE), &old).unwrap();
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        assert_eq!(store.journal_len, old.len() as u64, "nothing was cut");
        assert_eq!((store.get("g1"), store.get("g2")), (Some(9), Some(7)));
        assert_eq!(store.get_with_metadata("g1").unwrap().metadata, "");
        store.commit_with_metadata("g2", 8, "meta").unwrap();
        drop(store);
        let store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        assert_eq!(store.get("g1"), Some(9));
        let g2 = store.get_with_metadata("g2").unwrap();
        assert_eq!((g2.offset, g2.metadata.as_str()), (8, "meta"));
        // A commit without metadata is still written in the old form.
        let mut short = Vec::new();
        encode_entry(&mut short, "g1", 9, "");
        assert_eq!(short, old[old.len() - short.len()..]);
    }

    #[test]
    fn a_torn_entry_with_metadata_is_cut_and_earlier_commits_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        store.commit_with_metadata("g", 1, "one").unwrap();
        let kept = store.journal_len as usize;
        store.commit_with_metadata("g", 2, "two").unwrap();
        drop(store);
        let bytes = std::fs::read(dir.path().join(JOURNAL_FILE)).unwrap();
        for len in kept..bytes.len() {
            let copy = tempfile::tempdir().unwrap();
            std::fs::write(copy.path().join(JOURNAL_FILE), &bytes[..len]).unwrap();
            let store = OffsetStore::open(copy.path(), FsyncPolicy::Never).unwrap();
            let g = store.get_with_metadata("g").unwrap();
            assert_eq!((g.offset, g.metadata.as_str()), (1, "one"), "cut at {len}");
            assert_eq!(store.journal_len as usize, kept);
        }
    }

    #[test]
    fn a_torn_last_entry_is_cut_and_earlier_commits_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        store.commit("g", 1).unwrap();
        store.commit("g", 2).unwrap();
        drop(store);
        let path = dir.path().join(JOURNAL_FILE);
        let len = std::fs::metadata(&path).unwrap().len();
        for cut in 1..(ENTRY_OVERHEAD as u64 + 1) {
            let copy = tempfile::tempdir().unwrap();
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(
                copy.path().join(JOURNAL_FILE),
                &bytes[..(len - cut) as usize],
            )
            .unwrap();
            let store = OffsetStore::open(copy.path(), FsyncPolicy::Never).unwrap();
            assert_eq!(store.get("g"), Some(1), "cut {cut} bytes");
            let mut store = store;
            store.commit("g", 3).unwrap();
            drop(store);
            assert_eq!(
                OffsetStore::open(copy.path(), FsyncPolicy::Never)
                    .unwrap()
                    .get("g"),
                Some(3)
            );
        }
    }

    #[test]
    fn a_forgotten_group_stays_forgotten_after_a_reopen_and_the_others_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Always).unwrap();
        store.commit("gone", 5).unwrap();
        store.commit_with_metadata("kept", 7, "meta").unwrap();
        assert!(store.forget("gone").unwrap());
        assert!(!store.forget("gone").unwrap(), "nothing left to forget");
        assert_eq!(store.get("gone"), None);
        store.commit("kept", 8).unwrap();
        drop(store);
        let store = OffsetStore::open(dir.path(), FsyncPolicy::Always).unwrap();
        assert_eq!(store.get("gone"), None);
        assert_eq!(store.get("kept"), Some(8));
    }

    #[test]
    fn compaction_keeps_every_group_and_shrinks_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        let per_entry = (ENTRY_OVERHEAD + 2) as u64;
        let commits = COMPACT_MIN_BYTES / per_entry + 10;
        let mut expected = BTreeMap::new();
        for i in 0..commits {
            let group = ["g0", "g1"][(i % 2) as usize];
            store.commit(group, i).unwrap();
            expected.insert(group, i);
        }
        let len = std::fs::metadata(dir.path().join(JOURNAL_FILE))
            .unwrap()
            .len();
        assert!(
            len < COMPACT_MIN_BYTES,
            "journal was not compacted: {len} bytes"
        );
        drop(store);
        let store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        for (group, offset) in expected {
            assert_eq!(store.get(group), Some(offset));
        }
    }

    use crate::storage::fs::FileSystem;
    use crate::storage::sim::{FaultOp, SimFs};

    const SIM_DIR: &str = "/sim/topic_0";

    fn sim_store(sim: &SimFs) -> Result<OffsetStore> {
        let fs: SharedFs = std::sync::Arc::new(sim.clone());
        OffsetStore::open_with(&fs, Path::new(SIM_DIR), FsyncPolicy::Never)
    }

    fn journal_len(sim: &SimFs) -> u64 {
        sim.contents(&Path::new(SIM_DIR).join(JOURNAL_FILE))
            .unwrap()
            .len() as u64
    }

    /// Commits of one group until the journal holds `bytes`.
    fn commit_until(store: &mut OffsetStore, sim: &SimFs, bytes: u64, next: &mut u64) {
        while store.journal_len < bytes {
            store
                .commit("g", *next)
                .expect("a commit whose entry was written succeeds");
            *next += 1;
        }
        assert_eq!(store.journal_len, journal_len(sim));
    }

    #[test]
    fn a_failed_compaction_does_not_fail_the_commit_it_follows_and_is_retried_later() {
        let sim = SimFs::new(1);
        let mut store = sim_store(&sim).unwrap();
        let tmp = format!("{JOURNAL_FILE}{}", crate::storage::fsutil::TMP_SUFFIX);
        sim.inject(&tmp, FaultOp::Write, std::io::ErrorKind::StorageFull, 1);
        let mut next = 0;
        commit_until(&mut store, &sim, COMPACT_MIN_BYTES, &mut next);
        assert_eq!(sim.stats().faults_fired, 1, "the compaction was attempted");
        assert_eq!(store.get("g"), Some(next - 1));
        assert!(journal_len(&sim) >= COMPACT_MIN_BYTES, "not compacted yet");
        // A later commit compacts once the journal has grown a little more.
        let before = journal_len(&sim);
        while journal_len(&sim) >= before {
            assert!(
                store.journal_len < COMPACT_MIN_BYTES + 2 * COMPACT_RETRY_BYTES,
                "compaction never retried"
            );
            store.commit("g", next).unwrap();
            next += 1;
        }
        assert!(journal_len(&sim) < COMPACT_MIN_BYTES);
        drop(store);
        assert_eq!(sim_store(&sim).unwrap().get("g"), Some(next - 1));
    }

    #[test]
    fn a_failed_compaction_at_open_leaves_the_uncompacted_journal_in_use() {
        let sim = SimFs::new(2);
        let mut store = sim_store(&sim).unwrap();
        let mut next = 0;
        // Just below the size that compacts, then one more entry behind the store's back, so
        // that the next open is the one to compact.
        commit_until(
            &mut store,
            &sim,
            COMPACT_MIN_BYTES - ENTRY_OVERHEAD as u64,
            &mut next,
        );
        drop(store);
        let path = Path::new(SIM_DIR).join(JOURNAL_FILE);
        let mut entry = Vec::new();
        encode_entry(&mut entry, "g", next, "");
        let len = journal_len(&sim);
        sim.open(&path, OpenMode::Existing)
            .unwrap()
            .write_all_at(&entry, len)
            .unwrap();
        assert!(len + entry.len() as u64 >= COMPACT_MIN_BYTES);
        let tmp = format!("{JOURNAL_FILE}{}", crate::storage::fsutil::TMP_SUFFIX);
        sim.inject(&tmp, FaultOp::Sync, std::io::ErrorKind::Other, 1);
        let mut store = sim_store(&sim).expect("the uncompacted journal is valid");
        assert_eq!(sim.stats().faults_fired, 1, "the compaction was attempted");
        assert_eq!(store.get("g"), Some(next));
        store.commit("g", next + 1).unwrap();
        drop(store);
        assert_eq!(sim_store(&sim).unwrap().get("g"), Some(next + 1));
        assert!(
            journal_len(&sim) < COMPACT_MIN_BYTES,
            "compacted by a later open"
        );
    }
}
