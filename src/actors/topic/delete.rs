//! `DeleteTopicActors`: the topic's part of a delete.

use std::sync::atomic::Ordering;

use actix::prelude::*;
use futures::future::join_all;

use super::TopicActor;
use crate::actors::coordinator::DeleteGroup;
use crate::actors::partition::DeletePartition;

/// The topic is being deleted: mark its produce routes stale (handles stop using them),
/// stop its groups' coordinators (their parked polls are answered `UnknownTopic`), then
/// close its partitions for good ([`DeletePartition`]). Replies once every partition has
/// closed its files, so the caller may remove them. Sent by the `BrokerActor`, which has
/// already forgotten the topic, so nothing reaches this actor afterwards and it ends with
/// the broker's address to it. Never fails.
#[derive(Debug)]
pub struct DeleteTopicActors;
impl Message for DeleteTopicActors {
    type Result = ();
}

impl Handler<DeleteTopicActors> for TopicActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: DeleteTopicActors, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DeleteTopicActors").entered();
        self.stale.store(true, Ordering::Release);
        let groups = std::mem::take(&mut self.groups);
        let partitions = self.partitions.clone();
        Box::pin(async move {
            join_all(groups.values().map(|g| g.send(DeleteGroup))).await;
            drop(groups);
            join_all(partitions.iter().map(|p| p.send(DeletePartition))).await;
        })
    }
}
