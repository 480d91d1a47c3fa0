//! Produce (v3+): each partition's record batches appended as the client sent them.
//!
//! The partitions of one request are appended concurrently (each is its own partition
//! actor); the batches of one partition one after the other, in the request's order. Each
//! batch goes through `produce_kafka_batch`, so through the partition's group commit and
//! backpressure like every produce, and an idempotent producer's retry is answered with its
//! stored offsets. A topic that does not exist is `UNKNOWN_TOPIC_OR_PARTITION`: topics are
//! created by Metadata, not here (as Kafka does). `acks=0` is appended and not answered; when
//! any partition of it fails, the connection is closed instead, as Kafka does, since no
//! response can carry the error.
//!
//! Kafka's per-partition checks before anything is appended: the records hold at least one
//! batch, every batch is RecordBatch v2 (magic 0 and 1 are `INVALID_RECORD`, as Kafka answers
//! for v3+ requests), zstd only from v7 (`UNSUPPORTED_COMPRESSION_TYPE`), no transactional or
//! control batch (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`: this broker has no transactions,
//! so no transactional id is ever authorized). Kafka also refuses more than one batch per
//! partition; this listener accepts several, appended in order, the response giving the
//! first one's base offset (a later batch that fails leaves the earlier ones written).
//!
//! Each topic needs WRITE (ACLs, `authorize`): a partition of a topic the principal may not
//! write is `TOPIC_AUTHORIZATION_FAILED` and nothing of it is appended.
//!
//! A batch with a record without a key, to a compacted topic (`cleanup.policy` `compact`
//! or `compact,delete`), is refused whole before anything of it is written, as Kafka's
//! broker refuses it: `INVALID_RECORD`, with a `record_errors` entry (the record's index in
//! the batch and why) for each keyless record, and an `error_message` (v8+).
//!
//! A topic with schema validation on (`confluent.value.schema.validation`,
//! `confluent.key.schema.validation`) has its records checked against the schema registry
//! before anything is appended (`schema_validation`); a failing record refuses the partition's
//! records whole, `INVALID_RECORD` with `record_errors` as above.

use bytes::Bytes;
use futures::future::join_all;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::to_kafka;
use super::request::{Reply, RequestContext};
use super::schema_validation::{Checks, Refusal};
use crate::error::Error;
use crate::security::acl::Operation;
use crate::storage::compression::Compression;
use crate::storage::format::{BatchHeader, LOG_OVERHEAD, MAGIC};
use crate::storage::KafkaAppend;

/// Where every version of Kafka's message format keeps its magic byte (after base offset,
/// length, and the partition leader epoch or, before v2, the CRC): read before the rest of the
/// header can be interpreted.
const MAGIC_AT: usize = 16;

/// A partition's answer: the first batch's append, or why it was refused.
type Answer = Result<KafkaAppend, Refused>;

/// Why a partition's records were refused: Kafka's error, its message, and the records it
/// names (`record_errors`: the index in the batch, and why).
#[derive(Debug)]
struct Refused {
    error: ResponseError,
    message: String,
    records: Vec<(u32, String)>,
}

impl From<Refusal> for Refused {
    fn from(refused: Refusal) -> Self {
        Refused {
            error: refused.error,
            message: refused.message,
            records: refused.records,
        }
    }
}

impl From<(ResponseError, String)> for Refused {
    fn from((error, message): (ResponseError, String)) -> Self {
        Refused {
            error,
            message,
            records: Vec::new(),
        }
    }
}

impl From<&Error> for Refused {
    fn from(e: &Error) -> Self {
        let records = match e {
            Error::KeyRequired {
                topic,
                partition,
                indexes,
            } => {
                let at = partition.map_or_else(|| topic.clone(), |p| format!("{topic}-{p}"));
                indexes
                    .iter()
                    .map(|&i| {
                        (
                            i,
                            format!("record {i} has no key: {at} is a compacted topic"),
                        )
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        Refused {
            error: to_kafka(e),
            message: e.to_string(),
            records,
        }
    }
}

pub async fn handle(ctx: &RequestContext<'_>, request: ProduceRequest) -> Reply {
    if !(-1..=1).contains(&request.acks) {
        return Reply::Respond(Box::new(kafka_protocol::messages::ResponseKind::Produce(
            refuse_all(&request, ResponseError::InvalidRequiredAcks),
        )));
    }
    let mut work = Vec::new();
    for topic in &request.topic_data {
        for partition in &topic.partition_data {
            work.push((topic.name.0.as_str(), partition.index, &partition.records));
        }
    }
    let topics = request.topic_data.iter().map(|t| t.name.0.as_str());
    let checks = Checks::for_topics(ctx, topics).await;
    let answers =
        join_all(work.iter().map(|&(topic, index, records)| {
            produce_partition(ctx, &checks, topic, index, records)
        }))
        .await;
    if request.acks == 0 {
        // No response will tell the producer, so Kafka closes the connection: the producer
        // sees it drop, refreshes its metadata and reconnects.
        let failed = work
            .iter()
            .zip(&answers)
            .find_map(|(&(topic, index, _), answer)| {
                let Refused { error, message, .. } = answer.as_ref().err()?;
                Some(format!(
                    "acks=0 produce to {topic}-{index} failed ({error:?}: {message})"
                ))
            });
        return match failed {
            None => Reply::Silent,
            Some(reason) => Reply::SilentAndClose(reason),
        };
    }
    let mut answers = answers.into_iter();
    let responses = request
        .topic_data
        .iter()
        .map(|topic| {
            let partitions = topic
                .partition_data
                .iter()
                .map(|p| {
                    let answer = answers.next().expect("one answer per partition");
                    partition_response(ctx.version, p.index, answer)
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_partition_responses(partitions)
        })
        .collect();
    Reply::Respond(Box::new(kafka_protocol::messages::ResponseKind::Produce(
        ProduceResponse::default().with_responses(responses),
    )))
}

async fn produce_partition(
    ctx: &RequestContext<'_>,
    checks: &Checks<'_>,
    topic: &str,
    index: i32,
    records: &Option<Bytes>,
) -> Answer {
    ctx.check_topic(Operation::Write, topic)
        .map_err(|e| Refused::from((e, format!("not authorized to write to {topic}"))))?;
    let Ok(partition) = u32::try_from(index) else {
        return Err(Refused::from((
            ResponseError::UnknownTopicOrPartition,
            format!("no partition {index}"),
        )));
    };
    let batches = split(records.as_ref(), ctx.version)?;
    checks.check(topic, partition, &batches).await?;
    let mut first = None;
    for batch in batches {
        let appended = ctx
            .broker
            .produce_kafka_batch(topic, partition, batch)
            .await
            .map_err(|e| {
                tracing::debug!(topic, partition, error = %e, "produce refused");
                Refused::from(&e)
            })?;
        first.get_or_insert(appended);
    }
    Ok(first.expect("split returns at least one batch"))
}

/// The batches of a partition's records, checked as Kafka checks a v3+ produce before
/// anything is appended.
fn split(records: Option<&Bytes>, version: i16) -> Result<Vec<Bytes>, (ResponseError, String)> {
    let invalid = |why: &str| (ResponseError::InvalidRecord, why.to_owned());
    let corrupt = |why: String| (ResponseError::CorruptMessage, why);
    let records = records.ok_or_else(|| invalid("no records"))?;
    let mut batches = Vec::new();
    let mut at = 0usize;
    while at < records.len() {
        let rest = &records[at..];
        if rest.len() <= MAGIC_AT {
            return Err(corrupt(format!("{} bytes left, not a batch", rest.len())));
        }
        let length = i32::from_be_bytes(rest[8..12].try_into().expect("4 bytes"));
        let len = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_add(LOG_OVERHEAD))
            .filter(|&l| l <= rest.len() && l > MAGIC_AT)
            .ok_or_else(|| {
                corrupt(format!(
                    "batch length {length} with {} bytes left",
                    rest.len()
                ))
            })?;
        if rest[MAGIC_AT] != MAGIC {
            return Err(invalid(
                "produce requests of version 3 and later carry only record batches of magic 2",
            ));
        }
        // A header that does not even parse is left to the append, which refuses the batch.
        if let Some(header) = BatchHeader::parse(&rest[..len]) {
            if header.is_transactional() || header.is_control() {
                return Err((
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "this broker has no transactions".to_owned(),
                ));
            }
            if header.compression() == Ok(Compression::Zstd) && version < 7 {
                return Err((
                    ResponseError::UnsupportedCompressionType,
                    "zstd needs produce version 7 or later".to_owned(),
                ));
            }
        }
        batches.push(records.slice(at..at + len));
        at += len;
    }
    if batches.is_empty() {
        return Err(invalid("no record batch"));
    }
    Ok(batches)
}

fn partition_response(version: i16, index: i32, answer: Answer) -> PartitionProduceResponse {
    let response = PartitionProduceResponse::default().with_index(index);
    match answer {
        Ok(appended) => response
            .with_base_offset(appended.base_offset as i64)
            .with_log_append_time_ms(appended.log_append_time_ms.map_or(-1, |t| t as i64))
            .with_log_start_offset(appended.log_start_offset as i64),
        Err(Refused {
            error,
            message,
            records,
        }) => {
            let response = response.with_error_code(error.code()).with_base_offset(-1);
            if version < 8 {
                return response;
            }
            let records = records
                .into_iter()
                .map(|(index, why)| {
                    BatchIndexAndErrorMessage::default()
                        .with_batch_index(i32::try_from(index).unwrap_or(i32::MAX))
                        .with_batch_index_error_message(Some(StrBytes::from_string(why)))
                })
                .collect();
            response
                .with_error_message(Some(StrBytes::from_string(message)))
                .with_record_errors(records)
        }
    }
}

/// Every partition refused with `error` (a request-wide problem).
fn refuse_all(request: &ProduceRequest, error: ResponseError) -> ProduceResponse {
    let responses = request
        .topic_data
        .iter()
        .map(|topic| {
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_partition_responses(
                    topic
                        .partition_data
                        .iter()
                        .map(|p| {
                            PartitionProduceResponse::default()
                                .with_index(p.index)
                                .with_error_code(error.code())
                                .with_base_offset(-1)
                        })
                        .collect(),
                )
        })
        .collect();
    ProduceResponse::default().with_responses(responses)
}
