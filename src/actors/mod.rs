//! The actor layer: thin adapters that own the storage and group logic and turn messages
//! into method calls. Topology and message flow: `actors.md` at the crate root; each
//! message's contract is in the rustdoc of its type.
//!
//! - [`broker::BrokerActor`]: root; topic registry, data-dir lock, I/O arbiters.
//! - [`topic::TopicActor`]: one per topic; routing, partitioner, group registry.
//! - [`io_thread`]: the I/O arbiters that run the partitions; they spin briefly when idle.
//! - [`put_off`]: wake-ups of tasks on an I/O thread put off to its next wake-up.
//! - [`lane`]: each partition's produce lane, which coalesces produces queued behind the one
//!   in flight into one `Append`.
//! - [`partition::PartitionActor`]: one per partition, supervised, on an I/O arbiter;
//!   the single writer of its files.
//! - [`coordinator::GroupCoordinatorActor`]: one per group, supervised; membership and polls.
//! - [`subscription::SubscriptionActor`]: one per push subscription; polls as a group
//!   member and pushes typed batches to a subscribing actor, with bounded credits.

pub mod broker;
pub mod coordinator;
pub mod io_thread;
pub mod lane;
pub mod partition;
pub mod put_off;
pub mod subscription;
pub mod supervise;
pub mod topic;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::config::FsyncPolicy;
use crate::storage::fs::SharedFs;

/// Mailbox capacity of every actor that carries produces and commits.
///
/// actix delivers a sender's messages in order only while the mailbox has room: a `send` that
/// finds it full parks its message and retries later, and a newer `send` that finds room in
/// the meantime overtakes it. Pipelined produces from one caller would then be appended out
/// of order. The broker's backpressure is `max_size` (produces parked inside the partition),
/// not the mailbox, so mailboxes are made large enough never to fill: a caller would need
/// about a million requests in flight to one actor to reach it (actix's default is 16).
pub const MAILBOX_CAPACITY: usize = 1 << 20;

impl BrokerSettings {
    /// The size limits a produce request is checked against before anything is sent.
    pub fn limits(&self) -> crate::routing::RequestLimits {
        crate::routing::RequestLimits {
            max_record_bytes: self.max_record_bytes,
            max_request_bytes: self.max_request_bytes,
        }
    }
}

/// Broker-wide settings every actor reads (from `NanoKafka::builder()`).
#[derive(Debug, Clone)]
pub struct BrokerSettings {
    pub data_dir: PathBuf,
    pub fsync: FsyncPolicy,
    /// How long `Backpressure::Block` parks a produce before `Error::Timeout`.
    pub block_timeout: Duration,
    /// A member silent for longer is evicted.
    pub session_timeout: Duration,
    pub max_record_bytes: usize,
    /// The most bytes of record frames one produce request may carry.
    pub max_request_bytes: usize,
    /// The most bytes a Kafka client's compressed batch may decompress to.
    pub max_decompressed_batch_bytes: usize,
    pub clock: SharedClock,
    /// Where partition files live: the OS, or a simulated disk in fault tests.
    pub fs: SharedFs,
    /// Runs the partitions' `FsyncPolicy::Interval` syncs off the I/O threads (one thread
    /// per broker, started at the first sync: see `storage::sync_worker`).
    pub sync_worker: Arc<crate::storage::sync_worker::SyncWorker>,
    /// Runs the log cleaner's passes (compacted topics) one at a time, off the I/O threads:
    /// one key map in memory at a time, as Kafka's single cleaner thread.
    pub cleaner_worker: Arc<crate::storage::sync_worker::SyncWorker>,
    /// How often a compacted partition checks whether a pass is due (Kafka's
    /// `log.cleaner.backoff.ms`).
    pub cleaner_backoff: Duration,
    /// The memory of one pass's key map (Kafka's `log.cleaner.dedupe.buffer.size`).
    pub cleaner_key_map_bytes: usize,
}
