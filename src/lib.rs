//! NanoKafka: an embedded, single-process, Kafka-style log broker for actix services.
//!
//! # Architecture
//! Topics are split into partitions; each partition is an append-only, checksummed, segmented
//! log on disk with the committed offsets of every consumer group beside it. Around the
//! storage, a thin actor layer (actix): a `BrokerActor` supervises one `TopicActor` per
//! topic, which starts one `PartitionActor` per partition (the single owner of its files)
//! and one `GroupCoordinatorActor` per consumer group. Two handles front it: the blocking
//! [`NanoKafka`] for plain threads and [`AsyncNanoKafka`] for code already on actix/tokio;
//! actors can also send the typed [`messages`] to the broker's `Addr<BrokerActor>`, or
//! through a [`BrokerRef`] that answers one flat `Result`. Async code opens a broker with
//! [`AsyncNanoKafka::open`] and closes it with [`AsyncNanoKafka::shutdown`].
//! `actors.md` at the crate root maps every actor and message.
//!
//! # Layers, bottom up
//! A module uses modules of its own layer (never in a cycle) and of the layers below;
//! `tests/layering.rs` holds the same order and fails on an import that points up.
//! 1. **storage**: plain Rust, no actix: the partition log, its on-disk formats, recovery,
//!    retention, the offsets store, the data directory, the file layer. It is what makes
//!    records durable, ordered, bounded in memory and recoverable after a crash.
//! 2. **domain**, plain Rust with unit tests: `group_options` (what a group is configured
//!    with), `error`, `config` (topic configuration, and its Kafka names), [`clock`], `spin`
//!    and `wait` (how callers and the I/O threads wait without wasting cores), `partitioner`,
//!    `group` (membership, generations, assignors, liveness, a member's own positions),
//!    `types` (what the API returns), [`metrics`] (the metrics' names and handles, recorded
//!    through the `metrics` facade by the produce queue, the actors and the listener;
//!    storage only times its fsyncs for its owner to report), `partition` (a partition's log
//!    and offsets: fetch at the committed offset, commit checks, lag, backlog),
//!    `produce_queue` (backpressure admission and the group commit), `routing` (where a
//!    produced record goes, and the key rule of compacted topics), `inspect` (segment files
//!    and stored batches read for the command line; compiled with the `internals` feature
//!    only), `security` (who may reach the Kafka listener and what they may do), and with the
//!    `schema-registry` feature [`schemas`] (the schema registry's subjects, ids and
//!    compatibility levels, kept as the replay of `_schemas` records).
//! 3. **actors**: [`messages`] (the actor face), `actors` (the actix adapters: each handler
//!    decodes a message, calls the domain and replies), [`trace`] (the producer's span
//!    carried to the handler's in record headers; W3C `traceparent` with the `otel`
//!    feature), `broker_ref` ([`BrokerRef`]).
//! 4. **backend**: with the `kafka` feature, `kafka`: the same handles served by an Apache
//!    Kafka cluster through librdkafka.
//! 5. **async handle**: `async_handle` ([`AsyncNanoKafka`]), which reaches the running
//!    broker through a small trait, never the builder; with the `schema-registry` feature,
//!    the broker's schema store, `Schemas` over it, and the Avro codec of typed topics bound
//!    to a subject.
//! 6. **listener**: `listener`, Kafka's wire protocol on a socket, answered through an
//!    `AsyncNanoKafka` and configured by a [`ListenerConfig`]; with the `console` feature,
//!    `console`, the web console's HTTP server and JSON API, and with the `schema-registry`
//!    feature, `schema_api`, the schema registry's REST API, beside it.
//! 7. **handles**: `handle` ([`NanoKafka`], a blocking wrapper over the async handle),
//!    `consumer` ([`Consumer`]), `stream` ([`RecordStream`], its async twin), `topic`
//!    ([`Topic`], typed topics: where an actix service starts). Each of `AsyncNanoKafka`,
//!    `Consumer` and `RecordStream` holds one `Embedded | Kafka` enum and dispatches by one
//!    `match`.
//! 8. **composition root**: `root` ([`NanoKafkaBuilder`]): the one module that starts a
//!    broker (its I/O threads, actor system, listener, or the Kafka backend) and stops it;
//!    the handles reach what it started through a small trait.
//! 9. **tools**: with the `kafka` feature, `transfer` (`nanokafka export` / `import`).
//!
//! The public modules are [`clock`], [`messages`], [`metrics`], [`trace`] and, with the
//! `kafka` feature, `transfer`; every other module is private and what a user needs of it
//! is re-exported here. The `internals` feature, not part of the supported API, adds a hidden
//! `internals` module exposing `storage` (the storage engine, its simulated disk for fault
//! tests), `inspect` and `listener` (its request check) to the `nanokafka` binary (the
//! `nanokafka-cli` crate in `cli/`), the tests, the benchmarks and the fuzz targets.

mod actors;
mod async_handle;
mod broker_ref;
pub mod clock;
mod config;
#[cfg(feature = "console")]
mod console;
mod consumer;
mod error;
mod group;
mod group_options;
mod handle;
#[cfg(feature = "internals")]
mod inspect;
#[cfg(feature = "kafka")]
mod kafka;
mod listener;
pub mod messages;
pub mod metrics;
mod partition;
mod partitioner;
mod produce_queue;
mod root;
mod routing;
#[cfg(feature = "schema-registry")]
mod schema_api;
#[cfg(feature = "schema-registry")]
pub mod schemas;
pub mod security;
mod spin;
mod storage;
mod stream;
mod table;
mod topic;
pub mod trace;
#[cfg(feature = "kafka")]
pub mod transfer;
mod types;
mod wait;

pub use actors::broker::BrokerActor;
pub use actors::supervise::{MAX_RESTARTS, RESTART_WINDOW};
pub use async_handle::AsyncNanoKafka;
#[cfg(feature = "schema-registry")]
pub use async_handle::Schemas;
pub use broker_ref::{BrokerRef, RequestExt};
pub use config::{
    Backpressure, CleanupPolicy, CompressionType, DirtyRatio, FsyncPolicy, TimestampType,
    TopicChanges, TopicConfig, DEFAULT_DELETE_RETENTION_MS, MAX_PARTITIONS, MAX_SEGMENT_BYTES,
    MIN_SEGMENT_BYTES,
};
pub use consumer::Consumer;
pub use error::{Error, Result};
pub use group::{Assignment, Assignor, GroupOptions, StartFrom};
#[cfg(feature = "schema-registry")]
pub use handle::BlockingSchemas;
pub use handle::NanoKafka;
pub use listener::{AutoCreate, ListenerConfig, TlsConfig, DEFAULT_NUM_PARTITIONS, MAX_IN_FLIGHT};
pub use partition::ProduceRecord;
pub use partitioner::partition_for_key;
pub use root::{
    NanoKafkaBuilder, BOOTSTRAP_ENV, CLEANER_KEY_MAP_BYTES, DEFAULT_BLOCK_TIMEOUT,
    DEFAULT_CLEANER_BACKOFF, DEFAULT_CLEANER_KEY_MAP_BYTES, DEFAULT_DATA_DIR, DEFAULT_IDLE_SPIN,
    DEFAULT_MAX_REQUEST_BYTES, DEFAULT_SESSION_TIMEOUT, MAX_CLEANER_BACKOFF,
    MAX_DECOMPRESSED_BATCH_BYTES, MAX_IDLE_SPIN,
};
pub use security::scram::{
    ScramCredential, ScramMechanism, ScramStore, DEFAULT_ITERATIONS as DEFAULT_SCRAM_ITERATIONS,
    MAX_ITERATIONS as MAX_SCRAM_ITERATIONS, MIN_ITERATIONS as MIN_SCRAM_ITERATIONS,
};
pub use storage::producer_state::ActiveProducer;
pub use storage::{KafkaAppend, RecordBatch};
pub use stream::{RecordStream, StreamCommitter, StreamOptions};
pub use table::{LogTable, Table, TableChange, TableKey};
pub use topic::{BlockingTopic, Topic};
pub use types::{
    encode, Backend, BrokerStats, CleanerSummary, ConsumerBatch, Delivery, GroupStats, Header,
    ListenerStats, PartitionStats, Record, TopicId, TopicStats,
};

/// Not part of the supported API (`internals` feature): the storage engine with its simulated
/// disk, the inspection views of the on-disk format and the listener's request path, for the
/// `nanokafka` binary, this crate's tests and benchmarks and the fuzz targets. Anything here
/// may change in any release.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    /// The listener's security state (client quotas), for `nanokafka quotas`.
    pub mod security {
        pub use crate::security::*;
    }

    /// The storage engine: the partition log, the offsets store, the data directory, the
    /// file layer and its simulated disk.
    pub mod storage {
        pub use crate::storage::*;
    }
    /// Segment files and stored batches read for the command line.
    pub mod inspect {
        pub use crate::inspect::*;
    }
    /// The Kafka listener, with its request check and request reader for tests and fuzzing.
    pub mod listener {
        pub use crate::listener::*;
    }
}
