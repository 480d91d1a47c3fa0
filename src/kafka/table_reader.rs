//! A [`crate::Table`]'s reader on the Kafka backend: a librdkafka consumer assigned every
//! partition of the topic from its start, in no consumer group (nothing is committed: a
//! table rebuilds itself from the topic each time it opens, as Kafka Streams' global tables
//! do). Its calls block: the table's follower runs them on the runtime's blocking pool.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::{kafka_error, topic_error, KafkaBackend};
use crate::error::{Error, Result};
use crate::types::TableRecord;

/// The most records one read returns.
const MAX_RECORDS: usize = 1000;

/// The consumer and the topic it reads.
pub(crate) struct KafkaTableReader {
    consumer: BaseConsumer,
    topic: String,
}

impl std::fmt::Debug for KafkaTableReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaTableReader")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl KafkaTableReader {
    /// A consumer of every partition of `topic` from its start, and each partition's end
    /// (high watermark) as of now. Blocking.
    ///
    /// # Errors
    /// `UnknownTopic`; `Kafka` when the cluster cannot be asked.
    pub(crate) fn open(backend: &KafkaBackend, topic: &str) -> Result<(Self, Vec<u64>)> {
        let timeout = backend.config().request_timeout;
        let consumer: BaseConsumer = backend
            .config()
            .admin()
            // librdkafka wants a group for a consumer even when it only assigns; the
            // reader never subscribes nor commits, so the group never forms.
            .set("group.id", "nanokafka-table")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .create()
            .map_err(|e| kafka_error("create table reader", e))?;
        let ends = end_offsets(consumer.client(), topic, timeout)?;
        let mut assignment = TopicPartitionList::new();
        for p in 0..ends.len() as i32 {
            assignment
                .add_partition_offset(topic, p, Offset::Beginning)
                .map_err(|e| kafka_error("assign table partitions", e))?;
        }
        consumer
            .assign(&assignment)
            .map_err(|e| kafka_error("assign table partitions", e))?;
        let reader = KafkaTableReader {
            consumer,
            topic: topic.to_owned(),
        };
        Ok((reader, ends))
    }

    /// Per partition, the offset after the last record read (0 before any).
    pub(crate) fn positions(&self, partitions: usize) -> Vec<u64> {
        let mut positions = vec![0; partitions];
        if let Ok(list) = self.consumer.position() {
            for element in list.elements_for_topic(&self.topic) {
                let (Ok(p), Some(offset)) = (
                    usize::try_from(element.partition()),
                    element.offset().to_raw(),
                ) else {
                    continue;
                };
                if let (Some(slot), Ok(offset)) = (positions.get_mut(p), u64::try_from(offset)) {
                    *slot = offset;
                }
            }
        }
        positions
    }

    /// The records that arrive within `wait` (up to [`MAX_RECORDS`]; none when nothing
    /// did). Blocking.
    ///
    /// # Errors
    /// `Kafka` for a consume error other than a partition's end.
    pub(crate) fn read(&self, wait: Duration) -> Result<Vec<TableRecord>> {
        let mut records = Vec::new();
        let mut timeout = wait;
        while records.len() < MAX_RECORDS {
            let Some(message) = self.consumer.poll(timeout) else {
                break;
            };
            let message = message.map_err(|e| topic_error("read table", &self.topic, e))?;
            records.push(TableRecord {
                partition: u32::try_from(message.partition()).unwrap_or_default(),
                offset: u64::try_from(message.offset()).unwrap_or_default(),
                key: message.key().map(<[u8]>::to_vec),
                value: message.payload().map(<[u8]>::to_vec),
            });
            // What is already fetched is taken without waiting again.
            timeout = Duration::ZERO;
        }
        Ok(records)
    }
}

impl KafkaBackend {
    /// Each partition's end (high watermark) of `topic`, now. Blocking.
    ///
    /// # Errors
    /// `UnknownTopic`; `Kafka` when the cluster cannot be asked.
    pub(crate) fn end_offsets(&self, topic: &str) -> Result<Vec<u64>> {
        use rdkafka::producer::Producer;
        end_offsets(self.producer.client(), topic, self.config().request_timeout)
    }
}

fn end_offsets<C: rdkafka::ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<u64>> {
    let metadata = client
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| topic_error("read table metadata", topic, e))?;
    let partitions = metadata
        .topics()
        .first()
        .filter(|t| t.error().is_none())
        .map(|t| t.partitions().len())
        .filter(|n| *n > 0)
        .ok_or_else(|| Error::UnknownTopic {
            topic: topic.to_owned(),
        })?;
    (0..partitions as i32)
        .map(|p| {
            let (_, high) = client
                .fetch_watermarks(topic, p, timeout)
                .map_err(|e| topic_error("read table end offsets", topic, e))?;
            Ok(u64::try_from(high).unwrap_or(0))
        })
        .collect()
}
