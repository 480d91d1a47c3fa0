//! The schema registry's REST API (`schema-registry` feature): Confluent Schema Registry's
//! endpoints over the registry of [`crate::schemas`], served by actix-web on the broker's
//! actix-rt System (as the console is), started by the composition root when the builder has
//! [`crate::NanoKafkaBuilder::schema_registry`]. docs/schema-registry.md is the reference.
//!
//! The registry's state is the replay of the compacted topic `_schemas` (one partition),
//! read through an [`AsyncNanoKafka`]: every request first applies what the topic gained
//! since the last one (so records another writer appended, an `import` say, are seen), and a
//! change appends its records, then applies them the same way. One request at a time holds
//! the state, so ids and versions are taken in order.
//!
//! The parts: `routes` (the server, its routes and Confluent's JSON shapes), and here the
//! binding, the state and its topic.

mod routes;

use std::net::SocketAddr;
use std::sync::Arc;

use futures::lock::{Mutex, MutexGuard};

use crate::async_handle::AsyncNanoKafka;
use crate::config::{CleanupPolicy, TopicConfig};
use crate::error::{Error, Result};
use crate::messages::OffsetSpec;
use crate::schemas::{Registry, RegistryError, SCHEMAS_TOPIC};
use crate::storage::format::{self, Decoded, MAX_DECOMPRESSED_BYTES};

/// The registry's settings, from the builder.
#[derive(Debug, Clone)]
pub(crate) struct SchemaRegistryConfig {
    /// `host:port`, or a bare port (on loopback).
    pub addr: String,
}

/// A registry bound to its address, not serving yet.
#[derive(Debug)]
pub(crate) struct BoundRegistry {
    socket: std::net::TcpListener,
    addr: SocketAddr,
}

/// Binds the registry's address: `host:port`, or a bare port on loopback. `InvalidArgument`
/// for anything else, `Io` when the bind fails; anything but loopback is logged as a warning.
pub(crate) fn bind(config: &SchemaRegistryConfig) -> Result<BoundRegistry> {
    let Some(to_bind) = crate::listener::http_bind_addr(&config.addr) else {
        return Err(Error::InvalidArgument {
            name: "schema_registry",
            reason: format!(
                "{:?} is neither host:port nor a port (e.g. 127.0.0.1:8081, or 8081 for loopback)",
                config.addr
            ),
        });
    };
    let path = std::path::Path::new(&config.addr);
    let socket = std::net::TcpListener::bind(&to_bind)
        .map_err(|e| Error::io("bind the schema registry", path, e))?;
    let addr = socket
        .local_addr()
        .and_then(|addr| socket.set_nonblocking(true).map(|()| addr))
        .map_err(|e| Error::io("set up the schema registry", path, e))?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "the schema registry is bound to a non-loopback address: \
            any host that can reach it can register and delete schemas");
    }
    Ok(BoundRegistry { socket, addr })
}

impl BoundRegistry {
    /// Starts serving. Call on a thread with a running actix System (the broker's).
    ///
    /// # Errors
    /// `Io` when the server cannot take the socket.
    pub fn start(self, broker: AsyncNanoKafka) -> Result<RegistryHandle> {
        let service = Arc::new(Service {
            broker,
            state: Mutex::new(State::default()),
        });
        let server = routes::server(service, self.socket)
            .map_err(|e| Error::io("start the schema registry", std::path::Path::new(""), e))?;
        let handle = server.handle();
        actix_rt::spawn(server);
        tracing::info!(addr = %self.addr, "schema registry serving");
        Ok(RegistryHandle {
            addr: self.addr,
            handle,
        })
    }
}

/// A running registry.
pub(crate) struct RegistryHandle {
    addr: SocketAddr,
    handle: actix_web::dev::ServerHandle,
}

impl std::fmt::Debug for RegistryHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RegistryHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server and waits for it. Call off the broker's threads, while its System
    /// still runs.
    pub fn stop(self) {
        futures::executor::block_on(self.handle.stop(false));
        tracing::info!(addr = %self.addr, "schema registry stopped");
    }
}

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct Service {
    broker: AsyncNanoKafka,
    state: Mutex<State>,
}

/// The registry, and how far into `_schemas` it has read.
#[derive(Debug, Default)]
struct State {
    registry: Registry,
    /// The next offset of `_schemas` to apply; `None` before the first read (the topic may
    /// not exist yet).
    next: Option<u64>,
}

/// The largest fetch of `_schemas` batches at a time.
const FETCH_BYTES: usize = 4 << 20;

impl Service {
    /// The state, caught up with `_schemas`; held until the guard drops.
    async fn current(&self) -> std::result::Result<MutexGuard<'_, State>, RegistryError> {
        let mut state = self.state.lock().await;
        self.catch_up(&mut state).await?;
        Ok(state)
    }

    /// Appends `records` to `_schemas`, in order, then applies them (and anything before
    /// them) as a replay would. A failed append leaves the state as the topic says.
    async fn write(
        &self,
        state: &mut State,
        records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> std::result::Result<(), RegistryError> {
        for (key, value) in records {
            let written = match value {
                Some(value) => {
                    self.broker
                        .produce_raw(SCHEMAS_TOPIC, Some(&key), value)
                        .await
                }
                None => self.broker.produce_tombstone(SCHEMAS_TOPIC, &key).await,
            };
            written.map_err(|e| store_error("append to _schemas", &e))?;
        }
        self.catch_up(state).await
    }

    /// Creates `_schemas` when missing (compacted, one partition), then applies its records
    /// from where the state stopped to the log end.
    async fn catch_up(&self, state: &mut State) -> std::result::Result<(), RegistryError> {
        let mut next = match state.next {
            Some(next) => next,
            None => {
                self.ensure_topic().await?;
                let start = (self.broker)
                    .list_kafka_offset(SCHEMAS_TOPIC, 0, OffsetSpec::Earliest)
                    .await
                    .map_err(|e| store_error("read _schemas' log start", &e))?;
                start.map_or(0, |s| s.offset)
            }
        };
        let mut scratch = Vec::new();
        loop {
            let read = (self.broker)
                .fetch_kafka_batches(SCHEMAS_TOPIC, 0, next, FETCH_BYTES, true)
                .await
                .map_err(|e| store_error("read _schemas", &e))?;
            next = next.max(read.log_start_offset);
            if read.bytes.is_empty() {
                break;
            }
            let before = next;
            let mut bytes = read.bytes.as_slice();
            while !bytes.is_empty() {
                let header = match format::decode(bytes) {
                    Decoded::Batch(header) => header,
                    Decoded::Incomplete { .. } => break,
                    Decoded::Invalid { reason } => return Err(damaged(next, &reason)),
                };
                let batch = &bytes[..header.batch_len];
                bytes = &bytes[header.batch_len..];
                if !header.is_control() {
                    let section = format::records_section(
                        batch,
                        &header,
                        MAX_DECOMPRESSED_BYTES,
                        &mut scratch,
                    )
                    .map_err(|e| damaged(header.base_offset, &e))?;
                    let walked =
                        format::walk_records(section, &header, 0..header.records_count, |r, _| {
                            let offset = header.base_offset + u64::from(r.offset_delta);
                            if offset >= next {
                                if let Some(key) = r.key {
                                    if let Err(why) = state.registry.apply(key, r.value) {
                                        tracing::warn!(offset, %why, "a _schemas record skipped");
                                    }
                                }
                                next = offset + 1;
                            }
                            true
                        });
                    walked.map_err(|e| damaged(header.base_offset, &e))?;
                }
                next = next.max(header.next_offset());
            }
            if next == before {
                return Err(damaged(next, "a read that does not advance"));
            }
            if next >= read.log_end_offset {
                break;
            }
        }
        state.next = Some(next);
        Ok(())
    }

    async fn ensure_topic(&self) -> std::result::Result<(), RegistryError> {
        let config = TopicConfig::default()
            .partitions(1)
            .cleanup_policy(CleanupPolicy::Compact);
        match self.broker.create_topic(SCHEMAS_TOPIC, config).await {
            Ok(()) | Err(Error::TopicExists { .. }) => Ok(()),
            Err(e) => Err(store_error("create _schemas", &e)),
        }
    }
}

/// Confluent's 50001: the store failed.
fn store_error(what: &str, e: &Error) -> RegistryError {
    RegistryError {
        code: 50001,
        message: format!("Error in the backend data store: {what}: {e}"),
    }
}

fn damaged(offset: u64, why: &str) -> RegistryError {
    RegistryError {
        code: 50001,
        message: format!("Error in the backend data store: the _schemas batch at offset {offset} cannot be read: {why}"),
    }
}
