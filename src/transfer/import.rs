//! `import`: a Kafka cluster's topics and group offsets into a data directory.
//!
//! The run: connect; list the cluster's topics (internal `__` ones left out); open the data
//! directory (its lock keeps every other broker out) and refuse, changing nothing, when it
//! already has one of them; read the topics' configs and every group's committed offsets;
//! create the topics; copy each partition in offset order as client batches that keep every
//! record's timestamp, key, value and headers; write the groups' offsets, translated.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, Timestamp, TopicPartitionList};

use super::{refused, ImportOptions, Progress, TransferSummary};
use crate::config::kafka_names;
use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::handle::NanoKafka;
use crate::kafka::client::{self, kafka_error, OwnedHeader};
use crate::storage::batch::{HeaderRef, MAX_RECORD_BYTES_LIMIT};
use crate::storage::data_dir::validate_topic_name;
use crate::storage::format::{encode_client_batch, ClientRecord};

/// A client batch is appended once it holds this many records or bytes.
const BATCH_RECORDS: usize = 1_000;
const BATCH_BYTES: usize = 1 << 20;
/// How often, in records, a partition's copy reports [`Progress::Records`].
const REPORT_EVERY: u64 = 5_000;

/// `(topic, partition)` → each group's committed offset there, sorted by offset.
type Commits = BTreeMap<(String, u32), Vec<(i64, String)>>;

/// Copies every non-internal topic of the cluster of `options`, with the groups' committed
/// offsets, into its data directory (created if missing), and reports what it does to
/// `progress`.
///
/// # Errors
/// `Transfer` when the directory already has one of the topics (nothing is changed);
/// `DataDirLocked` when a broker has it open; `Kafka` for the cluster's failures; as
/// `produce_kafka_batch` for the records.
pub fn import(
    options: &ImportOptions,
    mut progress: impl FnMut(&Progress<'_>),
) -> Result<TransferSummary> {
    let cluster = Cluster::connect(options)?;
    let topics = client::topics(cluster.reader.client(), options.timeout)?;
    for name in topics.keys() {
        validate_topic_name(name)?;
    }
    let broker = NanoKafka::builder()
        .data_dir(&options.data_dir)
        // Whatever the cluster accepted must fit; the limit binds appends only.
        .max_record_bytes(MAX_RECORD_BYTES_LIMIT)
        .build()?;
    let imported = run(&cluster, &broker, &topics, &mut progress);
    let closed = broker.shutdown();
    let summary = imported?;
    closed?;
    Ok(summary)
}

fn run(
    cluster: &Cluster,
    broker: &NanoKafka,
    topics: &BTreeMap<String, u32>,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<TransferSummary> {
    let existing = broker.list_topics()?;
    if let Some(clash) = topics.keys().find(|t| existing.contains_key(*t)) {
        return Err(refused(
            "import",
            format!(
                "the data directory already has topic {clash}: import into a directory without \
                 the cluster's topics"
            ),
        ));
    }
    let configs = cluster.configs(topics, progress)?;
    let commits = cluster.commits(topics)?;
    let mut summary = TransferSummary {
        topics: topics.len(),
        partitions: topics.values().map(|&n| n as usize).sum(),
        complete: true,
        ..TransferSummary::default()
    };
    for (name, config) in &configs {
        broker.create_topic(name, config.clone())?;
        summary.topics_created += 1;
        progress(&Progress::TopicCreated {
            topic: name,
            partitions: config.partitions,
        });
    }
    let mut groups = std::collections::BTreeSet::new();
    for (name, &partitions) in topics {
        for partition in 0..partitions {
            let key = (name.clone(), partition);
            let pending = commits.get(&key).map_or(&[][..], Vec::as_slice);
            let copied = cluster.copy(broker, name, partition, pending, progress)?;
            summary.records += copied.records;
            for (group, offset) in copied.commits {
                broker.call_async(
                    |h| h.set_committed_offset(name, &group, partition, (offset, "")),
                    Duration::ZERO,
                )?;
                summary.offsets += 1;
                groups.insert(group);
            }
        }
    }
    summary.groups = groups.len();
    progress(&Progress::Groups {
        groups: summary.groups,
        offsets: summary.offsets,
    });
    Ok(summary)
}

/// One partition's copy: its records, and each group's committed offset translated.
struct Copied {
    records: u64,
    commits: Vec<(String, u64)>,
}

/// A record read from the cluster, waiting in a batch.
struct Owned {
    timestamp_ms: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<OwnedHeader>,
}

impl Owned {
    fn of(message: &BorrowedMessage<'_>) -> Owned {
        let timestamp_ms = match message.timestamp() {
            Timestamp::CreateTime(ms) | Timestamp::LogAppendTime(ms) => ms,
            Timestamp::NotAvailable => -1,
        };
        Owned {
            timestamp_ms,
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers: client::headers(message),
        }
    }

    fn size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum();
        self.key.as_ref().map_or(0, Vec::len) + self.value.as_ref().map_or(0, Vec::len) + headers
    }
}

/// The cluster: a reader that assigns itself partitions (no group), and an admin client.
struct Cluster {
    reader: BaseConsumer,
    admin: AdminClient<DefaultClientContext>,
    bootstrap: String,
    settings: Vec<(String, String)>,
    timeout: Duration,
}

impl Cluster {
    fn connect(options: &ImportOptions) -> Result<Cluster> {
        let own = [("client.id", "nanokafka-import")];
        let forced = [
            // librdkafka assigns partitions only to a consumer with a group id; this one
            // never joins it nor commits, so the group never exists on the cluster.
            ("group.id", "nanokafka-import-reader"),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            // The end of a partition is where its copy stops.
            ("enable.partition.eof", "true"),
            // A start offset retention passed meanwhile must fail, not skip to the end.
            ("auto.offset.reset", "error"),
        ];
        let reader = client::config(&options.bootstrap, &own, &options.settings, &forced)
            .create()
            .map_err(kafka_error("connect", &options.bootstrap))?;
        let admin = client::config(&options.bootstrap, &own, &options.settings, &[])
            .create()
            .map_err(kafka_error("connect", &options.bootstrap))?;
        Ok(Cluster {
            reader,
            admin,
            bootstrap: options.bootstrap.clone(),
            settings: options.settings.clone(),
            timeout: options.timeout,
        })
    }

    /// Each topic's `TopicConfig`: its partition count and the Kafka configs NanoKafka has.
    /// A config NanoKafka cannot take keeps its default, with a note.
    fn configs(
        &self,
        topics: &BTreeMap<String, u32>,
        progress: &mut dyn FnMut(&Progress<'_>),
    ) -> Result<BTreeMap<String, TopicConfig>> {
        let specifiers: Vec<ResourceSpecifier<'_>> =
            topics.keys().map(|t| ResourceSpecifier::Topic(t)).collect();
        let options = AdminOptions::new().request_timeout(Some(self.timeout));
        let described =
            futures::executor::block_on(self.admin.describe_configs(&specifiers, &options))
                .map_err(kafka_error("describe configs", &self.bootstrap))?;
        let mut configs = BTreeMap::new();
        for ((name, &partitions), resource) in topics.iter().zip(described) {
            let mut config = TopicConfig::default().partitions(partitions);
            let resource = resource.map_err(|code| Error::Kafka {
                op: "describe configs",
                reason: format!("topic {name}: {code}"),
            })?;
            for entry in &resource.entries {
                let wanted = match entry.name.as_str() {
                    "retention.ms"
                    | "retention.bytes"
                    | "message.timestamp.type"
                    | "cleanup.policy"
                    | "delete.retention.ms"
                    | "min.compaction.lag.ms"
                    | "max.compaction.lag.ms"
                    | "min.cleanable.dirty.ratio" => true,
                    // The cluster's default segment size is not NanoKafka's concern.
                    "segment.bytes" => !entry.is_default,
                    _ => false,
                };
                let Some(value) = entry.value.as_deref().filter(|_| wanted) else {
                    continue;
                };
                let mut changed = config.clone();
                let applied = kafka_names::apply(&mut changed, &entry.name, Some(value))
                    .and_then(|()| changed.validate().map_err(|e| e.to_string()));
                match applied {
                    Ok(()) => config = changed,
                    Err(reason) => progress(&Progress::Note(&format!(
                        "topic {name}: {}={value} not carried over ({reason}); NanoKafka's \
                         default kept",
                        entry.name
                    ))),
                }
            }
            configs.insert(name.clone(), config);
        }
        Ok(configs)
    }

    /// Every group's committed offsets on `topics`: groups are listed, then each is asked as
    /// a client of that group that joins nothing.
    fn commits(&self, topics: &BTreeMap<String, u32>) -> Result<Commits> {
        let listed = self
            .reader
            .fetch_group_list(None, self.timeout)
            .map_err(kafka_error("list groups", &self.bootstrap))?;
        let mut wanted = TopicPartitionList::new();
        for (name, &partitions) in topics {
            for partition in 0..partitions {
                wanted.add_partition(name, partition as i32);
            }
        }
        let mut commits = Commits::new();
        for group in listed.groups() {
            let own = [("client.id", "nanokafka-import")];
            let forced = [("group.id", group.name()), ("enable.auto.commit", "false")];
            let member: BaseConsumer =
                client::config(&self.bootstrap, &own, &self.settings, &forced)
                    .create()
                    .map_err(kafka_error("connect", &self.bootstrap))?;
            let committed = member
                .committed_offsets(wanted.clone(), self.timeout)
                .map_err(kafka_error(
                    "fetch offsets",
                    format!("group {}", group.name()),
                ))?;
            for element in committed.elements() {
                if let Offset::Offset(offset) = element.offset() {
                    commits
                        .entry((element.topic().to_owned(), element.partition() as u32))
                        .or_default()
                        .push((offset, group.name().to_owned()));
                }
            }
        }
        for offsets in commits.values_mut() {
            offsets.sort();
        }
        Ok(commits)
    }

    /// Copies `topic[partition]` from its log start to its end into `broker`, translating
    /// the committed offsets `pending` (sorted) on the way: each becomes the offset of the
    /// first imported record at or after it, or the end.
    fn copy(
        &self,
        broker: &NanoKafka,
        topic: &str,
        partition: u32,
        pending: &[(i64, String)],
        progress: &mut dyn FnMut(&Progress<'_>),
    ) -> Result<Copied> {
        let (low, high) = client::watermarks(self.reader.client(), topic, partition, self.timeout)?;
        let total = (high - low).max(0) as u64;
        progress(&Progress::PartitionStarted {
            topic,
            partition,
            already: 0,
            total,
        });
        let mut appender = Appender::new(broker, topic, partition);
        let mut pending = pending.iter().peekable();
        let mut commits = Vec::new();
        if low < high {
            self.assign(topic, partition, low)?;
            let read = self.read_to_end(topic, partition, |message| {
                while let Some((_, group)) = pending.next_if(|(c, _)| *c <= message.offset()) {
                    commits.push((group.clone(), appender.next_offset()));
                }
                appender.push(Owned::of(message))?;
                if appender.next_offset().is_multiple_of(REPORT_EVERY) {
                    progress(&Progress::Records {
                        topic,
                        partition,
                        copied: appender.next_offset(),
                        total,
                    });
                }
                Ok(())
            });
            self.reader
                .unassign()
                .map_err(kafka_error("fetch", format!("{topic}[{partition}]")))?;
            read?;
        }
        appender.flush()?;
        let records = appender.next_offset();
        commits.extend(pending.map(|(_, group)| (group.clone(), records)));
        progress(&Progress::PartitionDone {
            topic,
            partition,
            copied: records,
            already: 0,
        });
        Ok(Copied { records, commits })
    }

    fn assign(&self, topic: &str, partition: u32, offset: i64) -> Result<()> {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(topic, partition as i32, Offset::Offset(offset))
            .and_then(|()| self.reader.assign(&list))
            .map_err(kafka_error("fetch", format!("{topic}[{partition}]")))
    }

    /// Hands `visit` each record of the assigned partition up to its end: the end the
    /// fetches report (librdkafka's partition EOF), not the end offset ListOffsets gave
    /// before, which a broker may get wrong (tansu 0.6 counts batches there) and which
    /// read_committed cannot reach past an open transaction anyway.
    fn read_to_end(
        &self,
        topic: &str,
        partition: u32,
        mut visit: impl FnMut(&BorrowedMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut quiet_since = Instant::now();
        loop {
            match self.reader.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    visit(&message)?;
                    quiet_since = Instant::now();
                }
                Some(Err(KafkaError::PartitionEOF(_))) => return Ok(()),
                Some(Err(e)) => {
                    return Err(kafka_error("fetch", format!("{topic}[{partition}]"))(e))
                }
                None if quiet_since.elapsed() > self.timeout => {
                    return Err(Error::Kafka {
                        op: "fetch",
                        reason: format!(
                            "{topic}[{partition}]: neither a record nor its end for {:?}",
                            self.timeout
                        ),
                    })
                }
                None => {}
            }
        }
    }
}

/// Appends records to one partition as client batches, checking each lands where expected.
struct Appender<'a> {
    broker: &'a NanoKafka,
    topic: &'a str,
    partition: u32,
    batch: Vec<Owned>,
    batch_bytes: usize,
    /// The offset the next record gets: records appended plus those in `batch`.
    next: u64,
}

impl<'a> Appender<'a> {
    fn new(broker: &'a NanoKafka, topic: &'a str, partition: u32) -> Self {
        Appender {
            broker,
            topic,
            partition,
            batch: Vec::new(),
            batch_bytes: 0,
            next: 0,
        }
    }

    fn next_offset(&self) -> u64 {
        self.next
    }

    fn push(&mut self, record: Owned) -> Result<()> {
        self.batch_bytes += record.size();
        self.batch.push(record);
        self.next += 1;
        if self.batch.len() >= BATCH_RECORDS || self.batch_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let headers: Vec<Vec<HeaderRef<'_>>> = self
            .batch
            .iter()
            .map(|r| {
                r.headers
                    .iter()
                    .map(|(k, v)| (k.as_slice(), v.as_deref()))
                    .collect()
            })
            .collect();
        let records: Vec<ClientRecord<'_>> = self
            .batch
            .iter()
            .zip(&headers)
            .map(|(r, headers)| ClientRecord {
                timestamp_ms: r.timestamp_ms,
                key: r.key.as_deref(),
                value: r.value.as_deref(),
                headers,
            })
            .collect();
        let bytes = encode_client_batch(&records);
        let expected = self.next - self.batch.len() as u64;
        let appended = self
            .broker
            .produce_kafka_batch(self.topic, self.partition, bytes)?;
        if appended.base_offset != expected {
            return Err(Error::Internal {
                actor: "import".into(),
                reason: format!(
                    "{}[{}]: records appended at offset {}, {expected} expected",
                    self.topic, self.partition, appended.base_offset
                ),
            });
        }
        self.batch.clear();
        self.batch_bytes = 0;
        Ok(())
    }
}
