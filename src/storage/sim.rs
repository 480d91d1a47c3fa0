//! `SimFs`: an in-memory [`FileSystem`] that behaves like a disk behind a page cache, for
//! power-loss and I/O-fault tests (in the spirit of LazyFS).
//!
//! * A write lands in the file's current bytes (what reads see) and is remembered as
//!   unsynced; `sync_data`/`sync_all` make the current bytes durable.
//! * Created, renamed and removed names are durable only once their directory is synced.
//! * [`SimFs::crash`] is a power loss: names revert to their durable state, and each file to
//!   its durable bytes plus a random in-order prefix of its unsynced writes, the last of them
//!   torn at a random byte.
//! * [`SimFs::inject`] makes the next writes or syncs of matching files fail (EIO, ENOSPC).
//!   A failed write may have written part of its bytes; a failed sync forgets the unsynced
//!   writes without making them durable, as Linux may after marking the pages clean: a
//!   retried sync then "succeeds" without persisting them (Rebello et al., ATC'20).
//!
//! Directories are implicit: a file's directory is its path's parent.
//!
//! [`GatedFs`] (in `sim/gate.rs`) holds syncs until the test lets them through.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::fs::{FileSystem, OpenMode, StorageFile};

mod gate;
pub use gate::{GatedFs, SyncGate};

/// Which operation an injected fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    Write,
    Sync,
}

#[derive(Debug)]
struct Fault {
    path_contains: String,
    op: FaultOp,
    kind: io::ErrorKind,
    /// Matching operations let through before the fault fires.
    skip: usize,
    remaining: usize,
}

#[derive(Debug, Clone)]
enum Unsynced {
    Write { position: u64, bytes: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Node {
    durable: Vec<u8>,
    current: Vec<u8>,
    unsynced: Vec<Unsynced>,
}

#[derive(Debug, Default)]
struct State {
    nodes: Vec<Node>,
    /// Path → node, as reads see it.
    names: BTreeMap<PathBuf, usize>,
    /// Path → node, as a power loss would leave it.
    durable_names: BTreeMap<PathBuf, usize>,
    faults: Vec<Fault>,
    /// Set by `power_off`: every operation fails until `crash`.
    off: bool,
    rng: u64,
    /// Counters for test reports.
    writes: u64,
    /// Reads by the path they were made through (kept after the file is removed).
    reads: BTreeMap<PathBuf, u64>,
    syncs: u64,
    faults_fired: u64,
}

impl State {
    fn next_random(&mut self) -> u64 {
        // xorshift64*: deterministic per seed, good enough to pick cut points.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fault(&mut self, path: &Path, op: FaultOp) -> Option<io::ErrorKind> {
        if self.off {
            return Some(io::ErrorKind::Other);
        }
        let path = path.to_string_lossy();
        let fault = self
            .faults
            .iter_mut()
            .find(|f| f.op == op && f.remaining > 0 && path.contains(&f.path_contains))?;
        if fault.skip > 0 {
            fault.skip -= 1;
            return None;
        }
        fault.remaining -= 1;
        self.faults_fired += 1;
        Some(fault.kind)
    }
}

/// See the module docs. Clones share one simulated disk.
#[derive(Debug, Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

/// What a [`SimFs`] has seen, for test reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimStats {
    pub writes: u64,
    pub syncs: u64,
    pub faults_fired: u64,
}

impl SimFs {
    /// An empty disk; `seed` decides every random cut.
    pub fn new(seed: u64) -> Self {
        SimFs {
            state: Arc::new(Mutex::new(State {
                rng: seed | 1,
                ..State::default()
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: keep using it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the next `times` operations `op` on files whose path contains `path_contains`
    /// fail with `kind`.
    pub fn inject(&self, path_contains: &str, op: FaultOp, kind: io::ErrorKind, times: usize) {
        self.inject_after(path_contains, op, kind, 0, times);
    }

    /// As [`SimFs::inject`], after letting the next `skip` such operations through.
    pub fn inject_after(
        &self,
        path_contains: &str,
        op: FaultOp,
        kind: io::ErrorKind,
        skip: usize,
        times: usize,
    ) {
        self.lock().faults.push(Fault {
            path_contains: path_contains.to_owned(),
            op,
            kind,
            skip,
            remaining: times,
        });
    }

    /// The power goes out: from now on every operation fails with EIO (so whatever the
    /// owner does next changes nothing) until [`SimFs::crash`] brings the disk back.
    pub fn power_off(&self) {
        self.lock().off = true;
    }

    /// Removes every pending fault.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    pub fn stats(&self) -> SimStats {
        let state = self.lock();
        SimStats {
            writes: state.writes,
            syncs: state.syncs,
            faults_fired: state.faults_fired,
        }
    }

    /// Reads of the file at `path` so far (through its handles, or of the whole file), also
    /// after it was removed: tests check what an operation did not touch.
    pub fn reads(&self, path: &Path) -> u64 {
        self.lock().reads.get(path).copied().unwrap_or(0)
    }

    /// A power loss: see the module docs. Handles opened before it must not be used after.
    pub fn crash(&self) {
        let mut state = self.lock();
        state.names = state.durable_names.clone();
        state.faults.clear();
        state.off = false;
        for id in 0..state.nodes.len() {
            let mut unsynced = std::mem::take(&mut state.nodes[id].unsynced);
            let kept = (state.next_random() % (unsynced.len() as u64 + 1)) as usize;
            unsynced.truncate(kept);
            if let Some(Unsynced::Write { bytes: last, .. }) = unsynced.last_mut() {
                // The last write that reached the disk is torn.
                let cut = (state.next_random() % (last.len() as u64 + 1)) as usize;
                last.truncate(cut);
            }
            let bytes = replay(&state.nodes[id].durable, &unsynced);
            state.nodes[id].durable = bytes.clone();
            state.nodes[id].current = bytes;
        }
    }

    /// The current bytes of a file (tests inspect or damage files through this).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.lock();
        state
            .names
            .get(path)
            .map(|&id| state.nodes[id].current.clone())
    }
}

/// `durable` with `ops` applied in order.
fn replay(durable: &[u8], ops: &[Unsynced]) -> Vec<u8> {
    let mut bytes = durable.to_vec();
    for op in ops {
        match op {
            Unsynced::SetLen(len) => bytes.resize(*len as usize, 0),
            Unsynced::Write {
                position,
                bytes: written,
            } => apply_write(&mut bytes, *position, written),
        }
    }
    bytes
}

fn apply_write(bytes: &mut Vec<u8>, position: u64, written: &[u8]) {
    let end = position as usize + written.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[position as usize..end].copy_from_slice(written);
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

/// An open file of a [`SimFs`].
#[derive(Debug)]
struct SimFile {
    fs: SimFs,
    path: PathBuf,
    id: usize,
}

impl StorageFile for SimFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.fs.lock().nodes[self.id].current.len() as u64)
    }

    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        let mut state = self.fs.lock();
        *state.reads.entry(self.path.clone()).or_default() += 1;
        let bytes = &state.nodes[self.id].current;
        let end = position as usize + buf.len();
        if end > bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end",
            ));
        }
        buf.copy_from_slice(&bytes[position as usize..end]);
        Ok(())
    }

    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        let mut state = self.fs.lock();
        state.writes += 1;
        let off = state.off;
        let fault = state.fault(&self.path, FaultOp::Write);
        // A failing write may still have written a part of its bytes (not without power).
        let written = match fault {
            Some(_) if off => &buf[..0],
            Some(_) => &buf[..buf.len() / 2],
            None => buf,
        };
        let node = &mut state.nodes[self.id];
        apply_write(&mut node.current, position, written);
        node.unsynced.push(Unsynced::Write {
            position,
            bytes: written.to_vec(),
        });
        match fault {
            Some(kind) => Err(io::Error::new(kind, "injected write fault")),
            None => Ok(()),
        }
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.fs.lock();
        if state.off {
            return Err(io::Error::other("power is off"));
        }
        let node = &mut state.nodes[self.id];
        node.current.resize(len as usize, 0);
        node.unsynced.push(Unsynced::SetLen(len));
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = self.fs.lock();
        state.syncs += 1;
        let fault = state.fault(&self.path, FaultOp::Sync);
        let node = &mut state.nodes[self.id];
        if let Some(kind) = fault {
            // The pages are marked clean without reaching the disk: reads still see them,
            // no later sync writes them.
            node.unsynced.clear();
            return Err(io::Error::new(kind, "injected sync fault"));
        }
        // What reaches the disk is what was written since the last sync attempt; after a
        // failed one that is less than what reads see.
        node.durable = replay(&node.durable, &node.unsynced);
        node.unsynced.clear();
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync_data()
    }
}

impl FileSystem for SimFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>> {
        let mut state = self.lock();
        if state.off {
            return Err(io::Error::other("power is off"));
        }
        let existing = state.names.get(path).copied();
        let id = match (existing, mode) {
            (Some(id), OpenMode::Existing | OpenMode::CreateIfMissing) => id,
            (None, OpenMode::Existing) => return Err(not_found(path)),
            (_, OpenMode::CreateIfMissing | OpenMode::Truncate) => {
                state.nodes.push(Node::default());
                let id = state.nodes.len() - 1;
                state.names.insert(path.to_owned(), id);
                id
            }
        };
        Ok(Box::new(SimFile {
            fs: self.clone(),
            path: path.to_owned(),
            id,
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        *self.lock().reads.entry(path.to_owned()).or_default() += 1;
        self.contents(path).ok_or_else(|| not_found(path))
    }

    fn exists(&self, path: &Path) -> bool {
        self.lock().names.contains_key(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        if self.lock().off {
            return Err(io::Error::other("power is off"));
        }
        self.lock()
            .names
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.lock();
        if state.off {
            return Err(io::Error::other("power is off"));
        }
        let id = state.names.remove(from).ok_or_else(|| not_found(from))?;
        state.names.insert(to.to_owned(), id);
        Ok(())
    }

    fn create_dir_all(&self, _: &Path) -> io::Result<()> {
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = self.lock();
        Ok(state
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        if state.off {
            return Err(io::Error::other("power is off"));
        }
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        let current: Vec<(PathBuf, usize)> = state
            .names
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, &id)| (p.clone(), id))
            .collect();
        state.durable_names.retain(|p, _| !in_dir(p));
        state.durable_names.extend(current);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(fs: &SimFs, name: &str) -> Box<dyn StorageFile> {
        fs.open(Path::new(name), OpenMode::CreateIfMissing).unwrap()
    }

    #[test]
    fn synced_bytes_survive_a_crash_and_unsynced_ones_may_not() {
        let mut lost_some = false;
        for seed in 0..50 {
            let fs = SimFs::new(seed);
            let f = file(&fs, "/d/a");
            fs.sync_dir(Path::new("/d")).unwrap();
            f.write_all_at(b"durable", 0).unwrap();
            f.sync_data().unwrap();
            f.write_all_at(b"-volatile", 7).unwrap();
            fs.crash();
            let after = fs.contents(Path::new("/d/a")).unwrap();
            assert!(after.starts_with(b"durable"), "seed {seed}: {after:?}");
            assert!(b"durable-volatile".starts_with(&after[..]));
            lost_some |= after.len() < 16;
        }
        assert!(lost_some, "a crash never dropped an unsynced write");
    }

    #[test]
    fn names_are_durable_only_after_the_directory_sync() {
        let fs = SimFs::new(7);
        let f = file(&fs, "/d/new");
        f.write_all_at(b"x", 0).unwrap();
        f.sync_data().unwrap();
        fs.crash();
        assert!(!fs.exists(Path::new("/d/new")));
        let f = file(&fs, "/d/new");
        f.sync_data().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        fs.crash();
        assert!(fs.exists(Path::new("/d/new")));
    }

    #[test]
    fn a_failed_sync_forgets_the_unsynced_writes() {
        let fs = SimFs::new(3);
        let f = file(&fs, "/d/a");
        fs.sync_dir(Path::new("/d")).unwrap();
        f.write_all_at(b"lost", 0).unwrap();
        fs.inject("/d/a", FaultOp::Sync, io::ErrorKind::Other, 1);
        assert!(f.sync_data().is_err());
        assert!(f.sync_data().is_ok(), "the retry 'succeeds'");
        fs.crash();
        assert_eq!(
            fs.contents(Path::new("/d/a")).unwrap(),
            b"",
            "but nothing reached the disk"
        );
    }
}
