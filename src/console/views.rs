//! The read views built from the broker's stats: the overview, a topic, the groups, a group.
//!
//! A group here is any group with a coordinator or a committed offset on a topic, or one a
//! Kafka client used through the listener. Its lag on a partition is the crate's:
//! `log end - max(committed, log start)`, the whole log when it committed nothing there.
//! A Kafka client's group is shown as the listener keeps it (state, protocol, generation,
//! members with their client id, host and instance id); native members of its topics'
//! native groups are listed beside its Kafka members.

use std::collections::{BTreeMap, BTreeSet};

use actix_web::{web, HttpResponse};
use serde_json::{json, Value};

use super::request::{ApiError, Caller};
use super::Console;
use crate::listener::KafkaGroupView;
use crate::types::{PartitionStats, TopicStats};

/// A group's lag on one partition.
fn lag(p: &PartitionStats, group: &str) -> u64 {
    let committed = p.committed.get(group).copied().unwrap_or(0);
    p.log_end_offset
        .saturating_sub(committed.max(p.log_start_offset))
}

/// Every group that reads `topic`: those with a coordinator, then those with a commit only.
fn groups_of(topic: &TopicStats) -> BTreeSet<String> {
    let mut groups: BTreeSet<String> = topic.groups.keys().cloned().collect();
    for p in &topic.partitions {
        groups.extend(p.committed.keys().cloned());
    }
    groups
}

/// `(group, total lag over the topic's partitions)` for each group reading `topic`.
pub(super) fn group_lags(topic: &TopicStats) -> Vec<(String, u64)> {
    groups_of(topic)
        .into_iter()
        .map(|g| {
            let total = topic.partitions.iter().map(|p| lag(p, &g)).sum();
            (g, total)
        })
        .collect()
}

/// What the groups list and the overview say of a group, over every topic.
#[derive(Default)]
struct GroupSummary {
    topics: Vec<String>,
    members: BTreeSet<String>,
    generation: u64,
    lag: u64,
}

/// Every Kafka client group the listener keeps (none without a listener).
async fn kafka_groups(console: &Console) -> BTreeMap<String, KafkaGroupView> {
    match &console.facts.kafka_groups {
        Some(reader) => reader.groups().await,
        None => BTreeMap::new(),
    }
}

/// The Kafka client group `name`, if the listener keeps one.
pub(super) async fn kafka_group(console: &Console, name: &str) -> Option<KafkaGroupView> {
    match &console.facts.kafka_groups {
        Some(reader) => reader.group(name).await,
        None => None,
    }
}

fn summaries(
    stats: &crate::types::BrokerStats,
    kafka: BTreeMap<String, KafkaGroupView>,
) -> BTreeMap<String, GroupSummary> {
    let mut groups: BTreeMap<String, GroupSummary> = BTreeMap::new();
    for (name, topic) in &stats.topics {
        for (group, total) in group_lags(topic) {
            let summary = groups.entry(group.clone()).or_default();
            summary.topics.push(name.clone());
            summary.lag += total;
            if let Some(g) = topic.groups.get(&group) {
                summary.members.extend(g.assignment.keys().cloned());
                summary.generation = summary.generation.max(g.generation);
            }
        }
    }
    for (name, group) in kafka {
        let summary = groups.entry(name).or_default();
        // Its members sit in its topics' native groups by their native ids.
        summary
            .members
            .extend(group.members.into_iter().map(|m| m.native_id));
        summary.generation = group.generation;
    }
    groups
}

pub(super) async fn overview(caller: Caller) -> Result<HttpResponse, ApiError> {
    let console = &caller.console;
    let stats = console.broker.stats().await?;
    let kafka = kafka_groups(console).await;
    let facts = &console.facts;
    let topics: Vec<Value> = stats
        .topics
        .iter()
        .map(|(name, t)| {
            let records: u64 = t
                .partitions
                .iter()
                .map(|p| p.log_end_offset - p.log_start_offset.min(p.log_end_offset))
                .sum();
            json!({
                "name": name,
                "partitions": t.partitions.len(),
                "size_bytes": t.partitions.iter().map(|p| p.size_bytes).sum::<u64>(),
                "records": records,
                "records_per_sec": console.sampler.rate(name),
            })
        })
        .collect();
    let groups: Vec<Value> = summaries(&stats, kafka)
        .into_iter()
        .map(|(group, s)| {
            json!({"group": group, "topics": s.topics, "members": s.members.len(), "lag": s.lag})
        })
        .collect();
    let mut broker = json!({
        "uptime_ms": facts.clock.now_ms().saturating_sub(facts.started_ms),
        "data_dir": facts.data_dir.display().to_string(),
        "fsync": facts.fsync,
        "listener": facts.listener.map(|a| a.to_string()),
        "connections": stats.listener.as_ref().map(|l| l.connections),
        "console_writes": console.writes,
        "version": env!("CARGO_PKG_VERSION"),
    });
    super::schemas::overview_facts(&console.broker, &mut broker);
    Ok(HttpResponse::Ok().json(json!({
        "broker": broker,
        "topics": topics,
        "groups": groups,
    })))
}

pub(super) async fn topic(
    caller: Caller,
    name: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let console = &caller.console;
    let config = console.broker.describe_topic(&name).await?;
    let stats = console.broker.stats().await?;
    let t = stats
        .topics
        .get(name.as_str())
        .ok_or_else(|| ApiError::not_found(format!("unknown topic {name:?}")))?;
    let config: BTreeMap<&str, String> = crate::config::kafka_names::describe(&config)
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    let partitions: Vec<Value> = t
        .partitions
        .iter()
        .map(|p| {
            json!({
                "partition": p.partition,
                "log_start": p.log_start_offset,
                "log_end": p.log_end_offset,
                "size_bytes": p.size_bytes,
                "segments": p.segments,
            })
        })
        .collect();
    let groups: Vec<Value> = groups_of(t)
        .into_iter()
        .map(|g| {
            let by_partition =
                |f: &dyn Fn(&PartitionStats) -> Option<u64>| -> BTreeMap<String, u64> {
                    t.partitions
                        .iter()
                        .filter_map(|p| f(p).map(|v| (p.partition.to_string(), v)))
                        .collect()
                };
            json!({
                "group": g,
                "lag": by_partition(&|p| Some(lag(p, &g))),
                "committed": by_partition(&|p| p.committed.get(&g).copied()),
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "name": name.as_str(),
        "config": config,
        "partitions": partitions,
        "groups": groups,
        "throughput": pairs(console.sampler.throughput(&name)),
    })))
}

/// A series as `[[t_ms, value], ...]`.
fn pairs(series: Vec<(u64, f64)>) -> Vec<Value> {
    series.into_iter().map(|(t, v)| json!([t, v])).collect()
}

pub(super) async fn groups(caller: Caller) -> Result<HttpResponse, ApiError> {
    let stats = caller.console.broker.stats().await?;
    let kafka = kafka_groups(&caller.console).await;
    let groups: Vec<Value> = summaries(&stats, kafka)
        .into_iter()
        .map(|(group, s)| {
            json!({
                "group": group,
                "topics": s.topics,
                "members": s.members.len(),
                "generation": s.generation,
                "lag": s.lag,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(groups))
}

pub(super) async fn group(
    caller: Caller,
    group: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let console = &caller.console;
    let stats = console.broker.stats().await?;
    let group = group.into_inner();
    let kafka = kafka_group(console, &group).await;
    // Native member → its partitions, over the group's topics.
    let mut natives: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut offsets = Vec::new();
    let (mut generation, mut known) = (0, kafka.is_some());
    for (name, t) in &stats.topics {
        if !groups_of(t).contains(&group) {
            continue;
        }
        known = true;
        if let Some(g) = t.groups.get(&group) {
            generation = generation.max(g.generation);
            for (member, partitions) in &g.assignment {
                let assigned = natives.entry(member.clone()).or_default();
                assigned.extend(
                    partitions
                        .iter()
                        .map(|p| json!({"topic": name, "partition": p})),
                );
            }
        }
        for p in &t.partitions {
            offsets.push(json!({
                "topic": name,
                "partition": p.partition,
                "committed": p.committed.get(&group),
                "log_end": p.log_end_offset,
                "lag": lag(p, &group),
            }));
        }
    }
    if !known {
        return Err(ApiError::not_found(format!("unknown group {group:?}")));
    }
    // A Kafka client group tells its own state, unless only native members are left in it.
    let (state, protocol, generation, mut members) = match kafka {
        Some(k) if !k.members.is_empty() || natives.is_empty() => {
            for m in &k.members {
                natives.remove(&m.native_id);
            }
            let members: Vec<Value> = k.members.iter().map(kafka_member).collect();
            (k.state, k.protocol, k.generation, members)
        }
        // The broker's own groups assign with its assignors; they have no protocol name.
        _ => {
            let state = if natives.is_empty() {
                "Empty"
            } else {
                "Stable"
            };
            (state, None, generation, Vec::new())
        }
    };
    members.extend(natives.into_iter().map(|(member_id, partitions)| {
        json!({"member_id": member_id, "client_id": null, "host": null,
               "group_instance_id": null, "partitions": partitions})
    }));
    Ok(HttpResponse::Ok().json(json!({
        "group": group,
        "state": state,
        "protocol": protocol,
        "generation": generation,
        "members": members,
        "offsets": offsets,
        "lag_history": pairs(console.sampler.lag_history(&group)),
    })))
}

fn kafka_member(m: &crate::listener::KafkaMemberView) -> Value {
    let partitions: Vec<Value> = m
        .partitions
        .iter()
        .map(|(topic, p)| json!({"topic": topic, "partition": p}))
        .collect();
    json!({
        "member_id": m.member_id,
        "client_id": m.client_id,
        "host": m.host,
        "group_instance_id": m.instance_id,
        "partitions": partitions,
    })
}
