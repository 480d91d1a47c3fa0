//! `nanokafka groups reset-offsets GROUP --topic T --to-…`: moves a group's committed
//! offsets (the next offset it reads) on a stopped data directory, like
//! `kafka-consumer-groups --reset-offsets`.
//!
//! Kafka refuses to reset a group that has live members, and so does this (through
//! [`nanokafka::NanoKafka::reset_offset`]). Group membership is held in memory by the broker
//! that serves it, never on disk: a data directory no broker holds has no live members, so
//! offline the check always passes. It is still made, so that the rule holds wherever the
//! command's broker has members.
//!
//! Every target offset is worked out and checked before the first is written: a bad
//! `--to-offset` changes nothing. As with Kafka's tool, only `--execute` writes: without it
//! (or with `--dry-run`) the plan is printed and nothing changes, so a script ported from
//! Kafka that meant to preview never moves offsets.

use std::process::ExitCode;

use nanokafka::{NanoKafka, PartitionStats, TopicStats};
use serde_json::json;

use crate::offline::{self, Failure, WriteArgs};

#[derive(Debug, clap::Args)]
#[command(group(
    clap::ArgGroup::new("target")
        .required(true)
        .args(["to_earliest", "to_latest", "to_offset", "to_datetime"]),
))]
pub struct ResetArgs {
    /// The group.
    group: String,

    /// The topic whose offsets to move.
    #[arg(long, value_name = "T")]
    topic: String,

    /// Only this partition [default: every partition of the topic].
    #[arg(long, value_name = "P")]
    partition: Option<u32>,

    /// To each partition's log start: everything still held is read again.
    #[arg(long)]
    to_earliest: bool,

    /// To each partition's log end: everything held is skipped.
    #[arg(long)]
    to_latest: bool,

    /// To this offset, which must be within each partition's [log start, log end].
    #[arg(long, value_name = "N")]
    to_offset: Option<u64>,

    /// To each partition's first record at or after this time (RFC 3339, e.g.
    /// 2026-12-03T10:00:00Z, or milliseconds since the epoch); the log end where no record
    /// is that recent.
    #[arg(long, value_name = "TIME", value_parser = crate::time::parse_time)]
    to_datetime: Option<u64>,

    /// Print the new offsets without writing them (what happens without `--execute` too).
    #[arg(long, conflicts_with = "execute")]
    dry_run: bool,

    /// Write the new offsets; without it the command only prints them, as Kafka's
    /// `kafka-consumer-groups --reset-offsets` does.
    #[arg(long)]
    execute: bool,

    #[command(flatten)]
    args: WriteArgs,
}

/// One partition's move.
struct Move {
    partition: u32,
    previous: Option<u64>,
    new: u64,
}

pub fn run(args: ResetArgs) -> ExitCode {
    offline::finish(reset(&args))
}

fn reset(args: &ResetArgs) -> Result<(), Failure> {
    let broker = offline::open_for_write(&args.args.data_dir)?;
    if !args.execute && !args.dry_run {
        eprintln!("no offsets were written: --execute is missing (this is a preview)");
    }
    let moves = plan(&broker, args).and_then(|moves| {
        if args.execute {
            for m in &moves {
                broker
                    .reset_offset(&args.topic, &args.group, m.partition, m.new)
                    .map_err(|e| {
                        Failure(format!(
                            "cannot reset {}[{}]: {e} (partitions before it were reset)",
                            args.topic, m.partition
                        ))
                    })?;
            }
        }
        Ok(moves)
    });
    offline::close(broker)?;
    print(args, &moves?);
    Ok(())
}

/// The new offset of every partition to move, each checked.
fn plan(broker: &NanoKafka, args: &ResetArgs) -> Result<Vec<Move>, Failure> {
    let mut stats = broker.stats()?.topics;
    let Some(topic) = stats.remove(&args.topic) else {
        return Err(offline::no_such_topic(
            &args.topic,
            &args.args.data_dir,
            stats.keys(),
        ));
    };
    check_group(args, &topic)?;
    partitions(args, &topic)?
        .into_iter()
        .map(|p| {
            Ok(Move {
                partition: p.partition,
                previous: p.committed.get(&args.group).copied(),
                new: target(broker, args, p)?,
            })
        })
        .collect()
}

/// Refuses a group the topic does not know (no commit, no member) and one with live
/// members.
fn check_group(args: &ResetArgs, topic: &TopicStats) -> Result<(), Failure> {
    if let Some(live) = topic.groups.get(&args.group) {
        if !live.assignment.is_empty() {
            let members: Vec<&str> = live.assignment.keys().map(String::as_str).collect();
            return Err(Failure(format!(
                "group '{}' has live members on '{}' ({}); nothing was changed: stop them \
                 first",
                args.group,
                args.topic,
                members.join(", ")
            )));
        }
    }
    let committed = topic
        .partitions
        .iter()
        .any(|p| p.committed.contains_key(&args.group));
    if committed || topic.groups.contains_key(&args.group) {
        return Ok(());
    }
    let mut known: Vec<&str> = topic
        .partitions
        .iter()
        .flat_map(|p| p.committed.keys())
        .chain(topic.groups.keys())
        .map(String::as_str)
        .collect();
    known.sort_unstable();
    known.dedup();
    let known = if known.is_empty() {
        "it has none".to_owned()
    } else {
        format!("it has: {}", known.join(", "))
    };
    Err(Failure(format!(
        "no group '{}' on topic '{}' in {} ({known})",
        args.group,
        args.topic,
        args.args.data_dir.display()
    )))
}

/// The partitions to move: all, or the one asked for.
fn partitions<'a>(
    args: &ResetArgs,
    topic: &'a TopicStats,
) -> Result<Vec<&'a PartitionStats>, Failure> {
    let all = topic.partitions.iter();
    let Some(wanted) = args.partition else {
        return Ok(all.collect());
    };
    let chosen: Vec<_> = all.filter(|p| p.partition == wanted).collect();
    if chosen.is_empty() {
        let count = topic.partitions.len();
        return Err(Failure(format!(
            "topic '{}' has no partition {wanted} (it has {count}: 0 to {})",
            args.topic,
            count.saturating_sub(1)
        )));
    }
    Ok(chosen)
}

/// Where `partition` moves to.
fn target(broker: &NanoKafka, args: &ResetArgs, p: &PartitionStats) -> Result<u64, Failure> {
    let (start, end) = (p.log_start_offset, p.log_end_offset);
    if let Some(reason) = &p.failed {
        return Err(Failure(format!(
            "{}[{}] cannot be read: {reason}",
            args.topic, p.partition
        )));
    }
    match args.target() {
        Target::Earliest => Ok(start),
        Target::Latest => Ok(end),
        Target::Offset(offset) if (start..=end).contains(&offset) => Ok(offset),
        Target::Offset(offset) => Err(Failure(format!(
            "offset {offset} is outside {}[{}], which holds offsets {start} to {end} (the log \
             end); nothing was changed",
            args.topic, p.partition
        ))),
        Target::Time(time_ms) => {
            let found = broker.offset_for_timestamp(&args.topic, p.partition, time_ms)?;
            Ok(found.unwrap_or(end).clamp(start, end))
        }
    }
}

/// Where the offsets move, from the one `--to-…` flag given.
enum Target {
    Earliest,
    Latest,
    Offset(u64),
    Time(u64),
}

impl ResetArgs {
    fn target(&self) -> Target {
        // clap's "target" group lets exactly one through.
        match (self.to_offset, self.to_datetime) {
            (Some(offset), _) => Target::Offset(offset),
            (_, Some(time_ms)) => Target::Time(time_ms),
            _ if self.to_earliest => Target::Earliest,
            _ => Target::Latest,
        }
    }
}

fn print(args: &ResetArgs, moves: &[Move]) {
    if args.args.json {
        let partitions: Vec<_> = moves
            .iter()
            .map(|m| json!({ "partition": m.partition, "previous": m.previous, "new": m.new }))
            .collect();
        offline::print_json(&json!({
            "group": args.group,
            "topic": args.topic,
            "dry_run": !args.execute,
            "partitions": partitions,
        }));
        return;
    }
    let rows: Vec<Vec<String>> = moves
        .iter()
        .map(|m| {
            vec![
                args.topic.clone(),
                m.partition.to_string(),
                offline::or_dash(m.previous),
                m.new.to_string(),
            ]
        })
        .collect();
    offline::print_table(&["TOPIC", "PARTITION", "PREVIOUS", "NEW"], &rows);
    if !args.execute {
        println!("dry run: nothing was changed (add --execute to write)");
    } else {
        println!("reset group {} on {}", args.group, args.topic);
    }
}
