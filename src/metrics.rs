//! The broker's metrics, recorded through the [`metrics`] facade: the library records, the
//! embedding service's exporter (Prometheus, StatsD, OpenTelemetry...) collects. With no
//! recorder installed every call is a no-op on a handle, so the hot path pays next to
//! nothing; `nanokafka serve --metrics ADDR` installs a Prometheus exporter.
//!
//! Handles are registered when their owner starts (a partition actor, a connection), with
//! the labels resolved once: install the recorder before building the broker. Labels stay
//! bounded: per topic, partition and group, never per record or member.
//!
//! | name | kind | labels | unit |
//! | --- | --- | --- | --- |
//! | `nanokafka_produced_records_total` | counter | topic, partition | records acknowledged |
//! | `nanokafka_produced_bytes_total` | counter | topic, partition | bytes of the batches written |
//! | `nanokafka_fetched_records_total` | counter | topic, partition | records returned by polls and fetches |
//! | `nanokafka_fetched_bytes_total` | counter | topic, partition | bytes of the stored batches read |
//! | `nanokafka_append_seconds` | histogram | topic, partition | one group-commit write (its fsync included under `FsyncPolicy::Always`) |
//! | `nanokafka_fsync_seconds` | histogram | topic, partition | one `fdatasync` of the log |
//! | `nanokafka_group_lag` | gauge | topic, partition, group | records not yet committed |
//! | `nanokafka_cleaner_read_bytes_total` | counter | topic, partition | bytes the log cleaner's passes read |
//! | `nanokafka_cleaner_written_bytes_total` | counter | topic, partition | bytes of the cleaned segments written |
//! | `nanokafka_cleaner_removed_records_total` | counter | topic, partition | records the cleaner removed |
//! | `nanokafka_cleaner_dirty_ratio` | gauge | topic, partition | dirty share of the cleanable bytes after the last pass |
//! | `nanokafka_actor_restarts_total` | counter | actor | restarts under supervision |
//! | `nanokafka_group_rebalances_total` | counter | topic, group | generation changes |
//! | `nanokafka_listener_connections` | gauge | | connections open |
//! | `nanokafka_listener_connections_accepted_total` | counter | | connections accepted |
//!
//! Lag is set where it changes cheaply: on each commit of the group on the partition, and
//! after each write for the groups that committed there since the partition (re)started, so
//! a group that stopped committing still shows its lag growing.
//!
//! `listener` holds the Kafka listener's own counters, which `stats().listener` reads.

pub(crate) mod listener;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ::metrics::{counter, gauge, histogram, Counter, Gauge, Histogram, Unit};

pub const PRODUCED_RECORDS: &str = "nanokafka_produced_records_total";
pub const PRODUCED_BYTES: &str = "nanokafka_produced_bytes_total";
pub const FETCHED_RECORDS: &str = "nanokafka_fetched_records_total";
pub const FETCHED_BYTES: &str = "nanokafka_fetched_bytes_total";
pub const APPEND_SECONDS: &str = "nanokafka_append_seconds";
pub const FSYNC_SECONDS: &str = "nanokafka_fsync_seconds";
pub const GROUP_LAG: &str = "nanokafka_group_lag";
pub const CLEANER_READ_BYTES: &str = "nanokafka_cleaner_read_bytes_total";
pub const CLEANER_WRITTEN_BYTES: &str = "nanokafka_cleaner_written_bytes_total";
pub const CLEANER_REMOVED_RECORDS: &str = "nanokafka_cleaner_removed_records_total";
pub const CLEANER_DIRTY_RATIO: &str = "nanokafka_cleaner_dirty_ratio";
pub const ACTOR_RESTARTS: &str = "nanokafka_actor_restarts_total";
pub const GROUP_REBALANCES: &str = "nanokafka_group_rebalances_total";
pub const LISTENER_CONNECTIONS: &str = "nanokafka_listener_connections";
pub const LISTENER_ACCEPTED: &str = "nanokafka_listener_connections_accepted_total";

/// Registers every metric's unit and help text with the installed recorder (Prometheus
/// prints them as `# HELP` lines). Call once, after installing it; optional.
pub fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        PRODUCED_RECORDS,
        Unit::Count,
        "Records acknowledged to producers"
    );
    describe_counter!(
        PRODUCED_BYTES,
        Unit::Bytes,
        "Bytes of the record batches written"
    );
    describe_counter!(
        FETCHED_RECORDS,
        Unit::Count,
        "Records returned by polls and fetches"
    );
    describe_counter!(
        FETCHED_BYTES,
        Unit::Bytes,
        "Bytes of the stored batches read"
    );
    describe_histogram!(
        APPEND_SECONDS,
        Unit::Seconds,
        "Time of one group-commit write"
    );
    describe_histogram!(
        FSYNC_SECONDS,
        Unit::Seconds,
        "Time of one fdatasync of a log"
    );
    describe_gauge!(
        GROUP_LAG,
        Unit::Count,
        "Records a group has not committed yet"
    );
    describe_counter!(
        ACTOR_RESTARTS,
        Unit::Count,
        "Actor restarts under supervision"
    );
    describe_counter!(
        GROUP_REBALANCES,
        Unit::Count,
        "Consumer group generation changes"
    );
    describe_counter!(
        CLEANER_READ_BYTES,
        Unit::Bytes,
        "Bytes the log cleaner's passes read"
    );
    describe_counter!(
        CLEANER_WRITTEN_BYTES,
        Unit::Bytes,
        "Bytes of cleaned segments the log cleaner wrote"
    );
    describe_counter!(
        CLEANER_REMOVED_RECORDS,
        Unit::Count,
        "Records the log cleaner removed"
    );
    describe_gauge!(
        CLEANER_DIRTY_RATIO,
        "Dirty share of a compacted partition's cleanable bytes after the last pass"
    );
    describe_gauge!(LISTENER_CONNECTIONS, Unit::Count, "Kafka connections open");
    describe_counter!(LISTENER_ACCEPTED, Unit::Count, "Kafka connections accepted");
}

/// One partition's handles, made when its actor is created (clones share them).
#[derive(Debug, Clone)]
pub(crate) struct PartitionMetrics {
    produced_records: Counter,
    produced_bytes: Counter,
    fetched_records: Counter,
    fetched_bytes: Counter,
    append_seconds: Histogram,
    fsync_seconds: Histogram,
    /// `fdatasync`s of the log since the actor was made (restarts included), for
    /// `PartitionStats::fsyncs`: counted here whatever recorder is installed.
    fsyncs: Arc<AtomicU64>,
}

impl Default for PartitionMetrics {
    /// Handles recording nowhere (unit tests of the layers below the actors).
    fn default() -> Self {
        PartitionMetrics {
            produced_records: Counter::noop(),
            produced_bytes: Counter::noop(),
            fetched_records: Counter::noop(),
            fetched_bytes: Counter::noop(),
            append_seconds: Histogram::noop(),
            fsync_seconds: Histogram::noop(),
            fsyncs: Arc::default(),
        }
    }
}

impl PartitionMetrics {
    pub fn new(topic: &str, partition: u32) -> Self {
        let labels = [
            ("topic", topic.to_owned()),
            ("partition", partition.to_string()),
        ];
        PartitionMetrics {
            produced_records: counter!(PRODUCED_RECORDS, &labels),
            produced_bytes: counter!(PRODUCED_BYTES, &labels),
            fetched_records: counter!(FETCHED_RECORDS, &labels),
            fetched_bytes: counter!(FETCHED_BYTES, &labels),
            append_seconds: histogram!(APPEND_SECONDS, &labels),
            fsync_seconds: histogram!(FSYNC_SECONDS, &labels),
            fsyncs: Arc::default(),
        }
    }

    /// `records` acknowledged, written as `bytes`.
    pub fn produced(&self, records: u64, bytes: usize) {
        self.produced_records.increment(records);
        self.produced_bytes.increment(bytes as u64);
    }

    /// `records` returned from stored batches of `bytes`.
    pub fn fetched(&self, records: u64, bytes: usize) {
        self.fetched_records.increment(records);
        self.fetched_bytes.increment(bytes as u64);
    }

    pub fn append_took(&self, took: Duration) {
        self.append_seconds.record(took);
    }

    pub fn fsync_took(&self, took: Duration) {
        self.fsync_seconds.record(took);
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
    }

    /// `fdatasync`s recorded with [`PartitionMetrics::fsync_took`] so far.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }
}

/// One partition's lag gauges: one per group that committed there since its actor started.
#[derive(Debug, Default)]
pub(crate) struct LagGauges {
    topic: String,
    partition: String,
    gauges: BTreeMap<String, Gauge>,
}

impl LagGauges {
    pub fn new(topic: &str, partition: u32) -> Self {
        LagGauges {
            topic: topic.to_owned(),
            partition: partition.to_string(),
            gauges: BTreeMap::new(),
        }
    }

    /// Sets `group`'s lag, registering its gauge on the group's first commit here.
    pub fn set_lag(&mut self, group: &str, lag: u64) {
        if !self.gauges.contains_key(group) {
            let labels = [
                ("topic", self.topic.clone()),
                ("partition", self.partition.clone()),
                ("group", group.to_owned()),
            ];
            self.gauges
                .insert(group.to_owned(), gauge!(GROUP_LAG, &labels));
        }
        if let Some(gauge) = self.gauges.get(group) {
            gauge.set(lag as f64);
        }
    }

    /// Drops `group`'s gauge (the group was deleted here), setting it to 0 first.
    pub fn forget(&mut self, group: &str) {
        if let Some(gauge) = self.gauges.remove(group) {
            gauge.set(0.0);
        }
    }

    /// Sets the lag of every group that has a gauge here to `lag_of(group)`, when known.
    pub fn update_lags(&self, lag_of: impl Fn(&str) -> Option<u64>) {
        for (group, gauge) in &self.gauges {
            if let Some(lag) = lag_of(group) {
                gauge.set(lag as f64);
            }
        }
    }
}

/// An actor of kind `actor` (`partition`, `topic`, `group`, `broker`) is restarting.
pub(crate) fn actor_restarted(actor: &'static str) {
    counter!(ACTOR_RESTARTS, "actor" => actor).increment(1);
}

/// `group`'s generation on `topic` changed.
pub(crate) fn group_rebalanced(topic: &str, group: &str) {
    counter!(GROUP_REBALANCES, "topic" => topic.to_owned(), "group" => group.to_owned())
        .increment(1);
}

/// The listener accepted a connection.
pub(crate) fn connection_accepted() {
    counter!(LISTENER_ACCEPTED).increment(1);
}

/// A connection opened (`1.0`) or closed (`-1.0`).
pub(crate) fn connections_open_changed(by: f64) {
    gauge!(LISTENER_CONNECTIONS).increment(by);
}

/// The log cleaner's handles of one partition, made at its first pass (so a partition of a
/// topic that is not compacted exports none of them).
#[derive(Debug, Clone)]
pub(crate) struct CleanerMetrics {
    read: Counter,
    written: Counter,
    removed: Counter,
    dirty: Gauge,
}

impl CleanerMetrics {
    pub fn new(topic: &str, partition: u32) -> Self {
        let labels = [
            ("topic", topic.to_owned()),
            ("partition", partition.to_string()),
        ];
        CleanerMetrics {
            read: counter!(CLEANER_READ_BYTES, &labels),
            written: counter!(CLEANER_WRITTEN_BYTES, &labels),
            removed: counter!(CLEANER_REMOVED_RECORDS, &labels),
            dirty: gauge!(CLEANER_DIRTY_RATIO, &labels),
        }
    }

    /// A pass swapped in: it read and wrote these bytes, removed these records, and left
    /// this dirty ratio.
    pub fn cleaned(&self, (read, written): (u64, u64), removed: u64, dirty_ratio: f64) {
        self.read.increment(read);
        self.written.increment(written);
        self.removed.increment(removed);
        self.dirty.set(dirty_ratio);
    }
}
