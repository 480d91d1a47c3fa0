//! Fetch sessions (KIP-227), as Kafka's `FetchSession` / `FetchSessionCache`: plain Rust,
//! time passed in, one cache per listener behind a mutex held only between awaits.
//!
//! # The protocol
//! A request's `(session_id, session_epoch)` says what it is:
//! * epoch 0: a full fetch that asks for a session. Any session it names is closed; once
//!   answered, its partitions become a new session ([`FetchSessions::open`]), when the cache
//!   has room and the partitions fit the per-session cap, and the response carries its id
//!   (0 when none was opened: the client goes on with full fetches);
//! * epoch -1: a full fetch without a session (every client before KIP-227); any session it
//!   names is closed;
//! * any other epoch: an incremental fetch of session `session_id`, which must be at that
//!   epoch (each answered incremental fetch moves it on by one, `i32::MAX` to 1). The request
//!   names only the partitions added or changed (a new fetch offset or byte limit) and those
//!   to forget; the rest are fetched with what the session remembers. The response carries
//!   only partitions with something new ([`CachedPartition::must_answer`]), and partitions
//!   that got records move to the end of the session's order, so that the next fetch reads
//!   the others first under `max_bytes`.
//!
//! Errors, at the response's top level with no partitions and session id 0:
//! `FETCH_SESSION_ID_NOT_FOUND` (no such session: never opened, closed, evicted or expired),
//! `INVALID_FETCH_SESSION_EPOCH` (not the epoch expected: a duplicate or lost request),
//! `FETCH_SESSION_TOPIC_ID_ERROR` (a session opened with topic names, Fetch v12 and before,
//! used with topic ids, v13 and later, or the other way round). A refused request changes
//! nothing. An incremental fetch that leaves its session empty, or grows it past the
//! per-session cap, closes it and is answered as a sessionless fetch of the partitions it
//! named (Kafka's answer to an emptied session; the client opens a new one).
//!
//! # Limits and eviction
//! * `slots` sessions at most (Kafka's `max.incremental.fetch.session.cache.slots`, 1000). A
//!   full fetch that finds the cache full evicts, as Kafka does, the least recently used
//!   session if it is stale, else the smallest session (fewest partitions, then lowest id)
//!   that is older than the eviction time, if the new one is larger; otherwise it gets no
//!   session. Kafka takes "older" as of the candidate's last use and keeps the candidates in
//!   sorted trees; here it is as of now, and the smallest is found by a scan of the
//!   sessions, done only when the cache is full and nothing expired.
//! * a session unused for the eviction time (Kafka's `min.incremental.fetch.session.eviction.ms`,
//!   2 minutes) expires: every call first drops the sessions idle that long, oldest first,
//!   where Kafka keeps a stale session until a new one needs its slot. Consumers fetch every
//!   `fetch.max.wait.ms` (500 ms by default), far more often.
//! * `max_partitions` partitions per session (Kafka has no such cap; its request size bounds
//!   one request, not a session grown over many).
//!
//! # Memory
//! A cached partition is its key (a topic name shared by the topic's partitions, or a topic
//! id, and the partition index) and five numbers: about 90 bytes in the session's map with
//! its index. A full cache with full sessions at the defaults (1000 sessions of 1000
//! partitions) holds about 90 MB; the sessions of a few consumers, a few hundred KB.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use kafka_protocol::indexmap::IndexMap;

/// Kafka's `max.incremental.fetch.session.cache.slots`.
pub const DEFAULT_SLOTS: usize = 1000;
/// Partitions one session may hold: a consumer of more fetches without a session.
pub const DEFAULT_MAX_PARTITIONS: usize = 1000;
/// Kafka's `min.incremental.fetch.session.eviction.ms`.
pub const DEFAULT_EVICTION_MS: u64 = 120_000;

/// The session id that means "no session".
pub const NO_SESSION: i32 = 0;
/// The epoch of a full fetch that asks for a session.
const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch without a session.
const FINAL_EPOCH: i32 = -1;

/// Kafka's next epoch: `i32::MAX` wraps to 1 (0 and -1 mean full fetches).
fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        i32::MAX => 1,
        e if e < 0 => FINAL_EPOCH,
        e => e + 1,
    }
}

/// How a session names its topics: by name (Fetch v12 and before) or by topic id (v13+).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopicKey {
    Name(Arc<str>),
    Id(crate::TopicId),
}

/// One partition of a session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    pub topic: TopicKey,
    pub partition: i32,
}

/// What a request asks of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchParams {
    pub fetch_offset: i64,
    pub max_bytes: i32,
}

/// What a response answered for one partition, as the session compares it next time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub has_records: bool,
    pub is_error: bool,
}

/// Why a request's session was refused; each is Kafka's error of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    FetchSessionIdNotFound,
    InvalidFetchSessionEpoch,
    FetchSessionTopicIdError,
}

/// A request's session fields and naming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRequest {
    pub id: i32,
    pub epoch: i32,
    /// Fetch v13 and later: topics named by id.
    pub uses_topic_ids: bool,
}

/// What a request is to be answered as ([`FetchSessions::begin`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Context {
    /// Answer the request's partitions; session id 0.
    Sessionless,
    /// Answer the request's partitions, then [`FetchSessions::open`] a session of them.
    Full,
    /// Answer the session's partitions, in this order, with these parameters, then prune
    /// the answer with [`FetchSessions::answer`].
    Incremental {
        id: i32,
        partitions: Vec<(PartitionKey, FetchParams)>,
    },
    /// Refuse the request.
    Refused(SessionError),
}

/// A partition as a session remembers it: what the client last asked, and what it was last
/// told (Kafka's `CachedPartition`, less what only followers use).
#[derive(Debug, Clone, Copy)]
struct CachedPartition {
    params: FetchParams,
    /// -1 after an error, so the partition is answered again once the error is gone.
    high_watermark: i64,
    log_start_offset: i64,
}

impl CachedPartition {
    /// Kafka's `maybeUpdateResponseData`: a partition is answered when it has records, a new
    /// high watermark or log start offset, or an error (the last stable offset is the high
    /// watermark here, so it is covered). Remembers what it was told.
    fn must_answer(&mut self, answered: Answered) -> bool {
        let mut must = answered.has_records;
        if self.high_watermark != answered.high_watermark {
            self.high_watermark = answered.high_watermark;
            must = true;
        }
        if self.log_start_offset != answered.log_start_offset {
            self.log_start_offset = answered.log_start_offset;
            must = true;
        }
        if answered.is_error {
            self.high_watermark = -1;
            must = true;
        }
        must
    }
}

#[derive(Debug)]
struct Session {
    /// The epoch the next incremental fetch must carry.
    epoch: i32,
    uses_topic_ids: bool,
    created_ms: u64,
    last_used_ms: u64,
    /// In fetch order: partitions that got records move to the end.
    partitions: IndexMap<PartitionKey, CachedPartition>,
}

/// The cache's limits ([`crate::ListenerConfig`] sets them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    pub slots: usize,
    pub max_partitions: usize,
    pub eviction_ms: u64,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            slots: DEFAULT_SLOTS,
            max_partitions: DEFAULT_MAX_PARTITIONS,
            eviction_ms: DEFAULT_EVICTION_MS,
        }
    }
}

/// Every fetch session of a listener.
#[derive(Debug)]
pub struct FetchSessions {
    limits: SessionLimits,
    sessions: HashMap<i32, Session>,
    /// `(last_used_ms, id)` of every session: expiry and stale eviction take the first.
    by_last_use: BTreeSet<(u64, i32)>,
    /// Keys the session ids' hash: ids are not guessable from one another, as Kafka's are
    /// random (a session is not tied to a connection).
    id_keys: RandomState,
    ids_drawn: u64,
}

impl FetchSessions {
    pub fn new(limits: SessionLimits) -> Self {
        FetchSessions {
            limits,
            sessions: HashMap::new(),
            by_last_use: BTreeSet::new(),
            id_keys: RandomState::new(),
            ids_drawn: 0,
        }
    }

    /// Sessions open.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Partitions cached across all sessions.
    #[cfg(test)]
    pub fn cached_partitions(&self) -> usize {
        self.sessions.values().map(|s| s.partitions.len()).sum()
    }

    /// What a request is, with its partitions (`fetch`, those added or changed when
    /// incremental) and `forget` applied to its session when incremental (Kafka's
    /// `FetchManager.newContext`).
    pub fn begin(
        &mut self,
        now_ms: u64,
        request: SessionRequest,
        fetch: &[(PartitionKey, FetchParams)],
        forget: &[PartitionKey],
    ) -> Context {
        self.expire(now_ms);
        if request.epoch == INITIAL_EPOCH || request.epoch == FINAL_EPOCH {
            if request.id != NO_SESSION {
                self.remove(request.id);
            }
            return match request.epoch {
                INITIAL_EPOCH => Context::Full,
                _ => Context::Sessionless,
            };
        }
        let Some(session) = self.sessions.get_mut(&request.id) else {
            return Context::Refused(SessionError::FetchSessionIdNotFound);
        };
        if session.epoch != request.epoch {
            return Context::Refused(SessionError::InvalidFetchSessionEpoch);
        }
        if session.uses_topic_ids != request.uses_topic_ids {
            return Context::Refused(SessionError::FetchSessionTopicIdError);
        }
        for (key, params) in fetch {
            match session.partitions.get_mut(key) {
                Some(cached) => cached.params = *params,
                None => {
                    let cached = CachedPartition {
                        params: *params,
                        high_watermark: -1,
                        log_start_offset: -1,
                    };
                    session.partitions.insert(key.clone(), cached);
                }
            }
        }
        for key in forget {
            session.partitions.shift_remove(key);
        }
        let size = session.partitions.len();
        if size == 0 || size > self.limits.max_partitions {
            self.remove(request.id);
            return Context::Sessionless;
        }
        session.epoch = next_epoch(session.epoch);
        let partitions = session
            .partitions
            .iter()
            .map(|(key, cached)| (key.clone(), cached.params))
            .collect();
        self.touch(request.id, now_ms);
        Context::Incremental {
            id: request.id,
            partitions,
        }
    }

    /// Opens a session of a full fetch's answered partitions, if there is room: its id, or
    /// [`NO_SESSION`] (Kafka's `FullFetchContext`).
    pub fn open(
        &mut self,
        now_ms: u64,
        uses_topic_ids: bool,
        answered: impl ExactSizeIterator<Item = (PartitionKey, FetchParams, Answered)>,
    ) -> i32 {
        self.expire(now_ms);
        let size = answered.len();
        if size > self.limits.max_partitions || self.limits.slots == 0 {
            return NO_SESSION;
        }
        if self.sessions.len() >= self.limits.slots && !self.evict_for(size, now_ms) {
            return NO_SESSION;
        }
        let partitions = answered
            .map(|(key, params, answered)| {
                let cached = CachedPartition {
                    params,
                    high_watermark: answered.high_watermark,
                    log_start_offset: answered.log_start_offset,
                };
                (key, cached)
            })
            .collect();
        let id = self.new_id();
        let session = Session {
            epoch: next_epoch(INITIAL_EPOCH),
            uses_topic_ids,
            created_ms: now_ms,
            last_used_ms: now_ms,
            partitions,
        };
        self.sessions.insert(id, session);
        self.by_last_use.insert((now_ms, id));
        id
    }

    /// Which of an incremental fetch's answers go in its response (Kafka's
    /// `IncrementalFetchContext.updateAndGenerateResponseData`), in the order
    /// [`Context::Incremental`] gave; remembers what was answered and moves the partitions
    /// that got records to the end of the session's order.
    ///
    /// # Errors
    /// `FetchSessionIdNotFound` when the session went away while the fetch was read;
    /// `InvalidFetchSessionEpoch` when another request of the session was answered
    /// meanwhile (`epoch` is the request's).
    pub fn answer(
        &mut self,
        id: i32,
        epoch: i32,
        answers: &[(PartitionKey, Answered)],
    ) -> Result<Vec<bool>, SessionError> {
        let session = self
            .sessions
            .get_mut(&id)
            .ok_or(SessionError::FetchSessionIdNotFound)?;
        if session.epoch != next_epoch(epoch) {
            return Err(SessionError::InvalidFetchSessionEpoch);
        }
        let mut moved = IndexMap::new();
        let include = answers
            .iter()
            .map(|(key, answered)| {
                // A partition forgotten by a later request is no longer the session's.
                let Some(cached) = session.partitions.get_mut(key) else {
                    return false;
                };
                let must = cached.must_answer(*answered);
                if answered.has_records {
                    moved.insert(key.clone(), *cached);
                }
                must
            })
            .collect();
        if !moved.is_empty() {
            session.partitions.retain(|key, _| !moved.contains_key(key));
            session.partitions.extend(moved);
        }
        Ok(include)
    }

    /// Drops the sessions unused for the eviction time.
    fn expire(&mut self, now_ms: u64) {
        while let Some(&(last_used_ms, id)) = self.by_last_use.first() {
            if now_ms.saturating_sub(last_used_ms) <= self.limits.eviction_ms {
                break;
            }
            tracing::debug!(session_id = id, "fetch session expired");
            self.remove(id);
        }
    }

    /// Kafka's `tryEvict` for a new session of `size` partitions, with stale sessions
    /// already expired: the smallest session older than the eviction time goes if the new
    /// one is larger.
    fn evict_for(&mut self, size: usize, now_ms: u64) -> bool {
        let eviction_ms = self.limits.eviction_ms;
        let smallest = self
            .sessions
            .iter()
            .filter(|(_, s)| now_ms.saturating_sub(s.created_ms) > eviction_ms)
            .map(|(&id, s)| (s.partitions.len(), id))
            .min();
        match smallest {
            Some((smaller, id)) if size > smaller => {
                tracing::debug!(session_id = id, "fetch session evicted for a larger one");
                self.remove(id);
                true
            }
            _ => false,
        }
    }

    fn touch(&mut self, id: i32, now_ms: u64) {
        if let Some(session) = self.sessions.get_mut(&id) {
            self.by_last_use.remove(&(session.last_used_ms, id));
            session.last_used_ms = now_ms;
            self.by_last_use.insert((now_ms, id));
        }
    }

    fn remove(&mut self, id: i32) {
        if let Some(session) = self.sessions.remove(&id) {
            self.by_last_use.remove(&(session.last_used_ms, id));
        }
    }

    /// A positive id no open session has.
    fn new_id(&mut self) -> i32 {
        loop {
            self.ids_drawn += 1;
            let id = (self.id_keys.hash_one(self.ids_drawn) as i32) & i32::MAX;
            if id != NO_SESSION && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

#[cfg(test)]
#[path = "fetch_session_tests.rs"]
mod tests;
