//! CreatePartitions (v0–3): grows a topic as `alter_topic` does; one broker, so replica
//! assignments are refused. `validate_only` checks without growing. The growth is
//! synchronous, so `timeout_ms` never runs out.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use crate::config::{TopicChanges, MAX_PARTITIONS};
use crate::error::Error;

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
    if topic.assignments.as_ref().is_some_and(|a| !a.is_empty()) {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            "replica assignments are not supported: one broker holds every partition".into(),
        ));
    }
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
