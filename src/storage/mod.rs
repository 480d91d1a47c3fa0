//! The storage engine: plain Rust, no actix. Actors own these types and call them.
//!
//! # Layout of a data directory
//!
//! ```text
//! data/
//!   .lock                          exclusive lock: one broker process per data dir
//!   format                         the segment format, checked on open (data_dir.rs)
//!   producer_ids                   the next block of Kafka producer ids (producer_ids.rs)
//!   <topic>.json                   the topic's config (TopicConfig as JSON)
//!   .topic-config.tmp              a topic config being written (renamed to <topic>.json)
//!   <topic>_<partition>/           one directory per partition
//!     00000000000000000000.log     segment: Kafka record batches, named by base offset
//!                                  (format.rs; compressed batches: compression.rs)
//!     00000000000000000000.index   sparse offset index of that segment (index.rs)
//!     00000000000000000000.timeindex  time index of that segment (time_index.rs)
//!     <base>.log.cleaned, .index.cleaned, .timeindex.cleaned
//!                                  a segment the log cleaner is writing; `.swap` once its
//!                                  swap is committed (cleaner.rs, cleaner/swap.rs)
//!     <offset:020>.producers       idempotent producers' state as of an offset
//!                                  (producer_state.rs)
//!     checkpoint                   recovery point and clean-shutdown marker (checkpoint.rs)
//!     cleaner-offset-checkpoint    where the log cleaner stands: the clean point and the
//!                                  earliest tombstone's delete horizon (cleaner/checkpoint.rs)
//!     cleaner.marker               empty: the log was cleaned, its sealed segments may hold
//!                                  gaps (cleaner/swap.rs)
//!     log_start_offset             first readable offset (checkpoint.rs)
//!     offsets.journal              committed offsets of every group (offsets.rs)
//!   .export/<cluster>.json         `nanokafka export`'s checkpoint per Kafka cluster (written
//!                                  and read by `transfer`, never by the broker)
//! ```
//!
//! # Modules, bottom up
//! - [`format`]: Kafka's RecordBatch v2, the bytes of a segment; [`batch`]: records to
//!   produce, laid out as one unsealed batch.
//! - [`compression`]: Kafka's batch codecs (gzip, snappy, lz4, zstd), with bounded
//!   decompression.
//! - [`index`]: a segment's sparse offset → position index; [`time_index`]: its timestamp →
//!   offset index (Kafka's `TimeIndex`), for lookups by time and time retention.
//! - [`segment`]: one `.log` with its `.index` and `.timeindex`: append, read, scan, recover.
//! - [`checkpoint`]: what recovery may trust; the persisted log start offset.
//! - [`recovery`]: opening a partition directory, as separate passes.
//! - [`cleaner`]: the log cleaner of compacted topics: a pass over a snapshot of the sealed
//!   segments, and the crash-safe swap of its output into the log (`log/cleaning.rs`).
//! - [`log`]: [`PartitionLog`], the partition's log: append, read, retention, roll;
//!   [`fetch`]: the read path inside one segment.
//! - [`producer_state`]: idempotent producers' last batches, and their snapshots;
//!   [`producer_ids`]: the producer ids handed out, never twice.
//! - [`offsets`]: [`OffsetStore`], each group's committed offset in a partition.
//! - [`data_dir`]: [`DataDir`], the directory lock, topic configs and names.
//! - [`fs`]: the file layer every byte goes through (`FileSystem`, `StorageFile`, the OS);
//!   [`sim`]: a simulated disk for power-loss and I/O-fault tests; [`fd_pool`]: the
//!   broker-wide budget of open descriptors (`max_open_files`) over either.
//! - [`fsutil`]: atomic file replacement, directory sync, aligned buffers.
//! - [`sync_worker`]: the thread that runs `FsyncPolicy::Interval` syncs off the owners'
//!   threads, and how an owner learns that one is done.
//! - [`error`]: [`StorageError`], what every storage function fails with; [`policy`]:
//!   [`FsyncPolicy`], when appended bytes are made durable.
//!
//! # Layering
//! Storage depends on nothing else in the crate (no configuration, no actix, no crate-level
//! error): the broker above turns its settings into a [`LogConfig`], stores its topic configs
//! through [`DataDir`] as opaque bytes, and converts [`StorageError`] into its own error.
//! Inside, the imports between modules form no cycle: `compression`, `fs`, `error` and
//! `policy` import no other storage module; `format` imports only `compression`; `cleaner`
//! imports `segment` and the formats below it, and `recovery` imports `cleaner` (to finish an
//! interrupted swap); `log` is at the top, over `fetch`, `cleaner`, `recovery`,
//! `producer_state`, `checkpoint`, `segment`, `index`, `time_index` and `batch`.

pub mod batch;
pub mod checkpoint;
// Until the broker runs cleaning passes (compacted topics), only the tests use its API.
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
pub mod cleaner;
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
pub mod producer_ids;
pub mod producer_state;
pub mod recovery;
pub mod segment;
#[cfg(any(test, feature = "internals"))]
pub mod sim;
pub mod sync_worker;
pub mod time_index;

#[cfg(any(test, feature = "internals"))]
pub use batch::AppendRecord;
pub use batch::RecordBatch;
#[cfg_attr(not(any(test, feature = "internals")), allow(unused_imports))]
pub use cleaner::{Cleaner, CleanerPolicy, CleanerStats, LogSnapshot, Prepared};
pub use data_dir::DataDir;
pub use error::StorageError;
pub use log::{
    AppendInfo, BatchRead, CheckedKafkaBatch, FetchedRecords, KafkaAppend, LogConfig, LogSyncJob,
    LogSynced, PartitionLog, RetentionPolicy,
};
pub use offsets::{Committed, OffsetStore, OffsetsSyncJob, OffsetsSynced};
// Named outside storage only by the `internals` feature's users (and in docs).
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use offsets::MAX_OFFSET_METADATA_BYTES;
pub use policy::FsyncPolicy;
pub use recovery::RecoveryReport;
