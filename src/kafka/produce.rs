//! Produces on the Kafka backend: each record of a [`RecordBatch`] becomes one librdkafka
//! record (key, value, headers; the timestamp is the producer's clock, CreateTime, unless the
//! topic says LogAppendTime), all queued before the first delivery is awaited, so a batch
//! travels in as few requests as librdkafka's batching allows.
//!
//! librdkafka's local queue is the backpressure here: when it is full (the cluster is slower
//! than the producers), a produce waits for room up to the request timeout, as Kafka's
//! `max.block.ms` does, and fails with `Timeout` after it. Kafka has no `max_size` (a
//! backlog bound per consumer group): a topic's `Backpressure` settings do not apply.
//!
//! A compacted topic's key rule is the cluster's to apply: a keyless record it refuses
//! (Kafka's INVALID_RECORD) is reported as the embedded broker reports it, `KeyRequired`.

use std::time::Instant;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as RdHeader, Message, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureRecord};

use super::{topic_error, KafkaBackend};
use crate::error::{Error, Result};
use crate::storage::RecordBatch;
use crate::types::Delivery;

/// How long a produce facing a full local queue waits before trying again.
const QUEUE_FULL_RETRY: std::time::Duration = std::time::Duration::from_millis(5);

impl KafkaBackend {
    /// Sends `batch`'s records to `topic` (all to `partition` when given, else by key, or
    /// spread when keyless) and returns their deliveries in order.
    ///
    /// # Errors
    /// `UnknownTopic`, `UnknownPartition`; `Timeout` when librdkafka's queue stayed full for the request
    /// timeout; `KeyRequired` for a keyless record the cluster refused as INVALID_RECORD (a
    /// compacted topic); `Kafka` for another delivery the cluster refused (records before
    /// it in the batch may have been written).
    pub(crate) async fn produce_batch(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: &RecordBatch,
    ) -> Result<Vec<Delivery>> {
        let partition = partition
            .map(|p| {
                i32::try_from(p).map_err(|_| Error::UnknownPartition {
                    topic: topic.to_owned(),
                    partition: p,
                })
            })
            .transpose()?;
        let mut pending = Vec::with_capacity(batch.len());
        let mut keyed = Vec::with_capacity(batch.len());
        for record in batch.views() {
            keyed.push(record.key.is_some());
            let headers = record
                .headers
                .iter()
                .fold(OwnedHeaders::new(), |h, (k, v)| {
                    h.insert(RdHeader {
                        key: &String::from_utf8_lossy(k),
                        value: v,
                    })
                });
            let mut out = FutureRecord::<[u8], [u8]>::to(topic).headers(headers);
            if let Some(key) = record.key {
                out = out.key(key);
            }
            if let Some(value) = record.value {
                out = out.payload(value);
            }
            if let Some(p) = partition {
                out = out.partition(p);
            }
            pending.push(self.enqueue(topic, out).await?);
        }
        let mut deliveries = Vec::with_capacity(pending.len());
        for (index, (delivery, keyed)) in pending.into_iter().zip(keyed).enumerate() {
            let delivered = delivery
                .await
                .map_err(|_| Error::Kafka {
                    op: "produce",
                    reason: "the producer was closed before the delivery report".into(),
                })?
                .map_err(|(e, message)| match e.rdkafka_error_code() {
                    Some(RDKafkaErrorCode::InvalidRecord) if !keyed => Error::KeyRequired {
                        topic: topic.to_owned(),
                        partition: u32::try_from(message.partition()).ok(),
                        indexes: vec![u32::try_from(index).unwrap_or(u32::MAX)],
                    },
                    _ => topic_error("produce", topic, e),
                })?;
            deliveries.push(Delivery {
                partition: u32::try_from(delivered.partition).unwrap_or_default(),
                offset: u64::try_from(delivered.offset).unwrap_or_default(),
            });
        }
        Ok(deliveries)
    }

    /// Queues one record, waiting while librdkafka's queue is full (up to the request
    /// timeout).
    async fn enqueue<'a>(
        &self,
        topic: &str,
        mut record: FutureRecord<'a, [u8], [u8]>,
    ) -> Result<DeliveryFuture> {
        let started = Instant::now();
        loop {
            match self.producer.send_result(record) {
                Ok(delivery) => return Ok(delivery),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    let waited = started.elapsed();
                    if waited >= self.config.request_timeout {
                        return Err(Error::Timeout {
                            topic: topic.to_owned(),
                            partition: back.partition.map_or(0, |p| p.max(0) as u32),
                            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                        });
                    }
                    record = back;
                    tokio::time::sleep(QUEUE_FULL_RETRY).await;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::UnknownPartition), back)) => {
                    return Err(Error::UnknownPartition {
                        topic: topic.to_owned(),
                        partition: back.partition.map_or(0, |p| p.max(0) as u32),
                    })
                }
                Err((e, _)) => return Err(topic_error("produce", topic, e)),
            }
        }
    }
}
