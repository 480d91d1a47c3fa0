//! The KIP-848 consumer group protocol (`group.protocol=consumer`): ConsumerGroupHeartbeat
//! and ConsumerGroupDescribe. The group logic is
//! [`crate::group::consumer_protocol`]; each group name's [`ConsumerGroupActor`] drives it and
//! the members' native memberships (see `consumer_actor`).
//!
//! Partitions travel by topic id: a heartbeat's owned partitions are read through the
//! broker's topic ids (one round trip per heartbeat, which also lists the topics a
//! subscription is resolved against), and an owned topic id the broker does not know (its
//! topic deleted) is dropped.
//!
//! # Protocols do not mix
//! A group name is served by one protocol at a time, as Kafka serves it with its online
//! migration disabled (`group.consumer.migration.policy=disabled`): while a classic group of
//! that name has members, a ConsumerGroupHeartbeat is refused `GROUP_ID_NOT_FOUND` ("is not a
//! consumer group"), and while a consumer-protocol group has members, a JoinGroup is refused
//! `INCONSISTENT_GROUP_PROTOCOL`. Once the members have left, the other protocol may use the
//! name; committed offsets are the partitions' and stay.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::messages::consumer_group_describe_response as describe;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::actor::Describe;
use super::consumer_actor::{ConsumerBeat, ConsumerDescribed, DescribeConsumer};
use super::string;
use crate::config::validate_id;
use crate::group::classic::ClassicState;
use crate::group::consumer_protocol::{ConsumerError, HeartbeatRequest, Partitions};
use crate::listener::request::RequestContext;
use crate::security::acl::Operation;
use crate::types::TopicId;

/// Kafka's "authorized operations were not asked for".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
/// ConsumerGroupDescribe's member type of a consumer-protocol member.
const MEMBER_TYPE_CONSUMER: i8 = 1;

/// Kafka's error code for a refusal.
pub(super) fn code(e: &ConsumerError) -> i16 {
    match e {
        ConsumerError::InvalidRequest(_) => ResponseError::InvalidRequest,
        ConsumerError::UnsupportedAssignor(_) => ResponseError::UnsupportedAssignor,
        ConsumerError::InvalidRegularExpression(_) => ResponseError::InvalidRegularExpression,
        ConsumerError::UnknownMemberId => ResponseError::UnknownMemberId,
        ConsumerError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        ConsumerError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        ConsumerError::UnreleasedInstanceId(_) => ResponseError::UnreleasedInstanceId,
        ConsumerError::FencedInstanceId(_) => ResponseError::FencedInstanceId,
    }
    .code()
}

fn message(e: &ConsumerError) -> Option<String> {
    match e {
        ConsumerError::InvalidRequest(m)
        | ConsumerError::UnsupportedAssignor(m)
        | ConsumerError::InvalidRegularExpression(m)
        | ConsumerError::UnreleasedInstanceId(m)
        | ConsumerError::FencedInstanceId(m) => Some(m.clone()),
        _ => None,
    }
}

/// Whether `group` has consumer-protocol members (a JoinGroup must then be refused).
pub(super) async fn has_members(ctx: &RequestContext<'_>, group: &str) -> bool {
    match ctx.shared.groups.consumer(group) {
        Some(addr) => addr
            .send(DescribeConsumer)
            .await
            .is_ok_and(|d| !d.members.is_empty()),
        None => false,
    }
}

/// Whether `group` is a classic group with members.
async fn is_classic(ctx: &RequestContext<'_>, group: &str) -> bool {
    match ctx.shared.groups.get(group) {
        Some(addr) => addr
            .send(Describe)
            .await
            .is_ok_and(|d| d.state != ClassicState::Empty),
        None => false,
    }
}

pub async fn consumer_group_heartbeat(
    ctx: &RequestContext<'_>,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let refused = |code: i16, message: Option<String>| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
    };
    let group = request.group_id.to_string();
    if let Err(e) = ctx.check_group(Operation::Read, &group) {
        return refused(e.code(), None);
    }
    if group.is_empty() {
        let why = "GroupId can't be empty.".to_owned();
        return refused(ResponseError::InvalidRequest.code(), Some(why));
    }
    if let Err(e) = validate_id("group", &group) {
        return refused(ResponseError::InvalidGroupId.code(), Some(e.to_string()));
    }
    // Kafka's rule: every subscribed topic needs DESCRIBE, or the heartbeat is refused.
    let hidden = (request.subscribed_topic_names.iter().flatten())
        .any(|topic| !ctx.may_topic(Operation::Describe, topic.as_str()));
    if hidden {
        return refused(ResponseError::TopicAuthorizationFailed.code(), None);
    }
    if is_classic(ctx, &group).await {
        let why = format!("Group {group} is not a consumer group");
        return refused(ResponseError::GroupIdNotFound.code(), Some(why));
    }
    let (Ok(ids), Some(addr)) = (
        ctx.broker.topic_ids().await,
        ctx.shared.groups.consumer_or_start(ctx, &group).await,
    ) else {
        return refused(ResponseError::CoordinatorNotAvailable.code(), None);
    };
    let names: HashMap<_, &String> = ids.iter().map(|(name, id)| (wire_id(*id), name)).collect();
    let owned = request.topic_partitions.map(|owned| {
        let mut by_name = Partitions::new();
        for tp in owned {
            if let Some(name) = names.get(&tp.topic_id) {
                let partitions = tp.partitions.iter().filter_map(|&p| u32::try_from(p).ok());
                by_name
                    .entry((*name).clone())
                    .or_default()
                    .extend(partitions);
            }
        }
        by_name
    });
    let heartbeat = HeartbeatRequest {
        version: ctx.version,
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.map(|s| s.to_string()),
        rack_id: request.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .map(|names| names.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: request.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: request.server_assignor.map(|s| s.to_string()),
        owned,
        client_id: ctx.client_id.to_owned(),
        client_host: ctx.client_host(),
    };
    // A regex matches only the topics the principal may DESCRIBE.
    let topics: BTreeSet<String> = (ids.keys())
        .filter(|topic| ctx.may_topic(Operation::Describe, topic))
        .cloned()
        .collect();
    let beat = ConsumerBeat {
        request: heartbeat,
        topics,
    };
    let answer = match addr.send(beat).await {
        Err(_) => return refused(ResponseError::CoordinatorNotAvailable.code(), None),
        Ok(Err(e)) => return refused(code(&e), message(&e)),
        Ok(Ok(answer)) => answer,
    };
    let interval = ctx.shared.config.heartbeat_interval();
    let assignment = answer.assignment.map(|a| {
        let topics = by_id(&ids, &a).map(|(id, _, partitions)| {
            TopicPartitions::default()
                .with_topic_id(wire_id(id))
                .with_partitions(partitions)
        });
        Assignment::default().with_topic_partitions(topics.collect())
    });
    ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(string(&answer.member_id)))
        .with_member_epoch(answer.member_epoch)
        .with_heartbeat_interval_ms(i32::try_from(interval.as_millis()).unwrap_or(i32::MAX))
        .with_assignment(assignment)
}

/// A topic id as the wire carries it.
fn wire_id(id: TopicId) -> Uuid {
    Uuid::from_bytes(*id.as_bytes())
}

/// `partitions` by topic id: (id, name, partitions); a topic without an id (deleted since)
/// is left out.
fn by_id<'a>(
    ids: &'a BTreeMap<String, TopicId>,
    partitions: &'a Partitions,
) -> impl Iterator<Item = (TopicId, &'a String, Vec<i32>)> + 'a {
    partitions.iter().filter_map(|(topic, ps)| {
        let id = *ids.get(topic)?;
        Some((id, topic, ps.iter().map(|&p| p as i32).collect()))
    })
}

pub async fn consumer_group_describe(
    ctx: &RequestContext<'_>,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let ids = ctx.broker.topic_ids().await.unwrap_or_default();
    let mut groups = Vec::with_capacity(request.group_ids.len());
    for name in request.group_ids {
        let group = describe::DescribedGroup::default()
            .with_group_id(GroupId(name.0.clone()))
            .with_authorized_operations(OPERATIONS_NOT_REQUESTED);
        if let Err(e) = ctx.check_group(Operation::Describe, &name) {
            groups.push(group.with_error_code(e.code()));
            continue;
        }
        let described = match ctx.shared.groups.consumer(&name) {
            Some(addr) => addr.send(DescribeConsumer).await.ok(),
            None => None,
        };
        let not_found = |why: String| {
            group
                .clone()
                .with_error_code(ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(StrBytes::from_string(why)))
        };
        groups.push(match described {
            Some(d) => describe_one(group, d, &ids),
            None if is_classic(ctx, &name).await => {
                not_found(format!("Group {} is not a consumer group.", &*name))
            }
            None => not_found(format!("Group {} not found.", &*name)),
        });
    }
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

fn describe_one(
    group: describe::DescribedGroup,
    d: ConsumerDescribed,
    ids: &BTreeMap<String, TopicId>,
) -> describe::DescribedGroup {
    let assignment = |partitions: &Partitions| {
        let topics = by_id(ids, partitions).map(|(id, name, partitions)| {
            describe::TopicPartitions::default()
                .with_topic_id(wire_id(id))
                .with_topic_name(TopicName(string(name)))
                .with_partitions(partitions)
        });
        describe::Assignment::default().with_topic_partitions(topics.collect())
    };
    let members = d.members.iter().map(|m| {
        describe::Member::default()
            .with_member_id(string(&m.id))
            .with_instance_id(m.instance_id.as_deref().map(string))
            .with_rack_id(m.rack_id.as_deref().map(string))
            .with_member_epoch(m.member_epoch)
            .with_client_id(string(&m.client_id))
            .with_client_host(string(&m.client_host))
            .with_subscribed_topic_names(
                m.subscribed_topic_names
                    .iter()
                    .map(|t| TopicName(string(t)))
                    .collect(),
            )
            .with_subscribed_topic_regex(m.subscribed_topic_regex.as_deref().map(string))
            .with_assignment(assignment(&m.assigned))
            .with_target_assignment(assignment(&m.target))
            .with_member_type(MEMBER_TYPE_CONSUMER)
    });
    group
        .with_group_state(string(d.state.kafka_name()))
        .with_group_epoch(d.group_epoch)
        .with_assignment_epoch(d.group_epoch)
        .with_assignor_name(string(d.assignor))
        .with_members(members.collect())
}
