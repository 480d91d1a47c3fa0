//! A subscription's attempt counts across members and restarts: a `Retry` commits the
//! retried record's offset with its count as the commit's metadata
//! ([`AttemptNote`], through `CommitAttempt`), and a generation's partitions are held until
//! their commits are read back (`CommittedAttempts`).

use actix::prelude::*;
use serde::de::DeserializeOwned;

use super::shared::Subscribing;
use super::SubscriptionActor;
use crate::actors::coordinator::{CommitAttempt, CommittedAttempts};
use crate::group::delivery::AttemptNote;

impl<T: DeserializeOwned + Send + 'static> SubscriptionActor<T> {
    /// Reads the attempt counts of the generation last entered back from the partitions'
    /// commits, then frees each partition (without them when they cannot be read).
    pub(super) fn restore_attempts(&mut self, ctx: &mut Context<Self>) {
        let Some((generation, partitions)) = self.restore.take() else {
            return;
        };
        let Some(coordinator) = &self.broker.coordinator else {
            for partition in partitions {
                self.flow.rules.restored(generation, partition, None);
            }
            return;
        };
        let all = partitions.clone();
        let read = coordinator.ask(CommittedAttempts { partitions });
        ctx.spawn(read.into_actor(self).map(move |read, act, ctx| {
            let notes = read.unwrap_or_else(|_| all.into_iter().map(|p| (p, None)).collect());
            for (partition, note) in notes {
                if act.flow.rules.restored(generation, partition, note) {
                    act.released(partition, ctx);
                }
            }
        }));
    }

    /// Commits the retried record's offset with its count (an [`AttemptNote`]), fenced as
    /// any commit; without a coordinator, the records before it only.
    pub(super) fn commit_attempt(
        &mut self,
        generation: u64,
        partition: u32,
        (commit, from, attempt): (Option<u64>, u64, u32),
        ctx: &mut Context<Self>,
    ) {
        let Some(coordinator) = &self.broker.coordinator else {
            return self.commit(generation, partition, commit, ctx);
        };
        let request = coordinator.ask(CommitAttempt {
            member: self.join.member.clone(),
            generation,
            partition,
            offset: from,
            note: AttemptNote(attempt),
        });
        ctx.spawn(request.into_actor(self).map(move |result, act, _| {
            if let Err(error) = result {
                let offset = from.saturating_sub(1);
                act.flow.report.commit_refused(partition, offset, error);
            }
        }));
    }
}
