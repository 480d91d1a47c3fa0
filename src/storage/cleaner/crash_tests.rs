//! A power loss at every step of a cleaning pass (each write, truncation, sync, rename,
//! deletion and directory sync of the pass and its swap), then a reopen: the log must verify
//! and hold, for every key, a suffix of what was written to it, its latest value included.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::tests::{append, batch, clean, open, policy, read_all, sim, Stored, DIR, NOW};
use super::*;
use crate::storage::fs::{FileSystem, OpenMode};
use crate::storage::log::PartitionLog;
use crate::storage::sim::SimFs;

const DAY: u64 = 24 * 60 * 60 * 1000;

/// Counts the steps that change the disk and cuts the power at the `crash_at`-th.
#[derive(Debug)]
struct Steps {
    sim: SimFs,
    done: AtomicU64,
    crash_at: AtomicU64,
}

impl Steps {
    /// One more step: the power goes out when it is the one to crash at (that step and
    /// every later one then fail, as the disk is gone).
    fn step(&self) {
        if self.done.fetch_add(1, Ordering::SeqCst) >= self.crash_at.load(Ordering::SeqCst) {
            self.sim.power_off();
        }
    }
}

/// A [`SimFs`] whose power is cut at a chosen step.
#[derive(Debug)]
struct CrashingFs(Arc<Steps>);

#[derive(Debug)]
struct CrashingFile {
    inner: Box<dyn StorageFile>,
    steps: Arc<Steps>,
}

impl StorageFile for CrashingFile {
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, position)
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.steps.step();
        self.inner.write_all_at(buf, position)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.steps.step();
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.steps.step();
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.steps.step();
        self.inner.sync_all()
    }
}

impl FileSystem for CrashingFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>> {
        if mode != OpenMode::Existing {
            self.0.step();
        }
        let inner = self.0.sim.open(path, mode)?;
        Ok(Box::new(CrashingFile {
            inner,
            steps: self.0.clone(),
        }))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.0.sim.read(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.sim.exists(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.0.step();
        self.0.sim.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.step();
        self.0.sim.rename(from, to)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.0.sim.create_dir_all(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.0.sim.list(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.0.step();
        self.0.sim.sync_dir(dir)
    }
}

/// Writes keys `k0..k5` with values and tombstones over several segments, cleans once (so
/// that the pass under test also meets delete horizons), writes more; returns the log and
/// everything written.
fn prepared_log(fs: &SharedFs) -> (PartitionLog, Vec<Stored>) {
    let mut log = open(fs);
    let mut written = Vec::new();
    let mut write = |log: &mut PartitionLog, round: u8| {
        for key in 0..6u8 {
            let name = [b'k', b'0' + key];
            let tombstone = (round + key).is_multiple_of(5);
            let value = [round; 40];
            let value = (!tombstone).then_some(&value[..]);
            let offset = append(log, batch(&[(&name, value)]));
            written.push((offset, Some(name.to_vec()), value.map(<[u8]>::to_vec)));
        }
    };
    for round in 0..6 {
        write(&mut log, round);
    }
    clean(&mut log, policy(100), NOW);
    for round in 6..12 {
        write(&mut log, round);
    }
    (log, written)
}

/// For every key, the records read are a suffix of those written (same offsets, same
/// values), holding the latest unless the latest is a tombstone a cleaning may have dropped.
fn check(read: &[Stored], written: &[Stored], context: &str) {
    let by_key = |records: &[Stored]| {
        let mut keys: BTreeMap<Vec<u8>, Vec<Stored>> = BTreeMap::new();
        for r in records {
            keys.entry(r.1.clone().unwrap())
                .or_default()
                .push(r.clone());
        }
        keys
    };
    let (read, written) = (by_key(read), by_key(written));
    for (key, all) in &written {
        let got = read.get(key).map_or(&[][..], Vec::as_slice);
        assert!(
            all.ends_with(got),
            "{context}: key {key:?} reads {got:?}, not a suffix of {all:?}"
        );
        let latest = all.last().unwrap();
        assert!(
            !got.is_empty() || latest.2.is_none(),
            "{context}: key {key:?} lost its latest value {latest:?}"
        );
    }
}

#[test]
fn a_power_loss_at_any_step_of_a_cleaning_loses_no_latest_value_and_serves_no_stale_one() {
    let mut crash_at = 0u64;
    loop {
        let steps = Arc::new(Steps {
            sim: SimFs::new(crash_at),
            done: AtomicU64::new(0),
            crash_at: AtomicU64::new(u64::MAX),
        });
        let fs: SharedFs = Arc::new(CrashingFs(steps.clone()));
        let (mut log, written) = prepared_log(&fs);
        steps.done.store(0, Ordering::SeqCst);
        steps.crash_at.store(crash_at, Ordering::SeqCst);
        let policy = policy(100);
        let later = NOW + DAY + 1;
        let cleaned = log
            .cleaning_snapshot(log.log_end_offset(), &policy, later)
            .and_then(|snapshot| Cleaner::new(policy).prepare(&snapshot.unwrap(), later))
            .and_then(|prepared| log.swap_in(prepared));
        drop(log);
        let crashed = steps.done.load(Ordering::SeqCst) > crash_at;
        if !crashed {
            cleaned.unwrap();
            assert!(crash_at > 20, "a pass takes more than {crash_at} steps");
            return;
        }
        steps.sim.crash();
        let sim_fs: SharedFs = Arc::new(steps.sim.clone());
        let context = format!("power lost at step {crash_at}");
        let mut log = open(&sim_fs);
        check(&read_all(&mut log), &written, &context);
        let names = sim_fs.list(Path::new(DIR)).unwrap();
        assert!(
            !names.iter().any(|n| n.ends_with(".cleaned")
                || n.ends_with(".swap")
                || n.ends_with(".deleted")),
            "{context}: {names:?}"
        );
        // What recovery left cleans like any log.
        clean(&mut log, policy, later);
        check(&read_all(&mut log), &written, &context);
        crash_at += 1;
    }
}

/// The same, with a second power loss while the reopen finishes the interrupted swap.
#[test]
fn a_power_loss_while_recovery_finishes_a_swap_is_recovered_again() {
    for crash_at in 0.. {
        let (sim, fs) = sim(crash_at);
        let (log, written) = prepared_log(&fs);
        let policy = policy(100);
        let snapshot = log
            .cleaning_snapshot(log.log_end_offset(), &policy, NOW)
            .unwrap();
        let mut prepared = Cleaner::new(policy)
            .prepare(&snapshot.unwrap(), NOW)
            .unwrap();
        // Committed by hand: the swap files as step 1 of the swap leaves them, then a crash.
        let groups = std::mem::take(&mut prepared.groups);
        for group in &groups {
            let cleaned = &group.cleaned;
            for from in [&cleaned.index, &cleaned.time_index, &cleaned.log] {
                let name = from.to_str().unwrap();
                let to = name.replace(swap::CLEANED_SUFFIX, swap::SWAP_SUFFIX);
                fs.rename(from, Path::new(&to)).unwrap();
            }
        }
        fs.sync_dir(Path::new(DIR)).unwrap();
        drop(prepared);
        drop(log);
        sim.crash();
        let steps = Arc::new(Steps {
            sim: sim.clone(),
            done: AtomicU64::new(0),
            crash_at: AtomicU64::new(crash_at),
        });
        let crashing: SharedFs = Arc::new(CrashingFs(steps.clone()));
        let opened =
            PartitionLog::open_with(&crashing, Path::new(DIR), super::tests::config(), NOW);
        drop(opened);
        let crashed = steps.done.load(Ordering::SeqCst) > crash_at;
        sim.crash();
        let mut log = open(&(Arc::new(sim.clone()) as SharedFs));
        check(
            &read_all(&mut log),
            &written,
            &format!("second power loss at step {crash_at}"),
        );
        if !crashed {
            return;
        }
    }
}
