//! Keyed tables: [`Table<K, V>`], the latest value of every key of a topic kept in memory
//! and current, and [`LogTable<K, V>`], the same keys with their values left in the log.
//! The user-facing docs are on [`Table`], where rustdoc shows them.

mod core;
mod key;
mod source;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use actix::{Message, Recipient};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;

use self::core::{Kept, Located, Location, Slot, State};
pub use self::key::TableKey;
use self::source::Source;
use crate::async_handle::AsyncNanoKafka;
use crate::error::{Error, Result};
use crate::topic::Topic;
use crate::types::Delivery;

/// How long the follower waits for an append before it reads again (it also notices a
/// dropped table then).
const FOLLOW_WAIT: Duration = Duration::from_millis(250);
/// How long the follower waits after an error it retries (a partition restarting), doubled
/// after each failure in a row...
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// ...until this many failures in a row (about 50 s): then it stops, and the table's waits
/// (`open`, `put`, `catch_up`) answer that error.
const MAX_FAILURES: u32 = 10;

/// The latest value of every key of a topic, in memory, kept current: Kafka's global table
/// (Kafka Streams' `GlobalKTable`) for an actix service. Open one with [`Topic::table`].
///
/// * **Restored at open.** [`Topic::table`] reads every partition of the topic from its
///   start up to where it ended when the call was made, and returns once the table holds
///   all of it. Nothing is kept on disk beside the topic: a restart restores the table from
///   the topic again, which a compacted topic ([`crate::CleanupPolicy::Compact`]) keeps
///   short: the latest record of each key, and tombstones for a while.
/// * **Kept current.** A task of the broker's (the Kafka backend's runtime on that backend)
///   follows the topic's appends and applies each record: a value replaces its key's, a
///   tombstone (a null value: [`Table::delete`], or a Kafka client's) removes its key.
///   Records whose key is missing or not a `K`, or whose value is not a `V` (MessagePack,
///   as the typed produces write), are skipped and counted in [`Table::skipped`].
/// * **Writes go through the topic.** [`Table::put`] and [`Table::delete`] produce to the
///   topic, so every table of it (in this process, or in another one after graduation to
///   Kafka) sees them, and return once this table has applied them: a `get` after a `put`
///   reads what was put.
/// * **Changes for actors.** [`Table::subscribe`] sends an actor a [`TableChange`] for
///   every change applied after it subscribed.
/// * **Memory.** The table holds every key and value: about `size_of::<K>() +
///   size_of::<V>() + 16` bytes a key in the map, plus what the key and value hold on the
///   heap. [`LogTable`] holds only the keys and where their values lie (`size_of::<K>() +
///   16` bytes, plus the key's heap) and reads a value from the log on `get`.
///
/// ```no_run
/// use nanokafka::{AsyncNanoKafka, CleanupPolicy, Table, TopicConfig};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// struct Price {
///     cents: u64,
/// }
///
/// # async fn run(bus: AsyncNanoKafka) -> nanokafka::Result<()> {
/// let prices = bus.topic::<Price>("prices");
/// prices
///     .create(TopicConfig::default().cleanup_policy(CleanupPolicy::Compact))
///     .await?;
/// let table: Table<String, Price> = prices.table().await?;
/// table.put("AAPL".to_owned(), &Price { cents: 19_012 }).await?;
/// assert_eq!(table.get(&"AAPL".to_owned()), Some(Price { cents: 19_012 }));
/// table.delete(&"AAPL".to_owned()).await?;
/// assert!(table.is_empty());
/// # Ok(())
/// # }
/// ```
pub struct Table<K: TableKey, V: Send + Sync + 'static> {
    shared: Arc<Shared<K, Kept<V>, V>>,
    handle: AsyncNanoKafka,
}

/// A table that keeps only the keys, and where each key's latest value lies in the log: the
/// values are read from the topic on [`LogTable::get`] (one read of the batch holding it).
/// For key sets whose values would not fit in memory. Everything else is as [`Table`]'s,
/// but a change a subscriber receives carries no old value. Open one with
/// [`Topic::log_table`]. On the Kafka backend `get` is [`Error::Unsupported`].
pub struct LogTable<K: TableKey, V: Send + Sync + 'static> {
    shared: Arc<Shared<K, Located, V>>,
    handle: AsyncNanoKafka,
}

/// A change a table applied, as its subscribers receive it ([`Table::subscribe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableChange<K, V> {
    /// `key` took the value `new`; `old` is the value it replaced (`None` for a new key, and
    /// always on a [`LogTable`], which keeps no values).
    Updated { key: K, old: Option<V>, new: V },
    /// A tombstone removed `key`; `old` is the value it had (`None` on a [`LogTable`]).
    Deleted { key: K, old: Option<V> },
}

impl<K: 'static, V: 'static> Message for TableChange<K, V> {
    type Result = ();
}

/// What a table and its follower share.
struct Shared<K: TableKey, S, V: Send + Sync + 'static> {
    topic: String,
    state: RwLock<State<K, S>>,
    /// The positions applied (per partition, the offset the follower reads next), or why
    /// the follower stopped: what `put` and the restore wait on.
    progress: watch::Sender<Progress>,
    subscribers: Mutex<Vec<Recipient<TableChange<K, V>>>>,
}

#[derive(Debug, Clone, Default)]
struct Progress {
    positions: Vec<u64>,
    stopped: Option<Error>,
}

impl<V> Topic<V> {
    /// This topic as a [`Table`] keyed by `K`: restored from the topic before it returns,
    /// then kept current. The payload type is checked first, as for a subscriber.
    ///
    /// # Errors
    /// `PayloadTypeMismatch`, `UnknownTopic`, `BrokerStopped`; `Kafka` on the Kafka backend.
    pub async fn table<K>(&self) -> Result<Table<K, V>>
    where
        K: TableKey,
        V: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
    {
        self.check_payload_type().await?;
        let shared = open(self.handle(), self.name()).await?;
        Ok(Table {
            shared,
            handle: self.handle().clone(),
        })
    }

    /// This topic as a [`LogTable`] keyed by `K` (values read from the log on `get`).
    ///
    /// # Errors
    /// As [`Topic::table`].
    pub async fn log_table<K>(&self) -> Result<LogTable<K, V>>
    where
        K: TableKey,
        V: Serialize + DeserializeOwned + Clone + Send + Sync + 'static,
    {
        self.check_payload_type().await?;
        let shared = open(self.handle(), self.name()).await?;
        Ok(LogTable {
            shared,
            handle: self.handle().clone(),
        })
    }
}

/// Opens the shared state of a table of `topic`, starts its follower and waits until it has
/// applied everything the topic held at the call.
async fn open<K, S, V>(handle: &AsyncNanoKafka, topic: &str) -> Result<Arc<Shared<K, S, V>>>
where
    K: TableKey,
    S: Slot<V>,
    V: DeserializeOwned + Clone + Send + Sync + 'static,
{
    let (source, ends) = Source::open(handle.detached(), topic).await?;
    let shared = Arc::new(Shared {
        topic: topic.to_owned(),
        state: RwLock::new(State::new(vec![0; ends.len()])),
        progress: watch::Sender::new(Progress::default()),
        subscribers: Mutex::new(Vec::new()),
    });
    handle
        .spawn_task(follow(Arc::downgrade(&shared), source))
        .await?;
    shared.wait_until(&ends).await?;
    Ok(shared)
}

/// Reads the topic and applies its records until the table is dropped or the broker stops.
async fn follow<K, S, V>(table: Weak<Shared<K, S, V>>, mut source: Source)
where
    K: TableKey,
    S: Slot<V>,
    V: DeserializeOwned + Clone + Send + Sync + 'static,
{
    let mut failures = 0;
    loop {
        if table.strong_count() == 0 {
            return;
        }
        let read = source.read(FOLLOW_WAIT).await;
        let Some(table) = table.upgrade() else {
            return;
        };
        match read {
            Ok((records, positions)) => {
                failures = 0;
                table.apply(records, positions);
            }
            Err(
                e @ (Error::BrokerStopped | Error::UnknownTopic { .. } | Error::Unsupported { .. }),
            ) => {
                tracing::debug!(topic = %table.topic, "table follower stops: {e}");
                table.progress.send_modify(|p| p.stopped = Some(e));
                return;
            }
            Err(e) if failures + 1 >= MAX_FAILURES => {
                tracing::error!(topic = %table.topic, "table follower gives up: {e}");
                table.progress.send_modify(|p| p.stopped = Some(e));
                return;
            }
            Err(e) => {
                tracing::warn!(topic = %table.topic, "table follower retries: {e}");
                drop(table);
                tokio::time::sleep(RETRY_AFTER * 2u32.pow(failures)).await;
                failures += 1;
            }
        }
    }
}

impl<K, S, V> Shared<K, S, V>
where
    K: TableKey,
    S: Slot<V>,
    V: DeserializeOwned + Clone + Send + Sync + 'static,
{
    /// Applies `records` in order, then tells the subscribers what changed and the waiters
    /// how far the table has read.
    fn apply(&self, records: Vec<crate::types::TableRecord>, positions: Vec<u64>) {
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subscribers.retain(Recipient::connected);
        let want_change = !subscribers.is_empty();
        let mut changes = Vec::new();
        {
            let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
            for record in records {
                if let Some(change) = state.apply::<V>(&self.topic, record, want_change) {
                    changes.push(change);
                }
            }
            for (applied, read) in state.positions.iter_mut().zip(&positions) {
                *applied = (*applied).max(*read);
            }
        }
        for change in changes {
            for subscriber in subscribers.iter() {
                subscriber.do_send(change.clone());
            }
        }
        drop(subscribers);
        self.progress.send_modify(|p| {
            p.positions
                .resize(positions.len().max(p.positions.len()), 0);
            for (applied, read) in p.positions.iter_mut().zip(&positions) {
                *applied = (*applied).max(*read);
            }
        });
    }
}

impl<K: TableKey, S, V: Send + Sync + 'static> Shared<K, S, V> {
    /// Waits until the table has read every partition up to `ends` (per partition).
    ///
    /// # Errors
    /// Why the follower stopped, when it did first.
    async fn wait_until(&self, ends: &[u64]) -> Result<()> {
        let mut progress = self.progress.subscribe();
        let reached = progress
            .wait_for(|p| {
                p.stopped.is_some()
                    || ends.iter().enumerate().all(|(partition, end)| {
                        p.positions.get(partition).is_some_and(|at| at >= end)
                    })
            })
            .await
            .map_err(|_| Error::BrokerStopped)?;
        match &reached.stopped {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Waits until the table has applied the record `delivery` names.
    async fn wait_for(&self, delivery: Delivery) -> Result<()> {
        let mut ends = vec![0; delivery.partition as usize + 1];
        ends[delivery.partition as usize] = delivery.offset + 1;
        self.wait_until(&ends).await
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State<K, S>> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn subscribe(&self, recipient: Recipient<TableChange<K, V>>) {
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subscribers.push(recipient);
    }
}

/// The calls `Table` and `LogTable` share, written once.
macro_rules! common_calls {
    ($table:ident) => {
        impl<K: TableKey, V: Send + Sync + 'static> $table<K, V> {
            /// The topic the table reads.
            pub fn topic(&self) -> &str {
                &self.shared.topic
            }

            /// Whether the table holds `key`.
            pub fn contains_key(&self, key: &K) -> bool {
                self.shared.read().entries.contains_key(key)
            }

            /// Keys the table holds.
            pub fn len(&self) -> usize {
                self.shared.read().entries.len()
            }

            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// The keys, in order (a copy, taken at once).
            pub fn keys(&self) -> Vec<K> {
                self.shared.read().entries.keys().cloned().collect()
            }

            /// Records skipped since the table opened: keyless, or whose key is not a `K` or
            /// value not a `V` (each is also logged).
            pub fn skipped(&self) -> u64 {
                self.shared.read().skipped
            }

            /// Sends `recipient` a [`TableChange`] for each change the table applies from now
            /// on, in the order it applies them, until the actor stops.
            pub fn subscribe(&self, recipient: Recipient<TableChange<K, V>>) {
                self.shared.subscribe(recipient);
            }

            /// Waits until the table has applied everything the topic held at the call (what
            /// other producers wrote before it).
            ///
            /// # Errors
            /// `BrokerStopped`, `UnknownTopic` (the topic was deleted).
            pub async fn catch_up(&self) -> Result<()> {
                let ends = source::end_offsets(&self.handle, &self.shared.topic).await?;
                self.shared.wait_until(&ends).await
            }
        }

        impl<K: TableKey, V: Serialize + Send + Sync + 'static> $table<K, V> {
            /// Produces `value` for `key` to the topic (Kafka's partitioner picks the
            /// partition), and returns once this table has applied it.
            ///
            /// # Errors
            /// As [`AsyncNanoKafka::produce_keyed`]; `BrokerStopped` when the table's
            /// follower stopped first.
            pub async fn put(&self, key: K, value: &V) -> Result<Delivery> {
                let topic = &self.shared.topic;
                let key = key.to_key_bytes();
                let delivery = self.handle.produce_keyed(topic, &key, value).await?;
                self.shared.wait_for(delivery).await?;
                Ok(delivery)
            }

            /// Produces a tombstone for `key` (Kafka's null value), and returns once this
            /// table has applied it (the key is gone from it).
            ///
            /// # Errors
            /// As [`AsyncNanoKafka::produce_tombstone`]; `BrokerStopped` when the table's
            /// follower stopped first.
            pub async fn delete(&self, key: &K) -> Result<Delivery> {
                let topic = &self.shared.topic;
                let delivery = self
                    .handle
                    .produce_tombstone(topic, &key.to_key_bytes())
                    .await?;
                self.shared.wait_for(delivery).await?;
                Ok(delivery)
            }
        }

        impl<K: TableKey, V: Send + Sync + 'static> Clone for $table<K, V> {
            fn clone(&self) -> Self {
                $table {
                    shared: self.shared.clone(),
                    handle: self.handle.clone(),
                }
            }
        }

        impl<K: TableKey, V: Send + Sync + 'static> std::fmt::Debug for $table<K, V> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($table))
                    .field("topic", &self.shared.topic)
                    .finish_non_exhaustive()
            }
        }
    };
}

common_calls!(Table);
common_calls!(LogTable);

impl<K: TableKey, V: Clone + Send + Sync + 'static> Table<K, V> {
    /// `key`'s latest value.
    pub fn get(&self, key: &K) -> Option<V> {
        self.shared
            .read()
            .entries
            .get(key)
            .map(|kept| kept.0.clone())
    }

    /// Every key and its value, in key order (a copy, taken at once: the table goes on
    /// changing meanwhile).
    pub fn iter(&self) -> std::vec::IntoIter<(K, V)> {
        let state = self.shared.read();
        let all: Vec<(K, V)> = state
            .entries
            .iter()
            .map(|(k, kept)| (k.clone(), kept.0.clone()))
            .collect();
        all.into_iter()
    }

    /// Every key and its value, as a map (a copy).
    pub fn to_map(&self) -> BTreeMap<K, V> {
        self.iter().collect()
    }
}

impl<K: TableKey, V: DeserializeOwned + Send + Sync + 'static> LogTable<K, V> {
    /// `key`'s latest value, read from the log.
    ///
    /// # Errors
    /// `Decode` when the stored value is not a `V`; as
    /// [`AsyncNanoKafka::fetch_kafka_batches`]; `Unsupported` on the Kafka backend.
    pub async fn get(&self, key: &K) -> Result<Option<V>> {
        let Some((at, value)) = self.read_latest(key).await? else {
            return Ok(None);
        };
        let topic = &self.shared.topic;
        let value = rmp_serde::from_slice(&value).map_err(|source| Error::Decode {
            topic: topic.clone(),
            partition: at.partition,
            offset: at.offset,
            source: Arc::new(source),
        })?;
        Ok(Some(value))
    }

    /// Where `key`'s latest value lies, and its bytes (`None`: the key is not in the table,
    /// or a tombstone). A record the cleaner removed since the table located it was
    /// superseded by a newer one: the table catches up with the topic and looks again.
    async fn read_latest(&self, key: &K) -> Result<Option<(Location, Vec<u8>)>> {
        let topic = &self.shared.topic;
        for caught_up in [false, true] {
            if caught_up {
                self.catch_up().await?;
            }
            let located = self.shared.read().entries.get(key).copied();
            let Some(Located(at)) = located else {
                return Ok(None);
            };
            let read = self
                .handle
                .fetch_kafka_batches(topic, at.partition, at.offset, 1, true)
                .await?;
            let mut records = Vec::new();
            source::parse_batches(topic, at.partition, &read.bytes, at.offset, &mut records)?;
            if let Some(record) = records.into_iter().find(|r| r.offset == at.offset) {
                return Ok(record.value.map(|value| (at, value)));
            }
        }
        Ok(None)
    }
}
