//! The Kafka backend (`kafka` feature): the handles' calls served by an Apache Kafka cluster
//! through librdkafka (`rdkafka`), so that an application outgrows the embedded broker by
//! changing its configuration, not its code.
//!
//! `NanoKafka::builder().kafka_bootstrap("host:9092")` builds a [`crate::NanoKafka`] whose
//! [`crate::AsyncNanoKafka`] holds a `KafkaBackend` instead of the broker actor's address;
//! every public call checks for it first. Payloads are encoded the same way (rmp-serde), so
//! records written by one backend read the same on the other.
//!
//! # Pieces
//! - `KafkaBackend` (here): the cluster's settings, one idempotent producer shared by every
//!   clone of the handle, the admin client, and the group members of the flat
//!   `join_group`/`poll`/`commit` calls.
//! - `produce`: a [`crate::RecordBatch`] becomes one librdkafka record per entry. Keyed records go
//!   through Kafka's murmur2 partitioner (librdkafka's `murmur2_random`), the partition
//!   [`crate::partition_for_key`] computes, so keys land on the same partitions on both
//!   backends.
//! - `admin`: topics (create, delete, list), lag and offsets by timestamp.
//! - `member`: `member::KafkaMember`, one librdkafka group consumer with manual commits,
//!   behind `Consumer<T>`, the flat calls and subscriptions.
//! - `client`: librdkafka plumbing shared with `crate::transfer` (`nanokafka export` /
//!   `import`, which sits above the handles): client configs, errors with context, metadata,
//!   watermarks, a record's headers as bytes.
//!
//! Where Kafka's semantics differ from the embedded ones (the flat `poll`, `max_size`
//! backpressure, retention by record count, generations), `docs/kafka-backend.md` ("Where
//! the backends differ") lists each difference and the test that shows it.

mod admin;
pub(crate) use admin::for_cluster;
pub(crate) mod client;
pub(crate) mod consumer_member;
mod flat;
pub(crate) mod member;
mod produce;
pub(crate) mod stream_member;
pub(crate) mod subscription;
pub(crate) mod table_reader;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureProducer;

use crate::error::{Error, Result};
use crate::group::GroupOptions;
use flat::SharedMember;

/// The longest wait librdkafka takes (its timeouts are `i32` milliseconds, about 24.8 days):
/// longer timeouts given to the backend are cut to it, so none wraps or overflows a deadline.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(i32::MAX as u64);

/// The name the `Unsupported` errors give this backend.
pub(crate) const BACKEND: &str = "kafka";

/// Where the Kafka backend connects, and the librdkafka settings passed through unchanged
/// (security, client id, compression...). Settings given here win over the backend's own
/// defaults (see [`KafkaConfig::producer`] and [`KafkaConfig::consumer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaConfig {
    /// `bootstrap.servers`: `host:port[,host:port...]`.
    pub bootstrap: String,
    /// librdkafka settings, by name (<https://docs.confluent.io/platform/current/clients/librdkafka/html/md_CONFIGURATION.html>).
    pub settings: BTreeMap<String, String>,
    /// How long a call waits for the cluster (a produce's delivery, a join, an admin request):
    /// the builder's `block_timeout`, at most `MAX_WAIT` (about 24.8 days).
    pub request_timeout: Duration,
    /// A member's `session.timeout.ms`: the builder's `session_timeout`, at most `MAX_WAIT`.
    pub session_timeout: Duration,
}

impl KafkaConfig {
    /// The settings of a handle built with `kafka_bootstrap(bootstrap)`: the builder's
    /// passthrough `settings`, and its block and session timeouts, each cut to `MAX_WAIT`.
    pub(crate) fn new(
        bootstrap: String,
        settings: BTreeMap<String, String>,
        (block_timeout, session_timeout): (Duration, Duration),
    ) -> Self {
        KafkaConfig {
            bootstrap,
            settings,
            request_timeout: block_timeout.min(MAX_WAIT),
            session_timeout: session_timeout.min(MAX_WAIT),
        }
    }

    /// The settings every client starts from: the servers, then the passthrough.
    fn base(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        config
    }

    fn with_passthrough(&self, mut config: ClientConfig) -> ClientConfig {
        for (key, value) in &self.settings {
            config.set(key, value);
        }
        config
    }

    /// The producer's settings. Idempotence keeps each partition's records in the order
    /// they were sent, without duplicates, through librdkafka's retries (Kafka's default
    /// since 3.0). `murmur2_random` is Kafka's Java partitioner (murmur2 of the key; keyless
    /// records spread at random), instead of librdkafka's CRC-based default.
    /// `message.timeout.ms` bounds a delivery by the request timeout.
    pub fn producer(&self) -> ClientConfig {
        let mut config = self.base();
        config
            .set("enable.idempotence", "true")
            .set("partitioner", "murmur2_random")
            .set(
                "message.timeout.ms",
                millis(self.request_timeout).to_string(),
            );
        self.with_passthrough(config)
    }

    /// A group member's settings: manual commits only (the API's commits are the only
    /// ones), where a group without commits starts (`options.start`), the assignor and the
    /// session timeout.
    pub fn consumer(&self, group: &str, member: &str, options: GroupOptions) -> ClientConfig {
        let mut config = self.base();
        let reset = match options.start {
            crate::group::StartFrom::Earliest => "earliest",
            crate::group::StartFrom::Latest => "latest",
        };
        let assignor = match options.assignor {
            crate::group::Assignor::RoundRobin => "roundrobin",
            crate::group::Assignor::Range => "range",
            crate::group::Assignor::Sticky => "cooperative-sticky",
        };
        config
            .set("group.id", group)
            .set("client.id", member)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", reset)
            .set("partition.assignment.strategy", assignor)
            .set(
                "session.timeout.ms",
                millis(self.session_timeout).to_string(),
            );
        self.with_passthrough(config)
    }

    /// The admin client's and other short-lived clients' settings.
    pub fn admin(&self) -> ClientConfig {
        self.with_passthrough(self.base())
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Which of a group's members the flat calls address.
type MemberKey = (String, String, String);

/// A handle's connection to a Kafka cluster. See the module docs.
pub(crate) struct KafkaBackend {
    config: KafkaConfig,
    producer: FutureProducer,
    admin: AdminClient<DefaultClientContext>,
    /// The members of the flat `join_group` / `poll` / `commit` calls, by (topic, group,
    /// member).
    members: Mutex<HashMap<MemberKey, SharedMember>>,
    /// Set by `close`: later calls fail with `BrokerStopped`, as on the embedded broker.
    closed: AtomicBool,
    /// Runs the blocking handle's calls: one worker, as librdkafka does the work on its own
    /// threads; the runtime only drives the handle's futures and runs the blocking consumer
    /// calls on its blocking pool.
    runtime: tokio::runtime::Handle,
    /// Taken and shut down in the background by `close` (dropping a runtime on an async
    /// thread would panic).
    owned_runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

impl std::fmt::Debug for KafkaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaBackend")
            .field("bootstrap", &self.config.bootstrap)
            .finish_non_exhaustive()
    }
}

impl KafkaBackend {
    /// Creates the producer, the admin client and the runtime of the blocking calls.
    /// librdkafka connects lazily: an unreachable cluster shows as the first call's timeout,
    /// not here.
    ///
    /// # Errors
    /// `Kafka` when a setting is refused by librdkafka (an unknown name, a bad value); `Io`
    /// when the runtime's thread cannot start.
    pub(crate) fn connect(config: KafkaConfig) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("nanokafka-kafka")
            .enable_time()
            .build()
            .map_err(|e| Error::io("start the Kafka backend's runtime", "", e))?;
        let producer = config
            .producer()
            .create()
            .map_err(|e| kafka_error("create producer", e))?;
        let admin = config
            .admin()
            .create()
            .map_err(|e| kafka_error("create admin client", e))?;
        Ok(KafkaBackend {
            config,
            producer,
            admin,
            members: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            runtime: runtime.handle().clone(),
            owned_runtime: Mutex::new(Some(runtime)),
        })
    }

    /// Runs `request` to completion on this (plain) thread, on the backend's runtime: the
    /// blocking handle's calls.
    pub(crate) fn block_on<T>(&self, request: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(request)
    }

    /// `BrokerStopped` once the handle was shut down.
    ///
    /// # Errors
    /// `BrokerStopped` after `close`.
    pub(crate) fn check_open(&self) -> Result<()> {
        match self.closed.load(Ordering::SeqCst) {
            true => Err(Error::BrokerStopped),
            false => Ok(()),
        }
    }

    /// Runs `task` on the backend's runtime (a table's follower), until it ends.
    pub(crate) fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.runtime.spawn(task);
    }

    pub(crate) fn config(&self) -> &KafkaConfig {
        &self.config
    }

    /// Sends what is queued and closes every member of the flat calls (they leave their
    /// groups). The handle's shutdown.
    ///
    /// # Errors
    /// `Kafka` when records could not be delivered within the request timeout.
    pub(crate) fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::SeqCst);
        let members: Vec<_> = match self.members.lock() {
            Ok(mut members) => members.drain().map(|(_, m)| m).collect(),
            Err(_) => Vec::new(),
        };
        drop(members);
        use rdkafka::producer::Producer;
        let flushed = self
            .producer
            .flush(self.config.request_timeout)
            .map_err(|e| kafka_error("flush", e));
        let runtime = self
            .owned_runtime
            .lock()
            .map(|mut r| r.take())
            .unwrap_or(None);
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
        flushed
    }
}

impl Drop for KafkaBackend {
    /// A backend never closed still stops its runtime without blocking: dropping a tokio
    /// runtime on an async thread would panic.
    fn drop(&mut self) {
        let runtime = self
            .owned_runtime
            .get_mut()
            .map(Option::take)
            .unwrap_or(None);
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
    }
}

/// The `Unsupported` error of an embedded-only call.
pub(crate) fn unsupported(op: &'static str) -> Error {
    Error::Unsupported {
        op,
        backend: BACKEND,
    }
}

/// A librdkafka error as the crate's: the errors the embedded broker also has become its
/// variants (so callers match one set), the rest `Kafka` with `op` for context.
pub(crate) fn kafka_error(op: &'static str, e: KafkaError) -> Error {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic) => {
            Error::UnknownTopic {
                topic: String::new(),
            }
        }
        _ => Error::Kafka {
            op,
            reason: e.to_string(),
        },
    }
}

/// As [`kafka_error`], naming the topic in the errors that carry one.
pub(crate) fn topic_error(op: &'static str, topic: &str, e: KafkaError) -> Error {
    match kafka_error(op, e) {
        Error::UnknownTopic { .. } => Error::UnknownTopic {
            topic: topic.to_owned(),
        },
        other => other,
    }
}

/// Runs blocking librdkafka work (a consumer's poll, a synchronous commit, metadata) off
/// the async executor, on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Internal {
            actor: "kafka backend".into(),
            reason: e.to_string(),
        })?
}
