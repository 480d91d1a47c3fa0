//! The composition root: the one module that knows how a broker is put together. The
//! builder checks the settings and starts the backend they choose: for the embedded broker,
//! the data directory, the actor system and its thread, the I/O threads, the broker actor
//! and the Kafka listener (`embedded.rs`); for the Kafka backend, its clients and runtime.
//! [`Running`] is what was started, and how it stops: the listener first, then the broker
//! (every partition synced and closed), then the actor system and its thread.
//!
//! The handles ([`NanoKafka`], [`AsyncNanoKafka`]) sit below and only delegate: they reach
//! the running broker through the small [`RunningBroker`] trait (shutdown, the listener's
//! address, whether it stopped), never this module. Their constructors that start a broker
//! (`NanoKafka::open`, `NanoKafka::builder`, `AsyncNanoKafka::open`) are defined here
//! (`open.rs`).

mod builder;
mod console;
mod embedded;
mod open;
mod schema_registry;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use actix::prelude::*;

use crate::actors::broker::BrokerActor;
use crate::async_handle::{AsyncNanoKafka, BrokerLink, RunningBroker};
use crate::error::{Error, Result};
use crate::handle::NanoKafka;
use crate::listener::ListenerHandle;
use crate::messages::Shutdown;

pub use builder::{
    NanoKafkaBuilder, BOOTSTRAP_ENV, CLEANER_KEY_MAP_BYTES, DEFAULT_BLOCK_TIMEOUT,
    DEFAULT_CLEANER_BACKOFF, DEFAULT_CLEANER_KEY_MAP_BYTES, DEFAULT_DATA_DIR, DEFAULT_IDLE_SPIN,
    DEFAULT_MAX_REQUEST_BYTES, DEFAULT_SESSION_TIMEOUT, MAX_CLEANER_BACKOFF,
    MAX_DECOMPRESSED_BATCH_BYTES, MAX_IDLE_SPIN,
};

/// A started broker: the last [`NanoKafka`] (or owning [`AsyncNanoKafka`]) dropped drops it,
/// which shuts it down. The handles' own async handles reach it only weakly (no cycle).
#[derive(Debug)]
pub(crate) struct Running {
    stopped: AtomicBool,
    started: Started,
    listener_addr: Option<SocketAddr>,
    #[cfg_attr(not(feature = "console"), allow(dead_code))]
    console_addr: Option<SocketAddr>,
    #[cfg_attr(not(feature = "schema-registry"), allow(dead_code))]
    registry_addr: Option<SocketAddr>,
}

/// What was started, by backend.
#[derive(Debug)]
pub(crate) enum Started {
    Embedded(Box<EmbeddedBroker>),
    /// The backend's clients and its runtime, closed by `KafkaBackend::close`.
    #[cfg(feature = "kafka")]
    Kafka(Arc<crate::kafka::KafkaBackend>),
}

/// The embedded broker's running parts.
#[derive(Debug)]
pub(crate) struct EmbeddedBroker {
    addr: Addr<BrokerActor>,
    /// The actor system on the broker's thread.
    system: System,
    thread: Mutex<Option<JoinHandle<std::io::Result<()>>>>,
    /// The Kafka listener, stopped first on shutdown so no client request races the close.
    listener: Mutex<Option<ListenerHandle>>,
    /// The web console, stopped with the listener.
    console: Mutex<Option<console::Handle>>,
    /// The schema registry, stopped with the console.
    registry: Mutex<Option<schema_registry::Handle>>,
    /// The broker's schemas (with the `schema-registry` feature).
    #[cfg_attr(not(feature = "schema-registry"), allow(dead_code))]
    schemas: Option<schema_registry::Store>,
}

impl Running {
    /// The blocking handle of what was just started, whose calls `handle` serves.
    fn start(handle: AsyncNanoKafka, started: Started) -> NanoKafka {
        let (listener_addr, console_addr, registry_addr) = match &started {
            Started::Embedded(e) => (e.listener_addr(), e.console_addr(), e.registry_addr()),
            #[cfg(feature = "kafka")]
            Started::Kafka(_) => (None, None, None),
        };
        let running = Arc::new(Running {
            stopped: AtomicBool::new(false),
            started,
            listener_addr,
            console_addr,
            registry_addr,
        });
        let weak = Arc::downgrade(&running);
        let handle = handle
            .for_sequential_callers()
            .with_link(BrokerLink::borrowing(weak, listener_addr));
        NanoKafka::new(handle, running)
    }

    /// The blocking shutdown. Called once, on a thread that may block.
    fn close(&self) -> Result<()> {
        match &self.started {
            Started::Embedded(e) => e.close(),
            #[cfg(feature = "kafka")]
            Started::Kafka(backend) => backend.close(),
        }
    }

    /// Stops the actor system without closing the partitions (they reopen with a scan).
    fn stop_system(&self) {
        match &self.started {
            Started::Embedded(e) => e.system.stop(),
            #[cfg(feature = "kafka")]
            Started::Kafka(_) => {}
        }
    }
}

impl EmbeddedBroker {
    fn listener_addr(&self) -> Option<SocketAddr> {
        let listener = self.listener.lock().ok()?;
        listener.as_ref().map(ListenerHandle::addr)
    }

    fn console_addr(&self) -> Option<SocketAddr> {
        let console = self.console.lock().ok()?;
        console.as_ref().map(console::addr)
    }

    fn registry_addr(&self) -> Option<SocketAddr> {
        let registry = self.registry.lock().ok()?;
        registry.as_ref().map(schema_registry::addr)
    }

    /// Stops the console, the schema registry and the listener, asks the broker to close
    /// every partition, then stops the actor system and waits for its thread.
    fn close(&self) -> Result<()> {
        let registry = self.registry.lock().map(|mut r| r.take()).unwrap_or(None);
        if let Some(registry) = registry {
            schema_registry::stop(registry);
        }
        let console = self.console.lock().map(|mut c| c.take()).unwrap_or(None);
        if let Some(console) = console {
            console::stop(console);
        }
        let listener = self.listener.lock().map(|mut l| l.take()).unwrap_or(None);
        if let Some(listener) = listener {
            listener.stop();
        }
        let closed = futures::executor::block_on(self.addr.send(Shutdown))
            .unwrap_or(Err(Error::BrokerStopped));
        self.system.stop();
        let thread = self.thread.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        closed
    }
}

/// What the handles may ask of the running broker.
impl RunningBroker for Running {
    /// The close, once; `Ok` when already shut down.
    fn shutdown(&self) -> Result<()> {
        // Refused before anything changes: an error means nothing happened.
        crate::wait::refuse_actix_thread()?;
        if self.stopped.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.close()
    }

    fn listener_addr(&self) -> Option<SocketAddr> {
        self.listener_addr
    }

    #[cfg(feature = "console")]
    fn console_addr(&self) -> Option<SocketAddr> {
        self.console_addr
    }

    #[cfg(feature = "schema-registry")]
    fn schema_registry_addr(&self) -> Option<SocketAddr> {
        self.registry_addr
    }

    #[cfg(feature = "schema-registry")]
    fn schema_store(&self) -> Option<schema_registry::Store> {
        match &self.started {
            Started::Embedded(e) => e.schemas.clone(),
            #[cfg(feature = "kafka")]
            Started::Kafka(_) => None,
        }
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}

impl Drop for Running {
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
