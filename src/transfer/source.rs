//! The source of an export: the data directory opened with an embedded broker, which holds
//! the directory's lock for the whole export (no other broker writes it meanwhile), read as
//! the stored Kafka batches a Kafka client's Fetch gets, decoded here record by record (null
//! values stay null, header keys stay bytes).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::handle::NanoKafka;
use crate::storage::data_dir::FORMAT_FILE;
use crate::storage::format::MAX_DECOMPRESSED_BYTES;
use crate::storage::format::{self, Decoded, Headers};
use crate::types::PartitionStats;

/// How many bytes of batches one read asks for (a larger batch still comes whole).
const READ_BYTES: usize = 1 << 20;

/// A topic of the source: its config and its partitions' bounds and committed offsets, as
/// they were when the export opened the directory.
#[derive(Debug)]
pub struct SourceTopic {
    pub config: TopicConfig,
    pub partitions: Vec<PartitionStats>,
}

/// The data directory being exported.
pub struct Source {
    broker: NanoKafka,
    pub topics: BTreeMap<String, SourceTopic>,
}

/// One stored record.
#[derive(Debug, Clone, Copy)]
pub struct SourceRecord<'a> {
    pub offset: u64,
    /// As stored: the producer's (or the broker's) milliseconds, -1 for none.
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Headers<'a>,
}

impl Source {
    /// Opens `data_dir`, which must already be a data directory.
    ///
    /// # Errors
    /// `InvalidArgument` when it is not one; `DataDirLocked` when a broker has it open; as
    /// `NanoKafkaBuilder::build`.
    pub fn open(data_dir: &Path) -> Result<Source> {
        if !data_dir.join(FORMAT_FILE).is_file() {
            return Err(Error::InvalidArgument {
                name: "data_dir",
                reason: format!(
                    "{} is not a NanoKafka data directory (it has no {FORMAT_FILE} file)",
                    data_dir.display()
                ),
            });
        }
        let broker = NanoKafka::builder().data_dir(data_dir).build()?;
        let configs = broker.list_topics()?;
        let mut stats = broker.stats()?.topics;
        let mut topics = BTreeMap::new();
        for (name, config) in configs {
            let partitions = stats
                .remove(&name)
                .map(|s| s.partitions)
                .unwrap_or_default();
            if let Some(failed) = partitions.iter().find(|p| p.failed.is_some()) {
                return Err(Error::PartitionFailed {
                    topic: name,
                    partition: failed.partition,
                    reason: failed.failed.clone().unwrap_or_default(),
                });
            }
            topics.insert(name, SourceTopic { config, partitions });
        }
        Ok(Source { broker, topics })
    }

    /// Whole stored batches of `topic[partition]` from the one holding `offset`, and the
    /// offset after them.
    ///
    /// # Errors
    /// As `FetchKafkaBatches` (`OffsetOutOfRange` once retention passed `offset`).
    pub fn read(&self, topic: &str, partition: u32, offset: u64) -> Result<(Vec<u8>, u64)> {
        let read = self.broker.call_async(
            |h| h.fetch_kafka_batches(topic, partition, offset, READ_BYTES, true),
            Duration::ZERO,
        )?;
        Ok((read.bytes, read.next_offset))
    }

    /// Closes the broker and releases the directory's lock.
    ///
    /// # Errors
    /// As `NanoKafka::shutdown`.
    pub fn close(self) -> Result<()> {
        self.broker.shutdown()
    }
}

/// Calls `visit` with each record of the batches in `bytes`, in offset order, until it
/// returns `false`.
///
/// # Errors
/// `Corrupt` for bytes that are not whole, valid batches (the broker checked them as it read
/// them, so only damage in memory gets here); `visit`'s errors.
pub fn each_record(
    at: (&str, u32),
    bytes: &[u8],
    mut visit: impl FnMut(&SourceRecord<'_>) -> Result<bool>,
) -> Result<()> {
    let corrupt = |reason: String| Error::Corrupt {
        path: format!("{}[{}]", at.0, at.1).into(),
        position: 0,
        reason,
    };
    let mut at_byte = 0;
    while at_byte < bytes.len() {
        let header = match format::decode(&bytes[at_byte..]) {
            Decoded::Batch(header) => header,
            other => return Err(corrupt(format!("a read batch does not decode: {other:?}"))),
        };
        let batch = &bytes[at_byte..at_byte + header.batch_len];
        at_byte += header.batch_len;
        if header.is_control() {
            continue; // transaction markers take offsets but hold no records
        }
        let mut scratch = Vec::new();
        let section = format::records_section(batch, &header, MAX_DECOMPRESSED_BYTES, &mut scratch)
            .map_err(corrupt)?;
        let mut records = Vec::with_capacity(header.records_count as usize);
        format::validate_records(section, &header, |r| {
            records.push(SourceRecord {
                offset: header.base_offset + u64::from(r.offset_delta),
                timestamp_ms: header.record_timestamp(r.timestamp_delta),
                key: r.key,
                value: r.value,
                headers: r.headers,
            });
        })
        .map_err(corrupt)?;
        for record in &records {
            if !visit(record)? {
                return Ok(());
            }
        }
    }
    Ok(())
}
