//! Metadata: the one broker, and each topic's partitions (all led by it, leader epoch 0)
//! and, from v10, its topic id. Unknown topics are created with the default config when the
//! listener allows it and the client asks for it (`allow_auto_topic_creation`, true before
//! v4). From v10 a topic may be asked for by id instead of name: an unknown id is answered
//! UNKNOWN_TOPIC_ID (ids are never auto-created).
//!
//! ACLs: the list of every topic holds only those the principal may DESCRIBE; a topic asked
//! for by name that it may not describe is TOPIC_AUTHORIZATION_FAILED, by id UNKNOWN_TOPIC_ID
//! (an id tells nothing of a topic one may not see); auto-creating one needs CREATE on the
//! cluster or the topic, else TOPIC_AUTHORIZATION_FAILED.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::request::RequestContext;
use super::NODE_ID;
use crate::config::TopicConfig;
use crate::error::Error;
use crate::security::acl::Operation;
use crate::storage::data_dir::validate_topic_name;
use crate::types::TopicId;

/// Kafka's "authorized operations were not asked for".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub async fn handle(ctx: &RequestContext<'_>, request: MetadataRequest) -> MetadataResponse {
    let node = MetadataResponseBroker::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(ctx.shared.advertised_host.clone()))
        .with_port(ctx.shared.advertised_port);
    let response = MetadataResponse::default()
        .with_brokers(vec![node])
        .with_cluster_id(Some(StrBytes::from_string(ctx.shared.cluster_id.clone())))
        .with_controller_id(BrokerId(NODE_ID))
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED);
    // A stopping broker has no topics to offer; the client retries later.
    let known = ctx.broker.list_topics().await.unwrap_or_default();
    let mut ids = ctx.broker.topic_ids().await.unwrap_or_default();
    // v0 asks for every topic with an empty list; later versions with a null one.
    let requested = match request.topics {
        Some(topics) if !(ctx.version == 0 && topics.is_empty()) => topics,
        _ => {
            let topics = known
                .iter()
                .filter(|(name, _)| ctx.may_topic(Operation::Describe, name))
                .map(|(name, config)| topic(name, ids.get(name), Ok(config.partitions)));
            return response.with_topics(topics.collect());
        }
    };
    let mut topics = Vec::with_capacity(requested.len());
    for asked in requested {
        let name = match asked.name {
            Some(name) => name.0.to_string(),
            None => match ids.iter().find(|(name, id)| {
                id.as_bytes() == asked.topic_id.as_bytes()
                    && ctx.may_topic(Operation::Describe, name)
            }) {
                Some((name, _)) => name.clone(),
                None => {
                    let unknown = MetadataResponseTopic::default()
                        .with_topic_id(asked.topic_id)
                        .with_error_code(ResponseError::UnknownTopicId.code());
                    topics.push(unknown);
                    continue;
                }
            },
        };
        let partitions = match known.get(&name) {
            _ if !ctx.may_topic(Operation::Describe, &name) => {
                Err(ResponseError::TopicAuthorizationFailed)
            }
            Some(config) => Ok(config.partitions),
            None => {
                let created = create(ctx, &name, request.allow_auto_topic_creation).await;
                if created.is_ok() {
                    ids = ctx.broker.topic_ids().await.unwrap_or_default();
                }
                created
            }
        };
        topics.push(topic(&name, ids.get(&name), partitions));
    }
    response.with_topics(topics)
}

/// Creates `name` for a client that asked about it, if allowed. Its partition count, or the
/// error to report.
async fn create(ctx: &RequestContext<'_>, name: &str, allowed: bool) -> Result<u32, ResponseError> {
    if validate_topic_name(name).is_err() {
        return Err(ResponseError::InvalidTopicException);
    }
    if !(allowed && ctx.shared.config.auto_create_topics) {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    if !(ctx.may_cluster(Operation::Create) || ctx.may_topic(Operation::Create, name)) {
        return Err(ResponseError::TopicAuthorizationFailed);
    }
    let config = TopicConfig::default().partitions(ctx.shared.config.num_partitions);
    match ctx.broker.create_topic(name, config.clone()).await {
        // Another client's Metadata created it first: the same default config.
        Ok(()) | Err(Error::TopicExists { .. }) => {
            tracing::info!(
                topic = name,
                client_id = ctx.client_id,
                "created topic on a Metadata request"
            );
            Ok(config.partitions)
        }
        Err(e) => {
            tracing::warn!(topic = name, error = %e, "cannot auto-create a topic");
            Err(ResponseError::UnknownServerError)
        }
    }
}

/// A topic's entry; `id` is `None` (Kafka's zero id) only for a topic that does not exist.
fn topic(
    name: &str,
    id: Option<&TopicId>,
    partitions: Result<u32, ResponseError>,
) -> MetadataResponseTopic {
    let id = id.map_or(Uuid::nil(), |id| Uuid::from_bytes(*id.as_bytes()));
    let topic = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
        .with_topic_id(id)
        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED);
    match partitions {
        Err(e) => topic.with_error_code(e.code()),
        Ok(count) => topic.with_partitions((0..count).map(partition).collect()),
    }
}

fn partition(index: u32) -> MetadataResponsePartition {
    MetadataResponsePartition::default()
        .with_partition_index(index as i32)
        .with_leader_id(BrokerId(NODE_ID))
        .with_leader_epoch(0)
        .with_replica_nodes(vec![BrokerId(NODE_ID)])
        .with_isr_nodes(vec![BrokerId(NODE_ID)])
}
