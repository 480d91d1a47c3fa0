//! The `FsyncPolicy::Interval` sync of a log, split so its `fdatasync` runs on another thread
//! (`storage::sync_worker` says why): [`PartitionLog::begin_interval_sync`] on the owner's
//! thread takes a snapshot, [`LogSyncJob::run`] anywhere does the blocking part, and
//! [`PartitionLog::finish_interval_sync`] on the owner's thread applies the result.
//!
//! The owner keeps at most one job in flight. Meanwhile it appends, reads and rolls as usual:
//! the job syncs through its own handle (see `PartitionLog::sync_file`), and claims durable
//! only the bytes the segment held when it began (`LogSynced::size`): a record appended
//! during the sync keeps the log dirty, so the next interval syncs it. A failed sync is never
//! retried: its unsynced bytes are written again (`LogSegment::redirty_unsynced`) and the
//! error returned, after which the owner reopens the log.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::PartitionLog;
use crate::storage::error::{Result, StorageError};
use crate::storage::fs::{OpenMode, StorageFile};

/// The blocking half of an interval sync: `fdatasync` of the active segment as it was when
/// the job was taken. `Send`: runs on any thread.
#[derive(Debug)]
pub struct LogSyncJob {
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    base: u64,
    size: u64,
}

/// What a [`LogSyncJob`] did, for [`PartitionLog::finish_interval_sync`].
#[derive(Debug)]
pub struct LogSynced {
    path: PathBuf,
    /// The segment synced (by base offset) and its size when the job was taken.
    base: u64,
    size: u64,
    took: Duration,
    result: std::io::Result<()>,
}

impl LogSyncJob {
    /// `fdatasync`s the segment, timed. Blocks.
    pub fn run(self) -> LogSynced {
        let started = Instant::now();
        let result = self.file.sync_data();
        LogSynced {
            path: self.path,
            base: self.base,
            size: self.size,
            took: started.elapsed(),
            result,
        }
    }
}

impl PartitionLog {
    /// Starts an interval sync: the job that syncs what was appended so far, or `None` when
    /// nothing was appended since the last sync, or when the last roll's sealing is still
    /// running (the new segment's name is durable only once it is done; the next interval
    /// tries again). The log counts as clean from here on until the next append; the owner
    /// must hand the job's result to [`PartitionLog::finish_interval_sync`].
    ///
    /// # Errors
    /// `Io` when the last roll's sealing failed, or the segment cannot be opened for the
    /// sync; the owner then reopens the log, as after a failed sync.
    pub fn begin_interval_sync(&mut self) -> Result<Option<LogSyncJob>> {
        if self.sealing.as_ref().is_some_and(|done| !done.is_done()) {
            return Ok(None);
        }
        self.finish_sealing()?;
        if !self.dirty {
            return Ok(None);
        }
        let active = self.active();
        let (base, size, path) = (
            active.base_offset(),
            active.size(),
            active.log_path().to_owned(),
        );
        let file = match &self.sync_file {
            Some((b, file)) if *b == base => file.clone(),
            _ => {
                let file: Arc<dyn StorageFile> = self
                    .fs
                    .open(&path, OpenMode::Existing)
                    .map_err(|e| StorageError::io("open a segment to sync", &path, e))?
                    .into();
                self.sync_file = Some((base, file.clone()));
                file
            }
        };
        self.dirty = false;
        Ok(Some(LogSyncJob {
            file,
            path,
            base,
            size,
        }))
    }

    /// Applies a finished [`LogSyncJob`]: on success the bytes it covered count as synced
    /// (in the segment it synced, even if the log rolled meanwhile), and its duration joins
    /// [`PartitionLog::drain_sync_times`].
    ///
    /// # Errors
    /// `Io` when the sync failed: the unsynced bytes have been written again and the log
    /// must be reopened (a failed sync may have dropped dirty pages; it is never retried).
    pub fn finish_interval_sync(&mut self, done: LogSynced) -> Result<()> {
        self.record_sync_time(done.took);
        let segment = self.segments.get_mut(&done.base);
        match done.result {
            Ok(()) => {
                if let Some(segment) = segment {
                    segment.mark_synced(done.size);
                }
                Ok(())
            }
            Err(e) => {
                if let Some(segment) = segment {
                    segment.redirty_unsynced();
                }
                self.dirty = true;
                Err(StorageError::io("fdatasync segment", &done.path, e))
            }
        }
    }

    /// Bytes of the active segment the last successful sync proved durable.
    #[cfg(any(test, feature = "internals"))]
    pub fn active_synced_bytes(&self) -> u64 {
        self.active().synced_size()
    }

    /// Bytes of the active segment.
    #[cfg(any(test, feature = "internals"))]
    pub fn active_bytes(&self) -> u64 {
        self.active().size()
    }
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::storage::batch::AppendRecord;
    use crate::storage::fs::SharedFs;
    use crate::storage::sim::{FaultOp, GatedFs, SimFs, SyncGate};
    use crate::storage::{FsyncPolicy, LogConfig};

    const DEADLINE: Duration = Duration::from_secs(10);

    fn open(fs: &SharedFs) -> PartitionLog {
        let config = LogConfig {
            fsync: FsyncPolicy::Interval(Duration::from_secs(3600)),
            ..LogConfig::default()
        };
        PartitionLog::open_with(fs, Path::new("/data/t_0"), config, 0)
            .unwrap()
            .0
    }

    fn append(log: &mut PartitionLog, value: &[u8]) {
        log.append(&[AppendRecord { key: None, value }], 1).unwrap();
    }

    #[test]
    fn appends_and_reads_go_on_during_a_sync_which_claims_only_what_came_before_it() {
        let gate = SyncGate::new(".log");
        let fs: SharedFs = Arc::new(GatedFs::new(Arc::new(SimFs::new(1)), gate.clone()));
        let mut log = open(&fs);
        append(&mut log, b"before");
        let before = log.active_bytes();
        gate.close();
        let job = log.begin_interval_sync().unwrap().expect("dirty");
        assert!(
            log.begin_interval_sync().unwrap().is_none(),
            "nothing new to sync"
        );
        let running = std::thread::spawn(move || job.run());
        assert!(gate.wait_for_waiting(1, DEADLINE), "the sync is blocked");

        append(&mut log, b"during");
        assert_eq!(log.read(0, 10, 1 << 20).unwrap().len(), 2);
        assert_eq!(log.active_synced_bytes(), 0, "nothing synced yet");

        gate.let_through(1);
        log.finish_interval_sync(running.join().unwrap()).unwrap();
        assert_eq!(log.active_synced_bytes(), before);
        assert!(log.active_bytes() > before);
        assert!(
            log.is_dirty(),
            "the record appended during the sync is not synced"
        );
        let mut times = 0;
        log.drain_sync_times(|_| times += 1);
        assert_eq!(times, 1, "the sync's duration is recorded");

        gate.open();
        let job = log.begin_interval_sync().unwrap().expect("still dirty");
        log.finish_interval_sync(job.run()).unwrap();
        assert_eq!(log.active_synced_bytes(), log.active_bytes());
        assert!(!log.is_dirty());
    }

    #[test]
    fn a_failed_sync_is_reported_and_claims_nothing() {
        let sim = SimFs::new(2);
        let fs: SharedFs = Arc::new(sim.clone());
        let mut log = open(&fs);
        append(&mut log, b"one");
        sim.inject(".log", FaultOp::Sync, ErrorKind::Other, 1);
        let job = log.begin_interval_sync().unwrap().expect("dirty");
        let failed = log.finish_interval_sync(job.run());
        assert!(matches!(failed, Err(StorageError::Io { .. })), "{failed:?}");
        assert_eq!(log.active_synced_bytes(), 0);
        assert!(log.is_dirty());
    }
}
