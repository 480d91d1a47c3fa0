//! NanoKafka: an embedded, single-process, Kafka-style log broker for actix services.
//!
//! # Architecture
//! Topics are split into partitions; each partition is an append-only, checksummed, segmented
//! log on disk with the committed offsets of every consumer group beside it. The storage
//! layer is plain Rust (no actix): it is what makes records durable, ordered, bounded in
//! memory and recoverable after a crash.
//!
//! # Modules
//! - [`storage`]: the partition log, its on-disk formats, recovery, retention, the offsets
//!   store and the data directory (start with its module docs for the layout on disk).
//! - [`config`]: `TopicConfig`, `FsyncPolicy`, `Backpressure`.
//! - [`error`]: the one `Error` enum.

pub mod config;
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
pub mod types;

pub use async_handle::AsyncNanoKafka;
pub use config::{Backpressure, FsyncPolicy, TopicConfig};
pub use error::{Error, Result};
pub use group::{Assignment, Assignor};
pub use handle::{NanoKafka, NanoKafkaBuilder};
pub use partition::ProduceRecord;
pub use types::{BrokerStats, Delivery, GroupStats, PartitionStats, Record, TopicStats};
