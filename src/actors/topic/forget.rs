//! `ForgetGroup`: a group deleted from a topic (Kafka's DeleteGroups), or its committed
//! offsets on some partitions (OffsetDelete).

use std::sync::atomic::Ordering;

use actix::prelude::*;
use futures::future::join_all;

use super::TopicActor;
use crate::actors::coordinator::{DeleteGroup, DescribeGroup};
use crate::actors::partition::ForgetPartitionGroup;
use crate::error::{Error, Result};
use crate::messages::DeleteGroupOffsets;

impl Handler<DeleteGroupOffsets> for TopicActor {
    type Result = ResponseActFuture<Self, Result<bool>>;

    fn handle(&mut self, msg: DeleteGroupOffsets, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DeleteGroupOffsets").entered();
        let partitions = match &msg.partitions {
            None => Ok(self.partitions.clone()),
            Some(asked) => asked
                .iter()
                .map(|&p| self.partition(p).cloned())
                .collect::<Result<Vec<_>>>(),
        };
        let partitions = match partitions {
            Ok(partitions) => partitions,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        let coordinator = self.groups.get(&msg.group).cloned();
        let (topic, group) = (self.name.clone(), msg.group.clone());
        let whole_group = msg.partitions.is_none();
        let forget = async move {
            if let Some(coordinator) = &coordinator {
                let stats = coordinator
                    .send(DescribeGroup)
                    .await
                    .map_err(|_| Error::BrokerStopped)?;
                if !stats.assignment.is_empty() {
                    return Err(Error::GroupNotEmpty {
                        topic,
                        group,
                        members: stats.assignment.into_keys().collect(),
                    });
                }
            }
            let forgotten = join_all(partitions.iter().map(|p| {
                p.ask(ForgetPartitionGroup {
                    group: group.clone(),
                })
            }))
            .await;
            let mut any = coordinator.is_some() && whole_group;
            for forgot in forgotten {
                any |= forgot?;
            }
            Ok(any)
        };
        Box::pin(forget.into_actor(self).map(move |forgot, act, _| {
            if forgot.is_ok() && whole_group {
                if let Some(coordinator) = act.groups.remove(&msg.group) {
                    coordinator.do_send(DeleteGroup);
                    // Handles hold direct routes to the coordinator: they learn the topic's
                    // routes again, without it.
                    std::mem::take(&mut act.stale).store(true, Ordering::Release);
                    tracing::info!(topic = %act.name, group = %msg.group, "group deleted");
                }
            }
            forgot
        }))
    }
}
