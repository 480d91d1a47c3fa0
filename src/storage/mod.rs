//! The storage engine: plain Rust, no actix. Actors own these types and call them.
//!
//! # Layout of a data directory
//!
//! ```text
//! data/
//!   .lock                          exclusive lock: one broker process per data dir
//!   <topic>.json                   the topic's config (TopicConfig as JSON)
//!   .topic-config.tmp              a topic config being written (renamed to <topic>.json)
//!   <topic>_<partition>/           one directory per partition
//!     00000000000000000000.log     segment: record frames, named by base offset (record.rs)
//!     00000000000000000000.index   sparse offset index of that segment (index.rs)
//!     00000000000000000000.timeindex  time index of that segment (time_index.rs)
//!     checkpoint                   recovery point and clean-shutdown marker (checkpoint.rs)
//!     log_start_offset             first readable offset (checkpoint.rs)
//!     offsets.journal              committed offsets of every group (offsets.rs)
//! ```
//!
//! # Modules, bottom up
//! - [`record`]: the checksummed frame format of one record; [`batch`]: records to produce,
//!   laid out as unsealed frames.
//! - [`index`]: a segment's sparse offset → position index; [`time_index`]: its timestamp →
//!   offset index (Kafka's `TimeIndex`), for lookups by time and time retention.
//! - [`segment`]: one `.log` with its `.index` and `.timeindex`: append, read, scan, recover.
//! - [`checkpoint`]: what recovery may trust; the persisted log start offset.
//! - [`recovery`]: opening a partition directory, as separate passes.
//! - [`log`]: [`PartitionLog`], the partition's log: append, read, retention, roll;
//!   [`fetch`]: the read path inside one segment.
//! - [`offsets`]: [`OffsetStore`], each group's committed offset in a partition.
//! - [`data_dir`]: [`DataDir`], the directory lock, topic configs and names.
//! - [`fs`]: the file layer every byte goes through (`FileSystem`, `StorageFile`, the OS);
//!   [`sim`]: a simulated disk for power-loss and I/O-fault tests; [`fd_pool`]: the
//!   broker-wide budget of open descriptors (`max_open_files`) over either.
//! - [`fsutil`]: atomic file replacement, directory sync, aligned buffers.
//! - [`error`]: [`StorageError`], what every storage function fails with; [`policy`]:
//!   [`FsyncPolicy`], when appended bytes are made durable.
//!
//! # Layering
//! Storage depends on nothing else in the crate (no configuration, no actix, no crate-level
//! error): the broker above turns its settings into a [`LogConfig`], stores its topic configs
//! through [`DataDir`] as opaque bytes, and converts [`StorageError`] into its own error.
//! Inside, the imports between modules form no cycle: `record`, `fs`, `error` and `policy`
//! import no other storage module; `log` is at the top, over `fetch`, `recovery`,
//! `checkpoint`, `segment`, `index`, `time_index` and `batch`.

pub mod batch;
pub mod checkpoint;
pub mod compression;
pub mod data_dir;
pub mod error;
pub mod fd_pool;
pub mod fetch;
pub mod format;
pub mod fs;
pub mod fsutil;
pub mod index;
pub mod log;
pub mod offsets;
pub mod policy;
pub mod recovery;
pub mod segment;
#[cfg(any(test, feature = "test-support"))]
pub mod sim;
pub mod time_index;

#[cfg(any(test, feature = "test-support"))]
pub use batch::AppendRecord;
pub use batch::RecordBatch;
pub use data_dir::DataDir;
pub use error::StorageError;
pub use log::{AppendInfo, FetchedRecords, LogConfig, PartitionLog, RetentionPolicy};
pub use offsets::OffsetStore;
pub use policy::FsyncPolicy;
pub use recovery::RecoveryReport;
