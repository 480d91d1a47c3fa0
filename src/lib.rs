//! NanoKafka: an embedded, single-process, Kafka-style log broker for actix services.
//!
//! # Architecture
//! Topics are split into partitions; each partition is an append-only, checksummed, segmented
//! log on disk with the committed offsets of every consumer group beside it. The storage
//! layer is plain Rust (no actix): it is what makes records durable, ordered, bounded in
//! memory and recoverable after a crash.
//!
//! Around it, a thin actor layer (actix): a `BrokerActor` supervises one `TopicActor` per
//! topic, which starts one `PartitionActor` per partition (the single owner of its files)
//! and one `GroupCoordinatorActor` per consumer group. Two handles front it: the blocking
//! [`NanoKafka`] for plain threads and [`AsyncNanoKafka`] for code already on actix/tokio.
//! `actors.md` at the crate root maps every actor and message.
//!
//! # Modules, bottom up
//! - [`storage`]: the partition log, its on-disk formats, recovery, retention, the offsets
//!   store and the data directory (start with its module docs for the layout on disk).
//! - [`partition`]: a partition's log + offsets under the rules of spec §4 (fetch at the
//!   committed offset, commit checks, lag, backlog).
//! - [`group`]: consumer-group membership, generations, assignors, liveness.
//! - [`partitioner`]: Kafka's murmur2 partitioner. [`clock`]: the injectable clock.
//! - [`actors`]: the actix adapters; [`messages`]: the public actor face.
//! - [`handle`] / [`async_handle`]: the blocking and async handles (the blocking one waits for
//!   replies in the private `wait` module: a short spin, then it parks); [`consumer`]: the
//!   Kafka-style `Consumer<T>` with its own positions and fenced commits.
//! - [`config`], [`types`], [`error`]: configuration, returned values, the one `Error`.

pub mod config;
pub mod consumer;
pub mod error;
pub mod storage;

pub mod actors;
pub mod async_handle;
pub mod clock;
pub mod group;
pub mod handle;
pub mod messages;
pub mod partition;
pub mod partitioner;
mod produce_queue;
mod routing;
pub mod types;
mod wait;

pub use async_handle::AsyncNanoKafka;
pub use config::{Backpressure, FsyncPolicy, TopicConfig};
pub use consumer::Consumer;
pub use error::{Error, Result};
pub use group::{Assignment, Assignor, GroupOptions, StartFrom};
pub use handle::{NanoKafka, NanoKafkaBuilder};
pub use partition::ProduceRecord;
pub use storage::RecordBatch;
pub use types::{BrokerStats, Delivery, GroupStats, PartitionStats, Record, TopicStats};
