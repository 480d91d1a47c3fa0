//! Starting the embedded broker: the data directory and its topics, the actor system on a
//! thread of its own (`nanokafka-broker`), the I/O threads, the broker actor under its
//! supervisor, and the Kafka listener when asked for one (bound before anything starts, so a
//! taken port fails the build with nothing running).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;

use super::{console, schema_registry, EmbeddedBroker, Running, Started};
use crate::actors::broker::BrokerActor;
use crate::actors::io_thread::IoThread;
use crate::actors::BrokerSettings;
use crate::async_handle::AsyncNanoKafka;
use crate::error::{Error, Result};
use crate::handle::NanoKafka;
use crate::listener::{ListenerConfig, ListenerHandle};
use crate::security::acl::{AclStore, Authorizer};
use crate::security::quota::ClientQuotas;
use crate::storage::{fs, DataDir};

/// Starts the broker `settings` describe (already checked), with `io_threads` I/O threads
/// spinning up to `idle_spin`, a Kafka listener when `listener` is given, and the web console
/// and the schema registry when their configs are.
pub(super) fn start(
    settings: BrokerSettings,
    (io_threads, idle_spin): (usize, Duration),
    listener_config: Option<&ListenerConfig>,
    (console, registry): (Option<console::Config>, Option<schema_registry::Config>),
) -> Result<NanoKafka> {
    let data_dir = DataDir::open(&settings.data_dir)?;
    // Bound before anything starts: a taken port fails the build with nothing running.
    let listener = listener_config
        .map(|config| crate::listener::bind(config)?.open_security(&settings.data_dir))
        .transpose()?;
    let console = console::bind(console)?;
    let registry = schema_registry::bind(registry)?;
    // A damaged quotas file stops the start: never a listener that silently enforces none.
    let listener = match listener {
        Some(bound) => {
            let quotas = ClientQuotas::open(fs::os(), &settings.data_dir, settings.clock.clone())?;
            Some((bound, quotas))
        }
        None => None,
    };
    let cluster_id = cluster_id(&settings.data_dir);
    let authorizer = listener_config
        .and_then(|config| config.authorizer.clone())
        .map(|super_users| {
            let store = AclStore::open(&settings.data_dir)?;
            Ok::<_, Error>(Authorizer::new(store, super_users))
        })
        .transpose()?;
    let topics = crate::config::load_topics(&data_dir)?;
    let topic_names: Vec<String> = topics.iter().map(|(name, _)| name.clone()).collect();
    let path = settings.data_dir.clone();
    let clock = settings.clock.clone();
    let console_facts = console
        .is_some()
        .then(|| (settings.clone(), listener_config.cloned()));
    let settings = Arc::new(settings);
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
                // Before the listener: its produces check records against the schemas.
                let schemas = schema_registry::store(&addr);
                let listener = match listener {
                    Some((bound, quotas)) => Some(
                        bound
                            .start(
                                schema_registry::with_store(
                                    AsyncNanoKafka::from(addr.clone()),
                                    schemas.as_ref(),
                                ),
                                cluster_id,
                                clock,
                                quotas,
                                authorizer,
                            )
                            .map_err(|e| std::io::Error::other(e.to_string()))?,
                    ),
                    None => None,
                };
                let console = console::start(
                    console,
                    console_facts,
                    &addr,
                    (listener.as_ref(), schemas.as_ref()),
                )
                .map_err(|e| std::io::Error::other(e.to_string()))?;
                let registry = schema_registry::start(registry, schemas.as_ref())
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                Ok((addr, listener, (console, registry, schemas)))
            });
            let failed = started.is_err();
            let _ = started_tx.send(started.map(|started| (started, System::current())));
            if failed {
                return Ok(());
            }
            system.run()
        })
        .map_err(|e| Error::io("spawn broker thread", &path, e))?;
    let ((addr, listener, (console, registry, schemas)), system) = started_rx
        .recv()
        .map_err(|_| Error::BrokerStopped)?
        .map_err(|e| Error::io("start an I/O thread", &path, e))?;
    let metrics = listener.as_ref().map(ListenerHandle::metrics);
    let handle = AsyncNanoKafka::from(addr.clone()).with_listener_metrics(metrics);
    // Produces to the topics already there take the direct route from the first one.
    for name in &topic_names {
        crate::wait::block_on(handle.learn_route(name));
    }
    let broker = EmbeddedBroker {
        addr,
        system,
        thread: Mutex::new(Some(thread)),
        listener: Mutex::new(listener),
        console: Mutex::new(console),
        registry: Mutex::new(registry),
        schemas,
    };
    Ok(Running::start(handle, Started::Embedded(Box::new(broker))))
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
pub(super) fn default_io_threads() -> usize {
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
