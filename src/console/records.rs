//! Record pages and search: a partition read at an offset (or the first offset at a
//! timestamp, through the time index; or its newest records) with the batch fetch the Kafka
//! listener serves Fetch with, decoded here. Every read is bounded by a record count and a
//! byte budget of fetched batches, so no request reads a whole log into memory. A page's
//! values in Confluent's framing are decoded through the registry (`schemas`, with the
//! `schema-registry` feature); search results are not.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::{json, Value};

use super::field::{self, DEFAULT_MAX_FIELD_BYTES, MAX_FIELD_BYTES};
use super::request::{ApiError, Caller};
use super::schemas;
use crate::async_handle::AsyncNanoKafka;
use crate::messages::OffsetSpec;
use crate::storage::format::{self, BatchStep, RecordView};

/// Records a page holds by default, and at most.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;
/// Bytes of batches a page reads by default, and at most.
const DEFAULT_MAX_BYTES: usize = 1 << 20;
const MAX_MAX_BYTES: usize = 8 << 20;
/// Records a search scans by default, and at most, per request.
const DEFAULT_WINDOW: u64 = 10_000;
const MAX_WINDOW: u64 = 100_000;
/// Bytes of batches one search request reads at most (a window stops early past it).
const SEARCH_BYTES: usize = 16 << 20;
/// Matches one search request returns at most (it stops scanning at the last one).
const MAX_MATCHES: usize = 100;
/// How many times a `newest` page restarts nearer the log end when its byte budget ran out
/// before it (each restart keeps only the newer records).
const NEWEST_RESTARTS: usize = 4;

/// `GET /api/topics/{topic}/partitions/{p}/records` parameters.
#[derive(Debug, Deserialize)]
pub(super) struct RecordsQuery {
    offset: Option<u64>,
    timestamp: Option<u64>,
    newest: Option<bool>,
    limit: Option<usize>,
    max_bytes: Option<usize>,
    max_field_bytes: Option<usize>,
}

/// A bounded parameter: its default when absent, 400 above `max` or at zero.
fn bounded(
    name: &str,
    value: Option<usize>,
    default: usize,
    max: usize,
) -> Result<usize, ApiError> {
    match value {
        None => Ok(default),
        Some(v) if (1..=max).contains(&v) => Ok(v),
        Some(v) => Err(ApiError::bad_request(format!(
            "{name} must be 1..={max}, got {v}"
        ))),
    }
}

fn field_cap(value: Option<usize>) -> Result<usize, ApiError> {
    bounded(
        "max_field_bytes",
        value,
        DEFAULT_MAX_FIELD_BYTES,
        MAX_FIELD_BYTES,
    )
}

/// A partition's bounds: `(log start, log end)`.
async fn bounds(
    broker: &AsyncNanoKafka,
    topic: &str,
    partition: u32,
) -> Result<(u64, u64), ApiError> {
    let at = |spec| broker.list_kafka_offset(topic, partition, spec);
    let start = at(OffsetSpec::Earliest).await?.map_or(0, |o| o.offset);
    let end = at(OffsetSpec::Latest).await?.map_or(start, |o| o.offset);
    Ok((start, end.max(start)))
}

pub(super) async fn records(
    caller: Caller,
    path: web::Path<(String, u32)>,
    query: web::Query<RecordsQuery>,
) -> Result<HttpResponse, ApiError> {
    let (topic, partition) = path.into_inner();
    let q = query.into_inner();
    let modes = [
        q.offset.is_some(),
        q.timestamp.is_some(),
        q.newest == Some(true),
    ];
    if modes.iter().filter(|m| **m).count() != 1 {
        return Err(ApiError::bad_request(
            "give exactly one of offset=N, timestamp=MS or newest=true",
        ));
    }
    let limit = bounded("limit", q.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let budget = bounded("max_bytes", q.max_bytes, DEFAULT_MAX_BYTES, MAX_MAX_BYTES)?;
    let max_field = field_cap(q.max_field_bytes)?;
    let broker = &caller.console.broker;
    let (read, start) = Read::open(broker, &topic, partition).await?;
    let end = read.end;
    let (records, next_offset) = if q.newest == Some(true) {
        read.newest(start, limit as u64, budget, max_field).await?
    } else {
        let from = match (q.offset, q.timestamp) {
            (Some(offset), _) => offset.max(start),
            (None, Some(ms)) => broker
                .offset_for_timestamp(&topic, partition, ms)
                .await?
                .unwrap_or(end),
            (None, None) => end,
        };
        let (page, next) = read.page(from, limit as u64, budget, max_field).await?;
        // A huge offset: an empty page and the log's bounds, read on from the end.
        (page, next.min(end))
    };
    Ok(HttpResponse::Ok().json(json!({
        "partition": partition,
        "log_start": start,
        "log_end": end,
        "records": records,
        "next_offset": next_offset,
    })))
}

/// `GET /api/topics/{topic}/search` parameters.
#[derive(Debug, Deserialize)]
pub(super) struct SearchQuery {
    partition: u32,
    from: Option<u64>,
    key: Option<String>,
    contains: Option<String>,
    window: Option<u64>,
    max_field_bytes: Option<usize>,
}

pub(super) async fn search(
    caller: Caller,
    topic: web::Path<String>,
    query: web::Query<SearchQuery>,
) -> Result<HttpResponse, ApiError> {
    let q = query.into_inner();
    let matcher: Box<dyn Fn(&RecordView<'_>) -> bool> = match (&q.key, &q.contains) {
        (Some(key), None) => {
            let key = key.as_bytes().to_vec();
            Box::new(move |r| r.key == Some(key.as_slice()))
        }
        (None, Some(needle)) if !needle.is_empty() => {
            let needle = needle.as_bytes().to_vec();
            Box::new(move |r| {
                let has = |b: Option<&[u8]>| b.is_some_and(|b| contains(b, &needle));
                has(r.key) || has(r.value)
            })
        }
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of key=K or contains=S (not empty)",
            ))
        }
    };
    let window = match q.window {
        None => DEFAULT_WINDOW,
        Some(w) if (1..=MAX_WINDOW).contains(&w) => w,
        Some(w) => {
            return Err(ApiError::bad_request(format!(
                "window must be 1..={MAX_WINDOW}, got {w}"
            )))
        }
    };
    let max_field = field_cap(q.max_field_bytes)?;
    let (read, start) = Read::open(&caller.console.broker, &topic, q.partition).await?;
    let end = read.end;
    let from = q.from.unwrap_or(start).clamp(start, end);
    let (mut matches, mut shown) = (Vec::new(), 0usize);
    let scanned_to = read
        .scan(from, window, SEARCH_BYTES, |offset, timestamp, r| {
            if matcher(r) {
                matches.push(record_json(offset, timestamp, r, max_field));
                shown += shown_bytes(r, max_field);
            }
            matches.len() < MAX_MATCHES && shown < SEARCH_BYTES
        })
        .await?;
    Ok(HttpResponse::Ok().json(json!({
        "matches": matches,
        "scanned_from": from,
        "scanned_to": scanned_to,
        "log_start": start,
        "log_end": end,
        "done": scanned_to >= end,
    })))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The bytes of `r`'s fields a page shows, each at most `max_field`.
fn shown_bytes(r: &RecordView<'_>, max_field: usize) -> usize {
    let shown = |b: Option<&[u8]>| b.map_or(0, |b| b.len().min(max_field));
    let headers: usize = r.headers.iter().map(|(k, v)| k.len() + shown(v)).sum();
    shown(r.key) + shown(r.value) + headers
}

/// A record as the API shows it (see `field` for a field's renderings).
fn record_json(offset: u64, timestamp: i64, r: &RecordView<'_>, max_field: usize) -> Value {
    let render = |b: Option<&[u8]>| b.map(|b| field::render(b, max_field));
    let mut trace = Value::Null;
    let headers: Vec<Value> = r
        .headers
        .iter()
        .map(|(key, value)| {
            if key == crate::trace::TRACEPARENT_HEADER.as_bytes() {
                if let Some((trace_id, span_id)) = value.and_then(field::traceparent) {
                    trace = json!({"trace_id": trace_id, "span_id": span_id});
                }
            }
            let key = String::from_utf8_lossy(&key[..key.len().min(max_field)]);
            json!({"key": key, "value": render(value)})
        })
        .collect();
    json!({
        "offset": offset,
        "timestamp": timestamp,
        "key": render(r.key),
        "value": render(r.value),
        "headers": headers,
        "trace": trace,
    })
}

/// One partition read up to `end` (its log end when the request began).
struct Read<'a> {
    broker: &'a AsyncNanoKafka,
    topic: &'a str,
    partition: u32,
    end: u64,
}

impl<'a> Read<'a> {
    /// A read of `partition` up to its log end now, and its log start.
    async fn open(
        broker: &'a AsyncNanoKafka,
        topic: &'a str,
        partition: u32,
    ) -> Result<(Read<'a>, u64), ApiError> {
        let (start, end) = bounds(broker, topic, partition).await?;
        let read = Read {
            broker,
            topic,
            partition,
            end,
        };
        Ok((read, start))
    }

    /// The records from `from` on, rendered, and the offset after them.
    async fn page(
        &self,
        from: u64,
        limit: u64,
        budget: usize,
        max_field: usize,
    ) -> Result<(Vec<Value>, u64), ApiError> {
        let (mut page, mut shown) = (Vec::new(), 0usize);
        let mut decoder = schemas::Decoder::new(self.broker);
        let next = self
            .scan(from, limit, budget, |offset, timestamp, r| {
                decoder.note(page.len(), r.value, max_field);
                page.push(record_json(offset, timestamp, r, max_field));
                // Compressed batches can hold far more than they weigh: what is shown counts
                // against the same budget.
                shown += shown_bytes(r, max_field);
                shown < budget
            })
            .await?;
        decoder.apply(&mut page).await;
        Ok((page, next))
    }

    /// The last `limit` records from `start` on, newest first, and the log end. A byte
    /// budget that runs out before the log end restarts the read where it stopped (keeping
    /// only the newer records), at most [`NEWEST_RESTARTS`] times.
    async fn newest(
        &self,
        start: u64,
        limit: u64,
        budget: usize,
        max_field: usize,
    ) -> Result<(Vec<Value>, u64), ApiError> {
        let mut from = self.end.saturating_sub(limit).max(start);
        let mut restarts = 0;
        loop {
            let (mut page, next) = self.page(from, limit, budget, max_field).await?;
            if next >= self.end || restarts == NEWEST_RESTARTS || next == from {
                page.reverse();
                return Ok((page, self.end));
            }
            from = next;
            restarts += 1;
        }
    }

    /// Calls `visit(offset, timestamp, record)` on the records from `from` on, in order, until
    /// `max_records` were visited, `max_bytes` of batches were fetched (the first batch is
    /// read whatever its size), the log end, or `visit` says stop (after that record).
    /// Returns the offset to read next.
    async fn scan(
        &self,
        from: u64,
        max_records: u64,
        max_bytes: usize,
        mut visit: impl FnMut(u64, i64, &RecordView<'_>) -> bool,
    ) -> Result<u64, ApiError> {
        let (mut at, mut seen, mut used, mut stop) = (from, 0u64, 0usize, false);
        let mut scratch = Vec::new();
        while at < self.end && seen < max_records && used < max_bytes && !stop {
            let read = self
                .broker
                .fetch_kafka_batches(self.topic, self.partition, at, max_bytes - used, used == 0)
                .await?;
            if read.bytes.is_empty() {
                break;
            }
            used += read.bytes.len();
            let before = at;
            let end = self.end;
            let walked = format::walk_batches(&read.bytes, &mut scratch, |step| match step {
                BatchStep::Record(header, r) => {
                    let offset = header.base_offset + u64::from(r.offset_delta);
                    if offset < at {
                        return true;
                    }
                    if seen == max_records || offset >= end {
                        stop = true;
                        return false;
                    }
                    seen += 1;
                    at = offset + 1;
                    stop = !visit(offset, header.record_timestamp(r.timestamp_delta), r);
                    !stop
                }
                BatchStep::End(header) => {
                    at = at.max(header.next_offset()).min(end);
                    true
                }
            });
            walked.map_err(|e| damaged(e.base_offset.unwrap_or(at), &e.reason))?;
            if at == before {
                break;
            }
        }
        Ok(at)
    }
}

fn damaged(offset: u64, reason: &str) -> ApiError {
    ApiError::new(
        actix_web::http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("the batch at offset {offset} cannot be read: {reason}"),
    )
}
