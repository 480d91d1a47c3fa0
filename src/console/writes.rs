//! The writes: create, alter and delete a topic, produce a test record, reset a group's
//! offsets, delete records. Each is refused with 403 unless the console was started with
//! writes enabled, and with 400 unless its body says `"confirm": true`; each one done is
//! logged with `tracing::info!` (what, and who: the peer address).

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::request::{ApiError, Caller};
use crate::config::{kafka_names, TopicConfig};
use crate::storage::RecordBatch;
use crate::types::Header;

/// The body's fields, after the write was found allowed and confirmed.
fn admitted<T: DeserializeOwned>(caller: &Caller, body: Value) -> Result<T, ApiError> {
    if !caller.console.writes {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "writes are disabled; start the console with --console-writes",
        ));
    }
    if body.get("confirm") != Some(&Value::Bool(true)) {
        return Err(ApiError::bad_request(
            "a write needs \"confirm\": true in its body",
        ));
    }
    serde_json::from_value(body).map_err(|e| ApiError::bad_request(format!("bad body: {e}")))
}

fn peer(caller: &Caller) -> String {
    caller
        .peer
        .map_or_else(|| "unknown".to_owned(), |a| a.to_string())
}

/// `config` (Kafka names → values) applied to `base`.
fn with_configs(
    mut base: TopicConfig,
    config: &BTreeMap<String, Value>,
) -> Result<TopicConfig, ApiError> {
    for (name, value) in config {
        let value = match value {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        kafka_names::apply(&mut base, name, value.as_deref())
            .map_err(|reason| ApiError::bad_request(format!("config {name:?}: {reason}")))?;
    }
    Ok(base)
}

#[derive(Deserialize)]
struct CreateTopic {
    name: String,
    partitions: u32,
    #[serde(default)]
    config: BTreeMap<String, Value>,
}

pub(super) async fn create_topic(
    caller: Caller,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let req: CreateTopic = admitted(&caller, body.into_inner())?;
    let config = with_configs(
        TopicConfig {
            partitions: req.partitions,
            ..TopicConfig::default()
        },
        &req.config,
    )?;
    caller
        .console
        .broker
        .create_topic(&req.name, config)
        .await?;
    tracing::info!(
        topic = req.name,
        partitions = req.partitions,
        peer = peer(&caller),
        "console: created a topic"
    );
    Ok(HttpResponse::Created().json(json!({"name": req.name, "partitions": req.partitions})))
}

#[derive(Deserialize)]
struct AlterTopic {
    config: BTreeMap<String, Value>,
}

pub(super) async fn alter_topic(
    caller: Caller,
    topic: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let req: AlterTopic = admitted(&caller, body.into_inner())?;
    let broker = &caller.console.broker;
    let current = broker.describe_topic(&topic).await?;
    let next = with_configs(current.clone(), &req.config)?;
    let changes = crate::listener::changes_between(&current, &next);
    broker.alter_topic(&topic, changes).await?;
    tracing::info!(topic = topic.as_str(), configs = ?req.config.keys().collect::<Vec<_>>(),
        peer = peer(&caller), "console: altered a topic's configs");
    Ok(HttpResponse::Ok().json(json!({"name": topic.as_str()})))
}

#[derive(Deserialize)]
struct Confirmed {}

pub(super) async fn delete_topic(
    caller: Caller,
    topic: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let Confirmed {} = admitted(&caller, body.into_inner())?;
    caller.console.broker.delete_topic(&topic).await?;
    tracing::info!(
        topic = topic.as_str(),
        peer = peer(&caller),
        "console: deleted a topic"
    );
    Ok(HttpResponse::Ok().json(json!({"name": topic.as_str()})))
}

#[derive(Deserialize)]
struct Produce {
    partition: Option<u32>,
    key: Option<String>,
    value: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

pub(super) async fn produce(
    caller: Caller,
    topic: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let req: Produce = admitted(&caller, body.into_inner())?;
    let headers: Vec<Header> = req
        .headers
        .iter()
        .map(|(k, v)| Header::new(k.clone(), v.as_bytes()))
        .collect();
    let mut batch = RecordBatch::new();
    crate::trace::push_raw(
        &mut batch,
        req.key.as_deref().map(str::as_bytes),
        req.value.as_bytes(),
        &headers,
    );
    let delivery = caller
        .console
        .broker
        .produce_batch(&topic, req.partition, batch)
        .await?
        .pop()
        .ok_or_else(|| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "no delivery"))?;
    tracing::info!(
        topic = topic.as_str(),
        partition = delivery.partition,
        offset = delivery.offset,
        peer = peer(&caller),
        "console: produced a test record"
    );
    Ok(
        HttpResponse::Ok()
            .json(json!({"partition": delivery.partition, "offset": delivery.offset})),
    )
}

#[derive(Deserialize)]
struct DeleteRecords {
    before: u64,
}

pub(super) async fn delete_records(
    caller: Caller,
    path: web::Path<(String, u32)>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let req: DeleteRecords = admitted(&caller, body.into_inner())?;
    let (topic, partition) = path.into_inner();
    let log_start = caller
        .console
        .broker
        .delete_records(&topic, partition, req.before)
        .await?;
    tracing::info!(
        topic,
        partition,
        before = req.before,
        log_start,
        peer = peer(&caller),
        "console: deleted records"
    );
    Ok(HttpResponse::Ok().json(json!({"log_start": log_start})))
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ResetTo {
    Earliest,
    Latest,
    Timestamp,
    Offset,
}

#[derive(Deserialize)]
struct Reset {
    topic: String,
    to: ResetTo,
    value: Option<u64>,
    partitions: Option<Vec<u32>>,
}

pub(super) async fn reset(
    caller: Caller,
    group: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let req: Reset = admitted(&caller, body.into_inner())?;
    let broker = &caller.console.broker;
    // A Kafka client's group may hold partitions no native group knows of (one its leader
    // assigns), so its own members count too.
    if let Some(k) = super::views::kafka_group(&caller.console, &group).await {
        if !k.members.is_empty() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "group {:?} has {} live Kafka client member(s): stop them first",
                    group.as_str(),
                    k.members.len()
                ),
            ));
        }
    }
    let stats = broker.stats().await?;
    let topic = stats
        .topics
        .get(&req.topic)
        .ok_or_else(|| ApiError::not_found(format!("unknown topic {:?}", req.topic)))?;
    if topic
        .groups
        .get(group.as_str())
        .is_some_and(|g| !g.assignment.is_empty())
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "group {:?} has live members on {:?}: stop them first",
                group.as_str(),
                req.topic
            ),
        ));
    }
    let value = match (&req.to, req.value) {
        (ResetTo::Timestamp | ResetTo::Offset, None) => {
            return Err(ApiError::bad_request(
                "\"to\": \"timestamp\" and \"offset\" need a \"value\"",
            ))
        }
        (_, value) => value.unwrap_or(0),
    };
    let chosen: Vec<_> = match &req.partitions {
        Some(wanted) => {
            if let Some(p) = wanted
                .iter()
                .find(|p| **p as usize >= topic.partitions.len())
            {
                return Err(ApiError::not_found(format!(
                    "{:?} has no partition {p}",
                    req.topic
                )));
            }
            topic
                .partitions
                .iter()
                .filter(|p| wanted.contains(&p.partition))
                .collect()
        }
        None => topic.partitions.iter().collect(),
    };
    let mut offsets = Vec::with_capacity(chosen.len());
    for p in chosen {
        let (start, end) = (p.log_start_offset, p.log_end_offset);
        let offset = match req.to {
            ResetTo::Earliest => start,
            ResetTo::Latest => end,
            ResetTo::Timestamp => broker
                .offset_for_timestamp(&req.topic, p.partition, value)
                .await?
                .unwrap_or(end),
            // As Kafka's tool does: an offset outside the log goes to its nearest end.
            ResetTo::Offset => value.clamp(start, end),
        };
        broker
            .reset_offset(&req.topic, &group, p.partition, offset)
            .await?;
        offsets.push(json!({"partition": p.partition, "offset": offset}));
    }
    tracing::info!(group = group.as_str(), topic = req.topic, offsets = %serde_json::Value::Array(offsets.clone()),
        peer = peer(&caller), "console: reset a group's offsets");
    Ok(HttpResponse::Ok().json(json!({"offsets": offsets})))
}
