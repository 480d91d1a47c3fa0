//! `nanokafka groups list`, `groups describe GROUP` and `groups lag GROUP`: a data
//! directory's consumer groups, their committed offsets and their lag, read offline
//! (`groups reset-offsets`, which changes them, is in `reset`).
//!
//! A group here belongs to a topic (members join `(topic, group)`), so one group name can
//! appear under several topics; every view lists it per topic. A group is known by its
//! committed offsets (and, in a broker that is running, by its live members; offline there
//! are none).

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use nanokafka::{BrokerStats, NanoKafka, TopicStats};
use serde_json::json;

use crate::offline::{self, Failure, OfflineArgs};

#[derive(Debug, clap::Subcommand)]
pub enum GroupsCommand {
    /// Every group, per topic: partitions committed, total lag.
    List(OfflineArgs),
    /// One group, per topic: generation, members, and per partition its committed offset,
    /// the log's bounds and the lag.
    Describe {
        /// The group.
        group: String,
        #[command(flatten)]
        args: OfflineArgs,
    },
    /// One group's lag per topic and partition: committed offset, log end, lag.
    Lag {
        /// The group.
        group: String,
        #[command(flatten)]
        args: OfflineArgs,
    },
    /// Move one group's committed offsets on a topic (refused while it has live members).
    ResetOffsets(crate::reset::ResetArgs),
    /// Delete a group: its committed offsets on every topic (as kafka-consumer-groups
    /// --delete does). A stopped directory has no live members.
    Delete {
        /// The group.
        group: String,
        #[command(flatten)]
        args: crate::offline::WriteArgs,
    },
}

pub fn run(command: GroupsCommand) -> ExitCode {
    offline::finish(match command {
        GroupsCommand::List(args) => list(&args),
        GroupsCommand::Describe { group, args } => describe(&group, &args),
        GroupsCommand::Lag { group, args } => lag(&group, &args),
        GroupsCommand::ResetOffsets(args) => return crate::reset::run(args),
        GroupsCommand::Delete { group, args } => delete(&group, &args),
    })
}

fn delete(group: &str, args: &crate::offline::WriteArgs) -> Result<(), Failure> {
    let broker = offline::open_for_write(&args.data_dir)?;
    let deleted = broker
        .delete_group(group)
        .map_err(|e| Failure(format!("cannot delete group '{group}': {e}")));
    offline::close(broker)?;
    if !deleted? {
        return Err(Failure(format!(
            "no group '{group}' in {}; nothing was changed",
            args.data_dir.display()
        )));
    }
    if args.json {
        offline::print_json(&json!({ "deleted": group }));
    } else {
        println!("deleted group {group}");
    }
    Ok(())
}

/// One partition of a topic a group reads.
struct PartitionLag {
    partition: u32,
    committed: Option<u64>,
    log_start: u64,
    log_end: u64,
    /// `None` where the group has no commit (and no live member): Kafka's tools show `-`
    /// there too, as where it would start reading depends on the consumer's reset policy.
    lag: Option<u64>,
}

/// A group under one topic.
struct TopicGroup {
    generation: Option<u64>,
    members: BTreeMap<String, Vec<u32>>,
    partitions: Vec<PartitionLag>,
}

/// Every `(group, topic)` of the directory, with the group's state there.
type Groups = BTreeMap<(String, String), TopicGroup>;

fn read(args: &OfflineArgs) -> Result<Groups, Failure> {
    let broker = offline::open(&args.data_dir)?;
    let groups = broker
        .stats()
        .map_err(Failure::from)
        .and_then(|stats| collect(&broker, &stats));
    offline::close(broker)?;
    groups
}

fn collect(broker: &NanoKafka, stats: &BrokerStats) -> Result<Groups, Failure> {
    let mut groups = Groups::new();
    for (topic, topic_stats) in &stats.topics {
        for group in group_names(topic_stats) {
            // The library's lag formula (the one backpressure uses), not a copy of it.
            let lags = broker.lag(topic, &group)?;
            let live = topic_stats.groups.get(&group);
            let partitions = topic_stats
                .partitions
                .iter()
                .map(|p| PartitionLag {
                    partition: p.partition,
                    committed: p.committed.get(&group).copied(),
                    log_start: p.log_start_offset,
                    log_end: p.log_end_offset,
                    lag: lags.get(&p.partition).copied(),
                })
                .collect();
            let state = TopicGroup {
                generation: live.map(|g| g.generation),
                members: live.map(|g| g.assignment.clone()).unwrap_or_default(),
                partitions,
            };
            groups.insert((group, topic.clone()), state);
        }
    }
    Ok(groups)
}

/// The groups of a topic: those with a commit on any partition, and those live now.
fn group_names(stats: &TopicStats) -> BTreeSet<String> {
    let committed = stats.partitions.iter().flat_map(|p| p.committed.keys());
    committed.chain(stats.groups.keys()).cloned().collect()
}

fn list(args: &OfflineArgs) -> Result<(), Failure> {
    let groups = read(args)?;
    let summaries = groups.iter().map(|((group, topic), state)| {
        let committed = state.partitions.iter().filter(|p| p.committed.is_some());
        let lag: u64 = state.partitions.iter().filter_map(|p| p.lag).sum();
        (group, topic, committed.count(), state.partitions.len(), lag)
    });
    if args.json {
        let groups: Vec<_> = summaries
            .map(|(group, topic, committed, partitions, lag)| {
                json!({
                    "group": group,
                    "topic": topic,
                    "partitions_committed": committed,
                    "partitions": partitions,
                    "lag": lag,
                })
            })
            .collect();
        offline::print_json(&json!({ "groups": groups }));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = summaries
        .map(|(group, topic, committed, partitions, lag)| {
            vec![
                group.clone(),
                topic.clone(),
                format!("{committed}/{partitions}"),
                lag.to_string(),
            ]
        })
        .collect();
    offline::print_table(&["GROUP", "TOPIC", "COMMITTED", "LAG"], &rows);
    Ok(())
}

/// The topics `group` has, with its state under each; an error naming the known groups when
/// it has none.
fn one_group(group: &str, args: &OfflineArgs) -> Result<Vec<(String, TopicGroup)>, Failure> {
    let groups = read(args)?;
    let known: BTreeSet<&str> = groups.keys().map(|(g, _)| g.as_str()).collect();
    if !known.contains(group) {
        let known = if known.is_empty() {
            "it has none".to_owned()
        } else {
            format!(
                "it has: {}",
                known.into_iter().collect::<Vec<_>>().join(", ")
            )
        };
        return Err(Failure(format!(
            "no group '{group}' in {} ({known})",
            args.data_dir.display()
        )));
    }
    Ok(groups
        .into_iter()
        .filter(|((g, _), _)| g == group)
        .map(|((_, topic), state)| (topic, state))
        .collect())
}

fn partitions_json(state: &TopicGroup) -> Vec<serde_json::Value> {
    state
        .partitions
        .iter()
        .map(|p| {
            json!({
                "partition": p.partition,
                "committed": p.committed,
                "log_start_offset": p.log_start,
                "log_end_offset": p.log_end,
                "lag": p.lag,
            })
        })
        .collect()
}

fn describe(group: &str, args: &OfflineArgs) -> Result<(), Failure> {
    let topics = one_group(group, args)?;
    if args.json {
        let topics: Vec<_> = topics
            .iter()
            .map(|(topic, state)| {
                json!({
                    "topic": topic,
                    "generation": state.generation,
                    "members": state.members,
                    "partitions": partitions_json(state),
                })
            })
            .collect();
        offline::print_json(&json!({ "group": group, "topics": topics }));
        return Ok(());
    }
    println!("group: {group}");
    for (topic, state) in &topics {
        println!();
        println!("topic: {topic}");
        println!("generation: {}", offline::or_dash(state.generation));
        if state.members.is_empty() {
            println!("members: none (offline, nobody is connected)");
        }
        for (member, partitions) in &state.members {
            println!("member {member}: partitions {partitions:?}");
        }
        let rows: Vec<Vec<String>> = state
            .partitions
            .iter()
            .map(|p| {
                vec![
                    p.partition.to_string(),
                    offline::or_dash(p.committed),
                    p.log_start.to_string(),
                    p.log_end.to_string(),
                    offline::or_dash(p.lag),
                ]
            })
            .collect();
        offline::print_table(
            &["PARTITION", "COMMITTED", "LOG START", "LOG END", "LAG"],
            &rows,
        );
    }
    Ok(())
}

fn lag(group: &str, args: &OfflineArgs) -> Result<(), Failure> {
    let topics = one_group(group, args)?;
    let total: u64 = topics
        .iter()
        .flat_map(|(_, state)| state.partitions.iter().filter_map(|p| p.lag))
        .sum();
    if args.json {
        let partitions: Vec<_> = topics
            .iter()
            .flat_map(|(topic, state)| {
                partitions_json(state).into_iter().map(move |mut p| {
                    p["topic"] = json!(topic);
                    p
                })
            })
            .collect();
        offline::print_json(
            &json!({ "group": group, "partitions": partitions, "total_lag": total }),
        );
        return Ok(());
    }
    let rows: Vec<Vec<String>> = topics
        .iter()
        .flat_map(|(topic, state)| {
            state.partitions.iter().map(move |p| {
                vec![
                    topic.clone(),
                    p.partition.to_string(),
                    offline::or_dash(p.committed),
                    p.log_end.to_string(),
                    offline::or_dash(p.lag),
                ]
            })
        })
        .collect();
    offline::print_table(
        &["TOPIC", "PARTITION", "COMMITTED", "LOG END", "LAG"],
        &rows,
    );
    println!("total lag: {total}");
    Ok(())
}
