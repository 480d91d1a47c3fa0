//! The log's side of cleaning a compacted partition (the pass itself is
//! [`crate::storage::cleaner`]): what a pass may clean, and swapping its output in.

use std::collections::HashSet;

use super::*;
use crate::storage::cleaner::checkpoint::{CleanerCheckpoint, CLEANER_CHECKPOINT_FILE};
use crate::storage::cleaner::{
    earliest, swap, CleanedGroup, CleanerPolicy, CleanerStats, CleanerTotals, LogSnapshot,
    Prepared, SourceSegment,
};
use crate::storage::segment::{SegmentPaths, StepOver};

impl PartitionLog {
    /// Whether a sealed segment holds offsets no pass has cleaned: what a pass
    /// needs, checked without opening a file (before
    /// [`PartitionLog::cleaning_snapshot`], which opens every cleanable segment).
    pub fn has_dirty_sealed_segment(&self) -> bool {
        let first_dirty = self.first_dirty_offset.max(self.log_start_offset);
        self.segments
            .keys()
            .next_back()
            .is_some_and(|&active_base| first_dirty < active_base)
    }

    /// What a cleaning pass may clean now: the sealed segments from the one holding the log
    /// start on, each ending at or below `first_uncleanable_offset` and holding nothing newer
    /// than `policy.min_compaction_lag_ms` before `now_ms` (by its largest timestamp, as
    /// Kafka decides per segment), up to the first that does not; `None` when none does.
    /// Its dirty section starts where the last pass ended (kept across a reopen in the
    /// cleaner checkpoint; without a valid one, the whole log is dirty, as Kafka has it);
    /// a pass over a log with nothing dirty still drops tombstones past their delete horizon.
    /// The active segment is never among them. The snapshot has read handles of
    /// its own, so [`Cleaner::prepare`](crate::storage::cleaner::Cleaner::prepare) can run on
    /// another thread while this log appends and serves reads.
    ///
    /// # Errors
    /// `Io` when a segment file cannot be opened.
    pub fn cleaning_snapshot(
        &self,
        first_uncleanable_offset: u64,
        policy: &CleanerPolicy,
        now_ms: u64,
    ) -> Result<Option<LogSnapshot>> {
        let lag_cutoff = now_ms.saturating_sub(policy.min_compaction_lag_ms);
        let bases: Vec<u64> = self.segments.keys().copied().collect();
        let mut sources = Vec::new();
        for (segment, &end_offset) in self.segments.values().zip(&bases[1..]) {
            let young = policy.min_compaction_lag_ms > 0
                && segment
                    .last_timestamp_ms()
                    .is_some_and(|ts| ts > lag_cutoff);
            if end_offset > first_uncleanable_offset || young {
                break;
            }
            if end_offset <= self.log_start_offset {
                continue;
            }
            let path = segment.log_path().to_owned();
            let file = self
                .fs
                .open(&path, OpenMode::Existing)
                .map_err(|e| StorageError::io("open a segment to clean", &path, e))?;
            sources.push(SourceSegment {
                base_offset: segment.base_offset(),
                end_offset,
                size: segment.size(),
                max_timestamp_ms: segment.last_timestamp_ms(),
                path,
                file,
            });
        }
        if sources.is_empty() {
            return Ok(None);
        }
        let first_dirty = self.first_dirty_offset.max(self.log_start_offset);
        Ok(Some(LogSnapshot {
            fs: self.fs.clone(),
            dir: self.dir.clone(),
            sources,
            first_dirty_offset: first_dirty,
            max_segment_bytes: self.config.segment_bytes,
            producer_last_batches: self.producers.last_batch_bases().collect::<HashSet<_>>(),
        }))
    }

    /// Replaces the source segments of each group of `prepared` with its cleaned segment,
    /// group by group in offset order, by the swap protocol of
    /// [`crate::storage::cleaner::swap`] (each group's swap is atomic with respect to a
    /// crash: the next open finishes or undoes it). A group whose sources are not all still
    /// in the log as the pass read them (retention deleted one meanwhile), or whose files
    /// are gone (the directory was opened again since), is not swapped, and neither is any
    /// after it: their files are deleted and `abandoned` is set in the stats. Reads in progress start again from the index (positions in the replaced
    /// segments are forgotten).
    ///
    /// # Errors
    /// `Io` when a rename, a deletion or a directory sync fails. Once a group's swap is
    /// committed the log must then be reopened: recovery finishes the swap.
    pub fn swap_in(&mut self, mut prepared: Prepared) -> Result<CleanerStats> {
        self.finish_sealing()?;
        let mut stats = *prepared.stats();
        if !prepared.groups.is_empty() && !self.cleaned {
            swap::mark_cleaned(self.fs.as_ref(), &self.dir)?;
            self.cleaned = true;
            for segment in self.segments.values_mut() {
                segment.allow_gaps();
            }
        }
        while !prepared.groups.is_empty() {
            if !self.holds_sources_of(&prepared.groups[0]) {
                tracing::info!(
                    dir = %self.dir.display(), base_offset = prepared.groups[0].base_offset,
                    "a segment the cleaner read, or its output, is gone; dropping the rest of the pass"
                );
                prepared.discard_rest();
                stats.abandoned = true;
                break;
            }
            self.mark_unclean()?;
            let group = prepared.groups.remove(0);
            self.forget_positions();
            self.swap_group(&group)?;
            stats.segments_replaced += group.sources.len();
        }
        self.delete_horizon_ms = if stats.done && !stats.abandoned {
            // The pass saw every batch of the cleaned section.
            stats.delete_horizon_ms
        } else {
            // It saw part of it, or its swap stopped part-way: keep the earlier of the two
            // (too early a horizon costs a pass that drops nothing, never a tombstone kept).
            earliest(self.delete_horizon_ms, stats.delete_horizon_ms)
        };
        if !stats.abandoned {
            self.first_dirty_offset = self.first_dirty_offset.max(stats.cleaned_up_to);
        }
        self.store_cleaner_checkpoint();
        Ok(stats)
    }

    /// What the cleaner did to this log over its life, as the last pass recorded it
    /// (`cleaner.totals`, see [`CleanerTotals`]); `None` before the first pass.
    pub fn cleaner_totals(&self) -> Option<CleanerTotals> {
        CleanerTotals::read(self.fs.as_ref(), &self.dir)
    }

    /// Records `totals` as what the cleaner did to this log, replacing the last record.
    ///
    /// # Errors
    /// `Io` naming the step and the file.
    pub fn record_cleaner_totals(&self, totals: &CleanerTotals) -> Result<()> {
        totals.write(self.fs.as_ref(), &self.dir)
    }

    /// When the first tombstone of the cleaned section may go (its batch's delete horizon):
    /// a pass at or after it drops it, though nothing was written since. `None` when no
    /// cleaned batch keeps a tombstone.
    pub fn earliest_delete_horizon_ms(&self) -> Option<u64> {
        self.delete_horizon_ms
    }

    /// Takes the clean point of the cleaner checkpoint among `names` (the directory's
    /// entries), if there is a valid one that the log still reaches. Anything else leaves the
    /// whole log dirty: the checkpoint is an optimisation, and losing it is harmless (see
    /// `cleaner/checkpoint.rs`).
    pub(super) fn load_cleaner_checkpoint(&mut self, names: &[String]) {
        if !names.iter().any(|n| n == CLEANER_CHECKPOINT_FILE) {
            return;
        }
        let checkpoint = match CleanerCheckpoint::read(self.fs.as_ref(), &self.dir) {
            Ok(checkpoint) => checkpoint,
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot read the cleaner checkpoint; the whole log counts as dirty");
                None
            }
        };
        let Some(checkpoint) = checkpoint else {
            return;
        };
        // A pass cleans sealed segments only: a clean point past the active segment's base
        // names records the log no longer has (segments lost since).
        if checkpoint.clean_point > self.active_base() {
            tracing::warn!(
                dir = %self.dir.display(), clean_point = checkpoint.clean_point,
                active_base = self.active_base(),
                "the cleaner checkpoint is past the log's sealed segments; the whole log counts as dirty"
            );
            return;
        }
        self.first_dirty_offset = checkpoint.clean_point;
        self.delete_horizon_ms = checkpoint.delete_horizon_ms;
        self.cleaner_checkpoint = Some(checkpoint);
    }

    /// Writes the cleaner checkpoint when the clean point or the earliest delete horizon
    /// moved since it was last written. Called once a pass's swaps are durable, so it never
    /// claims a cleaning the disk does not hold. A failure is logged: the previous checkpoint
    /// stays, which costs the next open a reread of what was cleaned since.
    fn store_cleaner_checkpoint(&mut self) {
        let checkpoint = CleanerCheckpoint {
            clean_point: self.first_dirty_offset,
            delete_horizon_ms: self.delete_horizon_ms,
        };
        if self.cleaner_checkpoint == Some(checkpoint) {
            return;
        }
        match checkpoint.write(self.fs.as_ref(), &self.dir) {
            Ok(()) => self.cleaner_checkpoint = Some(checkpoint),
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot write the cleaner checkpoint; a reopen cleans again from the last one");
            }
        }
    }

    /// Whether every source of `group` is still a sealed segment of the log, of the size
    /// the pass read, and the cleaned segment still there (an open of the directory since
    /// the pass deleted it, as it deletes every `.cleaned` file).
    fn holds_sources_of(&self, group: &CleanedGroup) -> bool {
        let sources = group.sources.iter().all(|&(base, size)| {
            self.segments
                .get(&base)
                .is_some_and(|s| s.is_sealed() && s.size() == size)
        });
        sources && self.fs.exists(&group.cleaned.log)
    }

    /// Forgets every position in a segment: the next reads start from an index.
    fn forget_positions(&mut self) {
        self.read_hint = None;
        self.tail = None;
        self.batch_hint = None;
        self.ahead.clear();
        self.start_position = None;
        self.start_timestamp = None;
    }

    /// The steps of one group's swap (see `cleaner/swap.rs`), then the cleaned segment opened
    /// in place of its sources; the replaced files are unlinked in the background.
    fn swap_group(&mut self, group: &CleanedGroup) -> Result<()> {
        let fs = self.fs.clone();
        let fs = fs.as_ref();
        let base = group.base_offset;
        let cleaned = &group.cleaned;
        let swapping = SegmentPaths::new(&self.dir, base).with_suffix(swap::SWAP_SUFFIX);
        let fin = SegmentPaths::new(&self.dir, base);
        // 1. The commit point: `<base>.log.swap`, durable.
        let committed = swap::rename(fs, &cleaned.index, &swapping.index)
            .and_then(|()| swap::rename(fs, &cleaned.time_index, &swapping.time_index))
            .and_then(|()| swap::rename(fs, &cleaned.log, &swapping.log))
            .and_then(|()| sync_dir(fs, &self.dir));
        if let Err(e) = committed {
            swap::remove_quietly(fs, cleaned);
            swap::remove_quietly(fs, &swapping);
            return Err(e);
        }
        // 2. The sources renamed out of the way (`.deleted`) before the cleaned segment takes
        //    its final name.
        let mut retired = Vec::with_capacity(group.sources.len());
        for &(source, _) in &group.sources {
            let segment = self
                .segments
                .remove(&source)
                .expect("checked by holds_sources_of");
            retired.push(segment.retire(swap::DELETED_SUFFIX)?);
        }
        sync_dir(fs, &self.dir)?;
        // 3. The cleaned segment under the first source's names.
        swap::rename(fs, &swapping.index, &fin.index)?;
        swap::rename(fs, &swapping.time_index, &fin.time_index)?;
        swap::rename(fs, &swapping.log, &fin.log)?;
        sync_dir(fs, &self.dir)?;
        let mut segment = LogSegment::open(&self.fs, &self.dir, base, INDEX_INTERVAL_BYTES)?;
        segment.mark_sealed();
        segment.allow_gaps();
        if let Err(reason) = segment.load_tail()? {
            tracing::warn!(path = %fin.log.display(), %reason, "rebuilding a cleaned segment's index");
            segment.rebuild_index(StepOver::NEVER)?;
        }
        tracing::debug!(
            path = %fin.log.display(), sources = group.sources.len(), size = segment.size(),
            "swapped in a cleaned segment"
        );
        self.segments.insert(base, segment);
        // 4. The replaced files unlinked off this thread. They hold nothing the log reads any
        //    more: a failure only leaves them to the next open.
        let deleting_fs = self.fs.clone();
        let unlinked = self.delete_in_background(move || {
            retired
                .iter()
                .try_for_each(|paths| swap::remove_retired(deleting_fs.as_ref(), paths))
        });
        if let Err(e) = unlinked {
            tracing::warn!(dir = %self.dir.display(), error = %e, "deleting a replaced segment failed; the next open deletes it");
        }
        Ok(())
    }
}
