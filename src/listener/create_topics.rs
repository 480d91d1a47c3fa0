//! CreateTopics (v2–5): one broker, so the replication factor is 1 (or -1, the broker's
//! default), and a replica assignment may only place every partition on this broker (as
//! Kafka, the assignment then gives the partition count, and `num_partitions` and
//! `replication_factor` must be -1); configs in Kafka's names (see `config::kafka_names`).
//! Each topic of a request is answered on its own: the valid ones are created whatever the
//! others' errors. Creation is synchronous, so `timeout_ms` never runs out.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use super::NODE_ID;
use crate::config::kafka_names;
use crate::config::{TopicConfig, MAX_PARTITIONS};
use crate::error::Error;
use crate::security::acl::Operation;
use crate::storage::data_dir::validate_topic_name;

/// Why a topic cannot be created: Kafka's error and its message.
type Refusal = (ResponseError, String);

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for topic in &request.topics {
        *seen.entry(topic.name.0.to_string()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let outcome = match seen[&name] {
            1 => create(ctx, &topic, request.validate_only).await,
            _ => Err((
                ResponseError::InvalidRequest,
                format!("topic {name:?} appears more than once in the request"),
            )),
        };
        results.push(result(ctx.version, topic, outcome));
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// Checks and, unless `validate_only`, creates one topic; its config.
async fn create(
    ctx: &RequestContext<'_>,
    topic: &CreatableTopic,
    validate_only: bool,
) -> Result<TopicConfig, Refusal> {
    let name = topic.name.0.as_str();
    if !ctx.may_cluster(Operation::Create) {
        ctx.check_topic_said(Operation::Create, name)?;
    }
    validate_topic_name(name).map_err(|e| {
        (
            ResponseError::InvalidTopicException,
            Error::from(e).to_string(),
        )
    })?;
    let config = config_of(topic, ctx.shared.config.num_partitions)?;
    if validate_only {
        let known = ctx.broker.list_topics().await.unwrap_or_default();
        return match known.contains_key(name) {
            true => Err(exists(name)),
            false => Ok(config),
        };
    }
    match ctx.broker.create_topic(name, config.clone()).await {
        Ok(()) => {
            tracing::info!(
                topic = name,
                client_id = ctx.client_id,
                "created topic on a CreateTopics request"
            );
            Ok(config)
        }
        Err(Error::TopicExists { .. }) => Err(exists(name)),
        Err(e @ Error::InvalidConfig { .. }) => Err((ResponseError::InvalidConfig, e.to_string())),
        Err(e) => {
            tracing::warn!(topic = name, error = %e, "cannot create a topic");
            Err((ResponseError::UnknownServerError, e.to_string()))
        }
    }
}

fn exists(name: &str) -> Refusal {
    (
        ResponseError::TopicAlreadyExists,
        format!("topic {name:?} already exists"),
    )
}

/// The topic's config as requested, checked; `default_partitions` (the builder's
/// `num_partitions`) when it asks for -1.
fn config_of(topic: &CreatableTopic, default_partitions: u32) -> Result<TopicConfig, Refusal> {
    if !topic.assignments.is_empty() {
        let partitions = assigned_partitions(topic)?;
        return with_configs(topic, TopicConfig::default().partitions(partitions));
    }
    if !matches!(topic.replication_factor, -1 | 1) {
        return Err((
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} is larger than the number of brokers (1)",
                topic.replication_factor
            ),
        ));
    }
    let partitions = match topic.num_partitions {
        -1 => default_partitions,
        n if n >= 1 && n as u32 <= MAX_PARTITIONS => n as u32,
        n => {
            return Err((
                ResponseError::InvalidPartitions,
                format!("number of partitions must be 1..={MAX_PARTITIONS} (or -1), got {n}"),
            ))
        }
    };
    with_configs(topic, TopicConfig::default().partitions(partitions))
}

/// The partition count a replica assignment gives, checked as Kafka checks it: partitions
/// numbered from 0 without gaps, each on this broker alone.
fn assigned_partitions(topic: &CreatableTopic) -> Result<u32, Refusal> {
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Err((
            ResponseError::InvalidRequest,
            "both num_partitions or replication_factor and a replica assignment were set: \
             with an assignment both must be -1"
                .into(),
        ));
    }
    let count = topic.assignments.len();
    if count > MAX_PARTITIONS as usize {
        return Err((
            ResponseError::InvalidPartitions,
            format!("number of partitions must be 1..={MAX_PARTITIONS}, got {count}"),
        ));
    }
    let mut indexes: Vec<i32> = topic
        .assignments
        .iter()
        .map(|a| a.partition_index)
        .collect();
    indexes.sort_unstable();
    if indexes
        .iter()
        .enumerate()
        .any(|(i, &p)| i as i64 != i64::from(p))
    {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            format!("the assignment's partitions must be 0 to {} without gaps or repeats, got {indexes:?}", count - 1),
        ));
    }
    for assignment in &topic.assignments {
        let brokers: Vec<i32> = assignment.broker_ids.iter().map(|b| b.0).collect();
        if brokers != [NODE_ID] {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "partition {} is assigned to brokers {brokers:?}: this cluster is one broker, \
                     {NODE_ID}, which holds every partition alone",
                    assignment.partition_index
                ),
            ));
        }
    }
    Ok(count as u32)
}

/// `config` with the topic's configs in Kafka's names applied, checked.
fn with_configs(topic: &CreatableTopic, mut config: TopicConfig) -> Result<TopicConfig, Refusal> {
    for entry in &topic.configs {
        kafka_names::apply(&mut config, &entry.name, entry.value.as_deref())
            .map_err(|reason| (ResponseError::InvalidConfig, reason))?;
    }
    config
        .validate()
        .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
    Ok(config)
}

fn result(
    version: i16,
    topic: CreatableTopic,
    outcome: Result<TopicConfig, Refusal>,
) -> CreatableTopicResult {
    let result = CreatableTopicResult::default().with_name(topic.name);
    match outcome {
        Err((error, message)) => result
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message))),
        // v5 describes the topic created; earlier versions cannot carry it.
        Ok(config) if version >= 5 => result
            .with_num_partitions(config.partitions as i32)
            .with_replication_factor(1)
            .with_configs(Some(
                kafka_names::describe(&config)
                    .into_iter()
                    .map(|e| {
                        CreatableTopicConfigs::default()
                            .with_config_source(e.source())
                            .with_name(StrBytes::from_static_str(e.name))
                            .with_value(Some(StrBytes::from_string(e.value)))
                            .with_read_only(e.read_only)
                    })
                    .collect(),
            )),
        Ok(_) => result,
    }
}
