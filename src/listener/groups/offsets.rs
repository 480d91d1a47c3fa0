//! OffsetCommit and OffsetFetch. A group's committed offsets are the partitions' own: the
//! next offset to read (Kafka's meaning), the same numbers `lag()` and the native group read,
//! whoever wrote them. A commit stores exactly the offset sent, as Kafka does: any offset
//! from 0 (backwards, and past the log end too, where reads and lag count from the log end),
//! with its metadata string (at most `MAX_OFFSET_METADATA_BYTES`, Kafka's
//! `offset.metadata.max.bytes`, else `OFFSET_METADATA_TOO_LARGE`), and OffsetFetch returns
//! both. A negative offset cannot be stored (`OFFSET_OUT_OF_RANGE`); Kafka's clients never
//! send one.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::actor::CheckCommit;
use super::code;
use super::consumer_actor::{CheckConsumerCommit, CheckConsumerFetch};
use crate::config::validate_id;
use crate::error::Error;
use crate::listener::request::RequestContext;
use crate::security::acl::Operation;

/// OffsetFetch's "no committed offset".
const NO_OFFSET: i64 = -1;

fn commit_error(e: &Error) -> i16 {
    match e {
        Error::UnknownTopic { .. } | Error::UnknownPartition { .. } => {
            ResponseError::UnknownTopicOrPartition
        }
        Error::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        Error::OffsetMetadataTooLarge { .. } => ResponseError::OffsetMetadataTooLarge,
        Error::InvalidId { .. } => ResponseError::InvalidGroupId,
        // Safe to retry: nothing was written.
        Error::PartitionRestarted { .. } => ResponseError::CoordinatorLoadInProgress,
        _ => ResponseError::UnknownServerError,
    }
    .code()
}

/// Whether the request may commit, as Kafka's group coordinator decides. A consumer-protocol
/// group with members fences by member epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; its
/// members commit with v9, UNSUPPORTED_VERSION below). A classic group takes a member of its
/// current generation (UNKNOWN_MEMBER_ID, then ILLEGAL_GENERATION, then
/// REBALANCE_IN_PROGRESS while the generation's assignment is being handed out; during the
/// join phase the current generation still commits). Any group without members takes a
/// standalone commit (generation -1, whatever member id it names: a KIP-848 client reading by
/// `assign()` sends the one it made). A generation for a group that has none comes from a
/// generation that is gone: ILLEGAL_GENERATION (v9: GROUP_ID_NOT_FOUND, as Kafka answers).
async fn check(ctx: &RequestContext<'_>, request: &OffsetCommitRequest) -> i16 {
    if let Err(e) = ctx.check_group(Operation::Read, &request.group_id) {
        return e.code();
    }
    if validate_id("group", &request.group_id).is_err() {
        return ResponseError::InvalidGroupId.code();
    }
    let (member, generation) = (
        request.member_id.to_string(),
        request.generation_id_or_member_epoch,
    );
    let consumer = ctx.shared.groups.consumer(&request.group_id);
    let classic = ctx.shared.groups.get(&request.group_id);
    let consumer_members = super::consumer::has_members(ctx, &request.group_id).await;
    if let Some(addr) = consumer.filter(|_| consumer_members || classic.is_none()) {
        if ctx.version < 9 && consumer_members {
            // A consumer-protocol group's members commit with v9 (Kafka's rule).
            return ResponseError::UnsupportedVersion.code();
        }
        let check = CheckConsumerCommit {
            member,
            epoch: generation,
        };
        return match addr.send(check).await {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => super::consumer::code(&e),
            Err(_) => ResponseError::CoordinatorNotAvailable.code(),
        };
    }
    match classic {
        None if generation < 0 => 0,
        None if ctx.version >= 9 => ResponseError::GroupIdNotFound.code(),
        None => ResponseError::IllegalGeneration.code(),
        Some(addr) => {
            let instance = request.group_instance_id.as_ref().map(|i| i.to_string());
            let check = CheckCommit {
                member,
                instance,
                generation,
            };
            match addr.send(check).await {
                Ok(Ok(())) => 0,
                Ok(Err(e)) => code(&e),
                Err(_) => ResponseError::CoordinatorNotAvailable.code(),
            }
        }
    }
}

/// Whether an OffsetFetch (v9) naming a member may read a consumer-protocol group's offsets:
/// the member's current epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH), as Kafka checks it.
/// Without a member (and epoch -1), and for a classic group, always.
async fn check_fetch(
    ctx: &RequestContext<'_>,
    group: &str,
    member: Option<String>,
    epoch: i32,
) -> i16 {
    let Some(addr) = ctx.shared.groups.consumer(group) else {
        return 0;
    };
    match addr.send(CheckConsumerFetch { member, epoch }).await {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => super::consumer::code(&e),
        Err(_) => ResponseError::CoordinatorNotAvailable.code(),
    }
}

pub async fn offset_commit(
    ctx: &RequestContext<'_>,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let refused = check(ctx, &request).await;
    let group = request.group_id.to_string();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let refused = match ctx.check_topic(Operation::Read, &topic.name) {
            Err(e) if refused == 0 => e.code(),
            _ => refused,
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let error = match (refused, u32::try_from(p.partition_index)) {
                (0, Ok(partition)) => match u64::try_from(p.committed_offset) {
                    Ok(offset) => {
                        let metadata = p.committed_metadata.as_deref().unwrap_or_default();
                        ctx.broker
                            .set_committed_offset(
                                &topic.name,
                                &group,
                                partition,
                                (offset, metadata),
                            )
                            .await
                            .map_or_else(|e| commit_error(&e), |()| 0)
                    }
                    Err(_) => ResponseError::OffsetOutOfRange.code(),
                },
                (0, Err(_)) => ResponseError::UnknownTopicOrPartition.code(),
                (refused, _) => refused,
            };
            partitions.push(
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(error),
            );
        }
        topics.push(
            OffsetCommitResponseTopic::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// One partition's answer: (partition, committed offset or -1, its metadata, error code).
type Fetched = (i32, i64, StrBytes, i16);

/// `group`'s committed offsets of the named partitions of `topic` (-1 where none), or,
/// without names, of every partition with a commit.
async fn fetch_topic(
    ctx: &RequestContext<'_>,
    group: &str,
    topic: &str,
    wanted: Option<&[i32]>,
) -> Vec<Fetched> {
    // An unknown topic has no commits: -1, as Kafka answers.
    let committed = ctx
        .broker
        .committed_offsets(topic, group)
        .await
        .unwrap_or_default();
    let answer = |p: i32| -> Fetched {
        match usize::try_from(p).ok().and_then(|i| committed.get(i)) {
            Some(Ok(Some(c))) => (
                p,
                i64::try_from(c.offset).unwrap_or(i64::MAX),
                StrBytes::from_string(c.metadata.clone()),
                0,
            ),
            Some(Err(e)) => (p, NO_OFFSET, StrBytes::default(), commit_error(e)),
            _ => (p, NO_OFFSET, StrBytes::default(), 0),
        }
    };
    match wanted {
        Some(partitions) => partitions.iter().map(|&p| answer(p)).collect(),
        None => (0..committed.len() as i32)
            .map(answer)
            .filter(|(_, offset, _, error)| *offset != NO_OFFSET || *error != 0)
            .collect(),
    }
}

/// Every topic with commits by `group` when `topics` is `None`.
async fn fetch_group(
    ctx: &RequestContext<'_>,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Vec<(String, Vec<Fetched>)> {
    let mut answers = Vec::new();
    match topics {
        Some(topics) => {
            for (topic, partitions) in topics {
                if let Err(e) = ctx.check_topic(Operation::Describe, &topic) {
                    let refused = |p| (p, NO_OFFSET, StrBytes::default(), e.code());
                    answers.push((topic, partitions.into_iter().map(refused).collect()));
                    continue;
                }
                let fetched = fetch_topic(ctx, group, &topic, Some(&partitions)).await;
                answers.push((topic, fetched));
            }
        }
        None => {
            let known = ctx.broker.list_topics().await.unwrap_or_default();
            let described = known
                .keys()
                .filter(|topic| ctx.may_topic(Operation::Describe, topic));
            for topic in described {
                let fetched = fetch_topic(ctx, group, topic, None).await;
                if !fetched.is_empty() {
                    answers.push((topic.clone(), fetched));
                }
            }
        }
    }
    answers
}

pub async fn offset_fetch(
    ctx: &RequestContext<'_>,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if ctx.version >= 8 {
        let mut groups = Vec::with_capacity(request.groups.len());
        for g in request.groups {
            let member = g.member_id.map(|m| m.to_string());
            let refused = match ctx.check_group(Operation::Describe, &g.group_id) {
                Err(e) => e.code(),
                Ok(()) => check_fetch(ctx, &g.group_id, member, g.member_epoch).await,
            };
            if refused != 0 {
                groups.push(
                    OffsetFetchResponseGroup::default()
                        .with_group_id(GroupId(g.group_id.0))
                        .with_error_code(refused),
                );
                continue;
            }
            let wanted = g.topics.map(|ts| {
                ts.into_iter()
                    .map(|t| (t.name.to_string(), t.partition_indexes))
                    .collect()
            });
            let fetched = fetch_group(ctx, &g.group_id, wanted).await;
            let topics = fetched
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(StrBytes::from_string(name)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(p, offset, metadata, error)| {
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(-1)
                                        .with_metadata(Some(metadata))
                                        .with_error_code(error)
                                })
                                .collect(),
                        )
                })
                .collect();
            groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(GroupId(g.group_id.0))
                    .with_topics(topics),
            );
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted: Option<Vec<(String, Vec<i32>)>> = request.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    // v2+ carry a top-level error; v1 only the partitions' (of the topics it named).
    let denied = ctx
        .check_group(Operation::Describe, &request.group_id)
        .err();
    let fetched = match (denied, ctx.version >= 2) {
        (Some(e), true) => return OffsetFetchResponse::default().with_error_code(e.code()),
        (Some(e), false) => wanted
            .unwrap_or_default()
            .into_iter()
            .map(|(topic, partitions)| {
                let refused = |p| (p, NO_OFFSET, StrBytes::default(), e.code());
                (topic, partitions.into_iter().map(refused).collect())
            })
            .collect(),
        (None, _) => fetch_group(ctx, &request.group_id, wanted).await,
    };
    let topics = fetched
        .into_iter()
        .map(|(name, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, offset, metadata, error)| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                                .with_committed_leader_epoch(-1)
                                .with_metadata(Some(metadata))
                                .with_error_code(error)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}
