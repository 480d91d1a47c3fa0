//! `PooledFs`: a [`FileSystem`] wrapper that bounds the descriptors the partitions' files hold
//! (like RocksDB's `max_open_files`).
//!
//! # Why
//! A partition keeps several files open for its whole life (the active segment and its indexes,
//! `log_start_offset`, `offsets.journal`, plus every sealed segment). Kept open for real, a
//! few hundred partitions exhaust the common soft limit of 1024 descriptors. Instead, every
//! file opened through a `PooledFs` is a handle whose descriptor the pool may close when the
//! broker-wide budget is reached, and which reopens it on its next use.
//!
//! # Design
//! - Each handle ([`PooledFile`]) is a slot: a mutex around its path and its descriptor (if
//!   open), and an atomic "recently used" bit. A read or write on an open file takes only
//!   that slot's mutex (uncontended: a file has one user) and sets the bit: no global lock
//!   on the hot path.
//! - The global mutex guards the count of open descriptors and the CLOCK ring of the slots
//!   that hold one. It is taken only to open (or reopen) and to close. When the budget is
//!   reached, the clock hand gives each recently used slot a second chance (clears its bit)
//!   and closes the first one that was not used since the hand last passed.
//! - Lock order is slot, then global; an evictor holding the global lock only `try_lock`s
//!   its victims and skips a busy one, so two threads evicting each other's files cannot
//!   deadlock. Every open slot that is locked is in the middle of one I/O call (no slot op
//!   opens another file), so when all candidates are busy the evictor yields and retries.
//!   Only when every open file is pinned (below) does an open go over the budget.
//! - The first open uses the caller's [`OpenMode`] (it may create or truncate); a reopen is
//!   always [`OpenMode::Existing`]: a file is never truncated, or created empty, twice.
//! - A file removed, or renamed, through the pool while handles to it are alive: those
//!   handles are first made to hold a descriptor (reopened if evicted) and pinned (never
//!   evicted) across the operation, so a handle never reopens a stale path and reaches the
//!   wrong file, or none. A renamed file's handles then follow it to its new name and are
//!   evictable again; a removed or replaced file's handles stay pinned until dropped (the
//!   inode is only reachable through them). Paths must be spelled the same way for the same
//!   file (the engine always builds them with `dir.join(name)`).
//!
//! # Durability across a reopen
//! Closing a descriptor does not drop the file's dirty pages: they belong to the inode, and
//! on Linux `fsync`/`fdatasync` through any descriptor of the inode writes all of them,
//! including bytes written through an earlier, since-closed descriptor. So an eviction
//! between a write and its sync loses nothing. ([`super::sim::SimFs`] models the same: its
//! unsynced writes belong to the file, not to a handle.) A writeback error that no
//! descriptor has seen yet is reported to the first sync through a descriptor opened after it
//! on current kernels (`errseq_t`); the engine treats any failed sync as fatal for the
//! partition anyway.
//!
//! # What the budget counts
//! Every descriptor opened through the pool, including those that live for one call only
//! (`read` of a whole small file, `list`, `sync_dir`) while they are open: many partitions
//! syncing their directories at once (sealing threads) must not run the process out either.
//! Outside it: the data-dir lock, topic configs, the runtime's own descriptors (epoll,
//! eventfd, sockets) and the application's. Hence the default budget is half the process's
//! soft limit.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::fs::{FileSystem, OpenMode, SharedFs, StorageFile};

/// The smallest budget the builder accepts: room for every thread that may do I/O at once
/// (the I/O threads, sealing threads) plus the handles pinned across a remove or rename.
pub const MIN_OPEN_FILES: usize = 16;
/// The default budget never exceeds this, whatever the process limit (an unlimited soft limit
/// would otherwise mean an unbounded number of descriptors).
pub const MAX_DEFAULT_OPEN_FILES: usize = 65_536;
/// The default budget when the process limit cannot be read.
pub const FALLBACK_OPEN_FILES: usize = 512;

/// The process's soft `RLIMIT_NOFILE`; `None` when it is unlimited or cannot be read.
pub fn soft_nofile_limit() -> Option<u64> {
    read_nofile_limit().ok().flatten()
}

/// The soft `RLIMIT_NOFILE`: `Ok(None)` when unlimited.
fn read_nofile_limit() -> io::Result<Option<u64>> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` through a valid pointer and has no other effect.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur))
}

/// The default `max_open_files`: half the process's soft descriptor limit (the other half is
/// headroom for everything outside the pool), at least [`MIN_OPEN_FILES`], at most
/// [`MAX_DEFAULT_OPEN_FILES`] (also when the limit is unlimited); [`FALLBACK_OPEN_FILES`]
/// when the limit cannot be read.
pub fn default_max_open_files() -> usize {
    match read_nofile_limit() {
        Ok(Some(soft)) => usize::try_from(soft / 2)
            .unwrap_or(MAX_DEFAULT_OPEN_FILES)
            .clamp(MIN_OPEN_FILES, MAX_DEFAULT_OPEN_FILES),
        Ok(None) => MAX_DEFAULT_OPEN_FILES,
        Err(e) => {
            tracing::warn!(error = %e, fallback = FALLBACK_OPEN_FILES, "cannot read the descriptor limit");
            FALLBACK_OPEN_FILES
        }
    }
}

/// The error a pooled open returns when the process is out of descriptors (EMFILE) or the
/// system is (ENFILE): it names the budget and the limit, and says what to do.
#[derive(Debug)]
pub struct DescriptorLimit {
    max_open_files: usize,
    soft_limit: Option<u64>,
    source: io::Error,
}

impl fmt::Display for DescriptorLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = match self.soft_limit {
            Some(soft) => format!("the process may open {soft} (soft RLIMIT_NOFILE)"),
            None => "the process limit is unknown".to_owned(),
        };
        write!(
            f,
            "out of file descriptors ({}): the broker keeps at most {} partition files open \
             (max_open_files) and {limit}; descriptors outside the broker's files use the rest. \
             Lower max_open_files, raise the limit (ulimit -n), or close descriptors elsewhere \
             in the process",
            self.source, self.max_open_files
        )
    }
}

impl std::error::Error for DescriptorLimit {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A [`FileSystem`] whose open files share a budget of descriptors; see the module docs.
/// Share one per broker as a [`SharedFs`].
pub struct PooledFs {
    inner: SharedFs,
    pool: Arc<Pool>,
}

struct Pool {
    budget: usize,
    /// For error messages.
    soft_limit: Option<u64>,
    state: Mutex<PoolState>,
    /// Handles being dropped: their descriptor is closed before the count goes down, so
    /// meanwhile an evictor that finds nothing must wait for it rather than overflow.
    closing: AtomicUsize,
}

#[derive(Default)]
struct PoolState {
    /// Descriptors held by slots (counted from before they are opened until after they are
    /// closed, so the real number never exceeds this).
    open: usize,
    /// The largest `open` seen (tests check the budget with it).
    peak: usize,
    /// Of `open`: descriptors of one call (`read`, `list`, `sync_dir`), not in the ring.
    transient: usize,
    /// CLOCK ring: the slots that hold (or are about to hold) a descriptor. May also hold
    /// dropped slots and closed ones: both are removed when the hand meets them.
    ring: Vec<Weak<Slot>>,
    hand: usize,
    /// Live handles by current path, for `remove_file` and `rename`.
    by_path: HashMap<PathBuf, Vec<Weak<Slot>>>,
}

struct Slot {
    /// Set by every use; cleared by the clock hand (second chance).
    referenced: AtomicBool,
    file: Mutex<SlotFile>,
}

struct SlotFile {
    path: PathBuf,
    open: Option<Box<dyn StorageFile>>,
    /// Never evicted: the file was removed or replaced (or is being renamed) while open.
    pinned: bool,
}

/// A file opened through a [`PooledFs`]: its descriptor may be closed by the pool while it
/// is idle and is reopened (never truncated) on the next use.
pub struct PooledFile {
    slot: Arc<Slot>,
    pool: Arc<Pool>,
    inner: SharedFs,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock leaves plain data behind (a count, an optional file).
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl PooledFs {
    /// Wraps `inner` so that at most `max_open_files` of the files opened through it hold a
    /// descriptor at once (more only when every one of them is pinned; see the module docs).
    /// `max_open_files` of 0 is taken as 1.
    pub fn new(inner: SharedFs, max_open_files: usize) -> Self {
        PooledFs {
            inner,
            pool: Arc::new(Pool {
                budget: max_open_files.max(1),
                soft_limit: soft_nofile_limit(),
                state: Mutex::new(PoolState::default()),
                closing: AtomicUsize::new(0),
            }),
        }
    }

    #[cfg(test)]
    /// The budget.
    pub fn max_open_files(&self) -> usize {
        self.pool.budget
    }

    #[cfg(test)]
    /// Descriptors the pooled files hold now.
    pub fn open_files(&self) -> usize {
        lock(&self.pool.state).open
    }

    #[cfg(test)]
    /// The most descriptors the pooled files ever held at once.
    pub fn peak_open_files(&self) -> usize {
        lock(&self.pool.state).peak
    }

    /// Makes every live handle of `path` hold a descriptor and pins it, so the operation
    /// about to change what `path` names cannot strand it. Returns the slots, each with
    /// whether it was pinned before (to restore).
    fn hold_open(&self, path: &Path) -> io::Result<Vec<(Arc<Slot>, bool)>> {
        let slots: Vec<Arc<Slot>> = lock(&self.pool.state)
            .by_path
            .get(path)
            .map(|slots| slots.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default();
        let mut held = Vec::with_capacity(slots.len());
        for slot in slots {
            let mut file = lock(&slot.file);
            if let Err(e) = self.pool.ensure_open(&slot, &mut file, &self.inner) {
                drop(file);
                unpin(&held);
                return Err(e);
            }
            let was_pinned = std::mem::replace(&mut file.pinned, true);
            drop(file);
            held.push((slot, was_pinned));
        }
        Ok(held)
    }

    /// Runs `op`, which opens a descriptor and closes it before returning (reading a whole
    /// file, listing or syncing a directory), with that descriptor counted in the budget: a
    /// thousand partitions syncing their directories at once must not run the process out.
    fn transient<T>(&self, op: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        self.pool.acquire(None);
        let result = op();
        self.pool.release_transient();
        result.map_err(|e| self.pool.explain(e))
    }

    fn forget_path(&self, path: &Path) -> Vec<Weak<Slot>> {
        lock(&self.pool.state)
            .by_path
            .remove(path)
            .unwrap_or_default()
    }
}

/// Restores the pins [`PooledFs::hold_open`] set.
fn unpin(held: &[(Arc<Slot>, bool)]) {
    for (slot, was_pinned) in held {
        lock(&slot.file).pinned = *was_pinned;
    }
}

impl Pool {
    /// Counts one more descriptor, evicting a slot's first when the budget is reached. For
    /// `Some(slot)` it puts `slot` on the clock ring: the caller opens the file next and calls
    /// [`Pool::release`] if that fails. `None` is a transient descriptor (see
    /// [`PooledFs::transient`]), given back with [`Pool::release_transient`].
    fn acquire(&self, slot: Option<&Arc<Slot>>) {
        loop {
            let mut state = lock(&self.state);
            let mut victim = None;
            let room = state.open < self.budget || {
                let (evicted, in_use) = state.evict_one();
                victim = evicted;
                // Nothing evictable, now or soon: every open file is pinned. Their
                // descriptors cannot be given back; going over the budget is the only way on.
                victim.is_some()
                    || (!in_use
                        && state.transient == 0
                        && self.closing.load(Ordering::Acquire) == 0)
            };
            if room {
                if victim.is_none() && state.open >= self.budget {
                    tracing::warn!(
                        budget = self.budget,
                        open = state.open,
                        "every pooled file is pinned; opening one over max_open_files"
                    );
                }
                state.open += 1;
                state.peak = state.peak.max(state.open);
                match slot {
                    Some(slot) => state.ring.push(Arc::downgrade(slot)),
                    None => state.transient += 1,
                }
                drop(state);
                // Closed outside the global lock; the count already excludes it.
                drop(victim);
                return;
            }
            drop(state);
            // Every candidate was used since the hand last passed or is in the middle of an
            // I/O call on another thread (or a transient descriptor is open, or a handle is
            // being dropped): one will finish, or stay idle, and give its descriptor back.
            std::thread::yield_now();
        }
    }

    /// Gives back a descriptor counted by [`Pool::acquire`] and since closed (or never
    /// opened).
    fn release(&self) {
        let mut state = lock(&self.state);
        state.open = state.open.saturating_sub(1);
    }

    fn release_transient(&self) {
        let mut state = lock(&self.state);
        state.open = state.open.saturating_sub(1);
        state.transient = state.transient.saturating_sub(1);
    }

    /// Opens `file`'s path again if its descriptor was evicted. The caller holds the slot.
    fn ensure_open(
        &self,
        slot: &Arc<Slot>,
        file: &mut SlotFile,
        inner: &SharedFs,
    ) -> io::Result<()> {
        if file.open.is_some() {
            return Ok(());
        }
        let reopened = self.open_counted(slot, || inner.open(&file.path, OpenMode::Existing))?;
        file.open = Some(reopened);
        Ok(())
    }

    /// Runs `open` with a descriptor counted for `slot`; gives it back if `open` fails.
    fn open_counted(
        &self,
        slot: &Arc<Slot>,
        open: impl FnOnce() -> io::Result<Box<dyn StorageFile>>,
    ) -> io::Result<Box<dyn StorageFile>> {
        self.acquire(Some(slot));
        open().map_err(|e| {
            self.release();
            self.explain(e)
        })
    }

    /// EMFILE/ENFILE become a [`DescriptorLimit`] naming the budget and the limit.
    fn explain(&self, e: io::Error) -> io::Error {
        match e.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE) => io::Error::new(
                e.kind(),
                DescriptorLimit {
                    max_open_files: self.budget,
                    soft_limit: self.soft_limit,
                    source: e,
                },
            ),
            _ => e,
        }
    }
}

impl PoolState {
    /// One turn of the clock: takes the descriptor of the first slot that is open, idle since
    /// the hand last passed, not pinned and not locked by another thread. Returns it (to be
    /// closed outside the lock) and whether a slot that is not pinned was skipped (used
    /// again meanwhile, or locked): trying again later can succeed.
    fn evict_one(&mut self) -> (Option<Box<dyn StorageFile>>, bool) {
        let mut in_use = false;
        // Two turns: the first may only clear "recently used" bits.
        let mut steps = 2 * self.ring.len() + 1;
        while steps > 0 && !self.ring.is_empty() {
            if self.hand >= self.ring.len() {
                self.hand = 0;
            }
            let Some(slot) = self.ring[self.hand].upgrade() else {
                self.ring.swap_remove(self.hand);
                continue;
            };
            steps -= 1;
            if slot.referenced.swap(false, Ordering::Relaxed) {
                in_use = true;
                self.hand += 1;
                continue;
            }
            let mut file = match slot.file.try_lock() {
                Ok(file) => file,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    in_use = true;
                    self.hand += 1;
                    continue;
                }
            };
            if file.pinned {
                self.hand += 1;
                continue;
            }
            let evicted = file.open.take();
            drop(file);
            // Open or not (a failed reopen leaves its entry behind), it leaves the ring.
            self.ring.swap_remove(self.hand);
            if let Some(evicted) = evicted {
                self.open -= 1;
                return (Some(evicted), in_use);
            }
        }
        (None, in_use)
    }

    /// Drops ring entries of dropped slots once they outnumber the live ones, so the ring of
    /// a pool that never reaches its budget (no clock turns) stays bounded.
    fn compact_ring(&mut self) {
        if self.ring.len() > 2 * self.open + 64 {
            self.ring.retain(|slot| slot.strong_count() > 0);
            self.hand = 0;
        }
    }
}

impl PooledFile {
    /// Runs `op` on the open file, reopening it first if the pool closed it.
    fn with<T>(&self, op: impl FnOnce(&dyn StorageFile) -> io::Result<T>) -> io::Result<T> {
        let mut file = lock(&self.slot.file);
        self.slot.referenced.store(true, Ordering::Relaxed);
        self.pool.ensure_open(&self.slot, &mut file, &self.inner)?;
        let open = file.open.as_deref().expect("ensure_open opened it");
        op(open)
    }
}

impl Drop for PooledFile {
    fn drop(&mut self) {
        self.pool.closing.fetch_add(1, Ordering::AcqRel);
        let (closed, path) = {
            let mut file = lock(&self.slot.file);
            (file.open.take(), file.path.clone())
        };
        let was_open = closed.is_some();
        // Closed before the count goes down: the budget holds for real descriptors.
        drop(closed);
        let mut state = lock(&self.pool.state);
        if was_open {
            state.open = state.open.saturating_sub(1);
        }
        if let Some(slots) = state.by_path.get_mut(&path) {
            slots.retain(|s| s.strong_count() > 0 && !std::ptr::eq(s.as_ptr(), &*self.slot));
            if slots.is_empty() {
                state.by_path.remove(&path);
            }
        }
        state.compact_ring();
        self.pool.closing.fetch_sub(1, Ordering::AcqRel);
    }
}

impl StorageFile for PooledFile {
    fn size(&self) -> io::Result<u64> {
        self.with(|f| f.size())
    }
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.with(|f| f.read_exact_at(buf, position))
    }
    fn read_exact_at_appending(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        position: u64,
    ) -> io::Result<()> {
        self.with(|f| f.read_exact_at_appending(buf, len, position))
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.with(|f| f.write_all_at(buf, position))
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(|f| f.set_len(len))
    }
    // A sync through a reopened descriptor also persists what was written through the
    // evicted one: see "Durability across a reopen" in the module docs.
    fn sync_data(&self) -> io::Result<()> {
        self.with(|f| f.sync_data())
    }
    fn sync_all(&self) -> io::Result<()> {
        self.with(|f| f.sync_all())
    }
}

impl FileSystem for PooledFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>> {
        let slot = Arc::new(Slot {
            referenced: AtomicBool::new(true),
            file: Mutex::new(SlotFile {
                path: path.to_owned(),
                open: None,
                pinned: false,
            }),
        });
        // Locked while it opens: an evictor must not take the slot for a stale ring entry
        // (open, but not yet holding its file) and drop it from the ring.
        let mut file = lock(&slot.file);
        file.open = Some(
            self.pool
                .open_counted(&slot, || self.inner.open(path, mode))?,
        );
        drop(file);
        lock(&self.pool.state)
            .by_path
            .entry(path.to_owned())
            .or_default()
            .push(Arc::downgrade(&slot));
        Ok(Box::new(PooledFile {
            slot,
            pool: self.pool.clone(),
            inner: self.inner.clone(),
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.transient(|| self.inner.read(path))
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let held = self.hold_open(path)?;
        match self.inner.remove_file(path) {
            Ok(()) => {
                // Their inode is gone from the directory: they stay pinned until dropped.
                self.forget_path(path);
                Ok(())
            }
            Err(e) => {
                unpin(&held);
                Err(e)
            }
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let replaced = self.hold_open(to)?;
        let moved = match self.hold_open(from) {
            Ok(moved) => moved,
            Err(e) => {
                unpin(&replaced);
                return Err(e);
            }
        };
        if let Err(e) = self.inner.rename(from, to) {
            unpin(&replaced);
            unpin(&moved);
            return Err(e);
        }
        // The replaced file's handles keep their pins (its inode has no name any more); the
        // moved file's handles follow it to `to` and may be evicted again.
        self.forget_path(to);
        let moved_slots = self.forget_path(from);
        for (slot, was_pinned) in &moved {
            let mut file = lock(&slot.file);
            file.path = to.to_owned();
            file.pinned = *was_pinned;
        }
        if !moved_slots.is_empty() {
            lock(&self.pool.state)
                .by_path
                .insert(to.to_owned(), moved_slots);
        }
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.transient(|| self.inner.list(dir))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.transient(|| self.inner.sync_dir(dir))
    }
}

impl fmt::Debug for PooledFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledFs")
            .field("inner", &self.inner)
            .field("max_open_files", &self.pool.budget)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for PooledFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = lock(&self.slot.file);
        f.debug_struct("PooledFile")
            .field("path", &file.path)
            .field("open", &file.open.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;
    use crate::storage::fs::os;
    use crate::storage::sim::SimFs;

    fn pooled(budget: usize) -> (tempfile::TempDir, PooledFs) {
        (tempfile::tempdir().unwrap(), PooledFs::new(os(), budget))
    }

    fn read_all(file: &dyn StorageFile) -> Vec<u8> {
        let mut buf = vec![0; file.size().unwrap() as usize];
        file.read_exact_at(&mut buf, 0).unwrap();
        buf
    }

    #[test]
    fn files_beyond_the_budget_are_evicted_and_reopened_with_their_bytes() {
        let (dir, fs) = pooled(2);
        let files: Vec<_> = (0..6)
            .map(|i| {
                let f = fs
                    .open(&dir.path().join(format!("f{i}")), OpenMode::Truncate)
                    .unwrap();
                f.write_all_at(format!("file {i}").as_bytes(), 0).unwrap();
                assert!(fs.open_files() <= 2);
                f
            })
            .collect();
        for round in 0..3 {
            for (i, f) in files.iter().enumerate() {
                assert_eq!(
                    read_all(f.as_ref()),
                    format!("file {i}").into_bytes(),
                    "round {round}"
                );
                assert!(fs.open_files() <= 2);
            }
        }
        assert_eq!(fs.peak_open_files(), 2);
        drop(files);
        assert_eq!(fs.open_files(), 0);
    }

    #[test]
    fn a_reopen_never_truncates_or_recreates() {
        let (dir, fs) = pooled(1);
        let path = dir.path().join("a");
        let a = fs.open(&path, OpenMode::Truncate).unwrap();
        a.write_all_at(b"kept", 0).unwrap();
        // Evicts `a` (budget 1).
        let b = fs.open(&dir.path().join("b"), OpenMode::Truncate).unwrap();
        b.write_all_at(b"x", 0).unwrap();
        a.write_all_at(b"!", 4).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"kept!");
        // A file removed behind the pool's back is not recreated empty by a reopen.
        b.size().unwrap(); // evicts `a` again
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            a.size().unwrap_err().kind(),
            io::ErrorKind::NotFound,
            "a reopen opens the existing file only"
        );
        assert!(!path.exists());
    }

    #[test]
    fn a_failed_open_gives_its_descriptor_back() {
        let (dir, fs) = pooled(4);
        let missing = fs.open(&dir.path().join("missing"), OpenMode::Existing);
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(fs.open_files(), 0);
    }

    #[test]
    fn a_removed_file_stays_readable_through_its_handles() {
        let (dir, fs) = pooled(1);
        let path = dir.path().join("seg");
        let a = fs.open(&path, OpenMode::Truncate).unwrap();
        a.write_all_at(b"sealed", 0).unwrap();
        let other = fs
            .open(&dir.path().join("other"), OpenMode::Truncate)
            .unwrap();
        other.size().unwrap(); // `a` is evicted now
        fs.remove_file(&path).unwrap();
        assert!(!path.exists());
        // Pinned across the removal: its descriptor still reaches the unlinked inode.
        assert_eq!(read_all(a.as_ref()), b"sealed");
        a.sync_all().unwrap();
        // A new file of that name is another file.
        let new = fs.open(&path, OpenMode::Truncate).unwrap();
        assert_eq!(new.size().unwrap(), 0);
        assert_eq!(read_all(a.as_ref()), b"sealed");
        drop((a, other, new));
        assert_eq!(fs.open_files(), 0);
    }

    #[test]
    fn handles_follow_a_rename_and_a_replaced_file_keeps_its_bytes() {
        let (dir, fs) = pooled(1);
        let (tmp, target) = (dir.path().join("x.tmp"), dir.path().join("x"));
        let old = fs.open(&target, OpenMode::Truncate).unwrap();
        old.write_all_at(b"old", 0).unwrap();
        let new = fs.open(&tmp, OpenMode::Truncate).unwrap();
        new.write_all_at(b"new", 0).unwrap();
        fs.rename(&tmp, &target).unwrap();
        // Force both out of the pool and back.
        let filler = fs
            .open(&dir.path().join("filler"), OpenMode::Truncate)
            .unwrap();
        filler.size().unwrap();
        new.write_all_at(b"!", 3).unwrap();
        filler.size().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new!");
        assert_eq!(
            read_all(old.as_ref()),
            b"old",
            "the replaced inode, not the new file"
        );
        assert_eq!(read_all(new.as_ref()), b"new!");
    }

    #[test]
    fn a_sync_through_a_reopened_descriptor_persists_earlier_writes() {
        let sim = SimFs::new(11);
        let fs = PooledFs::new(Arc::new(sim.clone()), 1);
        let path = Path::new("/d/a");
        let a = fs.open(path, OpenMode::CreateIfMissing).unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        a.write_all_at(b"written before the eviction", 0).unwrap();
        let b = fs
            .open(Path::new("/d/b"), OpenMode::CreateIfMissing)
            .unwrap();
        b.size().unwrap(); // `a` is evicted
        a.sync_data().unwrap(); // through a new handle
        sim.crash();
        assert_eq!(sim.contents(path).unwrap(), b"written before the eviction");
    }

    #[test]
    fn out_of_descriptors_names_the_budget_and_the_limit() {
        let (_dir, fs) = pooled(77);
        let e = fs.pool.explain(io::Error::from_raw_os_error(libc::EMFILE));
        let message = e.to_string();
        assert!(message.contains("max_open_files"), "{message}");
        assert!(message.contains("77"), "{message}");
        assert!(message.contains("ulimit -n"), "{message}");
        let other = fs.pool.explain(io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(other.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn the_default_budget_is_half_the_soft_limit_within_bounds() {
        let budget = default_max_open_files();
        assert!((MIN_OPEN_FILES..=MAX_DEFAULT_OPEN_FILES).contains(&budget));
        if let Some(soft) = soft_nofile_limit() {
            assert!(budget as u64 <= (soft / 2).max(MIN_OPEN_FILES as u64));
        }
    }

    /// Threads that share a small budget (and one file, and directory syncs) neither
    /// deadlock, nor lose a write, nor exceed the budget.
    #[test]
    fn concurrent_users_share_the_budget() {
        const THREADS: usize = 6;
        const FILES_PER_THREAD: usize = 5;
        const ROUNDS: usize = 200;
        let (dir, fs) = pooled(3);
        let fs = Arc::new(fs);
        let shared: Arc<Box<dyn StorageFile>> = Arc::new(
            fs.open(&dir.path().join("shared"), OpenMode::Truncate)
                .unwrap(),
        );
        let barrier = Arc::new(Barrier::new(THREADS));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (fs, shared, barrier) = (fs.clone(), shared.clone(), barrier.clone());
                let dir = dir.path().to_owned();
                std::thread::spawn(move || {
                    let files: Vec<_> = (0..FILES_PER_THREAD)
                        .map(|i| {
                            fs.open(&dir.join(format!("t{t}-{i}")), OpenMode::Truncate)
                                .unwrap()
                        })
                        .collect();
                    barrier.wait();
                    for round in 0..ROUNDS {
                        let f = &files[round % FILES_PER_THREAD];
                        f.write_all_at(&[t as u8; 8], (round / FILES_PER_THREAD * 8) as u64)
                            .unwrap();
                        shared
                            .write_all_at(&[t as u8], (round * THREADS + t) as u64)
                            .unwrap();
                        if round % 7 == 0 {
                            f.sync_data().unwrap();
                        }
                        if round % 11 == 0 {
                            // A transient descriptor, counted in the same budget.
                            fs.sync_dir(&dir).unwrap();
                        }
                    }
                    for f in &files {
                        let bytes = read_all(f.as_ref());
                        assert_eq!(bytes.len(), ROUNDS / FILES_PER_THREAD * 8);
                        assert!(bytes.iter().all(|&b| b == t as u8));
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        let bytes = read_all(shared.as_ref().as_ref());
        for (i, &b) in bytes.iter().enumerate() {
            assert_eq!(b as usize, i % THREADS);
        }
        assert!(fs.peak_open_files() <= 3, "peak {}", fs.peak_open_files());
    }
}
