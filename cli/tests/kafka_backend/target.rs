//! The `Target` fixture: one broker a test body runs against, and the macro that runs each
//! body once per target.
//!
//! - `Embedded`: the embedded broker on a temporary data directory.
//! - `Serve`: the Kafka backend against `nanokafka serve` (our listener) as a child process.
//! - `Tansu`: the Kafka backend against tansu 0.6.0 (an independent Kafka broker, in memory),
//!   present when `NANOKAFKA_TANSU` or `benches/peers/tansu.sh path` names its binary;
//!   without it the tansu cases print a notice and pass, except under `CI`, where they fail.
//!
//! Every test starts a broker of its own (both start in milliseconds; a group join costs far
//! more), so tests share nothing, not even a Kafka group id. Topic names are unique anyway
//! ([`Target::topic`]), which keeps a failing test's topics apart in the broker's log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nanokafka::{NanoKafka, NanoKafkaBuilder, TopicConfig};

use crate::brokers::{self, Broker};

/// The longest a test body may run before the watchdog fails it (a hang, not a slow test:
/// the slowest bodies take a few seconds per group join on tansu).
const BODY_LIMIT: Duration = Duration::from_secs(240);

/// How much of its broker's output a failed test prints.
const LOG_LINES: usize = 400;

/// Which broker a [`Target`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Embedded,
    Serve,
    Tansu,
}

/// A broker for one test and a `NanoKafka` handle on it.
pub struct Target {
    pub kind: Kind,
    /// Dropped first: consumers leave and clients disconnect while the broker still runs.
    broker: NanoKafka,
    server: Option<Broker>,
    dir: tempfile::TempDir,
}

impl Target {
    /// Starts `kind`'s broker; `None` (after a notice on stderr) when tansu is not installed
    /// and `CI` is not set.
    fn start(kind: Kind) -> Option<Target> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let server = match kind {
            Kind::Embedded => None,
            Kind::Serve => Some(brokers::serve(&dir.path().join("served"))),
            Kind::Tansu => Some(brokers::tansu(&tansu_or_skip()?)),
        };
        // The Kafka handles get data directories of their own, beside serve's.
        let broker = match server {
            None => connect(dir.path(), kind, None),
            Some(_) => connect(&dir.path().join("client"), kind, server.as_ref()),
        };
        Some(Target {
            kind,
            broker,
            server,
            dir,
        })
    }

    /// The handle every test uses.
    pub fn broker(&self) -> &NanoKafka {
        &self.broker
    }

    /// A second, independent handle on the same broker: on Kafka a client of its own (its
    /// own producer and consumers, as another process would have); on the embedded broker,
    /// which one process owns, a clone.
    pub fn another_client(&self) -> NanoKafka {
        let client = self.another_client_with(|builder| builder);
        client.expect("another client")
    }

    /// As [`Target::another_client`], with the Kafka client's builder adjusted by
    /// `configure` (the embedded broker's clone keeps the settings it was built with); the
    /// build's error, if any.
    pub fn another_client_with(
        &self,
        configure: impl FnOnce(NanoKafkaBuilder) -> NanoKafkaBuilder,
    ) -> nanokafka::Result<NanoKafka> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        match self.kind {
            Kind::Embedded => Ok(self.broker.clone()),
            Kind::Serve | Kind::Tansu => {
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let dir = self.dir.path().join(format!("another-{n}"));
                configure(builder(&dir, self.kind, self.server.as_ref())).build()
            }
        }
    }

    /// The Kafka target's `bootstrap.servers`; `None` for the embedded broker.
    pub fn bootstrap(&self) -> Option<&str> {
        self.server.as_ref().map(|s| s.bootstrap.as_str())
    }

    /// Whether the target is tansu, for the cases its known gaps make it skip.
    pub fn is_tansu(&self) -> bool {
        self.kind == Kind::Tansu
    }

    /// Whether the handle runs the Kafka backend.
    pub fn is_kafka(&self) -> bool {
        self.kind != Kind::Embedded
    }

    /// A topic name no other test of this binary uses: `base-<n>-<pid>`.
    pub fn topic(&self, base: &str) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        format!("{base}-{n}-{}", std::process::id())
    }

    /// A fresh topic of `partitions` partitions, created through the handle.
    pub fn new_topic(&self, base: &str, partitions: u32) -> String {
        let topic = self.topic(base);
        self.broker
            .create_topic(&topic, TopicConfig::default().partitions(partitions))
            .unwrap_or_else(|e| panic!("create {topic} on {:?}: {e}", self.kind));
        topic
    }
}

/// The builder of a test's handle: embedded in `dir`, or the Kafka backend on `server`.
///
/// The Kafka members get a 6 s session (Kafka's smallest by default; tansu completes a join
/// after about half the session timeout, 22 s with the default 45 s) and heartbeats every
/// 500 ms (a librdkafka setting passed through: members hear of a rebalance on their next
/// heartbeat, 3 s apart by default).
///
/// On tansu every record is a batch of its own (`batch.num.messages=1`): tansu 0.6.0 answers
/// ListOffsets with a high watermark that counts each batch as one record (10 records in one
/// batch from offset 0: high watermark 1), so lag would be wrong whenever a batch held more.
fn builder(dir: &std::path::Path, kind: Kind, server: Option<&Broker>) -> NanoKafkaBuilder {
    let builder = NanoKafka::builder().data_dir(dir);
    let Some(server) = server else {
        return builder;
    };
    let builder = builder
        .kafka_bootstrap(server.bootstrap.as_str())
        .session_timeout(Duration::from_secs(6))
        .kafka_setting("heartbeat.interval.ms", "500");
    match kind {
        Kind::Tansu => builder.kafka_setting("batch.num.messages", "1"),
        Kind::Embedded | Kind::Serve => builder,
    }
}

fn connect(dir: &std::path::Path, kind: Kind, server: Option<&Broker>) -> NanoKafka {
    builder(dir, kind, server)
        .build()
        .expect("the test's broker handle")
}

/// tansu's binary, or `None` after a notice; under `CI` a missing tansu fails the test.
fn tansu_or_skip() -> Option<std::path::PathBuf> {
    match crate::tansu::tansu_binary() {
        Ok(binary) => Some(binary),
        Err(why) => {
            let under_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
            assert!(!under_ci, "CI must run the tansu cases, but {why}");
            eprintln!("skipping a tansu case: {why} (`benches/peers/tansu.sh install`)");
            None
        }
    }
}

/// Runs `body` against a fresh `kind` target, under a watchdog; when it fails, prints the
/// end of what the broker printed (a server's side of a failure is otherwise lost).
pub fn run(kind: Kind, body: fn(&Target)) {
    let Some(target) = Target::start(kind) else {
        return;
    };
    let log = target.server.as_ref().map(Broker::log);
    // The target moves into the body; a failure rethrows, so no broken state is seen.
    let run = move || crate::watchdog::within(BODY_LIMIT, move || body(&target));
    if let Err(failure) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        if let Some(log) = log {
            eprintln!(
                "--- the last {LOG_LINES} lines {kind:?}'s broker printed ---\n{}\n---",
                log.tail(LOG_LINES)
            );
        }
        std::panic::resume_unwind(failure);
    }
}

/// `on_every_target!(a, b)` in a test module makes, for each body `fn a(t: &Target)`, the
/// tests `embedded::a`, `serve::a` and `tansu::a` (filter one target with
/// `cargo test --features kafka --test kafka_backend -- ::serve::`).
macro_rules! on_every_target {
    ($($body:ident),+ $(,)?) => {
        mod embedded {
            $(#[test]
            fn $body() {
                $crate::target::run($crate::target::Kind::Embedded, super::$body);
            })+
        }
        mod serve {
            $(#[test]
            fn $body() {
                $crate::target::run($crate::target::Kind::Serve, super::$body);
            })+
        }
        mod tansu {
            $(#[test]
            fn $body() {
                $crate::target::run($crate::target::Kind::Tansu, super::$body);
            })+
        }
    };
}
pub(crate) use on_every_target;
