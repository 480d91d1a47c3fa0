//! CreatePartitions (v0–3): grows a topic as `alter_topic` does. One broker, so a replica
//! assignment may only place each new partition on this broker alone (as Kafka checks it: one
//! entry per new partition, else INVALID_REPLICA_ASSIGNMENT). `validate_only` checks without
//! growing. The growth is synchronous, so `timeout_ms` never runs out.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use super::NODE_ID;
use crate::config::{TopicChanges, MAX_PARTITIONS};
use crate::error::Error;
use crate::security::acl::Operation;

/// Why a topic cannot grow: Kafka's error and its message.
type Refusal = (ResponseError, String);

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for topic in &request.topics {
        *seen.entry(topic.name.0.to_string()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let outcome = match seen[&name] {
            1 => grow(ctx, &topic, request.validate_only).await,
            _ => Err((
                ResponseError::InvalidRequest,
                format!("topic {name:?} appears more than once in the request"),
            )),
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name);
        results.push(match outcome {
            Ok(()) => result,
            Err((error, message)) => result
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

/// Checks and, unless `validate_only`, grows one topic.
async fn grow(
    ctx: &RequestContext<'_>,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), Refusal> {
    let name = topic.name.0.as_str();
    ctx.check_topic_said(Operation::Alter, name)?;
    let count = match u32::try_from(topic.count) {
        Ok(n) if (1..=MAX_PARTITIONS).contains(&n) => n,
        _ => {
            return Err((
                ResponseError::InvalidPartitions,
                format!(
                    "number of partitions must be 1..={MAX_PARTITIONS}, got {}",
                    topic.count
                ),
            ))
        }
    };
    if let Some(assignments) = topic.assignments.as_ref().filter(|a| !a.is_empty()) {
        let current = ctx
            .broker
            .describe_topic(name)
            .await
            .map_err(|e| refusal(name, e))?
            .partitions;
        check_assignments(current, count, assignments)?;
    }
    let changes = TopicChanges::default().partitions(count);
    match ctx
        .broker
        .alter_embedded(name, changes, validate_only)
        .await
    {
        Ok(_) if validate_only => Ok(()),
        Ok(_) => {
            tracing::info!(
                topic = name,
                partitions = count,
                client_id = ctx.client_id,
                "grew topic on a CreatePartitions request"
            );
            Ok(())
        }
        Err(e) => Err(refusal(name, e)),
    }
}

/// Checks a replica assignment for growing a topic from `current` to `count` partitions:
/// one entry per new partition, each naming this broker alone. (A count not above
/// `current` is left to the alter, which refuses it.)
fn check_assignments(
    current: u32,
    count: u32,
    assignments: &[CreatePartitionsAssignment],
) -> Result<(), Refusal> {
    let added = count.saturating_sub(current) as usize;
    if added > 0 && assignments.len() != added {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            format!(
                "increasing the number of partitions by {added} but {} assignments provided",
                assignments.len()
            ),
        ));
    }
    for (i, assignment) in assignments.iter().enumerate() {
        let brokers: Vec<i32> = assignment.broker_ids.iter().map(|b| b.0).collect();
        if brokers != [NODE_ID] {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "new partition {} is assigned to brokers {brokers:?}: this cluster is one \
                     broker, {NODE_ID}, which holds every partition alone",
                    current as usize + i
                ),
            ));
        }
    }
    Ok(())
}

/// Kafka's error for an alter the broker refused.
pub(super) fn refusal(topic: &str, e: Error) -> Refusal {
    match e {
        Error::UnknownTopic { .. } | Error::InvalidTopicName { .. } => {
            (ResponseError::UnknownTopicOrPartition, e.to_string())
        }
        Error::InvalidConfig {
            field: "partitions",
            ..
        } => (ResponseError::InvalidPartitions, e.to_string()),
        Error::InvalidConfig { .. } => (ResponseError::InvalidConfig, e.to_string()),
        e => {
            tracing::warn!(topic, error = %e, "cannot alter a topic");
            (ResponseError::UnknownServerError, e.to_string())
        }
    }
}
