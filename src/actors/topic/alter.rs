//! `AlterTopicActors`: the topic's part of an alter.

use std::sync::atomic::Ordering;

use actix::prelude::*;
use futures::future::join_all;

use super::TopicActor;
use crate::actors::coordinator::AddPartitions;
use crate::actors::partition::{ReconfigurePartition, RegisterGroup};
use crate::config::{SchemaValidation, TopicConfig};
use crate::group::StartFrom;

/// The topic's config is now `config` (persisted and checked by the `BrokerActor`, which
/// sends this). Partitions it adds start at once, each on the I/O thread a creation would
/// have put it on; every group is registered with them from their start (they are new:
/// every record in them came after the group) and rebalances over them; the handles'
/// cached produce routes are marked stale, so their next produce learns the new count; so
/// they are when the cleanup policy changes, for its key rule.
/// Every partition then takes the new settings ([`ReconfigurePartition`]). Replies once
/// they all have, so a lowered retention has taken effect when the alter returns.
/// Never fails.
#[derive(Debug)]
pub struct AlterTopicActors {
    pub config: TopicConfig,
}
impl Message for AlterTopicActors {
    type Result = ();
}

impl Handler<AlterTopicActors> for TopicActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: AlterTopicActors, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "AlterTopicActors").entered();
        if msg.config.partitions as usize > self.partitions.len() {
            self.grow(&msg.config);
        }
        let validation = SchemaValidation::of(&msg.config);
        if msg.config.cleanup_policy != self.cleanup_policy || validation != self.schema_validation
        {
            self.cleanup_policy = msg.config.cleanup_policy;
            self.schema_validation = validation;
            // Routes cached before now check the old key rule: make their holders ask again.
            std::mem::take(&mut self.stale).store(true, Ordering::Release);
        }
        let reconfigured = self.partitions.iter().map(|p| {
            p.send(ReconfigurePartition {
                config: msg.config.clone(),
            })
        });
        let reconfigured = join_all(reconfigured);
        Box::pin(async move {
            // A partition that is gone has nothing left to apply the settings to.
            let _ = reconfigured.await;
        })
    }
}

impl TopicActor {
    /// Starts the partitions `config` adds and tells the groups and the handles.
    fn grow(&mut self, config: &TopicConfig) {
        let first_new = self.partitions.len();
        self.start_partitions(config);
        for partition in &self.partitions[first_new..] {
            for group in self.groups.keys() {
                partition.do_send(RegisterGroup {
                    group: group.clone(),
                    start: StartFrom::Earliest,
                });
            }
        }
        for coordinator in self.groups.values() {
            coordinator.do_send(AddPartitions {
                partitions: self.partitions.clone(),
            });
        }
        // Routes cached before now miss the new partitions: make their holders ask again.
        std::mem::take(&mut self.stale).store(true, Ordering::Release);
        tracing::info!(topic = %self.name, partitions = self.partitions.len(), "topic grew");
    }
}
