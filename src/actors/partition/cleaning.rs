//! The log cleaner of a compacted topic's partition, driven by its actor: every
//! `cleaner_backoff` it asks the partition whether a pass is due
//! ([`Partition::cleaning_due`](crate::partition::Partition::cleaning_due)); a due pass runs on
//! the broker's cleaner thread (one pass at a time over the whole broker, so one key map in
//! memory), over the sealed segments' own read handles, while this actor goes on appending
//! and serving reads; its answer, [`CleaningPrepared`], swaps the cleaned segments in on the
//! actor's thread (renames and syncs; the replaced files are unlinked on the sync worker). A pass that stopped short (its key map filled) is followed by the next at
//! once. A restart meanwhile is harmless: the reopen deletes the pass's files, and the swap
//! then finds them gone and abandons the pass.

use actix::prelude::*;

use super::{PartitionActor, Slot};
use crate::metrics::CleanerMetrics;
use crate::storage::cleaner::{Cleaner, Prepared};
use crate::storage::StorageError;

/// A pass's output, from the cleaner thread to the partition's actor.
#[derive(Debug)]
pub(super) struct CleaningPrepared(Result<Prepared, StorageError>);

impl Message for CleaningPrepared {
    type Result = ();
}

impl PartitionActor {
    /// Starts the check for a due pass, when the topic is compacted.
    pub(super) fn start_cleaning_timer(&mut self, ctx: &mut Context<Self>) {
        if self.cleaning.is_none() {
            return;
        }
        let timer = ctx.run_interval(self.settings.cleaner_backoff, |act, ctx| {
            act.clean_if_due(ctx);
        });
        self.timers.push(timer);
    }

    /// Hands a due pass to the cleaner thread, unless one of this partition's is running.
    fn clean_if_due(&mut self, ctx: &mut Context<Self>) {
        let (Some(plan), false) = (self.cleaning, self.cleaning_in_flight) else {
            return;
        };
        let Slot::Open(p) = &self.slot else {
            return;
        };
        let now = self.settings.clock.now_ms();
        let snapshot = match p.cleaning_due(&plan, now) {
            Ok(Some(snapshot)) => snapshot,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(partition = %self.name(), error = %e, "cannot start a cleaning pass");
                return;
            }
        };
        self.cleaning_in_flight = true;
        let addr = ctx.address();
        self.settings.cleaner_worker.run(move || {
            let prepared = Cleaner::new(plan.cleaner).prepare(&snapshot, now);
            // Its read handles closed before the swap renames and unlinks their files.
            drop(snapshot);
            addr.do_send(CleaningPrepared(prepared));
        });
    }
}

impl Handler<CleaningPrepared> for PartitionActor {
    type Result = ();

    fn handle(&mut self, msg: CleaningPrepared, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "CleaningPrepared").entered();
        self.cleaning_in_flight = false;
        let prepared = match msg.0 {
            Ok(prepared) => prepared,
            Err(e) => {
                tracing::warn!(partition = %self.name(), error = %e, "a cleaning pass failed");
                return;
            }
        };
        let now = self.settings.clock.now_ms();
        let Slot::Open(p) = &mut self.slot else {
            return; // dropped: its files are deleted
        };
        match p.swap_in(prepared, now) {
            Ok(stats) => {
                let bytes = (stats.bytes_read, stats.bytes_written);
                let dirty = stats.dirty_ratio_after;
                let (topic, partition) = (&self.topic, self.partition);
                let metrics = self
                    .cleaner_metrics
                    .get_or_insert_with(|| CleanerMetrics::new(topic, partition));
                metrics.cleaned(bytes, stats.records_removed, dirty);
                tracing::debug!(partition = %self.name(), ?stats, "cleaning pass swapped in");
                if !stats.done && !stats.abandoned {
                    self.clean_if_due(ctx);
                }
            }
            Err(e) => {
                // A swap that failed after its commit point is finished by the next open.
                tracing::error!(partition = %self.name(), error = %e, "cleaning swap failed; restarting");
                ctx.stop();
            }
        }
    }
}
