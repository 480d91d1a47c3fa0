//! DescribeTopicPartitions (KIP-966): Metadata's topics and partitions for tools, paged. The
//! topics asked for (every topic when the list is empty), by name, from the request's cursor
//! on; at most `response_partition_limit` partitions per answer (and at most
//! [`MAX_PARTITIONS`]), with a cursor saying where the next page starts. Every partition is
//! led by this one broker, which is its one replica and its ISR; there are no eligible
//! leader replicas beyond it (an empty list).
//!
//! As Kafka: a cursor naming a topic the list does not hold, or a negative partition, is an
//! INVALID_REQUEST for every topic asked for; an unknown topic asked for by name is answered
//! UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name no topic can have).

use std::collections::BTreeSet;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::request::RequestContext;
use super::NODE_ID;
use crate::security::acl::Operation;
use crate::storage::data_dir::validate_topic_name;

/// The most partitions one answer holds (Kafka's `max.request.partition.size.limit`).
pub const MAX_PARTITIONS: i32 = 2000;

/// Kafka's "authorized operations were not asked for".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let known = ctx.broker.list_topics().await.unwrap_or_default();
    let ids = ctx.broker.topic_ids().await.unwrap_or_default();
    let all = request.topics.is_empty();
    let (cursor_topic, cursor_partition) = match &request.cursor {
        Some(c) => (c.topic_name.0.to_string(), c.partition_index),
        None => (String::new(), 0),
    };
    let asked: BTreeSet<String> = match all {
        true => known
            .keys()
            .filter(|t| ctx.may_topic(Operation::Describe, t))
            .cloned()
            .collect(),
        false => request
            .topics
            .iter()
            .map(|t| t.name.0.to_string())
            .collect(),
    };
    let topics: Vec<String> = asked.into_iter().filter(|t| *t >= cursor_topic).collect();
    let cursor_missing = !all && request.cursor.is_some() && !topics.contains(&cursor_topic);
    if cursor_missing || cursor_partition < 0 {
        let refused = request.topics.into_iter().map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(t.name))
                .with_error_code(ResponseError::InvalidRequest.code())
        });
        return DescribeTopicPartitionsResponse::default().with_topics(refused.collect());
    }

    let mut remaining = request.response_partition_limit.clamp(1, MAX_PARTITIONS);
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in topics {
        if remaining == 0 {
            // The page is full: the next one starts with this topic.
            response.next_cursor = Some(cursor(&name, 0));
            break;
        }
        if !ctx.may_topic(Operation::Describe, &name) {
            response.topics.push(
                missing(&name).with_error_code(ResponseError::TopicAuthorizationFailed.code()),
            );
            continue;
        }
        let Some(config) = known.get(&name) else {
            if !all {
                response.topics.push(missing(&name));
            }
            continue;
        };
        let count = config.partitions as i32;
        let start = if name == cursor_topic {
            cursor_partition
        } else {
            0
        };
        let end = count.min(start.saturating_add(remaining));
        let id = ids
            .get(&name)
            .map_or(Uuid::nil(), |id| Uuid::from_bytes(*id.as_bytes()));
        let partitions: Vec<_> = (start..end).map(partition).collect();
        remaining -= partitions.len() as i32;
        response.topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_topic_id(id)
                .with_partitions(partitions)
                .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED),
        );
        if end < count {
            response.next_cursor = Some(cursor(&name, end));
            break;
        }
    }
    response
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic_name(topic))
        .with_partition_index(partition)
}

fn missing(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let error = match validate_topic_name(name) {
        Ok(()) => ResponseError::UnknownTopicOrPartition,
        Err(_) => ResponseError::InvalidTopicException,
    };
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(error.code())
}

fn partition(index: i32) -> DescribeTopicPartitionsResponsePartition {
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(index)
        .with_leader_id(BrokerId(NODE_ID))
        .with_leader_epoch(0)
        .with_replica_nodes(vec![BrokerId(NODE_ID)])
        .with_isr_nodes(vec![BrokerId(NODE_ID)])
        .with_eligible_leader_replicas(Some(vec![]))
        .with_last_known_elr(Some(vec![]))
}
