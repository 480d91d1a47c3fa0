//! The schema registry's state over its topic (`schema-registry` feature): one
//! [`SchemaStore`] per embedded broker, shared by everything that reads or changes schemas
//! (the REST API, typed topics bound to a subject, the listener's record validation, the
//! console), so ids and versions are taken in one order.
//!
//! The state is the replay of the compacted topic `_schemas` (one partition), read through a
//! detached [`AsyncNanoKafka`]: every use first applies what the topic gained since the last
//! one (so records another writer appended, an `import` say, are seen), and a change appends
//! its records, then applies them the same way. One caller at a time holds the state.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::lock::{Mutex, MutexGuard};

use crate::async_handle::AsyncNanoKafka;
use crate::config::{CleanupPolicy, TopicConfig};
use crate::error::Error;
use crate::messages::OffsetSpec;
use crate::schemas::{ParsedSchema, Registry, RegistryError, SCHEMAS_TOPIC};
use crate::storage::format::{self, BatchStep};

/// The registry of one broker, kept in its `_schemas` topic; see the module documentation.
#[derive(Debug)]
pub(crate) struct SchemaStore {
    broker: AsyncNanoKafka,
    state: Mutex<SchemaState>,
    /// The schemas records were checked or decoded with, parsed once per id. An id always
    /// names the same schema (the registry never reuses one), so an entry never goes stale;
    /// a hard-deleted schema stays usable here until the broker restarts, as it does in the
    /// caches of Confluent's serializers.
    parsed: std::sync::Mutex<HashMap<u32, Arc<ParsedSchema>>>,
    /// `(id, subject)` pairs found registered (see [`SchemaStore::registered_under`]): a
    /// version once registered stays under its subject until a permanent delete, and is
    /// kept here, as `parsed` keeps its schema, until the broker restarts.
    registered: std::sync::Mutex<HashSet<(u32, String)>>,
}

/// The registry, and how far into `_schemas` it has read.
#[derive(Debug, Default)]
pub(crate) struct SchemaState {
    pub registry: Registry,
    /// The next offset of `_schemas` to apply; `None` before the first read (the topic may
    /// not exist yet).
    next: Option<u64>,
}

/// Confluent's "schema not found" (an id no version has).
const NOT_FOUND: u32 = 40403;

/// The largest fetch of `_schemas` batches at a time.
const FETCH_BYTES: usize = 4 << 20;

impl SchemaStore {
    /// The store of the broker `broker` reaches (a handle that does not keep it running).
    pub fn new(broker: AsyncNanoKafka) -> Self {
        SchemaStore {
            broker,
            state: Mutex::new(SchemaState::default()),
            parsed: std::sync::Mutex::default(),
            registered: std::sync::Mutex::default(),
        }
    }

    /// The schema id `id` names, parsed (once per id: see `parsed`); `None` when the
    /// registry does not know the id (after catching up with `_schemas`).
    ///
    /// # Errors
    /// Confluent's 50001 when `_schemas` cannot be read; 42201 when the id's schema does not
    /// parse.
    pub async fn schema_by_id(
        &self,
        id: u32,
    ) -> std::result::Result<Option<Arc<ParsedSchema>>, RegistryError> {
        if let Some(parsed) = self.cached(id) {
            return Ok(Some(parsed));
        }
        let state = self.current().await?;
        let parsed = match state.registry.parse_id(id) {
            Ok(parsed) => Arc::new(parsed),
            Err(e) if e.code == NOT_FOUND => return Ok(None),
            Err(e) => return Err(e),
        };
        drop(state);
        let mut cache = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Some(cache.entry(id).or_insert(parsed).clone()))
    }

    /// Whether schema `id` is a version of `subject` (soft-deleted versions included), after
    /// catching up with `_schemas` unless already seen (see `registered`).
    ///
    /// # Errors
    /// Confluent's 50001 when `_schemas` cannot be read.
    pub async fn registered_under(
        &self,
        id: u32,
        subject: &str,
    ) -> std::result::Result<bool, RegistryError> {
        let key = (id, subject.to_owned());
        let lock = || self.registered.lock().unwrap_or_else(|p| p.into_inner());
        if lock().contains(&key) {
            return Ok(true);
        }
        let state = self.current().await?;
        let found = (state.registry.id_versions(id).iter()).any(|(s, _)| s == subject);
        drop(state);
        if found {
            lock().insert(key);
        }
        Ok(found)
    }

    fn cached(&self, id: u32) -> Option<Arc<ParsedSchema>> {
        let cache = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(&id).cloned()
    }

    /// The state, caught up with `_schemas`; held until the guard drops.
    ///
    /// # Errors
    /// Confluent's 50001 when `_schemas` cannot be created or read.
    pub async fn current(&self) -> std::result::Result<MutexGuard<'_, SchemaState>, RegistryError> {
        let mut state = self.state.lock().await;
        self.catch_up(&mut state).await?;
        Ok(state)
    }

    /// Appends `records` to `_schemas`, in order, then applies them (and anything before
    /// them) as a replay would. A failed append leaves the state as the topic says.
    ///
    /// # Errors
    /// Confluent's 50001 when an append or the read back fails.
    pub async fn write(
        &self,
        state: &mut SchemaState,
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
    async fn catch_up(&self, state: &mut SchemaState) -> std::result::Result<(), RegistryError> {
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
            let walked = format::walk_batches(&read.bytes, &mut scratch, |step| {
                match step {
                    BatchStep::Record(header, r) => {
                        let offset = header.base_offset + u64::from(r.offset_delta);
                        if offset >= next {
                            if let Some(key) = r.key {
                                if let Err(why) = state.registry.apply(key, r.value) {
                                    tracing::warn!(offset, %why, "a _schemas record skipped");
                                }
                            }
                            next = offset + 1;
                        }
                    }
                    BatchStep::End(header) => next = next.max(header.next_offset()),
                }
                true
            });
            walked.map_err(|e| damaged(e.base_offset.unwrap_or(next), &e.reason))?;
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
