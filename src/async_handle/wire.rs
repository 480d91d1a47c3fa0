//! The Kafka listener's data path on the async handle: raw batch reads, the long poll, offsets
//! by spec, producer ids. Each is one message to the broker (see [`crate::messages`]).

use std::time::Duration;

use super::AsyncNanoKafka;
use crate::error::Result;
use crate::messages::{
    AllocateProducerId, BatchRead, DescribeProducers, FetchKafkaBatches, ListKafkaOffset,
    ListedOffset, OffsetSpec, WaitForKafkaAppend,
};

impl AsyncNanoKafka {
    /// Whole record batches of `partition` as stored, from the batch holding `offset`, up to
    /// `max_bytes` (the first batch whatever its size with `min_one`): see
    /// [`FetchKafkaBatches`].
    ///
    /// # Errors
    /// As [`FetchKafkaBatches`].
    pub async fn fetch_kafka_batches(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<BatchRead> {
        self.ask(FetchKafkaBatches {
            topic: topic.to_owned(),
            partition,
            offset,
            max_bytes,
            min_one,
        })
        .await
    }

    /// Returns once `partition`'s log end is past `offset`, or after `wait`: see
    /// [`WaitForKafkaAppend`].
    ///
    /// # Errors
    /// As [`WaitForKafkaAppend`].
    pub async fn wait_for_kafka_append(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        wait: Duration,
    ) -> Result<()> {
        self.ask(WaitForKafkaAppend {
            topic: topic.to_owned(),
            partition,
            offset,
            wait,
        })
        .await
    }

    /// An offset of `partition` by [`OffsetSpec`]: see [`ListKafkaOffset`].
    ///
    /// # Errors
    /// As [`ListKafkaOffset`].
    pub async fn list_kafka_offset(
        &self,
        topic: &str,
        partition: u32,
        spec: OffsetSpec,
    ) -> Result<Option<ListedOffset>> {
        self.ask(ListKafkaOffset {
            topic: topic.to_owned(),
            partition,
            spec,
        })
        .await
    }

    /// The idempotent producers `partition` remembers: see [`DescribeProducers`].
    ///
    /// # Errors
    /// As [`DescribeProducers`]; `Unsupported` on the Kafka backend.
    pub async fn describe_producers(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<Vec<crate::ActiveProducer>> {
        self.ask(DescribeProducers {
            topic: topic.to_owned(),
            partition,
        })
        .await
    }

    /// A Kafka producer id never handed out before: see [`AllocateProducerId`].
    ///
    /// # Errors
    /// As [`AllocateProducerId`].
    pub async fn allocate_producer_id(&self) -> Result<i64> {
        self.ask(AllocateProducerId).await
    }
}
