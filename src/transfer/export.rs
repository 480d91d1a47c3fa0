//! `export`: a data directory's topics and group offsets to a Kafka cluster, resumable.
//!
//! The run: open the source (its lock is held throughout), connect, load the checkpoint; after
//! an interrupted run wait for the target to settle; plan every partition (where it resumes,
//! or its first mark) and refuse before changing anything when a count cannot be right;
//! create the missing topics; save the marks; copy partition by partition, flushing and
//! checking every delivery's offset; commit the groups' offsets; mark the run finished.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};

use super::checkpoint::{first_mark, resume_offset, ExportCheckpoint, PartitionMark, SourceBounds};
use super::source::{each_record, Source, SourceRecord, SourceTopic};
use super::{refused, ExportOptions, Progress, TransferSummary};
use crate::config::{Backpressure, TimestampType, TopicConfig};
use crate::error::{Error, Result};
use crate::kafka::client::{self, kafka_error};

/// How often, in records, a partition's copy reports [`Progress::Records`].
const REPORT_EVERY: u64 = 5_000;
/// How long the target's end offsets must stay still after an interrupted run.
const SETTLE: Duration = Duration::from_secs(1);

/// Copies the data directory of `options` to its Kafka cluster, resuming an export that was
/// stopped (see [`ExportCheckpoint`] for the rule), and reports what it does to `progress`.
///
/// # Errors
/// `InvalidArgument` when the directory is not a data directory; `DataDirLocked` when a
/// broker has it open; `Transfer` when the target holds records the export cannot account
/// for (nothing is changed), or a delivery went wrong; `Kafka` for the cluster's failures;
/// `Io` / `Corrupt` for the source's and the checkpoint's.
pub fn export(
    options: &ExportOptions,
    mut progress: impl FnMut(&Progress<'_>),
) -> Result<TransferSummary> {
    let source = Source::open(&options.data_dir)?;
    let exported = run(options, &source, &mut progress);
    let closed = source.close();
    let summary = exported?;
    closed?;
    Ok(summary)
}

fn run(
    options: &ExportOptions,
    source: &Source,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<TransferSummary> {
    let target = Target::connect(options)?;
    let cluster = client::cluster_key(
        target.producer.client(),
        &options.bootstrap,
        options.timeout,
    );
    let mut checkpoint = ExportCheckpoint::load(&options.data_dir, &cluster, &options.bootstrap)?;
    if checkpoint.unfinished() {
        target.settle(&checkpoint, source)?;
    }
    let plans = plan(source, &target, &checkpoint)?;
    for topic in &plans {
        for note in notes(&topic.name, &source.topics[&topic.name].config) {
            progress(&Progress::Note(&note));
        }
    }
    let mut summary = TransferSummary {
        topics: plans.len(),
        partitions: plans.iter().map(|t| t.partitions.len()).sum(),
        complete: true,
        ..TransferSummary::default()
    };
    for topic in plans.iter().filter(|t| t.create) {
        let config = &source.topics[&topic.name].config;
        target.create_topic(&topic.name, config, options.replication_factor)?;
        summary.topics_created += 1;
        progress(&Progress::TopicCreated {
            topic: &topic.name,
            partitions: config.partitions,
        });
    }
    for topic in &plans {
        checkpoint.set_marks(
            &topic.name,
            topic.partitions.iter().map(|p| p.mark).collect(),
        );
    }
    checkpoint.set_unfinished(true);
    checkpoint.save()?;

    let mut budget = options.max_records;
    for topic in &plans {
        for partition in &topic.partitions {
            summary.already_copied += partition.already;
            let copied = copy(
                source,
                &target,
                &topic.name,
                partition,
                &mut budget,
                progress,
            );
            summary.records += copied?;
            if budget == Some(0) {
                summary.complete = false;
                break;
            }
        }
    }
    if summary.complete {
        let (groups, offsets) = target.commit_groups(source, &plans, &options.settings)?;
        (summary.groups, summary.offsets) = (groups, offsets);
        progress(&Progress::Groups { groups, offsets });
    }
    checkpoint.set_unfinished(false);
    checkpoint.save()?;
    Ok(summary)
}

/// One partition's part of the run.
#[derive(Debug, Clone, Copy)]
struct PartitionPlan {
    partition: u32,
    mark: PartitionMark,
    /// The source offset to copy from, and the source's end offset to copy up to.
    resume: u64,
    end: u64,
    /// Records earlier runs copied.
    already: u64,
}

#[derive(Debug)]
struct TopicPlan {
    name: String,
    /// The target has no such topic yet.
    create: bool,
    partitions: Vec<PartitionPlan>,
}

/// Every topic's plan, or the first refusal (nothing has been changed then).
fn plan(source: &Source, target: &Target, checkpoint: &ExportCheckpoint) -> Result<Vec<TopicPlan>> {
    let existing = client::topics(target.producer.client(), target.timeout)?;
    let mut plans = Vec::with_capacity(source.topics.len());
    for (name, topic) in &source.topics {
        let count = topic.partitions.len() as u32;
        let marks = checkpoint.marks(name);
        let at = checkpoint.path().display();
        let create = match (existing.get(name), marks) {
            (None, None) => true,
            (Some(&found), _) if found != count => {
                return Err(refused(
                    "export",
                    format!(
                        "target topic {name} has {found} partitions, the source {count}: each \
                         partition goes to the partition of the same number"
                    ),
                ))
            }
            (None, Some(_)) => {
                return Err(refused(
                    "export",
                    format!(
                        "{at} says topic {name} was exported to this cluster, which no longer \
                         has it; delete {at} to export from scratch, into empty topics"
                    ),
                ))
            }
            (Some(_), Some(marks)) if marks.len() != count as usize => {
                return Err(refused(
                    "export",
                    format!(
                        "{at} has {} partitions for topic {name}, the source {count}: the \
                         source topic was recreated; delete {at} to export from scratch",
                        marks.len()
                    ),
                ))
            }
            (Some(_), _) => false,
        };
        let partitions = topic
            .partitions
            .iter()
            .map(|p| plan_partition(name, p, create, marks, target, checkpoint))
            .collect::<Result<_>>()?;
        plans.push(TopicPlan {
            name: name.clone(),
            create,
            partitions,
        });
    }
    Ok(plans)
}

fn plan_partition(
    topic: &str,
    stats: &crate::types::PartitionStats,
    create: bool,
    marks: Option<&[PartitionMark]>,
    target: &Target,
    checkpoint: &ExportCheckpoint,
) -> Result<PartitionPlan> {
    let at = (topic, stats.partition);
    let bounds = SourceBounds {
        start: stats.log_start_offset,
        end: stats.log_end_offset,
    };
    let (mark, resume) = match (create, marks) {
        (true, _) => {
            let mark = PartitionMark {
                source_base: bounds.start,
                target_base: 0,
            };
            (mark, bounds.start)
        }
        (false, Some(marks)) => {
            let mark = marks[stats.partition as usize];
            let (_, high) = target.watermarks(topic, stats.partition)?;
            let resume = resume_offset(at, mark, high, bounds, checkpoint.path())?;
            (mark, resume)
        }
        (false, None) => {
            let watermarks = target.watermarks(topic, stats.partition)?;
            let mark = first_mark(at, watermarks, bounds, checkpoint.path())?;
            (mark, bounds.start)
        }
    };
    Ok(PartitionPlan {
        partition: stats.partition,
        mark,
        resume,
        end: bounds.end,
        already: resume - mark.source_base,
    })
}

/// What of `config` has no Kafka equivalent, or changes on the way.
fn notes(topic: &str, config: &TopicConfig) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(max) = config.max_size {
        let reject = match config.backpressure {
            Backpressure::Reject => " (Reject)",
            Backpressure::Block => "",
        };
        notes.push(format!(
            "topic {topic}: max_size {max}{reject} not carried over: Kafka producers never \
             wait for consumers"
        ));
    }
    if let Some(records) = config.retention_size {
        notes.push(format!(
            "topic {topic}: retention_size {records} records not carried over: Kafka retains \
             by time and bytes only"
        ));
    }
    if config.timestamp_type == TimestampType::LogAppendTime {
        notes.push(format!(
            "topic {topic}: LogAppendTime: the target stamps each record with its own clock as \
             it appends it; the source's append times are not kept"
        ));
    }
    notes
}

/// The Kafka configs a topic is created with: every one both sides have. `retention.ms` and
/// `retention.bytes` are always sent (-1 for none): Kafka's own default would delete records
/// older than 7 days. `segment.bytes` only when it was set: NanoKafka's 64 MiB default
/// suits one machine, the cluster's own default suits the cluster.
fn kafka_configs(config: &TopicConfig) -> Vec<(&'static str, String)> {
    let default_segment = TopicConfig::default().segment_bytes.to_string();
    crate::kafka::for_cluster(config)
        .into_iter()
        .filter(|(name, value)| !(*name == "segment.bytes" && *value == default_segment))
        .collect()
}

/// Copies `plan`'s records, delivered; returns how many. Stops early once `budget` reaches 0.
fn copy(
    source: &Source,
    target: &Target,
    topic: &str,
    plan: &PartitionPlan,
    budget: &mut Option<u64>,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<u64> {
    let (partition, total) = (plan.partition, plan.end - plan.resume);
    progress(&Progress::PartitionStarted {
        topic,
        partition,
        already: plan.already,
        total,
    });
    let mut at = plan.resume;
    let mut copied = 0u64;
    while at < plan.end && *budget != Some(0) {
        let (bytes, next) = source.read(topic, partition, at)?;
        if bytes.is_empty() {
            return Err(Error::Internal {
                actor: "export".into(),
                reason: format!(
                    "{topic}[{partition}] read nothing at {at}, before its end {}",
                    plan.end
                ),
            });
        }
        let mut stopped = false;
        each_record((topic, partition), &bytes, |record| {
            if record.offset < at {
                return Ok(true); // the batch began before the resume point
            }
            if record.offset >= plan.end || *budget == Some(0) {
                stopped = true;
                return Ok(false);
            }
            let expected = plan.mark.target_base + (record.offset - plan.mark.source_base) as i64;
            target.send(topic, partition, record, expected)?;
            *budget = budget.map(|b| b - 1);
            copied += 1;
            at = record.offset + 1;
            if copied.is_multiple_of(REPORT_EVERY) {
                progress(&Progress::Records {
                    topic,
                    partition,
                    copied,
                    total,
                });
            }
            Ok(true)
        })?;
        if !stopped {
            at = at.max(next);
        }
    }
    target.flush()?;
    progress(&Progress::PartitionDone {
        topic,
        partition,
        copied,
        already: plan.already,
    });
    Ok(copied)
}

/// The cluster: an idempotent producer (which also answers metadata) and an admin client.
struct Target {
    producer: BaseProducer<Deliveries>,
    admin: AdminClient<DefaultClientContext>,
    bootstrap: String,
    timeout: Duration,
}

impl Target {
    fn connect(options: &ExportOptions) -> Result<Target> {
        let own = [("linger.ms", "5"), ("client.id", "nanokafka-export")];
        // The resume rule needs both: no duplicate within a run, no gap after a failure.
        let forced = [
            ("enable.idempotence", "true"),
            ("enable.gapless.guarantee", "true"),
        ];
        let producer = client::config(&options.bootstrap, &own, &options.settings, &forced)
            .create_with_context(Deliveries::default())
            .map_err(kafka_error("connect", &options.bootstrap))?;
        let admin = client::config(&options.bootstrap, &own, &options.settings, &[])
            .create()
            .map_err(kafka_error("connect", &options.bootstrap))?;
        Ok(Target {
            producer,
            admin,
            bootstrap: options.bootstrap.clone(),
            timeout: options.timeout,
        })
    }

    fn watermarks(&self, topic: &str, partition: u32) -> Result<(i64, i64)> {
        client::watermarks(self.producer.client(), topic, partition, self.timeout)
    }

    /// Waits until the end offsets of the target partitions the checkpoint knows stop
    /// moving: produce requests of an interrupted run may still be queued in the cluster.
    fn settle(&self, checkpoint: &ExportCheckpoint, source: &Source) -> Result<()> {
        let existing = client::topics(self.producer.client(), self.timeout)?;
        let ends = || -> Result<Vec<i64>> {
            let mut ends = Vec::new();
            for (name, partitions) in source
                .topics
                .keys()
                .filter(|t| checkpoint.marks(t).is_some())
                .filter_map(|t| existing.get(t).map(|&n| (t, n)))
            {
                for partition in 0..partitions {
                    ends.push(self.watermarks(name, partition)?.1);
                }
            }
            Ok(ends)
        };
        let deadline = Instant::now() + self.timeout;
        let mut before = ends()?;
        loop {
            std::thread::sleep(SETTLE);
            let now = ends()?;
            if now == before {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(refused(
                    "export",
                    "the target topics keep growing after an interrupted export: is something \
                     else writing to them?",
                ));
            }
            before = now;
        }
    }

    /// Creates `topic` with the partition count and Kafka configs of `config`, and waits
    /// until the cluster's metadata shows it whole.
    fn create_topic(&self, topic: &str, config: &TopicConfig, replication: i32) -> Result<()> {
        let configs = kafka_configs(config);
        let mut new = NewTopic::new(
            topic,
            config.partitions as i32,
            TopicReplication::Fixed(replication),
        );
        for (name, value) in &configs {
            new = new.set(name, value);
        }
        let options = AdminOptions::new()
            .request_timeout(Some(self.timeout))
            .operation_timeout(Some(self.timeout));
        let results = futures::executor::block_on(self.admin.create_topics([&new], &options))
            .map_err(kafka_error("create topic", topic))?;
        for result in results {
            if let Err((name, code)) = result {
                return Err(Error::Kafka {
                    op: "create topic",
                    reason: format!(
                        "{name} ({} partitions, {configs:?}): {code}",
                        config.partitions
                    ),
                });
            }
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let topics = client::topics(self.producer.client(), self.timeout)?;
            if topics.get(topic) == Some(&config.partitions) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Kafka {
                    op: "create topic",
                    reason: format!("{topic} was created but does not show in the metadata"),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Queues `record` for `topic[partition]`, where it must land at `expected`.
    fn send(
        &self,
        topic: &str,
        partition: u32,
        record: &SourceRecord<'_>,
        expected: i64,
    ) -> Result<()> {
        self.producer.context().check()?;
        let mut queued = BaseRecord::<[u8], [u8], usize>::with_opaque_to(topic, expected as usize)
            .partition(partition as i32);
        if let Some(key) = record.key {
            queued = queued.key(key);
        }
        if let Some(value) = record.value {
            queued = queued.payload(value);
        }
        // Without one, librdkafka stamps the record with the current time.
        if record.timestamp_ms >= 0 {
            queued = queued.timestamp(record.timestamp_ms);
        }
        if !record.headers.is_empty() {
            queued = queued.headers(owned_headers(topic, partition, record)?);
        }
        loop {
            match self.producer.send(queued) {
                Ok(()) => {
                    self.producer.poll(Duration::ZERO);
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    queued = back;
                    // Deliveries free the queue; they are served by this poll.
                    self.producer.poll(Duration::from_millis(50));
                    self.producer.context().check()?;
                }
                Err((e, _)) => {
                    return Err(kafka_error(
                        "produce",
                        format!(
                            "{topic}[{partition}] record at source offset {}",
                            record.offset
                        ),
                    )(e))
                }
            }
        }
    }

    /// Waits for every queued record's delivery; fails if one failed or landed elsewhere.
    fn flush(&self) -> Result<()> {
        // Bounded by librdkafka's message.timeout.ms (5 minutes by default).
        self.producer
            .flush(rdkafka::util::Timeout::Never)
            .map_err(kafka_error("produce", &self.bootstrap))?;
        self.producer.context().check()
    }

    /// Commits each source group's offsets, mapped to the target's, as a standalone client
    /// of that group; returns how many groups and offsets.
    fn commit_groups(
        &self,
        source: &Source,
        plans: &[TopicPlan],
        settings: &[(String, String)],
    ) -> Result<(usize, usize)> {
        let groups = group_offsets(source, plans);
        let mut offsets = 0;
        for (group, committed) in &groups {
            let mut list = TopicPartitionList::new();
            for (topic, partition, offset) in committed {
                list.add_partition_offset(topic, *partition as i32, Offset::Offset(*offset))
                    .map_err(kafka_error("commit offsets", format!("group {group}")))?;
            }
            let own = [
                ("enable.auto.commit", "false"),
                ("client.id", "nanokafka-export"),
            ];
            let consumer: BaseConsumer = client::config(
                &self.bootstrap,
                &own,
                settings,
                &[("group.id", group.as_str())],
            )
            .create()
            .map_err(kafka_error("connect", &self.bootstrap))?;
            consumer
                .commit(&list, CommitMode::Sync)
                .map_err(kafka_error("commit offsets", format!("group {group}")))?;
            offsets += committed.len();
        }
        Ok((groups.len(), offsets))
    }
}

/// Each group's committed offsets on the target: `(topic, partition, offset)`. A source
/// offset `c` is clamped to the exported records, then mapped by the partition's mark.
fn group_offsets(
    source: &Source,
    plans: &[TopicPlan],
) -> BTreeMap<String, Vec<(String, u32, i64)>> {
    let mut groups: BTreeMap<String, Vec<(String, u32, i64)>> = BTreeMap::new();
    for plan in plans {
        let SourceTopic { partitions, .. } = &source.topics[&plan.name];
        for (stats, p) in partitions.iter().zip(&plan.partitions) {
            for (group, &committed) in &stats.committed {
                let kept = committed.clamp(p.mark.source_base, p.end);
                let offset = p.mark.target_base + (kept - p.mark.source_base) as i64;
                groups.entry(group.clone()).or_default().push((
                    plan.name.clone(),
                    p.partition,
                    offset,
                ));
            }
        }
    }
    groups
}

/// librdkafka's headers for `record`. Kafka's header keys are strings; librdkafka's binding
/// takes them as `&str`.
fn owned_headers(topic: &str, partition: u32, record: &SourceRecord<'_>) -> Result<OwnedHeaders> {
    let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
    for (key, value) in record.headers.iter() {
        let Ok(key) = std::str::from_utf8(key) else {
            return Err(refused(
                "export",
                format!(
                    "record {topic}[{partition}]@{} has a header key that is not UTF-8, which a \
                     Kafka producer cannot send",
                    record.offset
                ),
            ));
        };
        headers = headers.insert(Header { key, value });
    }
    Ok(headers)
}

/// The producer's context: every delivery is checked, and the first failure kept.
#[derive(Default)]
struct Deliveries {
    failed: AtomicBool,
    failure: Mutex<Option<Error>>,
}

impl Deliveries {
    fn fail(&self, error: Error) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert(error);
        self.failed.store(true, Ordering::Release);
    }

    /// The first failed delivery, as the export's error.
    fn check(&self) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        Err(failure
            .clone()
            .unwrap_or_else(|| refused("export", "a delivery failed")))
    }
}

impl ClientContext for Deliveries {
    /// librdkafka's log lines as its default context logs them, less its warning that
    /// `enable.gapless.guarantee` is experimental: the export sets it on purpose.
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        if facility == "CONFWARN" && message.contains("enable.gapless.guarantee") {
            return;
        }
        DefaultClientContext.log(level, facility, message);
    }
}

impl ProducerContext for Deliveries {
    /// The target offset the record must land at.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, expected: usize) {
        match result {
            Ok(m) if m.offset() == expected as i64 => {}
            Ok(m) => self.fail(refused(
                "export",
                format!(
                    "a record for {}[{}] landed at offset {}, where {expected} was expected: \
                 something else wrote to the target partition during the export, which now \
                 holds records out of place",
                    m.topic(),
                    m.partition(),
                    m.offset()
                ),
            )),
            Err((e, m)) => self.fail(Error::Kafka {
                op: "produce",
                reason: format!(
                    "the record for {}[{}] at offset {expected} was not delivered: {e}; the \
                 records before it are, rerun to resume",
                    m.topic(),
                    m.partition()
                ),
            }),
        }
    }
}
