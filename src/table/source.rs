//! Where a table reads its topic: every partition from its start, in no consumer group (a
//! table commits nothing; it rebuilds itself whenever it opens). On the embedded broker it
//! reads the stored batches as a Kafka client's Fetch does, and waits for appends as its
//! long poll does; on the Kafka backend a librdkafka consumer assigned every partition does
//! the same.

use std::time::Duration;

use futures::future::select_all;

use crate::async_handle::{AsyncNanoKafka, Engine};
use crate::error::{Error, Result};
use crate::messages::OffsetSpec;
use crate::storage::format::{self, Decoded};
use crate::types::TableRecord;

/// The most bytes one read of a partition asks for (the first batch is read whole whatever
/// its size).
const READ_BYTES: usize = 1 << 20;

/// A table's reader of its topic.
pub(super) enum Source {
    Embedded(Box<Embedded>),
    #[cfg(feature = "kafka")]
    Kafka(
        std::sync::Arc<crate::kafka::table_reader::KafkaTableReader>,
        usize,
    ),
}

/// The embedded broker's topic, and where the table reads each partition next.
pub(super) struct Embedded {
    handle: AsyncNanoKafka,
    topic: String,
    positions: Vec<u64>,
}

impl Source {
    /// A reader of `topic` from the start of every partition, and where each partition
    /// ends now (what a table must read before it is restored).
    ///
    /// # Errors
    /// `UnknownTopic`, `BrokerStopped`; `Kafka` on the Kafka backend.
    pub async fn open(handle: AsyncNanoKafka, topic: &str) -> Result<(Source, Vec<u64>)> {
        match handle.engine()? {
            Engine::Embedded(_) => {
                let partitions = handle.describe_topic(topic).await?.partitions;
                let mut positions = Vec::with_capacity(partitions as usize);
                for p in 0..partitions {
                    positions.push(listed(&handle, topic, p, OffsetSpec::Earliest).await?);
                }
                let ends = end_offsets(&handle, topic).await?;
                let topic = topic.to_owned();
                let source = Embedded {
                    handle,
                    topic,
                    positions,
                };
                Ok((Source::Embedded(Box::new(source)), ends))
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => {
                let (k, name) = (k.clone(), topic.to_owned());
                let opened = crate::kafka::blocking(move || {
                    crate::kafka::table_reader::KafkaTableReader::open(&k, &name)
                });
                let (reader, ends) = opened.await?;
                Ok((Source::Kafka(std::sync::Arc::new(reader), ends.len()), ends))
            }
        }
    }

    /// The records after the last ones read, waiting up to `wait` when there are none yet;
    /// with, per partition, the offset the next read starts at.
    ///
    /// # Errors
    /// `BrokerStopped`, `UnknownTopic` (deleted); others the caller may retry.
    pub async fn read(&mut self, wait: Duration) -> Result<(Vec<TableRecord>, Vec<u64>)> {
        match self {
            Source::Embedded(e) => {
                let records = e.read(wait).await?;
                Ok((records, e.positions.clone()))
            }
            #[cfg(feature = "kafka")]
            Source::Kafka(reader, partitions) => {
                let (reader, partitions) = (reader.clone(), *partitions);
                crate::kafka::blocking(move || {
                    let records = reader.read(wait)?;
                    Ok((records, reader.positions(partitions)))
                })
                .await
            }
        }
    }
}

/// Where each partition of `topic` ends now.
///
/// # Errors
/// `UnknownTopic`, `BrokerStopped`; `Kafka` on the Kafka backend.
pub(super) async fn end_offsets(handle: &AsyncNanoKafka, topic: &str) -> Result<Vec<u64>> {
    match handle.engine()? {
        Engine::Embedded(_) => {
            let partitions = handle.describe_topic(topic).await?.partitions;
            let mut ends = Vec::with_capacity(partitions as usize);
            for p in 0..partitions {
                ends.push(listed(handle, topic, p, OffsetSpec::Latest).await?);
            }
            Ok(ends)
        }
        #[cfg(feature = "kafka")]
        Engine::Kafka(k) => {
            let (k, topic) = (k.clone(), topic.to_owned());
            crate::kafka::blocking(move || k.end_offsets(&topic)).await
        }
    }
}

async fn listed(handle: &AsyncNanoKafka, topic: &str, p: u32, spec: OffsetSpec) -> Result<u64> {
    let listed = handle.list_kafka_offset(topic, p, spec).await?;
    Ok(listed.map_or(0, |l| l.offset))
}

impl Embedded {
    async fn read(&mut self, wait: Duration) -> Result<Vec<TableRecord>> {
        let mut records = Vec::new();
        for p in 0..self.positions.len() {
            self.read_partition(p as u32, &mut records).await?;
        }
        if records.is_empty() {
            // Idle: the moment to notice partitions added since (`alter_topic`).
            let partitions = self.handle.describe_topic(&self.topic).await?.partitions;
            self.positions
                .resize((partitions as usize).max(self.positions.len()), 0);
        }
        if records.is_empty() && !wait.is_zero() && !self.positions.is_empty() {
            let waits = self.positions.iter().enumerate().map(|(p, &offset)| {
                let waited = self
                    .handle
                    .wait_for_kafka_append(&self.topic, p as u32, offset, wait);
                Box::pin(waited)
            });
            select_all(waits).await.0?;
        }
        Ok(records)
    }

    /// Appends the records of partition `p` from its position on (up to [`READ_BYTES`]).
    async fn read_partition(&mut self, p: u32, records: &mut Vec<TableRecord>) -> Result<()> {
        let position = self.positions[p as usize];
        let read = self
            .handle
            .fetch_kafka_batches(&self.topic, p, position, READ_BYTES, true)
            .await;
        let read = match read {
            Ok(read) => read,
            // Retention (`compact,delete`) removed records the table had not read yet: it
            // reads on from the log start, as a Kafka consumer resets to the earliest.
            Err(Error::OffsetOutOfRange {
                log_start_offset, ..
            }) if position < log_start_offset => {
                self.positions[p as usize] = log_start_offset;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        parse_batches(&self.topic, p, &read.bytes, position, records)?;
        self.positions[p as usize] = read.next_offset.max(position);
        Ok(())
    }
}

/// The records at or after `from` in `bytes`, whole verified batches as stored; control
/// batches are skipped.
///
/// # Errors
/// `Corrupt` when a batch does not verify (the broker verified it as it read: a bug).
pub(super) fn parse_batches(
    topic: &str,
    partition: u32,
    mut bytes: &[u8],
    from: u64,
    records: &mut Vec<TableRecord>,
) -> Result<()> {
    let corrupt = |reason: String| Error::Internal {
        actor: format!("the table of {topic}/{partition}"),
        reason,
    };
    let mut scratch = Vec::new();
    while !bytes.is_empty() {
        let header = match format::decode(bytes) {
            Decoded::Batch(header) => header,
            Decoded::Incomplete { .. } => break,
            Decoded::Invalid { reason } => return Err(corrupt(reason)),
        };
        let batch = &bytes[..header.batch_len];
        bytes = &bytes[header.batch_len..];
        if header.is_control() || header.next_offset() <= from {
            continue;
        }
        let limit = format::MAX_DECOMPRESSED_BYTES;
        let section =
            format::records_section(batch, &header, limit, &mut scratch).map_err(corrupt)?;
        format::validate_records(section, &header, |record| {
            let offset = header.base_offset + u64::from(record.offset_delta);
            if offset >= from {
                records.push(TableRecord {
                    partition,
                    offset,
                    key: record.key.map(<[u8]>::to_vec),
                    value: record.value.map(<[u8]>::to_vec),
                });
            }
        })
        .map_err(corrupt)?;
    }
    Ok(())
}
