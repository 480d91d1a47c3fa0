//! `NanoKafka`: the blocking, thread-safe handle, for plain threads.
//!
//! It owns an actix System on a background thread (`nanokafka-broker`) plus the I/O
//! arbiters; each call sends one message and blocks the calling thread for the reply. Called
//! on an actix thread, where blocking would deadlock, a call returns
//! `Error::BlockingInActorContext` instead. Dropping the last clone (and the last owning
//! `AsyncNanoKafka`, see `async_handle::lifecycle`) shuts the broker down.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::actors::broker::BrokerActor;
use crate::actors::io_thread::IoThread;
use crate::actors::BrokerSettings;
use crate::async_handle::{AsyncNanoKafka, BrokerLink, RunningBroker};
use crate::broker_ref::BrokerRef;
use crate::clock::{SharedClock, SystemClock};
use crate::config::{validate_max_record_bytes, FsyncPolicy, TopicChanges, TopicConfig};
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::listener::{ListenerConfig, ListenerHandle};
use crate::messages::{KafkaAppend, Shutdown};
use crate::partition::ProduceRecord;
use crate::storage::fd_pool::{
    default_max_open_files, soft_nofile_limit, PooledFs, MIN_OPEN_FILES,
};
use crate::storage::fs::SharedFs;
use crate::storage::log::{DEFAULT_MAX_RECORD_BYTES, MAX_BATCH_BYTES};
use crate::storage::{DataDir, RecordBatch};
use crate::types::{BrokerStats, Delivery, Header, Record};
use crate::wait::Patience;

mod open_async;

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
    /// `None`: no Kafka listener (the default).
    listener: Option<ListenerConfig>,
    /// `Some`: the handle's calls go to this Kafka cluster instead (the `kafka` feature).
    kafka_bootstrap: Option<String>,
    /// librdkafka settings for the Kafka backend, passed through.
    kafka_settings: BTreeMap<String, String>,
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
            listener: None,
            kafka_bootstrap: None,
            kafka_settings: BTreeMap::new(),
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
    /// below the record size or above 1 GiB, an `idle_spin` above [`MAX_IDLE_SPIN`],
    /// `max_open_files` below 16; `DataDirLocked`;
    /// `Io`/`Corrupt` when the directory or a topic config cannot be read;
    /// `BlockingInActorContext` on an actix thread.
    pub fn build(self) -> Result<NanoKafka> {
        crate::wait::refuse_actix_thread()?;
        validate_max_record_bytes(self.max_record_bytes)?;
        for (name, value) in [
            ("block_timeout", self.block_timeout),
            ("session_timeout", self.session_timeout),
        ] {
            if value.is_zero() {
                return Err(Error::InvalidArgument {
                    name,
                    reason: "must be above zero".into(),
                });
            }
        }
        if let Some(servers) = self.kafka_bootstrap.clone() {
            return self.build_kafka(servers);
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
        let data_dir = DataDir::open(&self.data_dir)?;
        // Bound before anything starts: a taken port fails the build with nothing running.
        let listener = self
            .listener
            .as_ref()
            .map(crate::listener::bind)
            .transpose()?;
        let cluster_id = cluster_id(&self.data_dir);
        let topics = crate::config::load_topics(&data_dir)?;
        let topic_names: Vec<String> = topics.iter().map(|(name, _)| name.clone()).collect();
        let settings = Arc::new(BrokerSettings {
            data_dir: self.data_dir.clone(),
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
        });
        let (io_threads, idle_spin) = (self.io_threads, self.idle_spin);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("nanokafka-broker".into())
            .spawn(move || {
                crate::actors::io_thread::mark_broker_thread();
                let system = actix_rt::System::new();
                let started = system.block_on(async move {
                    let arbiters = start_io_threads(io_threads, idle_spin)?;
                    let broker = BrokerActor::new(settings, data_dir, topics, arbiters);
                    let addr = Supervisor::start(move |ctx: &mut Context<BrokerActor>| {
                        ctx.set_mailbox_capacity(crate::actors::MAILBOX_CAPACITY);
                        broker
                    });
                    let listener = match listener {
                        Some(bound) => Some(
                            bound
                                .start(AsyncNanoKafka::from(addr.clone()), cluster_id)
                                .map_err(|e| std::io::Error::other(e.to_string()))?,
                        ),
                        None => None,
                    };
                    Ok((addr, listener))
                });
                let failed = started.is_err();
                let _ = started_tx.send(started.map(|started| (started, System::current())));
                if failed {
                    return Ok(());
                }
                system.run()
            })
            .map_err(|e| Error::io("spawn broker thread", &self.data_dir, e))?;
        let ((addr, listener), system) = started_rx
            .recv()
            .map_err(|_| Error::BrokerStopped)?
            .map_err(|e| Error::io("start an I/O thread", &self.data_dir, e))?;
        let metrics = listener.as_ref().map(ListenerHandle::metrics);
        let handle = AsyncNanoKafka::from(addr)
            .with_listener_metrics(metrics)
            .for_sequential_callers();
        // Produces to the topics already there take the direct route from the first one.
        for name in &topic_names {
            crate::wait::block_on(handle.learn_route(name));
        }
        let listener_addr = listener.as_ref().map(ListenerHandle::addr);
        Ok(NanoKafka {
            inner: Arc::new_cyclic(|inner: &std::sync::Weak<Inner>| Inner {
                handle: handle.with_link(BrokerLink::borrowing(inner.clone(), listener_addr)),
                system: Some(system),
                thread: Mutex::new(Some(thread)),
                stopped: AtomicBool::new(false),
                listener_addr,
                listener: Mutex::new(listener),
                #[cfg(feature = "kafka")]
                kafka: None,
            }),
        })
    }

    /// The Kafka backend: a producer, an admin client and a small runtime for the blocking
    /// calls. No data directory, actor system or listener.
    #[cfg(feature = "kafka")]
    fn build_kafka(self, servers: String) -> Result<NanoKafka> {
        if self.listener.is_some() {
            return Err(Error::InvalidArgument {
                name: "listen",
                reason: "a Kafka listener serves the embedded broker; with kafka_bootstrap \
                         the clients connect to the Kafka cluster itself"
                    .into(),
            });
        }
        let config = crate::kafka::KafkaConfig {
            bootstrap: servers,
            settings: self.kafka_settings,
            request_timeout: self.block_timeout.min(crate::kafka::MAX_WAIT),
            session_timeout: self.session_timeout.min(crate::kafka::MAX_WAIT),
        };
        let backend = Arc::new(crate::kafka::KafkaBackend::connect(config)?);
        // One worker: librdkafka does the work on its own threads; the runtime only drives
        // the handle's futures and runs the blocking consumer calls on its blocking pool.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("nanokafka-kafka")
            .enable_time()
            .build()
            .map_err(|e| Error::io("start the Kafka backend's runtime", "", e))?;
        Ok(NanoKafka {
            inner: Arc::new_cyclic(|inner: &std::sync::Weak<Inner>| Inner {
                handle: AsyncNanoKafka::kafka(backend)
                    .with_link(BrokerLink::borrowing(inner.clone(), None)),
                system: None,
                thread: Mutex::new(None),
                stopped: AtomicBool::new(false),
                listener: Mutex::new(None),
                listener_addr: None,
                kafka: Some(KafkaRuntime {
                    handle: runtime.handle().clone(),
                    runtime: Mutex::new(Some(runtime)),
                }),
            }),
        })
    }

    #[cfg(not(feature = "kafka"))]
    fn build_kafka(self, _servers: String) -> Result<NanoKafka> {
        Err(Error::InvalidArgument {
            name: "kafka_bootstrap",
            reason: "this build has no Kafka backend: rebuild with the `kafka` feature \
                     (cargo build --features kafka)"
                .into(),
        })
    }
}

/// The runtime that runs a Kafka-backed blocking handle's calls.
#[cfg(feature = "kafka")]
#[derive(Debug)]
struct KafkaRuntime {
    handle: tokio::runtime::Handle,
    /// Taken and shut down in the background on close (dropping a runtime on an async
    /// thread would panic).
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

/// A Kafka cluster id for the data directory at `path`: the same on every open of it, so
/// clients that remember it across a restart see the same cluster.
fn cluster_id(path: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    // FNV-1a rather than std's randomly seeded hasher: the id must not change between runs.
    let mut hash = Fnv1a::default();
    path.hash(&mut hash);
    format!("nanokafka-{:016x}", hash.finish())
}

/// FNV-1a, 64-bit: a stable hash for [`cluster_id`].
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The default I/O thread count: the cores but one, within 1..=4.
fn default_io_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    cores.saturating_sub(1).clamp(1, 4)
}

/// Starts `count` I/O threads, or none: on a failure the ones started are stopped.
fn start_io_threads(count: usize, idle_spin: Duration) -> std::io::Result<Vec<IoThread>> {
    let mut started = Vec::with_capacity(count);
    for _ in 0..count {
        match IoThread::start(idle_spin) {
            Ok(io) => started.push(io),
            Err(e) => {
                for io in started {
                    io.arbiter.stop();
                }
                return Err(e);
            }
        }
    }
    Ok(started)
}

/// The blocking broker handle. `Clone + Send + Sync`; clones share one broker.
#[derive(Debug, Clone)]
pub struct NanoKafka {
    inner: Arc<Inner>,
}

/// The broker a [`NanoKafka`] (or an owning [`AsyncNanoKafka`]) keeps running: dropping the
/// last `Arc` of it shuts the broker down. Its own `handle` reaches it only weakly (no cycle).
#[derive(Debug)]
pub(crate) struct Inner {
    handle: AsyncNanoKafka,
    /// The broker's actor system; `None` on the Kafka backend.
    system: Option<System>,
    thread: Mutex<Option<JoinHandle<std::io::Result<()>>>>,
    stopped: AtomicBool,
    /// The Kafka listener, stopped first on shutdown so no client request races the close.
    listener: Mutex<Option<ListenerHandle>>,
    listener_addr: Option<std::net::SocketAddr>,
    #[cfg(feature = "kafka")]
    kafka: Option<KafkaRuntime>,
}

impl Inner {
    fn block_on<T>(
        &self,
        request: impl Future<Output = Result<T>>,
        patience: Patience,
    ) -> Result<T> {
        crate::wait::refuse_actix_thread()?;
        if self.stopped.load(Ordering::SeqCst) {
            return Err(Error::BrokerStopped);
        }
        #[cfg(feature = "kafka")]
        if let Some(kafka) = &self.kafka {
            return kafka.handle.block_on(request);
        }
        crate::wait::block_on_with(request, patience)
    }

    /// The blocking shutdown: asks the broker to close every partition, then stops its
    /// System and waits for its thread. Called once, on a thread that may block.
    fn close(&self) -> Result<()> {
        #[cfg(feature = "kafka")]
        if let Some(kafka) = &self.kafka {
            return self.close_kafka(kafka);
        }
        let listener = self.listener.lock().map(|mut l| l.take()).unwrap_or(None);
        if let Some(listener) = listener {
            listener.stop();
        }
        let closed = futures::executor::block_on(self.handle.addr().send(Shutdown))
            .unwrap_or(Err(Error::BrokerStopped));
        self.stop_system();
        let thread = self.thread.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        closed
    }

    fn stop_system(&self) {
        if let Some(system) = &self.system {
            system.stop();
        }
    }

    /// The Kafka backend's close: delivers what is queued, closes the members (they leave
    /// their groups), then stops the runtime.
    #[cfg(feature = "kafka")]
    fn close_kafka(&self, kafka: &KafkaRuntime) -> Result<()> {
        let closed = match self.handle.kafka_backend() {
            Some(backend) => backend.close(),
            None => Ok(()),
        };
        let runtime = kafka.runtime.lock().map(|mut r| r.take()).unwrap_or(None);
        if let Some(runtime) = runtime {
            runtime.shutdown_background();
        }
        closed
    }

    /// Where the Kafka listener is bound, if there is one.
    pub(crate) fn listener_addr(&self) -> Option<std::net::SocketAddr> {
        self.listener_addr
    }

    /// [`NanoKafka::shutdown`]: the close, once; `Ok` when already shut down.
    pub(crate) fn shutdown(&self) -> Result<()> {
        // Refused before anything changes: an error means nothing happened.
        crate::wait::refuse_actix_thread()?;
        if self.stopped.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.close()
    }
}

/// What an async handle that owns (or reaches) this broker may ask of it.
impl RunningBroker for Inner {
    fn shutdown(&self) -> Result<()> {
        Inner::shutdown(self)
    }

    fn listener_addr(&self) -> Option<std::net::SocketAddr> {
        Inner::listener_addr(self)
    }
}

impl Drop for Inner {
    /// The last handle is gone: shut down cleanly and release the lock before returning,
    /// even on an actix/tokio thread, where the blocking close runs on a helper thread while
    /// this one waits (a drop cannot be async). Only on one of the broker's own threads,
    /// which the close itself needs, is the System merely stopped: the partitions then
    /// reopen with a scan, losing nothing acknowledged.
    fn drop(&mut self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        let closed = if crate::actors::io_thread::on_broker_thread() {
            self.stop_system();
            Err(Error::BlockingInActorContext)
        } else if crate::wait::refuse_actix_thread().is_err() {
            std::thread::scope(|scope| {
                let helper = std::thread::Builder::new()
                    .name("nanokafka-close".into())
                    .spawn_scoped(scope, || self.close());
                match helper {
                    Ok(helper) => helper.join().unwrap_or(Err(Error::BrokerStopped)),
                    Err(_) => {
                        self.stop_system();
                        Err(Error::BlockingInActorContext)
                    }
                }
            })
        } else {
            self.close()
        };
        match closed {
            // Already shut down through the actor face: nothing was left to close.
            Ok(()) | Err(Error::BrokerStopped) => {}
            Err(e) => tracing::warn!(error = %e, "broker shutdown on drop was not clean"),
        }
    }
}

impl NanoKafka {
    /// Opens (creating) the broker in `data_dir` with the default settings.
    ///
    /// # Errors
    /// As [`NanoKafkaBuilder::build`].
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self> {
        Self::builder().data_dir(data_dir).build()
    }

    /// A builder with the defaults: data dir `data`, `FsyncPolicy::Interval(1 s)`, 60 s block
    /// timeout, 45 s session timeout, 1 MiB records.
    pub fn builder() -> NanoKafkaBuilder {
        NanoKafkaBuilder::default()
    }

    /// The address the Kafka listener is bound to (with the port it picked, when asked for
    /// port 0), or `None` without a listener.
    pub fn listener_addr(&self) -> Option<std::net::SocketAddr> {
        self.inner.listener_addr
    }

    /// Which backend serves this handle: the embedded broker, or a Kafka cluster.
    pub fn backend(&self) -> crate::types::Backend {
        self.inner.handle.backend()
    }

    /// The async face of this broker, for code on actix/tokio threads. It does not keep the
    /// broker running: once the last `NanoKafka` (and owning async handle) is dropped, its
    /// calls answer `BrokerStopped`. Its [`AsyncNanoKafka::shutdown`] shuts this broker down
    /// as [`NanoKafka::shutdown`] does (this handle then answers `BrokerStopped`). To open a
    /// broker that async code owns, use [`AsyncNanoKafka::open`].
    pub fn async_handle(&self) -> AsyncNanoKafka {
        self.inner.handle.for_any_caller()
    }

    /// The broker actor, for actors that send [`crate::messages`].
    pub fn addr(&self) -> Addr<BrokerActor> {
        self.inner.handle.addr().clone()
    }

    /// The broker actor behind [`BrokerRef`], whose `request` answers one flat `Result`.
    /// Embedded backend only, as [`NanoKafka::addr`]: on the Kafka backend every request
    /// answers `BrokerStopped`.
    pub fn broker_ref(&self) -> BrokerRef {
        BrokerRef::new(self.addr())
    }

    /// An async handle that keeps this broker running as a `NanoKafka` clone does.
    pub(crate) fn owning_async_handle(&self) -> AsyncNanoKafka {
        self.inner
            .handle
            .for_any_caller()
            .with_link(BrokerLink::owning(self.inner.clone()))
    }

    fn call<T>(&self, request: impl Future<Output = Result<T>>) -> Result<T> {
        self.inner.block_on(request, Patience::ROUND_TRIP)
    }

    /// As `call`, for a produce of `bytes`: a large batch's append takes longer than a round
    /// trip, and the caller spins for it accordingly (see `Patience::append`).
    fn call_appending<T>(
        &self,
        request: impl Future<Output = Result<T>>,
        bytes: usize,
    ) -> Result<T> {
        self.inner.block_on(request, Patience::append(bytes))
    }

    /// As `call`, for a request that may wait `timeout` for data (a long poll).
    fn call_waiting<T>(
        &self,
        request: impl Future<Output = Result<T>>,
        timeout: Duration,
    ) -> Result<T> {
        let patience = match timeout.is_zero() {
            true => Patience::ROUND_TRIP,
            false => Patience::Park,
        };
        self.inner.block_on(request, patience)
    }

    /// Runs one async-handle request to completion on this thread.
    pub(crate) fn call_async<'a, T, F>(
        &'a self,
        request: impl FnOnce(&'a AsyncNanoKafka) -> F,
        timeout: Duration,
    ) -> Result<T>
    where
        F: Future<Output = Result<T>> + 'a,
    {
        self.call_waiting(request(&self.inner.handle), timeout)
    }

    /// [`AsyncNanoKafka::create_topic`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::create_topic`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn create_topic(&self, topic: &str, config: TopicConfig) -> Result<()> {
        self.call(self.inner.handle.create_topic(topic, config))
    }

    /// [`AsyncNanoKafka::list_topics`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::list_topics`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn list_topics(&self) -> Result<std::collections::BTreeMap<String, TopicConfig>> {
        self.call(self.inner.handle.list_topics())
    }

    /// [`AsyncNanoKafka::alter_topic`], blocking this thread until it answers: grows the
    /// topic's partitions or changes its settings (see [`TopicChanges`]); returns the
    /// config after the change.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::alter_topic`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn alter_topic(&self, topic: &str, changes: TopicChanges) -> Result<TopicConfig> {
        self.call(self.inner.handle.alter_topic(topic, changes))
    }

    /// [`AsyncNanoKafka::delete_topic`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::delete_topic`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn delete_topic(&self, topic: &str) -> Result<()> {
        self.call(self.inner.handle.delete_topic(topic))
    }

    /// [`AsyncNanoKafka::produce`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce<T: Serialize + ?Sized>(&self, topic: &str, value: &T) -> Result<Delivery> {
        self.call(self.inner.handle.produce(topic, value))
    }

    /// [`AsyncNanoKafka::produce_keyed`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_keyed`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce_keyed<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        key: impl AsRef<[u8]>,
        value: &T,
    ) -> Result<Delivery> {
        self.call(self.inner.handle.produce_keyed(topic, key, value))
    }

    /// [`AsyncNanoKafka::produce_raw`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_raw`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce_raw(&self, topic: &str, key: Option<&[u8]>, value: Vec<u8>) -> Result<Delivery> {
        self.call(self.inner.handle.produce_raw(topic, key, value))
    }

    /// [`AsyncNanoKafka::produce_with_headers`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_with_headers`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn produce_with_headers<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: &T,
        headers: &[Header],
    ) -> Result<Delivery> {
        self.call(
            self.inner
                .handle
                .produce_with_headers(topic, key, value, headers),
        )
    }

    /// [`AsyncNanoKafka::produce_raw_with_headers`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_raw_with_headers`]; `BlockingInActorContext` on an
    /// actix/tokio thread.
    pub fn produce_raw_with_headers(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[Header],
    ) -> Result<Delivery> {
        self.call(
            self.inner
                .handle
                .produce_raw_with_headers(topic, key, value, headers),
        )
    }

    /// [`AsyncNanoKafka::offset_for_timestamp`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::offset_for_timestamp`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: u64,
    ) -> Result<Option<u64>> {
        self.call(
            self.inner
                .handle
                .offset_for_timestamp(topic, partition, timestamp_ms),
        )
    }

    /// [`AsyncNanoKafka::produce_kafka_batch`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_kafka_batch`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn produce_kafka_batch(
        &self,
        topic: &str,
        partition: u32,
        batch: Vec<u8>,
    ) -> Result<KafkaAppend> {
        self.call(
            self.inner
                .handle
                .produce_kafka_batch(topic, partition, batch),
        )
    }

    /// [`AsyncNanoKafka::produce_batch_raw`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_batch_raw`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce_batch_raw(
        &self,
        topic: &str,
        partition: Option<u32>,
        records: Vec<ProduceRecord>,
    ) -> Result<Vec<Delivery>> {
        // As the async handle does: the records become one batch, produced as such.
        self.produce_batch(topic, partition, RecordBatch::from(&records[..]))
    }

    /// [`AsyncNanoKafka::produce_batch`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_batch`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce_batch(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: RecordBatch,
    ) -> Result<Vec<Delivery>> {
        let bytes = batch.size_bytes();
        self.call_appending(
            self.inner.handle.produce_batch(topic, partition, batch),
            bytes,
        )
    }

    /// [`AsyncNanoKafka::join_group`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::join_group`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn join_group(&self, topic: &str, group: &str, member: &str) -> Result<Assignment> {
        self.call(self.inner.handle.join_group(topic, group, member))
    }

    /// [`AsyncNanoKafka::join_group_with`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::join_group_with`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn join_group_with(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: impl Into<GroupOptions>,
    ) -> Result<Assignment> {
        self.call(
            self.inner
                .handle
                .join_group_with(topic, group, member, options),
        )
    }

    /// [`AsyncNanoKafka::leave_group`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::leave_group`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn leave_group(&self, topic: &str, group: &str, member: &str) -> Result<()> {
        self.call(self.inner.handle.leave_group(topic, group, member))
    }

    /// [`AsyncNanoKafka::heartbeat`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::heartbeat`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn heartbeat(&self, topic: &str, group: &str, member: &str) -> Result<Assignment> {
        self.call(self.inner.handle.heartbeat(topic, group, member))
    }

    /// [`AsyncNanoKafka::poll`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn poll<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
    ) -> Result<Option<Record<T>>> {
        self.call(self.inner.handle.poll(topic, group, member))
    }

    /// [`AsyncNanoKafka::poll_timeout`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll_timeout`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn poll_timeout<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        timeout: Duration,
    ) -> Result<Option<Record<T>>> {
        self.call_waiting(
            self.inner
                .handle
                .poll_timeout(topic, group, member, timeout),
            timeout,
        )
    }

    /// [`AsyncNanoKafka::poll_batch`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll_batch`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn poll_batch<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<T>>> {
        self.call_waiting(
            self.inner
                .handle
                .poll_batch(topic, group, member, max_records, timeout),
            timeout,
        )
    }

    /// [`AsyncNanoKafka::poll_batch_raw`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll_batch_raw`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn poll_batch_raw(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<Vec<u8>>>> {
        self.call_waiting(
            self.inner
                .handle
                .poll_batch_raw(topic, group, member, max_records, timeout),
            timeout,
        )
    }

    /// [`AsyncNanoKafka::commit`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::commit`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn commit(&self, topic: &str, group: &str, partition: u32, offset: u64) -> Result<()> {
        self.call(self.inner.handle.commit(topic, group, partition, offset))
    }

    /// [`AsyncNanoKafka::reset_offset`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::reset_offset`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn reset_offset(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        offset: u64,
    ) -> Result<()> {
        self.call(
            self.inner
                .handle
                .reset_offset(topic, group, partition, offset),
        )
    }

    /// [`AsyncNanoKafka::lag`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::lag`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn lag(&self, topic: &str, group: &str) -> Result<BTreeMap<u32, u64>> {
        self.call(self.inner.handle.lag(topic, group))
    }

    /// [`AsyncNanoKafka::stats`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::stats`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn stats(&self) -> Result<BrokerStats> {
        self.call(self.inner.handle.stats())
    }

    /// [`AsyncNanoKafka::crash_partition`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::crash_partition`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn crash_partition(&self, topic: &str, partition: u32) -> Result<()> {
        self.call(self.inner.handle.crash_partition(topic, partition))
    }

    /// Syncs and closes every partition (clean-shutdown checkpoints), stops the actors and
    /// releases the data-directory lock before it returns. Idempotent; later calls fail with
    /// `BrokerStopped`. Dropping the last handle does the same, on any thread.
    ///
    /// # Errors
    /// `Io` when a partition could not be closed cleanly (it is scanned on the next open);
    /// `BlockingInActorContext` on an actix/tokio thread, where nothing is done (drop the
    /// handles there, or shut down from a plain thread).
    pub fn shutdown(&self) -> Result<()> {
        self.inner.shutdown()
    }

    /// [`AsyncNanoKafka::describe_broker`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::describe_broker`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn describe_broker(&self) -> Result<crate::messages::BrokerDescription> {
        self.call(self.inner.handle.describe_broker())
    }

    /// [`AsyncNanoKafka::crash_topic`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::crash_topic`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn crash_topic(&self, topic: &str) -> Result<()> {
        self.call(self.inner.handle.crash_topic(topic))
    }

    /// [`AsyncNanoKafka::crash_broker`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::crash_broker`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn crash_broker(&self) -> Result<()> {
        self.call(self.inner.handle.crash_broker())
    }

    /// [`AsyncNanoKafka::crash_group_coordinator`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::crash_group_coordinator`]; `BlockingInActorContext` on an
    /// actix/tokio thread.
    pub fn crash_group_coordinator(&self, topic: &str, group: &str) -> Result<()> {
        self.call(self.inner.handle.crash_group_coordinator(topic, group))
    }

    /// [`AsyncNanoKafka::describe_topic`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::describe_topic`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn describe_topic(&self, topic: &str) -> Result<TopicConfig> {
        self.call(self.inner.handle.describe_topic(topic))
    }
}
