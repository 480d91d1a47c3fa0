//! The async handle's lifecycle: opening a broker from async code, keeping it running, and
//! shutting it down, for services that live inside `#[actix::main]` or tokio.
//!
//! Starting and closing a broker block: they open files and take the data-directory lock,
//! and the close waits for the broker's threads to finish. Blocking a runtime thread stalls
//! every task on it (and is refused by `NanoKafka`), so both run the blocking code of the
//! composition root (`root`) on a short-lived helper thread while the caller awaits its answer over a
//! oneshot channel: the caller's runtime keeps running meanwhile.
//!
//! Ownership: an `AsyncNanoKafka` from [`AsyncNanoKafka::open`] or
//! [`crate::NanoKafkaBuilder::build_async`] holds the broker (the same running broker a
//! `NanoKafka` holds, through the [`RunningBroker`] trait, which `root::Running` implements);
//! dropping its last clone (and every `NanoKafka` of it) shuts the broker down. Handles from
//! [`crate::NanoKafka::async_handle`] only reach it weakly, so the blocking handle still
//! decides when it stops, and the blocking handle's own async handle does not keep itself
//! alive (no reference cycle).

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use super::{AsyncNanoKafka, Engine};
use crate::error::{Error, Result};
use crate::messages::Shutdown;

/// The running broker a handle may own or reach: what `NanoKafkaBuilder::build` started
/// (the composition root, `root`), seen from below it.
pub(crate) trait RunningBroker: Send + Sync + std::fmt::Debug {
    /// Closes the broker, once (`Ok` when already closed). Blocks: run it off the runtime.
    fn shutdown(&self) -> Result<()>;
    /// Where its Kafka listener is bound, if it has one.
    fn listener_addr(&self) -> Option<SocketAddr>;
    /// Where its web console is bound, if it has one.
    #[cfg(feature = "console")]
    fn console_addr(&self) -> Option<SocketAddr>;
    /// Where its schema registry is bound, if it has one.
    #[cfg(feature = "schema-registry")]
    fn schema_registry_addr(&self) -> Option<SocketAddr>;
    /// Its schemas (the embedded broker's `_schemas`), `None` on the Kafka backend.
    #[cfg(feature = "schema-registry")]
    fn schema_store(&self) -> Option<Arc<super::SchemaStore>>;
    /// Whether it was shut down (or is being shut down).
    fn is_stopped(&self) -> bool;
}

/// How an [`AsyncNanoKafka`] is tied to the broker it talks to; shared by its clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct BrokerLink {
    owner: Owner,
    /// The Kafka listener's address, when the broker was built with one.
    listener_addr: Option<SocketAddr>,
    /// The web console's address, when the broker was built with one.
    #[cfg(feature = "console")]
    console_addr: Option<SocketAddr>,
    /// The schema registry's address, when the broker was built with one.
    #[cfg(feature = "schema-registry")]
    schema_registry_addr: Option<SocketAddr>,
    /// The broker's schemas, when it keeps them.
    #[cfg(feature = "schema-registry")]
    schema_store: Option<Arc<super::SchemaStore>>,
}

#[derive(Debug, Clone, Default)]
enum Owner {
    /// Wrapped from a bare `Addr<BrokerActor>`: whoever started the actor runs it.
    #[default]
    Detached,
    /// Keeps the broker running; the last owner dropped shuts it down.
    Owning(Arc<dyn RunningBroker>),
    /// Reaches a broker that others keep running; dead once it is dropped.
    Borrowing(Weak<dyn RunningBroker>),
}

impl BrokerLink {
    /// A link that keeps `inner` running.
    pub(crate) fn owning(inner: Arc<dyn RunningBroker>) -> Self {
        BrokerLink {
            listener_addr: inner.listener_addr(),
            #[cfg(feature = "console")]
            console_addr: inner.console_addr(),
            #[cfg(feature = "schema-registry")]
            schema_registry_addr: inner.schema_registry_addr(),
            #[cfg(feature = "schema-registry")]
            schema_store: inner.schema_store(),
            owner: Owner::Owning(inner),
        }
    }

    /// A link to a broker kept running by others (the blocking handles).
    pub(crate) fn borrowing(
        inner: Weak<dyn RunningBroker>,
        listener_addr: Option<SocketAddr>,
    ) -> Self {
        BrokerLink {
            #[cfg(feature = "console")]
            console_addr: inner.upgrade().and_then(|running| running.console_addr()),
            #[cfg(feature = "schema-registry")]
            schema_registry_addr: inner
                .upgrade()
                .and_then(|running| running.schema_registry_addr()),
            #[cfg(feature = "schema-registry")]
            schema_store: inner.upgrade().and_then(|running| running.schema_store()),
            owner: Owner::Borrowing(inner),
            listener_addr,
        }
    }

    /// The broker, while it is there; `None` when detached or already dropped.
    fn broker(&self) -> Option<Arc<dyn RunningBroker>> {
        match &self.owner {
            Owner::Detached => None,
            Owner::Owning(inner) => Some(inner.clone()),
            Owner::Borrowing(inner) => inner.upgrade(),
        }
    }
}

impl AsyncNanoKafka {
    /// Shuts the broker down without blocking the caller's runtime: syncs and closes every
    /// partition (clean-shutdown checkpoints), stops the actors and releases the
    /// data-directory lock before it returns, so the directory can be opened again at once.
    /// On the Kafka backend: delivers what is queued, closes the members (they leave their
    /// groups) and stops the backend's runtime. The blocking close runs on a helper thread.
    ///
    /// Every handle of the broker is affected, whichever one is shut down: later calls on
    /// any clone, on the other async handles and on the [`crate::NanoKafka`] it came from
    /// answer `BrokerStopped`. A second shutdown is `Ok(())`, as is a shutdown after the
    /// broker was dropped. A handle wrapped from a bare `Addr<BrokerActor>` sends the actor
    /// face's [`Shutdown`]: the partitions close and the lock is released, while the actor
    /// system keeps running under whoever started it.
    ///
    /// # Errors
    /// `Io` when a partition could not be closed cleanly (it is scanned on the next open);
    /// `Kafka` when queued records could not be delivered. The broker is stopped either way.
    pub async fn shutdown(&self) -> Result<()> {
        if let Some(inner) = self.link.broker() {
            return off_runtime("nanokafka-close", move || inner.shutdown()).await;
        }
        if let Owner::Borrowing(_) = self.link.owner {
            // The broker was dropped, which shut it down.
            return Ok(());
        }
        match &self.engine {
            // The actor face's shutdown: the actor system keeps running under its owner.
            Engine::Embedded(e) => match e.addr.send(Shutdown).await {
                Ok(closed) => closed,
                // The actor is gone: nothing is left to close.
                Err(_) => Ok(()),
            },
            #[cfg(feature = "kafka")]
            Engine::Kafka(backend) => {
                let backend = backend.clone();
                off_runtime("nanokafka-close", move || backend.close()).await
            }
        }
    }

    /// The address the Kafka listener is bound to (with the port it picked, when asked for
    /// port 0), or `None` without a listener (and for a handle wrapped from a bare
    /// `Addr<BrokerActor>`, which does not know).
    pub fn listener_addr(&self) -> Option<SocketAddr> {
        self.link.listener_addr
    }

    /// The address the web console is bound to (with the port it picked, when asked for
    /// port 0), or `None` without one (and for a handle wrapped from a bare
    /// `Addr<BrokerActor>`). See [`crate::NanoKafkaBuilder::console`].
    #[cfg(feature = "console")]
    pub fn console_addr(&self) -> Option<SocketAddr> {
        self.link.console_addr
    }

    /// The address the schema registry is bound to (with the port it picked, when asked for
    /// port 0), or `None` without one. See [`crate::NanoKafkaBuilder::schema_registry`].
    #[cfg(feature = "schema-registry")]
    pub fn schema_registry_addr(&self) -> Option<SocketAddr> {
        self.link.schema_registry_addr
    }

    /// The broker's schemas (`_schemas`), `None` on the Kafka backend or a handle detached
    /// from the broker that started it.
    #[cfg(feature = "schema-registry")]
    pub(crate) fn schema_store(&self) -> Option<&Arc<super::SchemaStore>> {
        self.link.schema_store.as_ref()
    }

    /// The same handle reaching `store` as the broker's schemas: for the parts the
    /// composition root starts before the broker's own handles exist (the Kafka listener).
    #[cfg(feature = "schema-registry")]
    pub(crate) fn with_schema_store(mut self, store: Option<Arc<super::SchemaStore>>) -> Self {
        self.link.schema_store = store;
        self
    }

    /// The same handle with `link`.
    pub(crate) fn with_link(self, link: BrokerLink) -> Self {
        AsyncNanoKafka { link, ..self }
    }
}

/// Runs `work` (blocking) on a new thread named `name` and awaits its answer, so the
/// awaiting runtime keeps running. A helper that panics answers `BrokerStopped`.
pub(crate) async fn off_runtime<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let (answer, answered) = futures::channel::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            // A caller that stopped waiting drops the answer here, on this plain thread
            // (dropping an opened broker closes it, which must not happen on a runtime).
            let _ = answer.send(work());
        })
        .map_err(|e| Error::io("spawn a helper thread", "", e))?;
    answered.await.map_err(|_| Error::BrokerStopped)?
}
