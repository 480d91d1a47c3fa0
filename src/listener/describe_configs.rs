//! DescribeConfigs (v1–4): a topic's configs in Kafka's names (see `config::kafka_names`), and a
//! few read-only configs of the broker (resource name "0", its node id). Other resource
//! types are answered INVALID_REQUEST, each resource on its own.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use super::NODE_ID;
use crate::config::kafka_names::{
    self, Entry, SOURCE_DEFAULT, SOURCE_STATIC_BROKER, TYPE_BOOLEAN, TYPE_INT, TYPE_LONG,
    TYPE_STRING,
};
use crate::security::acl::Operation;

/// Kafka's resource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

pub async fn handle(
    ctx: &RequestContext<'_>,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let mut results = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let entries = match resource.resource_type {
            TOPIC => topic(ctx, &resource).await,
            BROKER => broker(ctx, &resource).await,
            other => Err((
                ResponseError::InvalidRequest,
                format!("resource type {other} is not served (only topics, 2, and the broker, 4)"),
            )),
        };
        let result = DescribeConfigsResult::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name);
        results.push(match entries {
            Ok(entries) => {
                let wanted = |e: &Entry| {
                    resource
                        .configuration_keys
                        .as_ref()
                        .is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name))
                };
                let configs = entries
                    .into_iter()
                    .filter(wanted)
                    .map(|e| config(e, request.include_synonyms))
                    .collect();
                result.with_configs(configs)
            }
            Err((error, message)) => result
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    DescribeConfigsResponse::default().with_results(results)
}

type Described = Result<Vec<Entry>, (ResponseError, String)>;

async fn topic(ctx: &RequestContext<'_>, resource: &DescribeConfigsResource) -> Described {
    let name = resource.resource_name.as_str();
    ctx.check_topic_said(Operation::DescribeConfigs, name)?;
    let topics = ctx
        .broker
        .list_topics()
        .await
        .map_err(|e| (ResponseError::UnknownServerError, e.to_string()))?;
    match topics.get(name) {
        Some(config) => Ok(kafka_names::describe(config)),
        None => Err((
            ResponseError::UnknownTopicOrPartition,
            format!("topic {name:?} does not exist"),
        )),
    }
}

async fn broker(ctx: &RequestContext<'_>, resource: &DescribeConfigsResource) -> Described {
    let name = resource.resource_name.as_str();
    ctx.check_cluster_said(Operation::DescribeConfigs)?;
    // An empty name asks for the cluster-wide defaults: the same, with one broker.
    if !name.is_empty() && name != NODE_ID.to_string() {
        return Err((
            ResponseError::InvalidRequest,
            format!("broker {name:?} does not exist (this one is {NODE_ID})"),
        ));
    }
    let settings = ctx
        .broker
        .describe_broker()
        .await
        .map_err(|e| (ResponseError::UnknownServerError, e.to_string()))?;
    let config = &ctx.shared.config;
    let fixed = |name, value: String, config_type| Entry {
        name,
        value,
        is_default: false,
        read_only: true,
        config_type,
        synonym: None,
    };
    Ok(vec![
        fixed(
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
            TYPE_BOOLEAN,
        ),
        fixed("broker.id", NODE_ID.to_string(), TYPE_INT),
        fixed(
            "group.consumer.heartbeat.interval.ms",
            config.heartbeat_interval().as_millis().to_string(),
            TYPE_INT,
        ),
        fixed(
            "group.initial.rebalance.delay.ms",
            config.initial_rebalance_delay.as_millis().to_string(),
            TYPE_INT,
        ),
        fixed(
            "log.dirs",
            settings.data_dir.display().to_string(),
            TYPE_STRING,
        ),
        fixed(
            "message.max.bytes",
            settings.max_record_bytes.to_string(),
            TYPE_INT,
        ),
        fixed(
            "num.partitions",
            config.num_partitions.to_string(),
            TYPE_INT,
        ),
        fixed(
            "socket.request.max.bytes",
            config.max_frame_bytes.to_string(),
            TYPE_LONG,
        ),
    ])
}

fn config(entry: Entry, include_synonyms: bool) -> DescribeConfigsResourceResult {
    let source = match entry.read_only {
        true => SOURCE_STATIC_BROKER,
        false => entry.source(),
    };
    let mut synonyms = Vec::new();
    if include_synonyms {
        // Kafka lists where the value comes from first (the topic's own setting or the
        // broker's), then the broker default it overrides.
        if !entry.is_default {
            synonyms.push(synonym_of(entry.name, &entry.value, source));
        }
        if let Some((name, value)) = &entry.synonym {
            synonyms.push(synonym_of(name, value, SOURCE_DEFAULT));
        }
    }
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_static_str(entry.name))
        .with_value(Some(StrBytes::from_string(entry.value)))
        .with_read_only(entry.read_only)
        .with_config_source(source)
        .with_synonyms(synonyms)
        .with_config_type(entry.config_type)
}

fn synonym_of(name: &'static str, value: &str, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(StrBytes::from_static_str(name))
        .with_value(Some(StrBytes::from_string(value.to_owned())))
        .with_source(source)
}
