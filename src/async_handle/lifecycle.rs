//! The async handle's lifecycle: opening a broker from async code, keeping it running, and
//! shutting it down, for services that live inside `#[actix::main]` or tokio.
//!
//! Starting and closing a broker block: they open files and take the data-directory lock,
//! and the close waits for the broker's threads to finish. Blocking a runtime thread stalls
//! every task on it (and is refused by `NanoKafka`), so both run the blocking code of
//! `handle.rs` on a short-lived helper thread while the caller awaits its answer over a
//! oneshot channel: the caller's runtime keeps running meanwhile.
//!
//! Ownership: an `AsyncNanoKafka` from [`AsyncNanoKafka::open`] or
//! [`NanoKafkaBuilder::build_async`] holds the broker (the same `Inner` a `NanoKafka` holds);
//! dropping its last clone (and every `NanoKafka` of it) shuts the broker down. Handles from
//! [`crate::NanoKafka::async_handle`] only reach it weakly, so the blocking handle still
//! decides when it stops, and the blocking handle's own async handle does not keep itself
//! alive (no reference cycle).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Weak};

use super::AsyncNanoKafka;
use crate::error::{Error, Result};
use crate::handle::{Inner, NanoKafkaBuilder};
use crate::messages::Shutdown;

/// How an [`AsyncNanoKafka`] is tied to the broker it talks to; shared by its clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct BrokerLink {
    owner: Owner,
    /// The Kafka listener's address, when the broker was built with one.
    listener_addr: Option<SocketAddr>,
}

#[derive(Debug, Clone, Default)]
enum Owner {
    /// Wrapped from a bare `Addr<BrokerActor>`: whoever started the actor runs it.
    #[default]
    Detached,
    /// Keeps the broker running; the last owner dropped shuts it down.
    Owning(Arc<Inner>),
    /// Reaches a broker that others keep running; dead once it is dropped.
    Borrowing(Weak<Inner>),
}

impl BrokerLink {
    /// A link that keeps `inner` running.
    pub(crate) fn owning(inner: Arc<Inner>) -> Self {
        BrokerLink {
            listener_addr: inner.listener_addr(),
            owner: Owner::Owning(inner),
        }
    }

    /// A link to a broker kept running by others (the blocking handles).
    pub(crate) fn borrowing(inner: Weak<Inner>, listener_addr: Option<SocketAddr>) -> Self {
        BrokerLink {
            owner: Owner::Borrowing(inner),
            listener_addr,
        }
    }

    /// The broker, while it is there; `None` when detached or already dropped.
    fn broker(&self) -> Option<Arc<Inner>> {
        match &self.owner {
            Owner::Detached => None,
            Owner::Owning(inner) => Some(inner.clone()),
            Owner::Borrowing(inner) => inner.upgrade(),
        }
    }
}

impl NanoKafkaBuilder {
    /// As [`NanoKafkaBuilder::build`], for async code (`#[actix::main]`, actors, tokio): the
    /// broker is started on a helper thread while this awaits it, so the caller's runtime is
    /// never blocked. Every setting applies, the Kafka backend
    /// ([`NanoKafkaBuilder::kafka_bootstrap`]) too.
    ///
    /// The handle returned owns the broker: it runs until [`AsyncNanoKafka::shutdown`], or
    /// until the last clone of the handle is dropped (that drop then closes the broker before
    /// it returns, blocking its thread for the close; `shutdown().await` does not block).
    ///
    /// # Errors
    /// As [`NanoKafkaBuilder::build`] (`InvalidArgument`, `DataDirLocked`, `Io`, `Corrupt`...),
    /// but never `BlockingInActorContext`; `Io` when the helper thread cannot be started.
    ///
    /// # Example
    /// ```no_run
    /// # async fn run() -> nanokafka::Result<()> {
    /// use nanokafka::{NanoKafka, TopicConfig};
    /// let bus = NanoKafka::builder()
    ///     .data_dir("data")
    ///     .max_record_bytes(64 << 10)
    ///     .build_async()
    ///     .await?;
    /// bus.create_topic("orders", TopicConfig::default()).await?;
    /// bus.shutdown().await
    /// # }
    /// ```
    pub async fn build_async(self) -> Result<AsyncNanoKafka> {
        let broker = off_runtime("nanokafka-open", move || self.build()).await?;
        Ok(broker.owning_async_handle())
    }
}

impl AsyncNanoKafka {
    /// Opens (creating) the broker in `data_dir` with the default settings, from async code;
    /// the handle owns it. See [`NanoKafkaBuilder::build_async`], which this calls.
    ///
    /// # Errors
    /// As [`NanoKafkaBuilder::build_async`]: `DataDirLocked` when another broker holds the
    /// directory, `Io`/`Corrupt` when it cannot be read.
    ///
    /// # Example
    /// ```no_run
    /// #[actix::main]
    /// async fn main() -> nanokafka::Result<()> {
    ///     let bus = nanokafka::AsyncNanoKafka::open("data").await?;
    ///     bus.produce("events", &"hello").await?;
    ///     bus.shutdown().await
    /// }
    /// ```
    pub async fn open(data_dir: impl AsRef<Path>) -> Result<AsyncNanoKafka> {
        crate::NanoKafka::builder()
            .data_dir(data_dir)
            .build_async()
            .await
    }

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
        #[cfg(feature = "kafka")]
        if let Some(backend) = self.kafka.clone() {
            return off_runtime("nanokafka-close", move || backend.close()).await;
        }
        match self.addr.send(Shutdown).await {
            Ok(closed) => closed,
            // The actor is gone: nothing is left to close.
            Err(_) => Ok(()),
        }
    }

    /// The address the Kafka listener is bound to (with the port it picked, when asked for
    /// port 0), or `None` without a listener (and for a handle wrapped from a bare
    /// `Addr<BrokerActor>`, which does not know).
    pub fn listener_addr(&self) -> Option<SocketAddr> {
        self.link.listener_addr
    }

    /// The same handle with `link`.
    pub(crate) fn with_link(self, link: BrokerLink) -> Self {
        AsyncNanoKafka { link, ..self }
    }
}

/// Runs `work` (blocking) on a new thread named `name` and awaits its answer, so the
/// awaiting runtime keeps running. A helper that panics answers `BrokerStopped`.
async fn off_runtime<T: Send + 'static>(
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
