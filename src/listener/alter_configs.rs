//! AlterConfigs (v0–2, topics): the older, whole-set form of IncrementalAlterConfigs, which
//! librdkafka's Rust binding (and so the Kafka backend) uses. As in Kafka, the configs sent
//! are the topic's whole set: a Kafka-named config left out returns to its default
//! (`segment.bytes` too, from the next append on). NanoKafka's own settings
//! (`max_size`, `retention_size`, backpressure) have no Kafka name and are kept. Each
//! resource is checked whole before any of it changes; `validate_only` changes nothing.

use std::collections::BTreeSet;

use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::incremental_alter_configs::{alter_topic_configs, Refusal, TOPIC};
use super::request::RequestContext;
use crate::config::kafka_names;
use crate::config::TopicConfig;

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let outcome = match resource.resource_type {
            TOPIC => {
                let topic = resource.resource_name.as_str();
                let name = ("AlterConfigs", topic);
                alter_topic_configs(ctx, name, request.validate_only, |current| {
                    replaced(current, &resource)
                })
                .await
            }
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
    AlterConfigsResponse::default().with_responses(responses)
}

/// `current` with its Kafka-named configs replaced by the resource's (see the module docs).
fn replaced(
    current: &TopicConfig,
    resource: &AlterConfigsResource,
) -> Result<TopicConfig, Refusal> {
    let mut next = current.clone();
    kafka_names::reset(&mut next);
    let mut names = BTreeSet::new();
    for config in &resource.configs {
        let name = config.name.as_str();
        if !names.insert(name) {
            return Err((
                ResponseError::InvalidRequest,
                format!("config {name:?} appears more than once for one resource"),
            ));
        }
        kafka_names::apply(&mut next, name, config.value.as_deref())
            .map_err(|reason| (ResponseError::InvalidConfig, reason))?;
    }
    Ok(next)
}
