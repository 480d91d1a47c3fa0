//! The builder: a broker's settings, checked before anything starts, then the backend they
//! choose started (`embedded::start`, or the Kafka backend's clients).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::embedded::default_io_threads;
use crate::actors::BrokerSettings;
use crate::clock::{SharedClock, SystemClock};
use crate::config::{validate_max_record_bytes, FsyncPolicy, MAX_PARTITIONS};
use crate::error::{Error, Result};
use crate::handle::NanoKafka;
use crate::listener::{ListenerConfig, DEFAULT_NUM_PARTITIONS};
use crate::storage::fd_pool::{
    default_max_open_files, soft_nofile_limit, PooledFs, MIN_OPEN_FILES,
};
use crate::storage::fs::SharedFs;
use crate::storage::log::{DEFAULT_MAX_RECORD_BYTES, MAX_BATCH_BYTES};
use crate::storage::sync_worker::{CpuPriority, SyncWorker};

/// Kafka's `max.block.ms` default: how long a `Backpressure::Block` produce may wait.
pub const DEFAULT_BLOCK_TIMEOUT: Duration = Duration::from_secs(60);
/// Kafka's `session.timeout.ms` default (45 s).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(45);
/// How long an idle I/O thread waits for work before it sleeps; see
/// [`NanoKafkaBuilder::idle_spin`].
pub const DEFAULT_IDLE_SPIN: Duration = Duration::from_micros(50);
/// The longest `idle_spin` accepted. A spinning I/O thread notices its timers (interval
/// fsyncs, block timeouts, long-poll deadlines) only when the spin ends, so they may fire
/// this much late; a spin that pays for itself is tens of microseconds anyway.
pub const MAX_IDLE_SPIN: Duration = Duration::from_millis(1);
/// Kafka's `socket.request.max.bytes` (100 MiB): the default largest produce request.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 100 << 20;
/// The default, and the largest allowed, [`NanoKafkaBuilder::max_decompressed_batch_bytes`]:
/// what native reads decompress a batch within, so that anything appended reads back.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = crate::storage::format::MAX_DECOMPRESSED_BYTES;
/// Kafka's `log.cleaner.backoff.ms` default: how often a compacted partition checks whether
/// a cleaning pass is due.
pub const DEFAULT_CLEANER_BACKOFF: Duration = Duration::from_secs(15);
/// The default memory of the log cleaner's key map: 32 MiB, about 1.3 million keys (Kafka's
/// 128 MiB is shared by its cleaner threads on a server; an embedded broker keeps less).
pub const DEFAULT_CLEANER_KEY_MAP_BYTES: usize = 32 << 20;
/// The longest `cleaner_backoff` accepted: a day.
pub const MAX_CLEANER_BACKOFF: Duration = Duration::from_secs(24 * 60 * 60);
/// The smallest and largest `cleaner_key_map_bytes` accepted: 1 MiB (about 40,000 keys) and
/// 4 GiB (about 170 million keys), the most one pass allocates.
pub const CLEANER_KEY_MAP_BYTES: std::ops::RangeInclusive<usize> = (1 << 20)..=(4 << 30);
/// The default data directory, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "data";

/// Configures and starts a broker. See [`NanoKafka::builder`].
#[derive(Debug, Clone)]
pub struct NanoKafkaBuilder {
    data_dir: PathBuf,
    fsync: FsyncPolicy,
    block_timeout: Duration,
    session_timeout: Duration,
    max_record_bytes: usize,
    max_request_bytes: usize,
    max_decompressed_batch_bytes: usize,
    io_threads: usize,
    idle_spin: Duration,
    clock: SharedClock,
    fs: SharedFs,
    /// `None`: derived from the process's descriptor limit at `build`.
    max_open_files: Option<usize>,
    cleaner_backoff: Duration,
    cleaner_key_map_bytes: usize,
    /// `None`: no Kafka listener (the default).
    listener: Option<ListenerConfig>,
    /// TLS for the listener and the console.
    tls: Option<crate::listener::TlsConfig>,
    /// The partition count of topics the listener creates without being told one.
    num_partitions: u32,
    /// `Some`: the handle's calls go to this Kafka cluster instead (the `kafka` feature).
    kafka_bootstrap: Option<String>,
    /// librdkafka settings for the Kafka backend, passed through.
    kafka_settings: BTreeMap<String, String>,
    /// `Some`: serve the web console (the `console` feature).
    #[cfg(feature = "console")]
    console: Option<crate::console::ConsoleConfig>,
    /// `Some`: serve the schema registry (the `schema-registry` feature).
    #[cfg(feature = "schema-registry")]
    schema_registry: Option<crate::schema_api::SchemaRegistryConfig>,
}

impl Default for NanoKafkaBuilder {
    fn default() -> Self {
        NanoKafkaBuilder {
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            fsync: FsyncPolicy::default(),
            block_timeout: DEFAULT_BLOCK_TIMEOUT,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_decompressed_batch_bytes: MAX_DECOMPRESSED_BATCH_BYTES,
            // One I/O thread per core (at most 4): a partition's fsync blocks only its thread.
            io_threads: default_io_threads(),
            idle_spin: DEFAULT_IDLE_SPIN,
            clock: Arc::new(SystemClock),
            fs: crate::storage::fs::os(),
            max_open_files: None,
            cleaner_backoff: DEFAULT_CLEANER_BACKOFF,
            cleaner_key_map_bytes: DEFAULT_CLEANER_KEY_MAP_BYTES,
            listener: None,
            tls: None,
            num_partitions: DEFAULT_NUM_PARTITIONS,
            kafka_bootstrap: None,
            kafka_settings: BTreeMap::new(),
            #[cfg(feature = "console")]
            console: None,
            #[cfg(feature = "schema-registry")]
            schema_registry: None,
        }
    }
}

/// The environment variable [`NanoKafkaBuilder::kafka_bootstrap_from_env`] reads.
pub const BOOTSTRAP_ENV: &str = "NANOKAFKA_BOOTSTRAP";

impl NanoKafkaBuilder {
    /// Serves the handle's calls from the Kafka cluster at `servers` (`host:port[,...]`,
    /// librdkafka's `bootstrap.servers`) instead of the embedded broker: the same code runs
    /// on Apache Kafka. Needs the `kafka` feature (`build` says so otherwise). The data
    /// directory, fsync, I/O and listener settings do not apply there; `block_timeout`
    /// bounds each call's wait for the cluster and `session_timeout` is the members'.
    pub fn kafka_bootstrap(mut self, servers: impl Into<String>) -> Self {
        self.kafka_bootstrap = Some(servers.into());
        self
    }

    /// As [`NanoKafkaBuilder::kafka_bootstrap`] with the servers in the `NANOKAFKA_BOOTSTRAP`
    /// environment variable, when it is set (and not empty); else the embedded broker. The
    /// one place an application needs to pick its backend.
    pub fn kafka_bootstrap_from_env(self) -> Self {
        match std::env::var(BOOTSTRAP_ENV) {
            Ok(servers) if !servers.trim().is_empty() => self.kafka_bootstrap(servers.trim()),
            _ => self,
        }
    }

    /// A librdkafka setting for the Kafka backend (security, compression, client id...),
    /// passed through unchanged and applied after the backend's own (so it wins).
    pub fn kafka_setting(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.kafka_settings.insert(key.into(), value.into());
        self
    }

    /// The data directory (default `data`), created if absent.
    pub fn data_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.data_dir = dir.as_ref().to_owned();
        self
    }

    /// When appends and commits are synced (default `Interval(1 s)`).
    pub fn fsync(mut self, policy: FsyncPolicy) -> Self {
        self.fsync = policy;
        self
    }

    /// How long a produce parked by `Backpressure::Block` waits (default 60 s).
    pub fn block_timeout(mut self, timeout: Duration) -> Self {
        self.block_timeout = timeout;
        self
    }

    /// A group member silent for longer is evicted (default 45 s, like Kafka). It is also
    /// the largest `session.timeout.ms` a Kafka client's member may ask for (Kafka's
    /// `group.max.session.timeout.ms`).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Serve Kafka's wire protocol on `addr` (`host:port`, e.g. `127.0.0.1:9092`; port 0
    /// picks a free one, see [`NanoKafka::listener_addr`]) with the listener's defaults, so
    /// Kafka clients can produce, consume and join groups. Off by default.
    pub fn listen(self, addr: impl Into<String>) -> Self {
        self.listener(ListenerConfig::new(addr))
    }

    /// Serve Kafka's wire protocol as `config` says (caps, SASL/PLAIN, topic auto-creation).
    pub fn listener(mut self, config: ListenerConfig) -> Self {
        self.listener = Some(config);
        self
    }

    /// TLS with these certificates on the Kafka listener and the web console (HTTPS); mutual
    /// TLS on the listener when `tls` names a client CA. A listener given its own
    /// [`ListenerConfig::tls`] keeps it. Certificate files that cannot be used fail `build()`
    /// naming the file, with nothing started.
    pub fn tls(mut self, tls: crate::listener::TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Serve the web console on `addr` (`host:port`, e.g. `127.0.0.1:8080`, or a bare port,
    /// which binds loopback; port 0 picks a free one, see [`NanoKafka::console_addr`]): pages
    /// and a JSON API over
    /// the broker's topics, records and groups (docs/console.md), read-only unless
    /// [`NanoKafkaBuilder::console_writes`]. With SASL/PLAIN on the listener, it asks for the
    /// same user and password (HTTP Basic). Off by default; embedded broker only.
    #[cfg(feature = "console")]
    pub fn console(mut self, addr: impl Into<String>) -> Self {
        let writes = self.console.as_ref().is_some_and(|c| c.writes);
        let mut config = crate::console::ConsoleConfig::new(addr.into());
        config.writes = writes;
        self.console = Some(config);
        self
    }

    /// Serve a schema registry compatible with Confluent's REST API on `addr` (`host:port`,
    /// or a bare port, which binds loopback; port 0 picks a free one, see
    /// [`NanoKafka::schema_registry_addr`]): subjects, versions, schemas by id, compatibility
    /// levels (docs/schema-registry.md), kept in the compacted topic `_schemas`. Embedded
    /// broker only. No authentication: keep it on loopback.
    #[cfg(feature = "schema-registry")]
    pub fn schema_registry(mut self, addr: impl Into<String>) -> Self {
        self.schema_registry = Some(crate::schema_api::SchemaRegistryConfig { addr: addr.into() });
        self
    }

    /// Whether the web console serves its writes (create, alter and delete topics, produce a
    /// test record, reset offsets, delete records), each after a confirmation and logged;
    /// default false (they answer 403). Applies to [`NanoKafkaBuilder::console`], given
    /// before or after.
    #[cfg(feature = "console")]
    pub fn console_writes(mut self, enabled: bool) -> Self {
        match &mut self.console {
            Some(config) => config.writes = enabled,
            // Remembered for a `console(addr)` given after this.
            None if enabled => {
                let mut config = crate::console::ConsoleConfig::new(String::new());
                config.writes = enabled;
                self.console = Some(config);
            }
            None => {}
        }
        self
    }

    /// The console's sampler period and idle time (tests shorten them).
    #[cfg(all(feature = "console", feature = "internals"))]
    #[doc(hidden)]
    pub fn console_sampling(mut self, every: Duration, idle_after: Duration) -> Self {
        if let Some(config) = &mut self.console {
            config.sample_every = every;
            config.idle_after = idle_after;
        }
        self
    }

    /// The partition count of the topics the Kafka listener creates without being told one
    /// (Kafka's `num.partitions`, default 1): those a Metadata request auto-creates and those
    /// a CreateTopics request asks for with `num_partitions` -1. Topics created through the
    /// API name their own count. `build` refuses a count outside 1 to
    /// [`MAX_PARTITIONS`](crate::config::MAX_PARTITIONS).
    pub fn num_partitions(mut self, partitions: u32) -> Self {
        self.num_partitions = partitions;
        self
    }

    /// The largest key + value of one record (default 1 MiB).
    pub fn max_record_bytes(mut self, bytes: usize) -> Self {
        self.max_record_bytes = bytes;
        self
    }

    /// The largest produce request, in bytes of record frames (each record's key and value
    /// plus 30 bytes): a `produce_batch` / `produce_batch_raw` / `ProduceBatch` above it is
    /// refused with `Error::RequestTooLarge` before anything is written (default 100 MiB,
    /// Kafka's `socket.request.max.bytes`; at least `max_record_bytes`, at most 1 GiB).
    pub fn max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes;
        self
    }

    /// The most bytes a Kafka client's compressed batch may decompress to
    /// (`produce_kafka_batch`, and every Produce through the listener): a batch that would
    /// decompress to more is refused whole before anything is written, so a compression bomb
    /// costs at most this much memory, once (default and maximum
    /// [`MAX_DECOMPRESSED_BATCH_BYTES`], 128 MiB; at least `max_record_bytes`).
    pub fn max_decompressed_batch_bytes(mut self, bytes: usize) -> Self {
        self.max_decompressed_batch_bytes = bytes;
        self
    }

    /// Threads that run partition actors (default: one per core but one, at least 1 and at
    /// most 4). One core is left to the threads that call the broker: on two cores, a caller
    /// and two I/O threads would fight over them, and one I/O thread appends hundreds of
    /// thousands of records per second.
    pub fn io_threads(mut self, threads: usize) -> Self {
        self.io_threads = threads;
        self
    }

    /// How long an idle I/O thread spins, waiting for the next produce, before it sleeps
    /// (default 50 µs; zero never spins). Waking a sleeping thread costs tens of microseconds
    /// on a virtual machine, so a caller producing one record at a time goes several times
    /// faster with the spin. The spin yields the core after its first microseconds (a busy
    /// neighbour or a caller on the same core gets it), and it is skipped while it has not
    /// been paying: after a spin that no produce ended, the thread sleeps at once until a
    /// sleep turns out shorter than the spin. Timers on that thread may fire up to this much
    /// late. At most [`MAX_IDLE_SPIN`] (1 ms). See `actors::io_thread`.
    pub fn idle_spin(mut self, spin: Duration) -> Self {
        self.idle_spin = spin;
        self
    }

    /// The clock for timestamps, time retention and session timeouts (tests inject a
    /// [`crate::clock::ManualClock`]).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The file layer under the partitions' files (default: the OS). Fault-injection tests
    /// pass a [`crate::storage::sim::SimFs`]; the data-dir lock and topic configs always use
    /// the OS. Either way the broker wraps it in the descriptor budget of
    /// [`NanoKafkaBuilder::max_open_files`]. For tests (`internals` feature).
    #[cfg(feature = "internals")]
    pub fn file_system(mut self, fs: SharedFs) -> Self {
        self.fs = fs;
        self
    }

    /// How often each partition of a compacted topic checks whether a cleaning pass is due
    /// (Kafka's `log.cleaner.backoff.ms`). Default [`DEFAULT_CLEANER_BACKOFF`] (15 s); above
    /// zero and at most [`MAX_CLEANER_BACKOFF`] (`InvalidArgument`).
    pub fn cleaner_backoff(mut self, every: Duration) -> Self {
        self.cleaner_backoff = every;
        self
    }

    /// The memory of the log cleaner's key map, in bytes: 24 per distinct key of the dirty
    /// section (Kafka's `log.cleaner.dedupe.buffer.size`). Passes run one at a time, so this
    /// bounds the cleaner's memory; a pass takes what its dirty section can need (one key per
    /// offset) up to this, and a dirty section with more keys is cleaned in several passes. Default [`DEFAULT_CLEANER_KEY_MAP_BYTES`] (32 MiB, about 1.3 million keys);
    /// within [`CLEANER_KEY_MAP_BYTES`], 1 MiB to 4 GiB (`InvalidArgument`).
    pub fn cleaner_key_map_bytes(mut self, bytes: usize) -> Self {
        self.cleaner_key_map_bytes = bytes;
        self
    }

    /// How many partition files may hold an open descriptor at once, over the whole broker
    /// (like RocksDB's `max_open_files`). Files beyond it are closed while idle and reopened
    /// on their next use, so the number of partitions is not bounded by `ulimit -n`.
    ///
    /// Default: half the process's soft `RLIMIT_NOFILE` at `build` (the other half is
    /// headroom for the data-dir lock, topic configs, the runtime and the application),
    /// at least 16 and at most 65,536. At least 16 (`InvalidArgument` below).
    pub fn max_open_files(mut self, files: usize) -> Self {
        self.max_open_files = Some(files);
        self
    }

    /// Locks the data directory, loads its topics and starts the actors.
    ///
    /// # Errors
    /// `InvalidArgument` for a zero timeout, thread count or record size, a request size
    /// below the record size or above 1 GiB, a listener's consumer heartbeat interval not
    /// below the session timeout, an `idle_spin` above [`MAX_IDLE_SPIN`],
    /// `max_open_files` below 16; `DataDirLocked`;
    /// `Io`/`Corrupt` when the directory or a topic config cannot be read;
    /// `BlockingInActorContext` on an actix thread.
    pub fn build(mut self) -> Result<NanoKafka> {
        crate::wait::refuse_actix_thread()?;
        validate_max_record_bytes(self.max_record_bytes)?;
        for (name, value) in [
            ("block_timeout", self.block_timeout),
            ("session_timeout", self.session_timeout),
            ("cleaner_backoff", self.cleaner_backoff),
        ] {
            if value.is_zero() {
                return Err(Error::InvalidArgument {
                    name,
                    reason: "must be above zero".into(),
                });
            }
        }
        if !(1..=MAX_PARTITIONS).contains(&self.num_partitions) {
            return Err(Error::InvalidArgument {
                name: "num_partitions",
                reason: format!("must be 1..={MAX_PARTITIONS}, got {}", self.num_partitions),
            });
        }
        // Kafka's rule: a consumer-protocol member told to heartbeat less often than its
        // session lasts would be evicted between two heartbeats.
        if let Some(listener) = &mut self.listener {
            let interval = listener.heartbeat_interval_within(self.session_timeout);
            if interval >= self.session_timeout {
                return Err(Error::InvalidArgument {
                    name: "consumer_heartbeat_interval",
                    reason: format!(
                        "must be below the session timeout ({:?}), got {interval:?}",
                        self.session_timeout
                    ),
                });
            }
            listener.consumer_heartbeat_interval = Some(interval);
        }
        #[cfg(feature = "console")]
        if let Some(console) = &self.console {
            if console.addr.is_empty() {
                return Err(Error::InvalidArgument {
                    name: "console_writes",
                    reason: "needs the console: give its address with console(addr)".into(),
                });
            }
            if self.kafka_bootstrap.is_some() {
                return Err(Error::InvalidArgument {
                    name: "console",
                    reason: "the web console serves the embedded broker, not a Kafka cluster"
                        .into(),
                });
            }
        }
        #[cfg(feature = "schema-registry")]
        if self.kafka_bootstrap.is_some() && self.schema_registry.is_some() {
            return Err(Error::InvalidArgument {
                name: "schema_registry",
                reason: "the schema registry serves the embedded broker, not a Kafka cluster"
                    .into(),
            });
        }
        if self.kafka_bootstrap.is_some() && self.listener.is_some() {
            return Err(Error::InvalidArgument {
                name: "listen",
                reason: "a Kafka listener serves the embedded broker; with kafka_bootstrap \
                         the clients connect to the Kafka cluster itself"
                    .into(),
            });
        }
        match self.kafka_bootstrap.clone() {
            None => self.build_embedded(),
            // A producer, an admin client and a small runtime for the blocking calls (all
            // in `KafkaBackend`); no data directory, actor system or listener.
            #[cfg(feature = "kafka")]
            Some(bootstrap) => {
                let config = crate::kafka::KafkaConfig::new(
                    bootstrap,
                    self.kafka_settings,
                    (self.block_timeout, self.session_timeout),
                );
                let backend = Arc::new(crate::kafka::KafkaBackend::connect(config)?);
                let engine = crate::async_handle::Engine::Kafka(backend.clone());
                let handle = crate::async_handle::AsyncNanoKafka::new(engine);
                Ok(super::Running::start(
                    handle,
                    super::Started::Kafka(backend),
                ))
            }
            #[cfg(not(feature = "kafka"))]
            Some(_) => Err(Error::InvalidArgument {
                name: "kafka_bootstrap",
                reason: "this build has no Kafka backend: rebuild with the `kafka` feature \
                         (cargo build --features kafka)"
                    .into(),
            }),
        }
    }

    /// The embedded broker's own settings checked, then started (`embedded::start`).
    fn build_embedded(self) -> Result<NanoKafka> {
        if !CLEANER_KEY_MAP_BYTES.contains(&self.cleaner_key_map_bytes) {
            return Err(Error::InvalidArgument {
                name: "cleaner_key_map_bytes",
                reason: format!("must be 1 MiB to 4 GiB, got {}", self.cleaner_key_map_bytes),
            });
        }
        if self.cleaner_backoff > MAX_CLEANER_BACKOFF {
            return Err(Error::InvalidArgument {
                name: "cleaner_backoff",
                reason: format!(
                    "must be at most {MAX_CLEANER_BACKOFF:?}, got {:?}",
                    self.cleaner_backoff
                ),
            });
        }
        if self.io_threads == 0 {
            return Err(Error::InvalidArgument {
                name: "io_threads",
                reason: "must be at least 1".into(),
            });
        }
        if self.idle_spin > MAX_IDLE_SPIN {
            return Err(Error::InvalidArgument {
                name: "idle_spin",
                reason: format!(
                    "must be at most {MAX_IDLE_SPIN:?}, got {:?}",
                    self.idle_spin
                ),
            });
        }
        if self.max_request_bytes < self.max_record_bytes
            || self.max_request_bytes > MAX_BATCH_BYTES
        {
            return Err(Error::InvalidArgument {
                name: "max_request_bytes",
                reason: format!(
                    "must be {}..={MAX_BATCH_BYTES} (at least max_record_bytes), got {}",
                    self.max_record_bytes, self.max_request_bytes
                ),
            });
        }
        if self.max_decompressed_batch_bytes < self.max_record_bytes
            || self.max_decompressed_batch_bytes > MAX_DECOMPRESSED_BATCH_BYTES
        {
            return Err(Error::InvalidArgument {
                name: "max_decompressed_batch_bytes",
                reason: format!(
                    "must be {}..={MAX_DECOMPRESSED_BATCH_BYTES} (at least max_record_bytes), got {}",
                    self.max_record_bytes, self.max_decompressed_batch_bytes
                ),
            });
        }
        if let FsyncPolicy::Interval(every) = self.fsync {
            if every.is_zero() {
                return Err(Error::InvalidArgument {
                    name: "fsync",
                    reason: "FsyncPolicy::Interval must be above zero".into(),
                });
            }
        }
        let max_open_files = match self.max_open_files {
            Some(files) if files < MIN_OPEN_FILES => {
                return Err(Error::InvalidArgument {
                    name: "max_open_files",
                    reason: format!("must be at least {MIN_OPEN_FILES} (got {files})"),
                })
            }
            Some(files) => {
                if let Some(soft) = soft_nofile_limit().filter(|&soft| files as u64 >= soft) {
                    tracing::warn!(
                        max_open_files = files,
                        soft_limit = soft,
                        "max_open_files is not below the process's descriptor limit (ulimit -n): \
                         opens may fail with EMFILE"
                    );
                }
                files
            }
            None => default_max_open_files(),
        };
        let settings = BrokerSettings {
            data_dir: self.data_dir,
            fsync: self.fsync,
            block_timeout: self.block_timeout,
            session_timeout: self.session_timeout,
            max_record_bytes: self.max_record_bytes,
            max_request_bytes: self.max_request_bytes,
            max_decompressed_batch_bytes: self.max_decompressed_batch_bytes,
            clock: self.clock,
            // Every partition file goes through one budget of descriptors.
            fs: Arc::new(PooledFs::new(self.fs, max_open_files)),
            sync_worker: Arc::default(),
            cleaner_worker: Arc::new(
                SyncWorker::named("nanokafka-cleaner").with_priority(CpuPriority::Background),
            ),
            cleaner_backoff: self.cleaner_backoff,
            cleaner_key_map_bytes: self.cleaner_key_map_bytes,
        };
        let io = (self.io_threads, self.idle_spin);
        let num_partitions = self.num_partitions;
        let tls = self.tls;
        let listener = self.listener.map(|mut config| {
            config.tls = config.tls.or_else(|| tls.clone());
            config.with_num_partitions(num_partitions)
        });
        #[cfg(feature = "console")]
        let console = self.console.map(|mut config| {
            config.tls = tls;
            config
        });
        #[cfg(not(feature = "console"))]
        let console = None;
        #[cfg(feature = "schema-registry")]
        let registry = self.schema_registry;
        #[cfg(not(feature = "schema-registry"))]
        let registry = None;
        super::embedded::start(settings, io, listener.as_ref(), (console, registry))
    }
}
