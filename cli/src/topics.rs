//! `nanokafka topics list` and `nanokafka topics describe TOPIC`: a data directory's topics,
//! their configs and their partitions' bounds (and, for a compacted topic, what the log
//! cleaner did to each partition), read offline. `topics create`, `topics alter`
//! and `topics delete` change a stopped data directory: like `kafka-topics --delete`, a
//! delete asks no confirmation (it is the library's crash-safe `delete_topic`: records,
//! committed offsets and groups go with the topic); `alter` is the library's `alter_topic`
//! (partitions only grow; retention lowered applies at once).

use std::collections::BTreeMap;
use std::process::ExitCode;

use nanokafka::CompressionType;
use nanokafka::{
    Backpressure, CleanerSummary, CleanupPolicy, PartitionStats, TimestampType, TopicChanges,
    TopicConfig, TopicId, MAX_PARTITIONS, MAX_SEGMENT_BYTES, MIN_SEGMENT_BYTES,
};
use serde_json::json;

use crate::offline::{self, Failure, OfflineArgs, WriteArgs};

#[derive(Debug, clap::Subcommand)]
pub enum TopicsCommand {
    /// Every topic: partitions, records per partition, retention.
    List(OfflineArgs),
    /// One topic's config and each partition's offsets, segments and bytes; for a compacted
    /// topic, what the log cleaner did to each partition.
    Describe {
        /// The topic.
        topic: String,
        #[command(flatten)]
        args: OfflineArgs,
    },
    /// Create a topic (exit 1 when it exists).
    Create(CreateArgs),
    /// Change a topic: grow its partitions, change retention, max size, backpressure,
    /// timestamp type or cleanup policy (exit 1, nothing changed, when the change cannot
    /// work).
    Alter(AlterArgs),
    /// Delete a topic with its records, committed offsets and groups, without asking (as
    /// kafka-topics --delete does).
    Delete {
        /// The topic.
        topic: String,
        #[command(flatten)]
        args: WriteArgs,
    },
    /// Delete a partition's records below an offset (as kafka-delete-records does): its log
    /// start moves there, groups read from it, and the segments wholly below it are removed.
    DeleteRecords(DeleteRecordsArgs),
}

/// `topics delete-records`: one partition and the offset below which its records go.
#[derive(Debug, clap::Args)]
pub struct DeleteRecordsArgs {
    /// The topic.
    topic: String,

    /// The partition.
    #[arg(long, value_name = "P")]
    partition: u32,

    /// Delete every record below this offset (at most the log end; `end` for all of them).
    #[arg(long, value_name = "OFFSET")]
    before: BeforeArg,

    #[command(flatten)]
    args: WriteArgs,
}

/// An offset, or `end`: the log end.
#[derive(Debug, Clone, Copy)]
enum BeforeArg {
    Offset(u64),
    End,
}

impl std::str::FromStr for BeforeArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "end" => Ok(BeforeArg::End),
            _ => s
                .parse()
                .map(BeforeArg::Offset)
                .map_err(|_| format!("'{s}' is neither an offset nor `end`")),
        }
    }
}

/// `topics create`: the topic's config, each flag a [`TopicConfig`] field; unset ones
/// keep the library's defaults.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// The topic.
    topic: String,

    /// Number of partitions, fixed at creation.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PARTITIONS)))]
    partitions: u32,

    /// Keep records at most this many milliseconds after their append.
    #[arg(long, value_name = "MS", value_parser = at_least_one())]
    retention_ms: Option<u64>,

    /// Keep at most this many bytes of batches per partition.
    #[arg(long, value_name = "BYTES", value_parser = at_least_one())]
    retention_bytes: Option<u64>,

    /// Keep at most this many records per partition.
    #[arg(long, value_name = "N", value_parser = at_least_one())]
    retention_records: Option<u64>,

    /// Backlog (records the slowest group has not committed) at which producers meet
    /// --backpressure.
    #[arg(long, value_name = "N", value_parser = at_least_one())]
    max_size: Option<u64>,

    /// What producers meet at --max-size.
    #[arg(long, value_enum, requires = "max_size", default_value = "block")]
    backpressure: BackpressureArg,

    /// Roll a segment file once it reaches this size.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES))]
    segment_bytes: Option<u64>,

    /// Whose clock a record's timestamp comes from: the producer's or the broker's.
    #[arg(long, value_enum, default_value = "create")]
    timestamp_type: TimestampTypeArg,

    /// Kafka's cleanup.policy: delete (retention applies), compact (every record needs a
    /// key, the log cleaner keeps the latest of each; retention does not apply) or
    /// compact,delete (both).
    #[arg(long, value_name = "POLICY", value_parser = cleanup_policy, default_value = "delete")]
    cleanup_policy: CleanupPolicy,

    /// Kafka's compression.type: producer (each batch as produced), uncompressed, gzip,
    /// snappy, lz4 or zstd (batches of another codec are recompressed at the append).
    #[arg(long, value_name = "TYPE", value_parser = compression_type, default_value = "producer")]
    compression_type: CompressionType,

    /// Kafka's max.message.bytes: the largest batch an append takes (default: no limit of
    /// the topic's own).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(0..=i64::from(i32::MAX)))]
    max_message_bytes: Option<u32>,

    #[command(flatten)]
    args: WriteArgs,
}

/// `topics alter`: each flag one change; a limit given as `none` is removed. At least one
/// change is required.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("change").required(true).multiple(true)))]
pub struct AlterArgs {
    /// The topic.
    topic: String,

    /// The new number of partitions: more than now (as in Kafka, never fewer). Keyed
    /// records produced after it may go to other partitions than before.
    #[arg(long, value_name = "N", group = "change", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PARTITIONS)))]
    partitions: Option<u32>,

    /// Keep records at most this many milliseconds after their append, or `none`.
    #[arg(long, value_name = "MS|none", group = "change", value_parser = limit)]
    retention_ms: Option<Limit>,

    /// Keep at most this many bytes of batches per partition, or `none`.
    #[arg(long, value_name = "BYTES|none", group = "change", value_parser = limit)]
    retention_bytes: Option<Limit>,

    /// Keep at most this many records per partition, or `none`.
    #[arg(long, value_name = "N|none", group = "change", value_parser = limit)]
    retention_records: Option<Limit>,

    /// The backlog at which producers meet the backpressure, or `none`.
    #[arg(long, value_name = "N|none", group = "change", value_parser = limit)]
    max_size: Option<Limit>,

    /// What producers meet at the max size.
    #[arg(long, value_enum, group = "change")]
    backpressure: Option<BackpressureArg>,

    /// Whose clock a record's timestamp comes from.
    #[arg(long, value_enum, group = "change")]
    timestamp_type: Option<TimestampTypeArg>,

    /// delete, compact or compact,delete (see `topics create`); the next produce follows
    /// it, and retention stops or applies at once.
    #[arg(long, value_name = "POLICY", group = "change", value_parser = cleanup_policy)]
    cleanup_policy: Option<CleanupPolicy>,

    /// The codec of the batches appended next (see `topics create`).
    #[arg(long, value_name = "TYPE", group = "change", value_parser = compression_type)]
    compression_type: Option<CompressionType>,

    /// The largest batch an append takes from now on, or `none`.
    #[arg(long, value_name = "BYTES|none", group = "change", value_parser = max_message_bytes)]
    max_message_bytes: Option<MaxMessageBytes>,

    #[command(flatten)]
    args: WriteArgs,
}

/// Kafka's list: `delete`, `compact`, `compact,delete` (either order, spaces ignored).
fn cleanup_policy(value: &str) -> Result<CleanupPolicy, String> {
    value.parse()
}

/// Kafka's name of a compression type.
fn compression_type(value: &str) -> Result<CompressionType, String> {
    value.parse()
}

/// `--max-message-bytes`'s value for `topics alter`: bytes, or `none` (the topic's own limit
/// removed).
#[derive(Debug, Clone, Copy)]
struct MaxMessageBytes(Option<u32>);

fn max_message_bytes(value: &str) -> Result<MaxMessageBytes, String> {
    match value {
        "none" => Ok(MaxMessageBytes(None)),
        _ => match value.parse::<u32>() {
            Ok(n) if n <= i32::MAX as u32 => Ok(MaxMessageBytes(Some(n))),
            _ => Err(format!(
                "`{value}` is neither a number of bytes up to {} nor `none`",
                i32::MAX
            )),
        },
    }
}

/// A limit flag's value: a number of at least 1, or `none` (no limit).
#[derive(Debug, Clone, Copy)]
struct Limit(Option<u64>);

fn limit(value: &str) -> Result<Limit, String> {
    if value == "none" {
        return Ok(Limit(None));
    }
    match value.parse::<u64>() {
        Ok(0) => Err("0 would keep nothing: give at least 1, or `none`".into()),
        Ok(n) => Ok(Limit(Some(n))),
        Err(_) => Err(format!("`{value}` is neither a number nor `none`")),
    }
}

impl AlterArgs {
    fn changes(&self) -> TopicChanges {
        let mut changes = TopicChanges::default();
        if let Some(n) = self.partitions {
            changes = changes.partitions(n);
        }
        if let Some(Limit(ms)) = self.retention_ms {
            changes = changes.retention_ms(ms);
        }
        if let Some(Limit(bytes)) = self.retention_bytes {
            changes = changes.retention_bytes(bytes);
        }
        if let Some(Limit(records)) = self.retention_records {
            changes = changes.retention_size(records);
        }
        if let Some(Limit(records)) = self.max_size {
            changes = changes.max_size(records);
        }
        if let Some(backpressure) = self.backpressure {
            changes = changes.backpressure(backpressure.into());
        }
        if let Some(timestamp_type) = self.timestamp_type {
            changes = changes.timestamp_type(timestamp_type.into());
        }
        if let Some(policy) = self.cleanup_policy {
            changes = changes.cleanup_policy(policy);
        }
        if let Some(compression) = self.compression_type {
            changes = changes.compression_type(compression);
        }
        if let Some(MaxMessageBytes(bytes)) = self.max_message_bytes {
            changes = changes.max_message_bytes(bytes);
        }
        changes
    }
}

impl From<BackpressureArg> for Backpressure {
    fn from(arg: BackpressureArg) -> Self {
        match arg {
            BackpressureArg::Block => Backpressure::Block,
            BackpressureArg::Reject => Backpressure::Reject,
        }
    }
}

impl From<TimestampTypeArg> for TimestampType {
    fn from(arg: TimestampTypeArg) -> Self {
        match arg {
            TimestampTypeArg::Create => TimestampType::CreateTime,
            TimestampTypeArg::LogAppend => TimestampType::LogAppendTime,
        }
    }
}

/// A limit of 0 would keep nothing: refused as a usage error (exit 2).
fn at_least_one() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..)
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum BackpressureArg {
    Block,
    Reject,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum TimestampTypeArg {
    Create,
    LogAppend,
}

pub fn run(command: TopicsCommand) -> ExitCode {
    offline::finish(match command {
        TopicsCommand::List(args) => list(&args),
        TopicsCommand::Describe { topic, args } => describe(&topic, &args),
        TopicsCommand::Create(args) => create(&args),
        TopicsCommand::Alter(args) => alter(&args),
        TopicsCommand::Delete { topic, args } => delete(&topic, &args),
        TopicsCommand::DeleteRecords(args) => delete_records(&args),
    })
}

impl CreateArgs {
    fn config(&self) -> TopicConfig {
        let mut config = TopicConfig::default()
            .partitions(self.partitions)
            .timestamp_type(self.timestamp_type.into())
            .cleanup_policy(self.cleanup_policy)
            .compression_type(self.compression_type);
        config.max_message_bytes = self.max_message_bytes;
        config.retention_ms = self.retention_ms;
        config.retention_bytes = self.retention_bytes;
        config.retention_size = self.retention_records;
        if let Some(records) = self.max_size {
            config = config
                .max_size(records)
                .backpressure(self.backpressure.into());
        }
        if let Some(bytes) = self.segment_bytes {
            config = config.segment_bytes(bytes);
        }
        config
    }
}

fn create(args: &CreateArgs) -> Result<(), Failure> {
    let config = args.config();
    // The library validates the config too; checking first says what is wrong before the
    // directory is opened.
    config.validate()?;
    let broker = offline::open_for_write(&args.args.data_dir)?;
    let created = broker
        .create_topic(&args.topic, config.clone())
        .map_err(|e| match e {
            nanokafka::Error::TopicExists { topic } => Failure(format!(
                "topic '{topic}' already exists in {}; nothing was changed",
                args.args.data_dir.display()
            )),
            e => Failure(format!("cannot create topic '{}': {e}", args.topic)),
        });
    offline::close(broker)?;
    created?;
    if args.args.json {
        offline::print_json(&json!({ "created": args.topic, "config": config }));
    } else {
        println!(
            "created topic {} ({} partitions, retention {}, cleanup policy {})",
            args.topic,
            config.partitions,
            retention_text(&config),
            config.cleanup_policy
        );
    }
    Ok(())
}

fn alter(args: &AlterArgs) -> Result<(), Failure> {
    let (topic, dir) = (args.topic.as_str(), &args.args.data_dir);
    let broker = offline::open_for_write(dir)?;
    let altered = broker
        .list_topics()
        .map_err(Failure::from)
        .and_then(|known| {
            if !known.contains_key(topic) {
                return Err(offline::no_such_topic(topic, dir, known.keys()));
            }
            broker.alter_topic(topic, args.changes()).map_err(|e| {
                Failure(format!(
                    "cannot alter topic '{topic}': {e}; nothing was changed"
                ))
            })
        });
    offline::close(broker)?;
    let config = altered?;
    if args.args.json {
        offline::print_json(&json!({ "altered": topic, "config": config }));
    } else {
        println!(
            "altered topic {topic} ({} partitions, retention {}, max size {}, cleanup policy {})",
            config.partitions,
            retention_text(&config),
            config.max_size.map_or_else(
                || "none".to_owned(),
                |n| format!("{n} ({:?})", config.backpressure)
            ),
            config.cleanup_policy
        );
    }
    Ok(())
}

fn delete(topic: &str, args: &WriteArgs) -> Result<(), Failure> {
    let broker = offline::open_for_write(&args.data_dir)?;
    let deleted = broker
        .list_topics()
        .map_err(Failure::from)
        .and_then(|known| {
            if !known.contains_key(topic) {
                return Err(offline::no_such_topic(topic, &args.data_dir, known.keys()));
            }
            broker
                .delete_topic(topic)
                .map_err(|e| Failure(format!("cannot delete topic '{topic}': {e}")))
        });
    offline::close(broker)?;
    deleted?;
    if args.json {
        offline::print_json(&json!({ "deleted": topic }));
    } else {
        println!("deleted topic {topic}");
    }
    Ok(())
}

fn delete_records(args: &DeleteRecordsArgs) -> Result<(), Failure> {
    let (topic, dir, partition) = (args.topic.as_str(), &args.args.data_dir, args.partition);
    let broker = offline::open_for_write(dir)?;
    let deleted = broker
        .list_topics()
        .map_err(Failure::from)
        .and_then(|known| {
            if !known.contains_key(topic) {
                return Err(offline::no_such_topic(topic, dir, known.keys()));
            }
            let before = match args.before {
                BeforeArg::Offset(offset) => offset,
                BeforeArg::End => {
                    let stats = broker.stats()?;
                    let partitions = &stats.topics[topic].partitions;
                    partitions
                        .iter()
                        .find(|p| p.partition == partition)
                        .map_or(0, |p| p.log_end_offset)
                }
            };
            broker
                .delete_records(topic, partition, before)
                .map_err(|e| {
                    Failure(format!(
                        "cannot delete the records of {topic}/{partition} below {before}: {e}; \
                         nothing was changed"
                    ))
                })
        });
    offline::close(broker)?;
    let log_start = deleted?;
    if args.args.json {
        offline::print_json(&json!({
            "topic": topic,
            "partition": partition,
            "log_start_offset": log_start,
        }));
    } else {
        println!("{topic}/{partition}: records below offset {log_start} deleted (its log start)");
    }
    Ok(())
}

/// Every topic's config, partition stats and id, read with the broker closed again after.
type Topics = BTreeMap<String, (TopicConfig, Vec<PartitionStats>, Option<TopicId>)>;

/// Reads every topic of the data directory.
pub fn read(args: &OfflineArgs) -> Result<Topics, Failure> {
    let broker = offline::open(&args.data_dir)?;
    let read = || -> Result<Topics, Failure> {
        let mut stats = broker.stats()?.topics;
        let topics = broker.list_topics()?;
        let mut ids = broker.topic_ids()?;
        Ok(topics
            .into_iter()
            .map(|(name, config)| {
                let partitions = stats
                    .remove(&name)
                    .map(|s| s.partitions)
                    .unwrap_or_default();
                let id = ids.remove(&name);
                (name, (config, partitions, id))
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
            .map(|(name, (config, partitions, _))| {
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
        .map(|(name, (config, partitions, _))| {
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
    let Some((config, partitions, id)) = topics.remove(topic) else {
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
                    "cleaner": p.cleaner.map(|c| cleaner_json(&c)),
                })
            })
            .collect();
        offline::print_json(&json!({
            "name": topic,
            "topic_id": id.map(|id| id.to_string()),
            "config": config,
            "cleanup": cleanup_json(&config),
            "partitions": partitions,
        }));
        return Ok(());
    }
    println!("topic: {topic}");
    if let Some(id) = id {
        println!("topic id: {id}");
    }
    println!("partitions: {}", config.partitions);
    println!("retention: {}", retention_text(&config));
    println!("cleanup policy: {}", cleanup_text(&config));
    println!("segment bytes: {}", config.segment_bytes);
    println!("timestamp type: {:?}", config.timestamp_type);
    println!("compression type: {}", config.compression_type);
    match config.max_message_bytes {
        Some(bytes) => println!("max message bytes: {bytes}"),
        None => println!("max message bytes: none (the broker's limits)"),
    }
    if let Some(payload_type) = &config.payload_type {
        println!("payload type: {payload_type}");
    }
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
    if config.cleanup_policy.compacts() || partitions.iter().any(|p| p.cleaner.is_some()) {
        println!();
        print_cleaner(&partitions);
    }
    Ok(())
}

/// What the log cleaner did to each partition, over its life: a table, one row a partition.
fn print_cleaner(partitions: &[PartitionStats]) {
    println!(
        "log cleaner (dirty ratio: the share of the cleanable bytes the last pass left dirty):"
    );
    let rows: Vec<Vec<String>> = partitions
        .iter()
        .map(|p| {
            let c = p.cleaner.unwrap_or_default();
            vec![
                p.partition.to_string(),
                c.passes.to_string(),
                c.last_pass_ms
                    .map_or_else(|| "never".to_owned(), crate::time::format_time),
                c.records_removed.to_string(),
                c.bytes_read.to_string(),
                c.bytes_written.to_string(),
                match p.cleaner {
                    Some(c) => format!("{:.3}", dirty_ratio(&c)),
                    None => "-".to_owned(),
                },
            ]
        })
        .collect();
    offline::print_table(
        &[
            "PARTITION",
            "PASSES",
            "LAST PASS",
            "RECORDS REMOVED",
            "BYTES READ",
            "BYTES WRITTEN",
            "DIRTY RATIO",
        ],
        &rows,
    );
}

/// A partition's cleaner figures in `describe --json`: the last pass both as milliseconds
/// since the epoch and as RFC 3339.
fn cleaner_json(c: &CleanerSummary) -> serde_json::Value {
    json!({
        "passes": c.passes,
        "last_pass_ms": c.last_pass_ms,
        "last_pass": c.last_pass_ms.map(crate::time::format_time),
        "records_removed": c.records_removed,
        "bytes_read": c.bytes_read,
        "bytes_written": c.bytes_written,
        "dirty_ratio": dirty_ratio(c),
    })
}

/// The dirty share of the cleanable bytes the last pass left, 0 to 1.
fn dirty_ratio(c: &CleanerSummary) -> f64 {
    f64::from(c.dirty_permille) / 1000.0
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

/// The cleanup policy and the compaction settings in Kafka's names, every one stated (the
/// config's JSON leaves them out at their defaults).
fn cleanup_json(config: &TopicConfig) -> serde_json::Value {
    json!({
        "cleanup.policy": config.cleanup_policy.kafka_name(),
        "delete.retention.ms": config.delete_retention_ms,
        "min.compaction.lag.ms": config.min_compaction_lag_ms,
        "max.compaction.lag.ms": config.max_compaction_lag_ms,
        "min.cleanable.dirty.ratio": config.min_cleanable_dirty_ratio.as_f64(),
    })
}

/// `delete`, or a compacting policy with its settings and what it does today.
fn cleanup_text(config: &TopicConfig) -> String {
    if !config.cleanup_policy.compacts() {
        return config.cleanup_policy.to_string();
    }
    let max_lag = config
        .max_compaction_lag_ms
        .map_or_else(|| "none".to_owned(), |ms| format!("{ms} ms"));
    format!(
        "{} (records need a key; delete retention {} ms, compaction lag {} ms to {max_lag}, \
         min dirty ratio {})",
        config.cleanup_policy,
        config.delete_retention_ms,
        config.min_compaction_lag_ms,
        config.min_cleanable_dirty_ratio
    )
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
