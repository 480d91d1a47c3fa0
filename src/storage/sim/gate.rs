//! `GatedFs`: a [`FileSystem`] wrapper whose files' `sync_data` (`fdatasync`) waits at a
//! [`SyncGate`] until the test lets it through, to show what keeps being served while a sync
//! is slow (the page cache writing back gigabytes). Everything else goes straight through.

use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::storage::fs::{FileSystem, OpenMode, SharedFs, StorageFile};

/// Where the syncs of files whose path contains `pattern` wait. Open (letting every sync
/// through) until [`SyncGate::close`].
#[derive(Debug)]
pub struct SyncGate {
    pattern: String,
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    closed: bool,
    /// Syncs that may pass while closed.
    permits: usize,
    /// Syncs waiting now.
    waiting: usize,
    /// Syncs that went through to the file system (passed the gate).
    passed: usize,
}

impl SyncGate {
    /// A gate, open, for the files whose path contains `pattern`.
    pub fn new(pattern: &str) -> Arc<Self> {
        Arc::new(SyncGate {
            pattern: pattern.to_owned(),
            state: Mutex::default(),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// From now on, matching syncs wait.
    pub fn close(&self) {
        self.lock().closed = true;
    }

    /// Lets every sync through, now and from now on.
    pub fn open(&self) {
        self.lock().closed = false;
        self.changed.notify_all();
    }

    /// Lets the next `n` syncs through (those waiting first); the gate stays closed.
    pub fn let_through(&self, n: usize) {
        self.lock().permits += n;
        self.changed.notify_all();
    }

    /// Waits until at least `n` syncs wait at the gate; `false` after `timeout`.
    pub fn wait_for_waiting(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |s| s.waiting >= n)
    }

    /// Waits until at least `n` syncs have passed the gate; `false` after `timeout`.
    pub fn wait_for_passed(&self, n: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |s| s.passed >= n)
    }

    /// Syncs that passed the gate so far.
    pub fn passed(&self) -> usize {
        self.lock().passed
    }

    fn wait_until(&self, timeout: Duration, done: impl Fn(&GateState) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        while !done(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Called by a matching file's sync: returns when the gate lets it through.
    fn pass(&self) {
        let mut state = self.lock();
        state.waiting += 1;
        self.changed.notify_all();
        while state.closed && state.permits == 0 {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.closed {
            state.permits -= 1;
        }
        state.waiting -= 1;
        state.passed += 1;
        self.changed.notify_all();
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct GatedFs {
    inner: SharedFs,
    gate: Arc<SyncGate>,
}

impl GatedFs {
    /// `inner`, with the syncs of the files `gate` matches held at it.
    pub fn new(inner: SharedFs, gate: Arc<SyncGate>) -> Self {
        GatedFs { inner, gate }
    }
}

#[derive(Debug)]
struct GatedFile {
    inner: Box<dyn StorageFile>,
    gate: Option<Arc<SyncGate>>,
}

impl StorageFile for GatedFile {
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, position)
    }
    fn read_exact_at_appending(
        &self,
        buf: &mut Vec<u8>,
        len: usize,
        position: u64,
    ) -> io::Result<()> {
        self.inner.read_exact_at_appending(buf, len, position)
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, position)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        if let Some(gate) = &self.gate {
            gate.pass();
        }
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
}

impl FileSystem for GatedFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>> {
        let matches = path.to_string_lossy().contains(&self.gate.pattern);
        Ok(Box::new(GatedFile {
            inner: self.inner.open(path, mode)?,
            gate: matches.then(|| self.gate.clone()),
        }))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
}
