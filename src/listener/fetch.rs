//! Fetch (v4 to v12): whole record batches as stored, a copy of bytes.
//!
//! Each partition is read from the batch holding its `fetch_offset`, up to its
//! `partition_max_bytes` and the request's `max_bytes` in all; the first batch of the
//! response is returned whole even when larger (KIP-74), so a consumer always progresses.
//! When the response holds fewer than `min_bytes` the fetch parks, up to `max_wait_ms`, on
//! every partition's append path (`wait_for_kafka_append`: the group commit that writes
//! wakes it, nothing polls); the first partition that gets data wakes it, and it reads
//! every partition again, so the high watermark answered is the one after the wait.
//!
//! What a client sees: the high watermark and the last stable offset are the log end (no
//! transactions: read_committed reads the same as read_uncommitted), no aborted
//! transactions, no preferred read replica (-1), every partition asked for in the response
//! (an empty partition with empty records, never null), `OFFSET_OUT_OF_RANGE` for an offset
//! below the log start or past the log end. Sessions (v7+) are not kept: the answer's
//! session id is 0, which tells the client to send full fetches, and a request for an
//! incremental fetch is `FETCH_SESSION_ID_NOT_FOUND`.
//!
//! Copies: the partition reads its batches from the segment straight into the buffer that
//! becomes the response's records (one copy from the page cache); encoding the response
//! copies them once more into the frame written to the socket.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{join_all, select_all};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;

use super::errors::to_kafka;
use super::request::RequestContext;
use crate::error::Error;
use crate::messages::BatchRead;

/// Kafka's `read_committed` isolation level.
const READ_COMMITTED: i8 = 1;

/// One partition asked for.
struct Wanted<'a> {
    topic: &'a str,
    index: i32,
    offset: i64,
    max_bytes: usize,
}

pub async fn handle(ctx: &RequestContext<'_>, request: FetchRequest) -> FetchResponse {
    let response = FetchResponse::default();
    if ctx.version >= 7 && request.session_id != 0 {
        return response.with_error_code(ResponseError::FetchSessionIdNotFound.code());
    }
    let wanted: Vec<Wanted<'_>> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Wanted {
                topic: t.topic.0.as_str(),
                index: p.partition,
                offset: p.fetch_offset,
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
            })
        })
        .collect();
    let max_bytes = usize::try_from(request.max_bytes).unwrap_or(0);
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = Instant::now() + max_wait;
    let reads = loop {
        let reads = read_all(ctx, &wanted, max_bytes).await;
        let bytes: usize = reads.iter().flatten().map(|r| r.bytes.len()).sum();
        let failed = reads.iter().any(Result::is_err);
        let left = deadline.saturating_duration_since(Instant::now());
        if bytes >= min_bytes || failed || left.is_zero() {
            break reads;
        }
        // Park on every partition until one of them appends past what was read.
        let waits = wanted.iter().zip(&reads).filter_map(|(w, read)| {
            let read = read.as_ref().ok()?;
            let partition = u32::try_from(w.index).ok()?;
            let seen = read.log_end_offset;
            Some(Box::pin(
                ctx.broker
                    .wait_for_kafka_append(w.topic, partition, seen, left),
            ))
        });
        let waits: Vec<_> = waits.collect();
        if waits.is_empty() {
            break reads;
        }
        let _ = select_all(waits).await;
    };
    let committed = request.isolation_level == READ_COMMITTED;
    let mut reads = reads.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let read = reads.next().expect("one read per partition");
                    partition_data(ctx.version, p.partition, read, committed)
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    response.with_responses(topics)
}

/// Reads every partition at once, then keeps whole batches, in the request's order, within
/// each partition's limit and `max_bytes` in all (the response's first batch whatever its
/// size).
async fn read_all(
    ctx: &RequestContext<'_>,
    wanted: &[Wanted<'_>],
    max_bytes: usize,
) -> Vec<Result<BatchRead, Error>> {
    let reads = join_all(wanted.iter().map(|w| async move {
        let Ok(partition) = u32::try_from(w.index) else {
            return Err(Error::UnknownTopic {
                topic: w.topic.to_owned(),
            });
        };
        // A negative offset is before any log start.
        let offset = u64::try_from(w.offset).unwrap_or(u64::MAX);
        let limit = w.max_bytes.min(max_bytes);
        ctx.broker
            .fetch_kafka_batches(w.topic, partition, offset, limit, true)
            .await
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
                w.max_bytes,
                max_bytes - total.min(max_bytes),
            );
            read.bytes.truncate(keep);
            total += keep;
            Ok(read)
        })
        .collect()
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

fn partition_data(
    version: i16,
    index: i32,
    read: Result<BatchRead, Error>,
    read_committed: bool,
) -> PartitionData {
    let data = PartitionData::default()
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
        Err(e) => {
            tracing::debug!(partition = index, error = %e, "fetch refused");
            data.with_error_code(to_kafka(&e).code())
                .with_high_watermark(-1)
                .with_last_stable_offset(-1)
                .with_records(Some(Bytes::new()))
        }
    }
}
