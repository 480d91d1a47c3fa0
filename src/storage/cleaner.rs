//! The log cleaner of compacted topics (Kafka's `LogCleaner`/`Cleaner`), for one partition.
//!
//! A compacted topic keeps the latest record of every key; a tombstone (a key with a null
//! value) deletes its key. Cleaning rewrites the log's sealed segments below a "first
//! uncleanable offset" without the records a later record of the same key supersedes.
//!
//! # What a reader relies on
//! * A read from offset 0 returns, in offset order, at least the latest record of every
//!   key; for each key the records returned are a suffix of those written (never an older
//!   value after a newer one was removed).
//! * Offsets never change: removed records leave gaps (inside a batch, and whole batches),
//!   and the log end offset stays. The active segment is never cleaned.
//! * A tombstone stays readable for `delete_retention_ms` after the first cleaning of its
//!   segment: that cleaning sets the batch's delete horizon (attribute bit 6, the horizon in
//!   the base timestamp: Kafka's `RecordBatch.deleteHorizonMs()`); a cleaning after it drops
//!   the tombstone. Records older than the tombstone were removed by the cleaning that set
//!   the horizon (the tombstone was in its key map), so the key does not come back. A pass
//!   reports the earliest horizon it left ([`CleanerStats::delete_horizon_ms`]); the log
//!   keeps it (in the cleaner checkpoint, `cleaner/checkpoint.rs`) so that a pass is due
//!   then even if nothing was written since.
//! * The last batch of each idempotent producer stays, empty if all of its records go (as
//!   Kafka keeps it), so its sequence numbers survive a reopen that rebuilds the producer
//!   state from the log. So does the last batch of each cleaned segment: a cleaned segment
//!   then still ends where its sources did, so segments follow each other without a gap and
//!   a swap's extent is known from its last batch (see `cleaner/swap.rs`). Kafka does not
//!   keep that one; it costs a 61-byte header per cleaned segment.
//!
//! # One pass
//! [`PartitionLog::cleaning_snapshot`](super::PartitionLog::cleaning_snapshot) names the
//! sealed segments that may be cleaned (the caller bounds them by offset and by
//! `min_compaction_lag_ms` against each segment's largest timestamp) and opens its own
//! read handles on them. [`Cleaner::prepare`] then runs anywhere, another thread included,
//! while the log goes on appending and serving reads:
//! 1. The dirty section (from the first offset no earlier pass cleaned to the end) is read
//!    into an [`OffsetMap`] of key → latest offset. When the keys do not fit the map's budget
//!    the pass ends at the batch where it filled: the caller runs another pass for the rest,
//!    as Kafka's cleaner does.
//! 2. The segments from the log start to that end are grouped (consecutive, at most the
//!    log's `segment_bytes` of sources each: Kafka's `groupSegmentsBySize`) and each group is
//!    rewritten into one segment under temporary names (`<base>.log.cleaned`, `.index.cleaned`,
//!    `.timeindex.cleaned`), named after the group's first segment, then synced.
//!
//! [`PartitionLog::swap_in`](super::PartitionLog::swap_in) then replaces each group's
//! sources with its cleaned segment, crash-safely, unless retention removed one of them
//! meanwhile (the rest of the pass is then abandoned and its files deleted).
//!
//! # Memory
//! The key map (allocated once per pass, for one key per offset of the dirty section at most,
//! and never more than the budget: a pass over a few new records takes kilobytes, not the
//! budget), one read buffer of 1 MiB
//! (`batches::READ_CHUNK`, or one larger batch), one batch's decompressed records and its
//! rewrite. Records are never gathered beyond one batch.

mod batches;
pub mod checkpoint;
mod offset_map;
pub mod swap;
pub mod totals;

use std::collections::HashSet;
use std::path::PathBuf;

use super::error::{Result, StorageError};
use super::fs::{SharedFs, StorageFile};
use super::index::INDEX_INTERVAL_BYTES;
use super::segment::{LogSegment, SegmentPaths};
use batches::{clean_batch, for_each_batch, Rules};
pub use batches::{Cleaned, Removed};
pub use offset_map::OffsetMap;
pub use totals::CleanerTotals;

/// Kafka's `log.cleaner.dedupe.buffer.size` default (128 MiB, shared there by the cleaner
/// threads): about 5 million keys at 24 bytes each.
pub const DEFAULT_KEY_MAP_BYTES: usize = 128 << 20;
/// Kafka's `delete.retention.ms` default: one day.
pub const DEFAULT_DELETE_RETENTION_MS: u64 = 24 * 60 * 60 * 1000;

/// How a partition is cleaned (Kafka's topic configs of the same names, and the cleaner's
/// buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanerPolicy {
    /// How long a tombstone stays readable after its segment was first cleaned.
    pub delete_retention_ms: u64,
    /// A segment is cleaned only once its largest timestamp is at least this old.
    pub min_compaction_lag_ms: u64,
    /// The most memory of the key map, in bytes (24 per key, see [`OffsetMap`]); a pass takes
    /// less when its dirty section has fewer offsets than that many keys.
    pub key_map_bytes: usize,
}

impl Default for CleanerPolicy {
    fn default() -> Self {
        CleanerPolicy {
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
            min_compaction_lag_ms: 0,
            key_map_bytes: DEFAULT_KEY_MAP_BYTES,
        }
    }
}

/// What a pass did, for the caller to report as metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CleanerStats {
    /// Bytes read from the source segments (the dirty section twice: map, then rewrite).
    pub bytes_read: u64,
    /// Bytes written to cleaned segments.
    pub bytes_written: u64,
    pub records_removed: u64,
    /// Tombstones among them (superseded, or past their delete horizon).
    pub tombstones_removed: u64,
    /// Batches left out whole.
    pub batches_removed: u64,
    /// Dirty bytes over all bytes of the cleanable segments, before the pass and after it
    /// (Kafka's `cleanableRatio`, by whole segments before; after, the bytes the pass left
    /// dirty over what the cleanable segments hold once it is swapped in).
    pub dirty_ratio_before: f64,
    pub dirty_ratio_after: f64,
    /// Where the next pass's dirty section starts; the first uncleanable offset when the
    /// key map held every key of this one.
    pub cleaned_up_to: u64,
    /// Whether the dirty section was cleaned to its end (else run another pass).
    pub done: bool,
    /// The memory the pass's key map took: room for one key per offset of its dirty
    /// section, at most the policy's `key_map_bytes`.
    pub key_map_bytes: usize,
    /// The earliest delete horizon among the batches below `cleaned_up_to` that keep a
    /// tombstone (all of them later than the pass's `now_ms`: those passed were dropped).
    pub delete_horizon_ms: Option<u64>,
    /// Segments replaced by [`PartitionLog::swap_in`](super::PartitionLog::swap_in).
    pub segments_replaced: usize,
    /// `swap_in` found a source segment gone (retention) and dropped the rest of the pass.
    pub abandoned: bool,
}

/// A sealed segment as a pass sees it, through a read handle of its own.
#[derive(Debug)]
pub struct SourceSegment {
    pub base_offset: u64,
    /// The base offset of the segment after it: where its offsets end.
    pub end_offset: u64,
    pub size: u64,
    /// Its largest record timestamp, when known (for `max.compaction.lag.ms`).
    pub max_timestamp_ms: Option<u64>,
    pub path: PathBuf,
    pub file: Box<dyn StorageFile>,
}

/// What a pass cleans, taken from the log by
/// [`PartitionLog::cleaning_snapshot`](super::PartitionLog::cleaning_snapshot): the sealed
/// segments are immutable, so the pass needs nothing else of the log.
#[derive(Debug)]
pub struct LogSnapshot {
    pub fs: SharedFs,
    pub dir: PathBuf,
    /// Consecutive sealed segments, from the one holding the log start on.
    pub sources: Vec<SourceSegment>,
    /// The first offset no earlier pass cleaned (the dirty section starts here).
    pub first_dirty_offset: u64,
    /// The most bytes of source segments grouped into one cleaned segment: the log's
    /// `segment_bytes` (Kafka's `groupSegmentsBySize` takes `segment.bytes`).
    pub max_segment_bytes: u64,
    /// The base offset of the last producer batch of each idempotent producer.
    pub producer_last_batches: HashSet<u64>,
}

/// One cleaned segment, synced under temporary names, and the sources it replaces.
#[derive(Debug, Clone)]
pub struct CleanedGroup {
    pub base_offset: u64,
    /// `(base offset, size)` of each source segment, as the pass read it.
    pub sources: Vec<(u64, u64)>,
    /// The cleaned files (`.cleaned` names).
    pub cleaned: SegmentPaths,
}

/// A pass's output, waiting for [`PartitionLog::swap_in`](super::PartitionLog::swap_in).
/// Dropped without it, it deletes its temporary files.
#[derive(Debug)]
pub struct Prepared {
    pub(super) fs: SharedFs,
    /// In offset order; swapped in that order.
    pub(super) groups: Vec<CleanedGroup>,
    pub(super) stats: CleanerStats,
}

impl Prepared {
    /// What the pass did (the swap adds `segments_replaced`).
    pub fn stats(&self) -> &CleanerStats {
        &self.stats
    }

    /// Deletes the temporary files of the groups not swapped in.
    pub(super) fn discard_rest(&mut self) {
        for group in self.groups.drain(..) {
            swap::remove_quietly(self.fs.as_ref(), &group.cleaned);
        }
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        self.discard_rest();
    }
}

/// Runs passes under one policy; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cleaner {
    pub policy: CleanerPolicy,
}

impl Cleaner {
    pub fn new(policy: CleanerPolicy) -> Self {
        Cleaner { policy }
    }

    /// Runs one pass over `snapshot` as of `now_ms` (the caller's clock: tombstones' delete
    /// horizons are set from it and compared with it), writing the cleaned segments under
    /// temporary names. Touches nothing the log uses.
    ///
    /// # Errors
    /// `Corrupt` when a source segment holds a batch that does not verify (nothing is
    /// cleaned over damage); `Io` when a file cannot be read, written or synced, or (kind
    /// `OutOfMemory`) when the key map cannot hold the keys of even the first dirty batch.
    /// The temporary files written so far are deleted.
    pub fn prepare(&self, snapshot: &LogSnapshot, now_ms: u64) -> Result<Prepared> {
        let mut prepared = Prepared {
            fs: snapshot.fs.clone(),
            groups: Vec::new(),
            stats: CleanerStats::default(),
        };
        let Some(last) = snapshot.sources.last() else {
            prepared.stats.done = true;
            prepared.stats.cleaned_up_to = snapshot.first_dirty_offset;
            return Ok(prepared);
        };
        let first_uncleanable = last.end_offset;
        // The dirty section holds at most one record, so one key, per offset.
        let offsets = first_uncleanable.saturating_sub(snapshot.first_dirty_offset);
        let mut map = OffsetMap::for_keys(offsets, self.policy.key_map_bytes);
        prepared.stats.key_map_bytes = map.memory_bytes();
        let end = build_map(snapshot, &mut map, &mut prepared.stats)?;
        let stats = &mut prepared.stats;
        stats.cleaned_up_to = end;
        stats.done = end == first_uncleanable;
        let total: u64 = snapshot.sources.iter().map(|s| s.size).sum();
        let dirty: u64 = snapshot
            .sources
            .iter()
            .filter(|s| s.end_offset > snapshot.first_dirty_offset)
            .map(|s| s.size)
            .sum();
        stats.dirty_ratio_before = ratio(dirty, total);
        let cleaning: Vec<&SourceSegment> = snapshot
            .sources
            .iter()
            .filter(|s| s.base_offset < end)
            .collect();
        let (mut total_after, mut dirty_after) = (total, 0u64);
        dirty_after += snapshot
            .sources
            .iter()
            .filter(|s| s.base_offset >= end)
            .map(|s| s.size)
            .sum::<u64>();
        for group in group_by_size(&cleaning, snapshot.max_segment_bytes) {
            let context = GroupContext {
                snapshot,
                map: &map,
                end,
                now_ms,
                policy: &self.policy,
            };
            let written = write_group(&context, &group, &mut prepared.stats)?;
            dirty_after += written.dirty_bytes;
            if written.changed {
                let sources: u64 = group.iter().map(|s| s.size).sum();
                total_after = total_after - sources + written.bytes;
                prepared.groups.push(written.group);
            } else {
                swap::remove_quietly(snapshot.fs.as_ref(), &written.group.cleaned);
            }
        }
        prepared.stats.dirty_ratio_after = ratio(dirty_after, total_after);
        Ok(prepared)
    }
}

/// The earlier of two optional times.
pub fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Puts the keys of the dirty section into `map`; returns where the pass ends: the end of the
/// last source, or the base offset of the batch whose keys no longer fit.
fn build_map(snapshot: &LogSnapshot, map: &mut OffsetMap, stats: &mut CleanerStats) -> Result<u64> {
    let first_dirty = snapshot.first_dirty_offset;
    let mut end = snapshot
        .sources
        .last()
        .map_or(first_dirty, |s| s.end_offset);
    let mut scratch = Vec::new();
    // The keys of one batch, hashed before any is put (see `OffsetMap::hash`).
    let mut hashed: Vec<([u64; 2], u64)> = Vec::new();
    'segments: for source in &snapshot.sources {
        if source.end_offset <= first_dirty {
            continue;
        }
        let mut full_at = None;
        for_each_batch(
            source.file.as_ref(),
            &source.path,
            source.size,
            |position, header, batch| {
                if header.next_offset() <= first_dirty || header.is_control() {
                    return Ok(true);
                }
                stats.bytes_read += batch.len() as u64;
                let section = crate::storage::format::records_section(
                    batch,
                    header,
                    crate::storage::format::MAX_DECOMPRESSED_BYTES,
                    &mut scratch,
                )
                .map_err(|reason| StorageError::corrupt(&source.path, position, reason))?;
                hashed.clear();
                crate::storage::format::validate_records(section, header, |record| {
                    let offset = header.base_offset + u64::from(record.offset_delta);
                    if let (true, Some(key)) = (offset >= first_dirty, record.key) {
                        hashed.push((map.hash(key), offset));
                    }
                })
                .map_err(|reason| StorageError::corrupt(&source.path, position, reason))?;
                let fits = hashed
                    .iter()
                    .all(|&(hash, offset)| map.put_hash(hash, offset).is_ok());
                if !fits {
                    full_at = Some(header.base_offset.max(first_dirty));
                }
                Ok(fits)
            },
        )?;
        if let Some(at) = full_at {
            end = at;
            break 'segments;
        }
    }
    if end <= first_dirty && snapshot.sources.iter().any(|s| s.end_offset > first_dirty) {
        return Err(StorageError::io(
            "fit the keys of one batch in the cleaner's key map",
            &snapshot.dir,
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!(
                    "the batch at offset {first_dirty} has more keys than a map of {} holds",
                    map.capacity()
                ),
            ),
        ));
    }
    Ok(end)
}

/// Consecutive sources, each group at most `max_bytes` of them (one source at least), and
/// offsets a segment can index (relative offsets are `u32`).
fn group_by_size<'a>(sources: &[&'a SourceSegment], max_bytes: u64) -> Vec<Vec<&'a SourceSegment>> {
    let mut groups: Vec<Vec<&SourceSegment>> = Vec::new();
    let mut size = 0u64;
    for &source in sources {
        let fits = groups.last().is_some_and(|group| {
            let base = group[0].base_offset;
            size + source.size <= max_bytes && source.end_offset - base <= u64::from(u32::MAX)
        });
        if fits {
            size += source.size;
            groups.last_mut().expect("checked").push(source);
        } else {
            size = source.size;
            groups.push(vec![source]);
        }
    }
    groups
}

/// What every group of a pass shares.
struct GroupContext<'a> {
    snapshot: &'a LogSnapshot,
    map: &'a OffsetMap,
    /// Batches from here on are copied as they are (the key map did not reach them).
    end: u64,
    now_ms: u64,
    policy: &'a CleanerPolicy,
}

/// A group written and synced.
struct Written {
    group: CleanedGroup,
    bytes: u64,
    /// Bytes of batches at or past the pass's end, copied uncleaned.
    dirty_bytes: u64,
    /// Whether any batch differs from its source (else the group is not swapped in).
    changed: bool,
}

/// Writes `sources` cleaned into one segment under `.cleaned` names, and syncs it.
fn write_group(
    context: &GroupContext<'_>,
    sources: &[&SourceSegment],
    stats: &mut CleanerStats,
) -> Result<Written> {
    let snapshot = context.snapshot;
    let base = sources[0].base_offset;
    let cleaned = SegmentPaths::new(&snapshot.dir, base).with_suffix(swap::CLEANED_SUFFIX);
    let result = (|| {
        let mut out = LogSegment::create_at(&snapshot.fs, &cleaned, base, INDEX_INTERVAL_BYTES)?;
        out.mark_sealed();
        // Merging segments is a change worth swapping in even when no record goes.
        let (mut changed, mut dirty_bytes) = (sources.len() > 1, 0u64);
        let mut scratch = Vec::new();
        // The source holding the group's last batch (an empty segment holds none: a crash
        // just after a roll leaves one).
        let last = sources.iter().rposition(|s| s.size > 0);
        for (i, source) in sources.iter().enumerate() {
            for_each_batch(
                source.file.as_ref(),
                &source.path,
                source.size,
                |position, header, batch| {
                    stats.bytes_read += batch.len() as u64;
                    let last_of_group =
                        Some(i) == last && position + batch.len() as u64 == source.size;
                    let cleaned = if header.base_offset >= context.end {
                        dirty_bytes += batch.len() as u64;
                        Cleaned::Unchanged
                    } else {
                        let rules = Rules {
                            map: context.map,
                            now_ms: context.now_ms,
                            delete_retention_ms: context.policy.delete_retention_ms,
                            keep_empty: last_of_group
                                || snapshot.producer_last_batches.contains(&header.base_offset),
                        };
                        let mut removed = Removed::default();
                        let cleaned =
                            clean_batch(batch, header, &rules, &mut scratch, &mut removed)
                                .map_err(|reason| {
                                    StorageError::corrupt(&source.path, position, reason)
                                })?;
                        stats.records_removed += removed.records;
                        stats.tombstones_removed += removed.tombstones;
                        stats.delete_horizon_ms =
                            earliest(stats.delete_horizon_ms, removed.kept_tombstones_horizon_ms);
                        cleaned
                    };
                    let bytes = match &cleaned {
                        Cleaned::Unchanged => batch,
                        Cleaned::Dropped => {
                            stats.batches_removed += 1;
                            changed = true;
                            return Ok(true);
                        }
                        Cleaned::Rebuilt(bytes) => {
                            changed = true;
                            bytes.as_slice()
                        }
                    };
                    // The index entry of a batch after a gap names the batch's own base offset.
                    out.set_next_offset(header.base_offset);
                    out.append(
                        bytes,
                        header.next_offset(),
                        header.max_timestamp.max(0) as u64,
                    )?;
                    stats.bytes_written += bytes.len() as u64;
                    Ok(true)
                },
            )?;
        }
        out.seal_time_index()?;
        out.sync_all()?;
        Ok(Written {
            bytes: out.size(),
            group: CleanedGroup {
                base_offset: base,
                sources: sources.iter().map(|s| (s.base_offset, s.size)).collect(),
                cleaned: cleaned.clone(),
            },
            dirty_bytes,
            changed,
        })
    })();
    if result.is_err() {
        swap::remove_quietly(snapshot.fs.as_ref(), &cleaned);
    }
    result
}

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod tests;
