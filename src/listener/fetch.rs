//! Fetch (v4 to v18): whole record batches as stored, a copy of bytes, in fetch sessions.
//!
//! Each partition is read from the batch holding its `fetch_offset`, up to its
//! `partition_max_bytes` and the request's `max_bytes` in all; the first batch of the
//! response is returned whole even when larger (KIP-74), so a consumer always progresses.
//! When the response holds fewer than `min_bytes` the fetch parks, up to `max_wait_ms`, on
//! every partition's append path (`wait_for_kafka_append`: the group commit that writes
//! wakes it, nothing polls); the first partition that gets data wakes it, and it reads
//! every partition again, so the high watermark answered is the one after the wait.
//!
//! From v13 topics are named by topic id (KIP-516) in requests and responses: an id no
//! topic has (never made, or its topic deleted, even if created again under the same name
//! with a new id) is `UNKNOWN_TOPIC_ID` for each of its partitions. v14 and v15 change nothing
//! a consumer sends (v15 moves the follower's replica id into a tagged field, ignored here,
//! as every follower field is); from v16 a partition answered `NOT_LEADER_OR_FOLLOWER` (its
//! partition restarting) names its leader, this broker, with its endpoint (KIP-951); v17 and
//! v18 add only follower fields.
//!
//! Each topic needs READ (ACLs): a partition of a topic the principal may not read is
//! `TOPIC_AUTHORIZATION_FAILED`, checked at every read, so an incremental fetch session
//! stops reading a topic as soon as its ACL goes.
//!
//! Which partitions are read and answered is the fetch session's business (`fetch_session`,
//! KIP-227, v7+): a full fetch reads and answers the partitions it names; an incremental
//! one reads every partition of its session and answers only those with something new.
//!
//! What a client sees: the high watermark and the last stable offset are the log end (no
//! transactions: read_committed reads the same as read_uncommitted), no aborted
//! transactions, no preferred read replica (-1), every partition of a full fetch in the
//! response (an empty partition with empty records, never null), `OFFSET_OUT_OF_RANGE` for
//! an offset below the log start or past the log end. Partitions are answered in the order
//! they are read (the request's, or the session's), consecutive partitions of a topic under
//! one topic entry, as Kafka does.
//!
//! Copies: the partition reads its batches from the segment straight into the buffer that
//! becomes the response's records (one copy from the page cache); encoding the response
//! copies them once more into the frame written to the socket.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{join_all, select_all};
use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::to_kafka;
use super::fetch_session::{Answered, Context, FetchParams, PartitionKey, SessionError};
use super::fetch_session::{SessionRequest, TopicKey, NO_SESSION};
use super::request::RequestContext;
use super::NODE_ID;
use crate::messages::BatchRead;
use crate::security::acl::Operation;
use crate::TopicId;
use uuid::Uuid;

/// Kafka's `read_committed` isolation level.
const READ_COMMITTED: i8 = 1;
/// Fetch names topics by id from v13 (KIP-516).
const FIRST_BY_TOPIC_ID: i16 = 13;
/// Fetch answers the leader of a partition it does not lead from v16 (KIP-951).
const FIRST_WITH_NODE_ENDPOINTS: i16 = 16;

/// One partition to read.
struct Wanted {
    key: PartitionKey,
    /// The topic's name; `None` for a topic id no topic has.
    topic: Option<Arc<str>>,
    params: FetchParams,
}

/// A partition's read: its batches, or Kafka's error code.
type Read = Result<BatchRead, i16>;

pub async fn handle(ctx: &RequestContext<'_>, request: FetchRequest) -> FetchResponse {
    let uses_topic_ids = ctx.version >= FIRST_BY_TOPIC_ID;
    let (fetch, forget) = requested(&request, uses_topic_ids);
    let session_request = SessionRequest {
        id: request.session_id,
        epoch: request.session_epoch,
        uses_topic_ids,
    };
    let now_ms = ctx.shared.clock.now_ms();
    let context = ctx
        .shared
        .fetch_sessions()
        .begin(now_ms, session_request, &fetch, &forget);
    let partitions = match &context {
        Context::Refused(e) => return refused(*e),
        Context::Sessionless | Context::Full => fetch,
        Context::Incremental { partitions, .. } => partitions.clone(),
    };
    let wanted = resolve(ctx, partitions, uses_topic_ids).await;
    let reads = read_waiting(ctx, &request, &wanted).await;
    let committed = request.isolation_level == READ_COMMITTED;
    let answered: Vec<PartitionData> = reads
        .into_iter()
        .zip(&wanted)
        .map(|(read, w)| partition_data(ctx.version, w.key.partition, read, committed))
        .collect();
    let (session_id, include) = match conclude(ctx, context, session_request, &wanted, &answered) {
        Ok(concluded) => concluded,
        Err(e) => return refused(e),
    };
    let answered = wanted
        .iter()
        .zip(answered)
        .enumerate()
        .filter(|(i, _)| include.as_ref().is_none_or(|include| include[*i]))
        .map(|(_, answer)| answer);
    let topics = by_topic(answered);
    FetchResponse::default()
        .with_session_id(session_id)
        .with_node_endpoints(leader_endpoints(ctx, &topics))
        .with_responses(topics)
}

/// The partitions to read, each with its topic's name (none for an unknown topic id).
async fn resolve(
    ctx: &RequestContext<'_>,
    partitions: Vec<(PartitionKey, FetchParams)>,
    uses_topic_ids: bool,
) -> Vec<Wanted> {
    let names = match uses_topic_ids {
        true => topic_names(ctx).await,
        false => HashMap::new(),
    };
    partitions
        .into_iter()
        .map(|(key, params)| {
            let topic = match &key.topic {
                TopicKey::Name(name) => Some(name.clone()),
                TopicKey::Id(id) => names.get(id).cloned(),
            };
            Wanted { key, topic, params }
        })
        .collect()
}

/// The session's part once the partitions are read: the response's session id, and for an
/// incremental fetch which of `answered` go in the response (all for a full fetch, which
/// may open a session of them).
///
/// # Errors
/// The session's refusal (it went away, or another request of it was answered meanwhile).
fn conclude(
    ctx: &RequestContext<'_>,
    context: Context,
    request: SessionRequest,
    wanted: &[Wanted],
    answered: &[PartitionData],
) -> Result<(i32, Option<Vec<bool>>), SessionError> {
    let now_ms = ctx.shared.clock.now_ms();
    let answers = wanted.iter().zip(answered);
    match context {
        Context::Refused(e) => Err(e),
        Context::Sessionless => Ok((NO_SESSION, None)),
        Context::Full => {
            let opened = answers.map(|(w, data)| (w.key.clone(), w.params, answer_of(data)));
            let mut sessions = ctx.shared.fetch_sessions();
            let id = sessions.open(now_ms, request.uses_topic_ids, opened);
            if id != NO_SESSION {
                ctx.shared.metrics.fetch_session_opened();
            }
            Ok((id, None))
        }
        Context::Incremental { id, .. } => {
            let answers: Vec<_> = answers
                .map(|(w, data)| (w.key.clone(), answer_of(data)))
                .collect();
            let include = ctx
                .shared
                .fetch_sessions()
                .answer(id, request.epoch, &answers)?;
            ctx.shared.metrics.incremental_fetch();
            Ok((id, Some(include)))
        }
    }
}

/// Every topic's name by id, asked of the broker for each request that names topics by id:
/// a topic deleted and created again has a new id, and its old one must be unknown at
/// once, which no cache in the listener could promise without being told of every deletion.
/// One round trip to the broker actor and a copy of its id map per request.
async fn topic_names(ctx: &RequestContext<'_>) -> HashMap<TopicId, Arc<str>> {
    // A stopping broker knows no topic: every partition is answered UNKNOWN_TOPIC_ID.
    let ids = ctx.broker.topic_ids().await.unwrap_or_default();
    ids.into_iter()
        .map(|(name, id)| (id, Arc::from(name)))
        .collect()
}

/// From v16 (KIP-951), a partition answered `NOT_LEADER_OR_FOLLOWER` names its leader, and
/// the response carries the leader's endpoint, so the client need not ask Metadata: here the
/// one broker, which leads every partition with epoch 0 (its partition was restarting).
fn leader_endpoints(
    ctx: &RequestContext<'_>,
    topics: &[FetchableTopicResponse],
) -> Vec<NodeEndpoint> {
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let any = topics
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code == not_leader);
    if ctx.version < FIRST_WITH_NODE_ENDPOINTS || !any {
        return Vec::new();
    }
    vec![NodeEndpoint::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(ctx.shared.advertised_host.clone()))
        .with_port(ctx.shared.advertised_port)]
}

/// The request's partitions (added or changed, when incremental) and those it forgets, by
/// topic id from v13, by name before. One name is shared by all of a topic's partitions.
fn requested(
    request: &FetchRequest,
    uses_topic_ids: bool,
) -> (Vec<(PartitionKey, FetchParams)>, Vec<PartitionKey>) {
    let topic_key = |name: &TopicName, id: &Uuid| match uses_topic_ids {
        true => TopicKey::Id(TopicId::from_bytes(*id.as_bytes())),
        false => TopicKey::Name(Arc::from(name.0.as_str())),
    };
    let fetch = request
        .topics
        .iter()
        .flat_map(|t| {
            let topic = topic_key(&t.topic, &t.topic_id);
            t.partitions.iter().map(move |p| {
                let key = PartitionKey {
                    topic: topic.clone(),
                    partition: p.partition,
                };
                let params = FetchParams {
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                };
                (key, params)
            })
        })
        .collect();
    let forget = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            let topic = topic_key(&t.topic, &t.topic_id);
            t.partitions.iter().map(move |&partition| PartitionKey {
                topic: topic.clone(),
                partition,
            })
        })
        .collect();
    (fetch, forget)
}

/// A refused session: Kafka's error at the top, no partitions, no session.
fn refused(e: SessionError) -> FetchResponse {
    let code = match e {
        SessionError::FetchSessionIdNotFound => ResponseError::FetchSessionIdNotFound,
        SessionError::InvalidFetchSessionEpoch => ResponseError::InvalidFetchSessionEpoch,
        SessionError::FetchSessionTopicIdError => ResponseError::FetchSessionTopicIdError,
    };
    tracing::debug!(error = ?e, "fetch session refused");
    FetchResponse::default()
        .with_error_code(code.code())
        .with_session_id(NO_SESSION)
}

/// Reads every partition, and again after each append that wakes the wait, until the reads
/// hold `min_bytes`, one fails, or `max_wait_ms` is over.
async fn read_waiting(
    ctx: &RequestContext<'_>,
    request: &FetchRequest,
    wanted: &[Wanted],
) -> Vec<Read> {
    let max_bytes = usize::try_from(request.max_bytes).unwrap_or(0);
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = Instant::now() + max_wait;
    loop {
        let reads = read_all(ctx, wanted, max_bytes).await;
        let bytes: usize = reads.iter().flatten().map(|r| r.bytes.len()).sum();
        let failed = reads.iter().any(Result::is_err);
        let left = deadline.saturating_duration_since(Instant::now());
        if bytes >= min_bytes || failed || left.is_zero() {
            return reads;
        }
        // Park on every partition until one of them appends past what was read.
        let waits = wanted.iter().zip(&reads).filter_map(|(w, read)| {
            let read = read.as_ref().ok()?;
            let partition = u32::try_from(w.key.partition).ok()?;
            let topic = w.topic.as_deref()?;
            let seen = read.log_end_offset;
            Some(Box::pin(
                ctx.broker
                    .wait_for_kafka_append(topic, partition, seen, left),
            ))
        });
        let waits: Vec<_> = waits.collect();
        if waits.is_empty() {
            return reads;
        }
        let _ = select_all(waits).await;
    }
}

/// Reads every partition at once, then keeps whole batches, in order, within each
/// partition's limit and `max_bytes` in all (the response's first batch whatever its size).
async fn read_all(ctx: &RequestContext<'_>, wanted: &[Wanted], max_bytes: usize) -> Vec<Read> {
    let reads = join_all(wanted.iter().map(|w| async move {
        let Some(topic) = w.topic.as_deref() else {
            return Err(ResponseError::UnknownTopicId.code());
        };
        if !ctx.may_topic(Operation::Read, topic) {
            return Err(ResponseError::TopicAuthorizationFailed.code());
        }
        let Ok(partition) = u32::try_from(w.key.partition) else {
            return Err(ResponseError::UnknownTopicOrPartition.code());
        };
        // A negative offset is before any log start.
        let offset = u64::try_from(w.params.fetch_offset).unwrap_or(u64::MAX);
        let limit = partition_max(w).min(max_bytes);
        ctx.broker
            .fetch_kafka_batches(topic, partition, offset, limit, true)
            .await
            .map_err(|e| {
                tracing::debug!(topic, partition, error = %e, "fetch refused");
                to_kafka(&e).code()
            })
    }))
    .await;
    let mut total = 0usize;
    reads
        .into_iter()
        .zip(wanted)
        .map(|(read, w)| {
            let mut read = read?;
            let keep = whole_batches_within(
                &read.bytes,
                total == 0,
                partition_max(w),
                max_bytes - total.min(max_bytes),
            );
            read.bytes.truncate(keep);
            total += keep;
            Ok(read)
        })
        .collect()
}

fn partition_max(w: &Wanted) -> usize {
    usize::try_from(w.params.max_bytes).unwrap_or(0)
}

/// How many bytes of the whole batches at the start of `bytes` fit within both limits; the
/// first batch fits anyway when `first_of_response`.
fn whole_batches_within(
    bytes: &[u8],
    first_of_response: bool,
    partition_max: usize,
    response_left: usize,
) -> usize {
    let limit = partition_max.min(response_left);
    let mut at = 0usize;
    while at + 12 <= bytes.len() {
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        let len = 12 + usize::try_from(length).unwrap_or(usize::MAX - 12);
        let fits = at + len <= limit || (at == 0 && first_of_response);
        if !fits || at + len > bytes.len() {
            break;
        }
        at += len;
    }
    at
}

fn partition_data(version: i16, index: i32, read: Read, read_committed: bool) -> PartitionData {
    let mut data = PartitionData::default()
        .with_partition_index(index)
        .with_aborted_transactions(read_committed.then(Vec::new))
        .with_preferred_read_replica(BrokerId(-1));
    match read {
        Ok(read) => data
            .with_high_watermark(read.log_end_offset as i64)
            .with_last_stable_offset(read.log_end_offset as i64)
            .with_log_start_offset(if version >= 5 {
                read.log_start_offset as i64
            } else {
                -1
            })
            .with_records(Some(Bytes::from(read.bytes))),
        Err(code) => {
            if code == ResponseError::NotLeaderOrFollower.code()
                && version >= FIRST_WITH_NODE_ENDPOINTS
            {
                data.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(NODE_ID))
                    .with_leader_epoch(0);
            }
            data.with_error_code(code)
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_records(Some(Bytes::new()))
        }
    }
}

/// What a session remembers of a partition's answer.
fn answer_of(data: &PartitionData) -> Answered {
    Answered {
        high_watermark: data.high_watermark,
        log_start_offset: data.log_start_offset,
        has_records: data.records.as_ref().is_some_and(|r| !r.is_empty()),
        is_error: data.error_code != 0,
    }
}

/// The answered partitions under their topics: consecutive partitions of one topic share
/// its entry.
fn by_topic<'a>(
    answered: impl Iterator<Item = (&'a Wanted, PartitionData)>,
) -> Vec<FetchableTopicResponse> {
    let mut topics: Vec<(&TopicKey, FetchableTopicResponse)> = Vec::new();
    for (w, data) in answered {
        match topics.last_mut() {
            Some((key, entry)) if **key == w.key.topic => entry.partitions.push(data),
            _ => {
                let entry = topic_entry(&w.key.topic).with_partitions(vec![data]);
                topics.push((&w.key.topic, entry));
            }
        }
    }
    topics.into_iter().map(|(_, entry)| entry).collect()
}

fn topic_entry(key: &TopicKey) -> FetchableTopicResponse {
    let entry = FetchableTopicResponse::default();
    match key {
        TopicKey::Name(name) => {
            entry.with_topic(TopicName(StrBytes::from_string(name.to_string())))
        }
        TopicKey::Id(id) => entry.with_topic_id(Uuid::from_bytes(*id.as_bytes())),
    }
}
