//! Cleaning a compacted partition: when a pass is due (Kafka's `min.cleanable.dirty.ratio`
//! and `max.compaction.lag.ms`), and what the passes did (kept across restarts in the log's
//! `cleaner.totals`). The pass itself is the
//! storage's (`storage::cleaner`); the partition actor runs it on the broker's cleaner
//! thread and swaps its output in.

use crate::config::TopicConfig;
use crate::error::Result;
use crate::storage::cleaner::{CleanerPolicy, CleanerStats, CleanerTotals, LogSnapshot, Prepared};
use crate::types::CleanerSummary;

use super::Partition;

/// How a compacted partition is cleaned: its topic's settings and the broker's key-map
/// budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleaningPlan {
    /// The pass's own rules (delete retention, minimum lag, key-map bytes).
    pub cleaner: CleanerPolicy,
    /// A pass runs once the dirty bytes are at least this share of the cleanable bytes.
    pub min_dirty_ratio: f64,
    /// ...or once a dirty segment's newest record is older than this, whatever the ratio.
    pub max_lag_ms: Option<u64>,
}

impl CleaningPlan {
    /// The plan of a partition of a topic with `config`, whose passes may use
    /// `key_map_bytes`; `None` when the topic is not compacted.
    pub fn for_topic(config: &TopicConfig, key_map_bytes: usize) -> Option<Self> {
        config.cleanup_policy.compacts().then(|| CleaningPlan {
            cleaner: CleanerPolicy {
                delete_retention_ms: config.delete_retention_ms,
                min_compaction_lag_ms: config.min_compaction_lag_ms,
                key_map_bytes,
            },
            min_dirty_ratio: config.min_cleanable_dirty_ratio.as_f64(),
            max_lag_ms: config.max_compaction_lag_ms,
        })
    }
}

impl Partition {
    /// The pass to run now, if one is due as of `now_ms`: the cleanable segments (sealed, past
    /// the minimum lag) hold dirty bytes, at least `min_dirty_ratio` of them, or one dirty
    /// segment past the maximum lag, or the rest of a dirty section the last pass stopped
    /// short of (its key map filled: a section is cleaned to its end, in as many passes as
    /// the key map needs); or a tombstone of the cleaned section is past its delete horizon
    /// (a quiet log drops it too). The snapshot reads on its own handles: run the pass
    /// anywhere, then [`Partition::swap_in`].
    ///
    /// # Errors
    /// `Io` when a segment cannot be opened for the pass.
    pub fn cleaning_due(&self, plan: &CleaningPlan, now_ms: u64) -> Result<Option<LogSnapshot>> {
        let horizon_passed = self
            .log
            .earliest_delete_horizon_ms()
            .is_some_and(|horizon| horizon <= now_ms);
        // Most checks find nothing new sealed since the last pass: no file is opened then.
        if !horizon_passed && !self.log.has_dirty_sealed_segment() {
            return Ok(None);
        }
        let end = self.log.log_end_offset();
        let Some(snapshot) = self.log.cleaning_snapshot(end, &plan.cleaner, now_ms)? else {
            return Ok(None);
        };
        let dirty = |s: &&crate::storage::cleaner::SourceSegment| {
            s.end_offset > snapshot.first_dirty_offset
        };
        let total: u64 = snapshot.sources.iter().map(|s| s.size).sum();
        let dirty_bytes: u64 = snapshot.sources.iter().filter(dirty).map(|s| s.size).sum();
        let ratio = match total {
            0 => 0.0,
            _ => dirty_bytes as f64 / total as f64,
        };
        let overdue = plan.max_lag_ms.is_some_and(|lag| {
            let cutoff = now_ms.saturating_sub(lag);
            snapshot
                .sources
                .iter()
                .filter(dirty)
                .any(|s| s.max_timestamp_ms.is_some_and(|ts| ts <= cutoff))
        });
        let due = horizon_passed
            || dirty_bytes > 0
                && (ratio >= plan.min_dirty_ratio || overdue || self.cleaning_unfinished);
        Ok(due.then_some(snapshot))
    }

    /// Swaps a finished pass in (see `PartitionLog::swap_in`) and records what it did for
    /// [`Partition::stats`], on disk too (`cleaner.totals`: a failure to write it is logged,
    /// and costs only the figures of this pass after a restart).
    ///
    /// # Errors
    /// `Io` from the swap: the partition must then be reopened (recovery finishes it).
    pub fn swap_in(&mut self, prepared: Prepared, now_ms: u64) -> Result<CleanerStats> {
        let stats = self.log.swap_in(prepared)?;
        self.cleaning_unfinished = !stats.done && !stats.abandoned;
        let summary = self.cleaning.get_or_insert_with(CleanerSummary::default);
        summary.passes += 1;
        summary.bytes_read += stats.bytes_read;
        summary.bytes_written += stats.bytes_written;
        summary.records_removed += stats.records_removed;
        summary.last_pass_ms = Some(now_ms);
        summary.dirty_permille = (stats.dirty_ratio_after.clamp(0.0, 1.0) * 1000.0).round() as u32;
        let totals = totals_of(summary);
        if let Err(e) = self.log.record_cleaner_totals(&totals) {
            tracing::warn!(
                dir = %self.log.dir().display(), error = %e,
                "cannot record the cleaner's totals; a restart forgets this pass's figures"
            );
        }
        Ok(stats)
    }
}

/// The figures of `totals` (as `cleaner.totals` keeps them) as `stats()` reports them.
pub(super) fn summary_of(totals: CleanerTotals) -> CleanerSummary {
    CleanerSummary {
        passes: totals.passes,
        bytes_read: totals.bytes_read,
        bytes_written: totals.bytes_written,
        records_removed: totals.records_removed,
        last_pass_ms: Some(totals.last_pass_ms),
        dirty_permille: totals.dirty_permille,
    }
}

/// `summary` as `cleaner.totals` keeps it (written after a pass: its last pass is set).
fn totals_of(summary: &CleanerSummary) -> CleanerTotals {
    CleanerTotals {
        passes: summary.passes,
        bytes_read: summary.bytes_read,
        bytes_written: summary.bytes_written,
        records_removed: summary.records_removed,
        last_pass_ms: summary.last_pass_ms.unwrap_or(0),
        dirty_permille: summary.dirty_permille,
    }
}

#[cfg(test)]
mod tests;
