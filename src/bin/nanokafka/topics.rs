//! `nanokafka topics list` and `nanokafka topics describe TOPIC`: a data directory's topics,
//! their configs and their partitions' bounds, read offline.

use std::collections::BTreeMap;
use std::process::ExitCode;

use nanokafka::{PartitionStats, TopicConfig};
use serde_json::json;

use crate::offline::{self, Failure, OfflineArgs};

#[derive(Debug, clap::Subcommand)]
pub enum TopicsCommand {
    /// Every topic: partitions, records per partition, retention.
    List(OfflineArgs),
    /// One topic's config and each partition's offsets, segments and bytes.
    Describe {
        /// The topic.
        topic: String,
        #[command(flatten)]
        args: OfflineArgs,
    },
}

pub fn run(command: TopicsCommand) -> ExitCode {
    offline::finish(match command {
        TopicsCommand::List(args) => list(&args),
        TopicsCommand::Describe { topic, args } => describe(&topic, &args),
    })
}

/// Every topic's config and partition stats, read with the broker closed again after.
type Topics = BTreeMap<String, (TopicConfig, Vec<PartitionStats>)>;

/// Reads every topic of the data directory.
pub fn read(args: &OfflineArgs) -> Result<Topics, Failure> {
    let broker = offline::open(&args.data_dir)?;
    let read = || -> Result<Topics, Failure> {
        let mut stats = broker.stats()?.topics;
        let topics = broker.list_topics()?;
        Ok(topics
            .into_iter()
            .map(|(name, config)| {
                let partitions = stats
                    .remove(&name)
                    .map(|s| s.partitions)
                    .unwrap_or_default();
                (name, (config, partitions))
            })
            .collect())
    };
    let topics = read();
    offline::close(broker)?;
    topics
}

fn list(args: &OfflineArgs) -> Result<(), Failure> {
    let topics = read(args)?;
    if args.json {
        let topics: Vec<_> = topics
            .iter()
            .map(|(name, (config, partitions))| {
                let counts = records(partitions);
                json!({
                    "name": name,
                    "partitions": config.partitions,
                    "records": counts.iter().sum::<u64>(),
                    "records_per_partition": {
                        "min": counts.iter().min(),
                        "max": counts.iter().max(),
                    },
                    "retention": retention_json(config),
                })
            })
            .collect();
        offline::print_json(&json!({ "topics": topics }));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = topics
        .iter()
        .map(|(name, (config, partitions))| {
            let counts = records(partitions);
            let per_partition = match (counts.iter().min(), counts.iter().max()) {
                (Some(min), Some(max)) if min == max => min.to_string(),
                (Some(min), Some(max)) => format!("{min}-{max}"),
                _ => "-".to_owned(),
            };
            vec![
                name.clone(),
                config.partitions.to_string(),
                counts.iter().sum::<u64>().to_string(),
                per_partition,
                retention_text(config),
            ]
        })
        .collect();
    offline::print_table(
        &[
            "TOPIC",
            "PARTITIONS",
            "RECORDS",
            "PER PARTITION",
            "RETENTION",
        ],
        &rows,
    );
    Ok(())
}

fn describe(topic: &str, args: &OfflineArgs) -> Result<(), Failure> {
    let mut topics = read(args)?;
    let Some((config, partitions)) = topics.remove(topic) else {
        return Err(unknown_topic(topic, args, &topics));
    };
    if args.json {
        let partitions: Vec<_> = partitions
            .iter()
            .map(|p| {
                json!({
                    "partition": p.partition,
                    "log_start_offset": p.log_start_offset,
                    "log_end_offset": p.log_end_offset,
                    "records": p.log_end_offset - p.log_start_offset,
                    "segments": p.segments,
                    "size_bytes": p.size_bytes,
                    "failed": p.failed,
                })
            })
            .collect();
        offline::print_json(&json!({
            "name": topic,
            "config": config,
            "partitions": partitions,
        }));
        return Ok(());
    }
    println!("topic: {topic}");
    println!("partitions: {}", config.partitions);
    println!("retention: {}", retention_text(&config));
    println!("segment bytes: {}", config.segment_bytes);
    println!("timestamp type: {:?}", config.timestamp_type);
    match config.max_size {
        Some(records) => println!(
            "max size: {records} records (then {:?})",
            config.backpressure
        ),
        None => println!("max size: none"),
    }
    println!();
    let rows: Vec<Vec<String>> = partitions
        .iter()
        .map(|p| {
            vec![
                p.partition.to_string(),
                p.log_start_offset.to_string(),
                p.log_end_offset.to_string(),
                (p.log_end_offset - p.log_start_offset).to_string(),
                p.segments.to_string(),
                p.size_bytes.to_string(),
                p.failed.clone().unwrap_or_default(),
            ]
        })
        .collect();
    offline::print_table(
        &[
            "PARTITION",
            "LOG START",
            "LOG END",
            "RECORDS",
            "SEGMENTS",
            "BYTES",
            "FAILED",
        ],
        &rows,
    );
    Ok(())
}

/// The error for a topic the directory does not have, listing those it has.
pub fn unknown_topic(topic: &str, args: &OfflineArgs, topics: &Topics) -> Failure {
    let known: Vec<&str> = topics.keys().map(String::as_str).collect();
    let known = if known.is_empty() {
        "it has none".to_owned()
    } else {
        format!("it has: {}", known.join(", "))
    };
    Failure(format!(
        "no topic '{topic}' in {} ({known})",
        args.data_dir.display()
    ))
}

/// Records held by each partition.
fn records(partitions: &[PartitionStats]) -> Vec<u64> {
    partitions
        .iter()
        .map(|p| p.log_end_offset - p.log_start_offset)
        .collect()
}

fn retention_json(config: &TopicConfig) -> serde_json::Value {
    json!({
        "ms": config.retention_ms,
        "bytes": config.retention_bytes,
        "records": config.retention_size,
    })
}

/// `ms=.. bytes=.. records=..` for the limits that are set, `none` when none is.
fn retention_text(config: &TopicConfig) -> String {
    let limits: Vec<String> = [
        ("ms", config.retention_ms),
        ("bytes", config.retention_bytes),
        ("records", config.retention_size),
    ]
    .into_iter()
    .filter_map(|(name, limit)| limit.map(|l| format!("{name}={l}")))
    .collect();
    if limits.is_empty() {
        "none".to_owned()
    } else {
        limits.join(" ")
    }
}
