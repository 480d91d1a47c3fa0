//! What a Kafka client's groups need of a topic: membership with the group's own options,
//! committed offsets set and read in Kafka's meaning, and the groups' descriptions. Sent by
//! the listener (through `AsyncNanoKafka` and the broker, like every topic message).

use std::collections::{BTreeMap, BTreeSet};

use actix::prelude::*;
use futures::future::join_all;

use super::TopicActor;
use crate::actors::coordinator::{DescribeGroup, Join};
use crate::actors::partition::{GetCommitted, SetCommitted};
use crate::actors::supervise::guarded_future;
use crate::config::validate_id;
use crate::error::Result;
use crate::group::{Assignment, GroupOptions};
use crate::messages::topic_message;
use crate::storage::Committed;
use crate::types::GroupStats;

/// Join `group` on `topic` as a Kafka client's member: with the options the group has, or
/// `options` when this join creates it (a Kafka client cannot know a native group's
/// assignor). `holding`: the partitions of `topic` its client still holds as it joins (see
/// [`crate::group::GroupState::join_kafka_member`]; the native group withholds them from
/// their new owners). Sent by a `KafkaGroupActor` through its `AsyncNanoKafka` and the
/// broker; the topic starts the coordinator if needed and sends it `Join { options: None }`.
/// Reply: the member's assignment. Errors: `InvalidId`, `UnknownTopic`, `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct JoinAsKafkaMember {
    pub topic: String,
    pub group: String,
    pub member: String,
    pub options: GroupOptions,
    pub holding: BTreeSet<u32>,
}

/// Set `group`'s committed offset of `partition` to `offset` exactly, with `metadata`: the
/// next offset to read (a Kafka OffsetCommit, which may name any offset, past the log end
/// too; a native commit of `o` stores `o + 1`). No member of the group needs to exist.
/// Errors: `InvalidId` (group), `UnknownPartition`, `OffsetMetadataTooLarge`, `Io`,
/// `PartitionRestarted`, `PartitionFailed`. Sent by the listener (a
/// Kafka client's OffsetCommit) and by the topic itself for a `ResetOffset`; the topic
/// forwards it to the partition as `SetCommitted`.
#[derive(Debug)]
pub struct SetCommittedOffset {
    pub topic: String,
    pub group: String,
    pub partition: u32,
    pub offset: u64,
    pub metadata: String,
}

/// `group`'s committed offset and its metadata on every partition of `topic`, in partition
/// order: `None`
/// where it has none; a partition that cannot answer (restarting, failed) has its error.
/// Sent by the listener for a Kafka client's OffsetFetch; the topic asks every partition
/// `GetCommitted` (one number each, no stats walk). Errors: `UnknownTopic` only.
#[derive(Debug)]
pub struct CommittedOffsets {
    pub topic: String,
    pub group: String,
}

/// The native groups of `topic` (all, or those named): generation and assignment, no lag,
/// from each coordinator's `DescribeGroup` (a coordinator that stopped is left out). Sent by
/// the listener (DescribeGroups, ListGroups), by a `KafkaGroupActor` to read its members'
/// native assignments, and by the topic itself for a `ResetOffset`. Never fails but for
/// `UnknownTopic`.
#[derive(Debug)]
pub struct DescribeGroups {
    pub topic: String,
    pub groups: Option<Vec<String>>,
}

topic_message!(JoinAsKafkaMember => Assignment);
topic_message!(SetCommittedOffset => ());
topic_message!(CommittedOffsets => Vec<Result<Option<Committed>>>);
topic_message!(DescribeGroups => BTreeMap<String, GroupStats>);

impl Handler<JoinAsKafkaMember> for TopicActor {
    type Result = ResponseFuture<Result<Assignment>>;

    fn handle(&mut self, msg: JoinAsKafkaMember, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "JoinAsKafkaMember").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let join = Join {
                member: msg.member,
                options: None,
                holding: Some(msg.holding),
            };
            act.join_coordinator(&msg.group, msg.options, join)
        })
    }
}

impl Handler<SetCommittedOffset> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: SetCommittedOffset, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "SetCommittedOffset").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let target =
                validate_id("group", &msg.group).and_then(|()| act.partition(msg.partition));
            match target {
                Ok(partition) => Box::pin(partition.ask(SetCommitted {
                    group: msg.group,
                    offset: msg.offset,
                    metadata: msg.metadata,
                })),
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl Handler<CommittedOffsets> for TopicActor {
    type Result = ResponseFuture<Result<Vec<Result<Option<Committed>>>>>;

    fn handle(&mut self, msg: CommittedOffsets, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CommittedOffsets").entered();
        let partitions = self.partitions.clone();
        Box::pin(async move {
            let asks = partitions.iter().map(|p| {
                p.ask(GetCommitted {
                    group: msg.group.clone(),
                })
            });
            Ok(join_all(asks).await)
        })
    }
}

impl Handler<DescribeGroups> for TopicActor {
    type Result = ResponseFuture<Result<BTreeMap<String, GroupStats>>>;

    fn handle(&mut self, msg: DescribeGroups, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DescribeGroups").entered();
        let groups: Vec<_> = self
            .groups
            .iter()
            .filter(|(name, _)| {
                msg.groups
                    .as_ref()
                    .is_none_or(|wanted| wanted.contains(name))
            })
            .map(|(name, addr)| (name.clone(), addr.clone()))
            .collect();
        Box::pin(async move {
            let mut described = BTreeMap::new();
            for (name, addr) in groups {
                // A coordinator that stopped (the broker is stopping) is left out.
                if let Ok(stats) = addr.send(DescribeGroup).await {
                    described.insert(name, stats);
                }
            }
            Ok(described)
        })
    }
}
