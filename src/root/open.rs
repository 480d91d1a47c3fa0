//! The handles' constructors that start a broker: [`NanoKafka::open`] and
//! [`NanoKafka::builder`]; from async code, the builder's `build_async` and
//! [`AsyncNanoKafka::open`], which start the broker as `build` does, on a helper thread
//! (`off_runtime`), and hand back an async handle that owns it.

use std::path::Path;

use super::NanoKafkaBuilder;
use crate::async_handle::{off_runtime, AsyncNanoKafka};
use crate::error::Result;
use crate::handle::NanoKafka;

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
        NanoKafka::builder().data_dir(data_dir).build_async().await
    }
}
