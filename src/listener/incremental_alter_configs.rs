//! IncrementalAlterConfigs (v0–1): a topic's configs in Kafka's names (see `config::kafka_names`),
//! changed as `alter_topic` does. SET sets a config, DELETE returns it to its default;
//! APPEND and SUBTRACT add or remove items of a list config, and the only one here is
//! `cleanup.policy` (`delete`, `compact`); on any other config they are INVALID_CONFIG, as
//! is a subtraction that leaves no policy. A changed `segment.bytes` applies from the next
//! append on (see `TopicChanges`). Every resource is checked whole before anything of it changes;
//! `validate_only` changes nothing. Broker configs are read-only (INVALID_REQUEST), as are
//! other resource types.

use std::collections::BTreeSet;

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::create_partitions::refusal;
use super::request::RequestContext;
use crate::config::kafka_names;
use crate::config::{TopicChanges, TopicConfig};
use crate::security::acl::Operation;

/// Kafka's resource type of a topic.
pub(super) const TOPIC: i8 = 2;

/// Kafka's config operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Why a resource's configs cannot change: Kafka's error and its message.
pub(super) type Refusal = (ResponseError, String);

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let outcome = match resource.resource_type {
            TOPIC => alter(ctx, &resource, request.validate_only).await,
            other => Err((
                ResponseError::InvalidRequest,
                format!("resource type {other} cannot be altered (only topics, 2)"),
            )),
        };
        let response = AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name);
        responses.push(match outcome {
            Ok(()) => response,
            Err((error, message)) => response
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// Checks and, unless `validate_only`, applies one topic's config operations.
async fn alter(
    ctx: &RequestContext<'_>,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let topic = resource.resource_name.as_str();
    let api = "IncrementalAlterConfigs";
    alter_topic_configs(ctx, (api, topic), validate_only, |current| {
        operated(current, resource)
    })
    .await
}

/// Makes `topic`'s new config with `operate` from its current one and, unless
/// `validate_only`, applies it (AlterConfigs and IncrementalAlterConfigs differ only in
/// `operate`; `api` names the request in the log).
pub(super) async fn alter_topic_configs(
    ctx: &RequestContext<'_>,
    (api, topic): (&'static str, &str),
    validate_only: bool,
    operate: impl FnOnce(&TopicConfig) -> Result<TopicConfig, Refusal>,
) -> Result<(), Refusal> {
    ctx.check_topic_said(Operation::AlterConfigs, topic)?;
    let current = ctx
        .broker
        .list_topics()
        .await
        .map_err(|e| refusal(topic, e))?
        .remove(topic)
        .ok_or_else(|| {
            (
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {topic:?}"),
            )
        })?;
    let next = operate(&current)?;
    let changes = changes_between(&current, &next);
    if changes == TopicChanges::default() {
        return Ok(());
    }
    ctx.broker
        .alter_embedded(topic, changes, validate_only)
        .await
        .map_err(|e| refusal(topic, e))?;
    if !validate_only {
        tracing::info!(
            topic,
            api,
            client_id = ctx.client_id,
            "altered topic configs on a Kafka request"
        );
    }
    Ok(())
}

/// `current` with the resource's operations applied, in order.
fn operated(
    current: &TopicConfig,
    resource: &AlterConfigsResource,
) -> Result<TopicConfig, Refusal> {
    let mut names = BTreeSet::new();
    let mut next = current.clone();
    for config in &resource.configs {
        let name = config.name.as_str();
        if !names.insert(name) {
            return Err((
                ResponseError::InvalidRequest,
                format!("config {name:?} appears more than once for one resource"),
            ));
        }
        let value = match (config.config_operation, config.value.as_deref()) {
            (SET, Some(value)) => Some(value),
            (SET, None) => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("SET of {name:?} without a value"),
                ))
            }
            (DELETE, _) => None,
            (APPEND | SUBTRACT, value) => {
                let op = match config.config_operation {
                    APPEND => kafka_names::ListOp::Append,
                    _ => kafka_names::ListOp::Subtract,
                };
                kafka_names::change_list(&mut next, name, op, value.unwrap_or_default())
                    .map_err(|reason| (ResponseError::InvalidConfig, reason))?;
                continue;
            }
            (other, _) => {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("unknown config operation {other} for {name:?}"),
                ))
            }
        };
        kafka_names::apply(&mut next, name, value)
            .map_err(|reason| (ResponseError::InvalidConfig, reason))?;
    }
    Ok(next)
}

/// The changes that make `next` of `current`. Every field of `TopicConfig` is named here, so
/// that one added later cannot be left out silently (a change the request asked for, answered
/// as made, and never applied).
pub(crate) fn changes_between(current: &TopicConfig, next: &TopicConfig) -> TopicChanges {
    fn changed<T: PartialEq + Clone>(current: &T, next: &T) -> Option<T> {
        (current != next).then(|| next.clone())
    }
    let TopicConfig {
        partitions,
        max_size,
        retention_size,
        retention_bytes,
        retention_ms,
        backpressure,
        segment_bytes,
        timestamp_type,
        payload_type,
        cleanup_policy,
        delete_retention_ms,
        min_compaction_lag_ms,
        max_compaction_lag_ms,
        min_cleanable_dirty_ratio,
        compression_type,
        max_message_bytes,
        value_schema_validation,
        key_schema_validation,
    } = next;
    TopicChanges {
        partitions: changed(&current.partitions, partitions),
        max_size: changed(&current.max_size, max_size),
        retention_size: changed(&current.retention_size, retention_size),
        retention_bytes: changed(&current.retention_bytes, retention_bytes),
        retention_ms: changed(&current.retention_ms, retention_ms),
        backpressure: changed(&current.backpressure, backpressure),
        timestamp_type: changed(&current.timestamp_type, timestamp_type),
        segment_bytes: changed(&current.segment_bytes, segment_bytes),
        payload_type: changed(&current.payload_type, payload_type),
        cleanup_policy: changed(&current.cleanup_policy, cleanup_policy),
        delete_retention_ms: changed(&current.delete_retention_ms, delete_retention_ms),
        min_compaction_lag_ms: changed(&current.min_compaction_lag_ms, min_compaction_lag_ms),
        max_compaction_lag_ms: changed(&current.max_compaction_lag_ms, max_compaction_lag_ms),
        min_cleanable_dirty_ratio: changed(
            &current.min_cleanable_dirty_ratio,
            min_cleanable_dirty_ratio,
        ),
        compression_type: changed(&current.compression_type, compression_type),
        max_message_bytes: changed(&current.max_message_bytes, max_message_bytes),
        value_schema_validation: changed(&current.value_schema_validation, value_schema_validation),
        key_schema_validation: changed(&current.key_schema_validation, key_schema_validation),
    }
}
