//! Moving a data directory to a Kafka cluster and back: [`export`] and [`import`], the library
//! behind `nanokafka export` and `nanokafka import`.
//!
//! # What moves
//! Every topic, partition by partition into the same partition number, in offset order:
//! keys (also none), values (also empty, and null ones, Kafka's tombstones), headers in
//! their order (null values and repeated keys included) and timestamps; and every consumer
//! group's committed offsets. A missing target topic is created with the same partition
//! count and the configs both sides have (Kafka's `retention.ms`, `retention.bytes`,
//! `segment.bytes`, `message.timestamp.type`, `cleanup.policy` and the compaction settings
//! `delete.retention.ms`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
//! `min.cleanable.dirty.ratio`; see `config::kafka_names` for the names). An import of a
//! compacted Kafka topic holding records without a key (written before the topic was made
//! compacted) fails at the first of them: a compacted topic here refuses them.
//!
//! What has no Kafka equivalent stays behind, reported as a [`Progress::Note`]: `max_size`
//! with its `backpressure` (Kafka producers never wait for consumers) and `retention_size`
//! (Kafka retains by time and bytes, never by record count). A `LogAppendTime` topic is
//! created `LogAppendTime` on the other side too, so the receiving broker stamps each record
//! with its own clock as it appends it: the original append times are not kept there (they
//! are, for `CreateTime` topics, the default).
//!
//! # Offsets
//! Export: Kafka numbers a partition's records from its end offset when the export began (0
//! for a topic it creates), NanoKafka from the partition's log start. A record keeps its
//! place, so a source offset `o` is target offset `o - source_base + target_base` (see
//! [`ExportCheckpoint`] for both bases), and each group's committed offset `c` (the next
//! offset to read, Kafka's meaning already) is committed as the same mapping of `c`, clamped
//! to the records exported: a group behind the source's log start resumes at the first
//! exported record. For a source partition whose log starts at 0 going to a new topic, every
//! offset is unchanged.
//!
//! Import: the imported partitions are numbered from 0 and have no gaps. When the Kafka
//! partition starts at 0 and has no gaps (no compaction, no transaction markers), every
//! offset is unchanged; otherwise the `n`-th record read gets offset `n`, and a committed
//! offset `c` becomes the offset of the first imported record at or after `c` (the end, when
//! there is none), so a group resumes at the same record.
//!
//! # Stopping and resuming
//! An export may be stopped at any point (Ctrl-C, kill, a crash, a lost connection) and run
//! again: it resumes where the target's partitions end, never duplicating a record. The rule
//! and its checks are documented on [`ExportCheckpoint`]. Import is not resumable: it
//! refuses a data directory that already has one of the topics (delete the directory and
//! import again).
//!
//! # Requirements
//! Export opens the data directory with an embedded broker, so nothing else may have it open
//! (`Error::DataDirLocked` names the holder). Nothing else may write to the target topics
//! while an export runs, and group offsets are committed as a standalone client (no group
//! membership), which Kafka accepts only while the group has no active members: export
//! before starting the consumers on Kafka.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod checkpoint;
mod export;
mod import;
mod source;

pub use checkpoint::{ExportCheckpoint, PartitionMark};
pub use export::export;
pub use import::import;

/// How long a metadata, admin or group request to the cluster may take by default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What [`export`] is asked to do.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub(crate) data_dir: PathBuf,
    pub(crate) bootstrap: String,
    pub(crate) settings: Vec<(String, String)>,
    pub(crate) replication_factor: i32,
    pub(crate) timeout: Duration,
    pub(crate) max_records: Option<u64>,
}

impl ExportOptions {
    /// Export the data directory `data_dir` to the cluster at `bootstrap` (`host:port`, or a
    /// comma-separated list, librdkafka's `bootstrap.servers`).
    pub fn new(data_dir: impl AsRef<Path>, bootstrap: impl Into<String>) -> Self {
        ExportOptions {
            data_dir: data_dir.as_ref().to_owned(),
            bootstrap: bootstrap.into(),
            settings: Vec::new(),
            replication_factor: -1,
            timeout: DEFAULT_REQUEST_TIMEOUT,
            max_records: None,
        }
    }

    /// A librdkafka setting for every client the export makes (SASL, TLS, client id, ...),
    /// e.g. `("security.protocol", "SASL_SSL")`. The producer's `enable.idempotence` and
    /// `enable.gapless.guarantee` are always on: the resume rule depends on them.
    pub fn kafka_setting(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((key.into(), value.into()));
        self
    }

    /// The replication factor of the topics the export creates (default -1: the cluster's
    /// `default.replication.factor`).
    pub fn replication_factor(mut self, factor: i32) -> Self {
        self.replication_factor = factor;
        self
    }

    /// How long one metadata, admin or commit request may take (default 30 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Stops after this many records were delivered, without committing group offsets, as
    /// a crash would (but deterministically): for testing the resume rule.
    #[doc(hidden)]
    pub fn max_records(mut self, records: u64) -> Self {
        self.max_records = Some(records);
        self
    }
}

/// What [`import`] is asked to do.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub(crate) bootstrap: String,
    pub(crate) data_dir: PathBuf,
    pub(crate) settings: Vec<(String, String)>,
    pub(crate) timeout: Duration,
}

impl ImportOptions {
    /// Import every non-internal topic (names not starting with `__`) of the cluster at
    /// `bootstrap` into the data directory `data_dir` (created if missing).
    pub fn new(bootstrap: impl Into<String>, data_dir: impl AsRef<Path>) -> Self {
        ImportOptions {
            bootstrap: bootstrap.into(),
            data_dir: data_dir.as_ref().to_owned(),
            settings: Vec::new(),
            timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// A librdkafka setting for every client the import makes (SASL, TLS, client id, ...).
    pub fn kafka_setting(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((key.into(), value.into()));
        self
    }

    /// How long one metadata, admin or fetch wait may take (default 30 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// What a run of [`export`] or [`import`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferSummary {
    /// Records copied by this run.
    pub records: u64,
    /// Records an earlier, stopped export had already copied (always 0 for import).
    pub already_copied: u64,
    /// Topics and partitions gone through.
    pub topics: usize,
    pub partitions: usize,
    /// Topics this run created on the receiving side.
    pub topics_created: usize,
    /// Groups whose committed offsets were written, and how many offsets in all.
    pub groups: usize,
    pub offsets: usize,
    /// False when the run stopped early (`max_records`): run it again to finish.
    pub complete: bool,
}

/// What a transfer reports as it goes, to show progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// The receiving side did not have the topic: it was created.
    TopicCreated { topic: &'a str, partitions: u32 },
    /// A partition's copy begins: `total` records to copy in this run, `already` copied by
    /// an earlier run.
    PartitionStarted {
        topic: &'a str,
        partition: u32,
        already: u64,
        total: u64,
    },
    /// `copied` of the partition's `total` records so far (every few thousand records).
    Records {
        topic: &'a str,
        partition: u32,
        copied: u64,
        total: u64,
    },
    /// The partition's records of this run are all delivered.
    PartitionDone {
        topic: &'a str,
        partition: u32,
        copied: u64,
        already: u64,
    },
    /// The committed offsets of `groups` groups were written, `offsets` in all.
    Groups { groups: usize, offsets: usize },
    /// Something that did not carry over, or a decision the user should know of.
    Note(&'a str),
}

/// The `Error::Transfer` of `op`.
fn refused(op: &'static str, reason: impl Into<String>) -> crate::Error {
    crate::Error::Transfer {
        op,
        reason: reason.into(),
    }
}
