//! Kafka producers' batches in the partition log: appending a client's batch as it was sent,
//! and the idempotent producers' state that recognises a retried batch (rebuilt on open,
//! snapshotted at rolls and clean shutdowns).

use bytes::Bytes;

use super::*;
use crate::storage::format::HEADER_LEN;

/// Where a Kafka producer's batch went: the reply to `ProduceKafkaBatch`
/// (`produce_kafka_batch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaAppend {
    pub base_offset: u64,
    pub last_offset: u64,
    /// The append time given to the batch under LogAppendTime; `None` under CreateTime.
    pub log_append_time_ms: Option<u64>,
    /// The log start offset after the append (and the retention it ran), as Kafka's
    /// produce response reports it.
    pub log_start_offset: u64,
    /// The batch was a retry of one already stored (an idempotent producer's): nothing was
    /// written, and the offsets are those of the stored batch.
    pub duplicate: bool,
}

/// A Kafka batch's append as a native one: its offsets, and the append time under
/// LogAppendTime (0 otherwise).
impl From<KafkaAppend> for AppendInfo {
    fn from(k: KafkaAppend) -> Self {
        AppendInfo {
            base_offset: k.base_offset,
            count: k.last_offset - k.base_offset + 1,
            timestamp_ms: k.log_append_time_ms.unwrap_or_default(),
        }
    }
}

/// A Kafka client's batch checked whole for an append ([`PartitionLog::check_kafka_batch`]):
/// its CRC, header and every record verified once, so that appending it later reads none of
/// its records again (a compressed batch is decompressed once, here).
///
/// It keeps the client's bytes as they came (`bytes`: the Kafka listener's request buffer,
/// shared, not copied) and a copy of their header (`head`): the append rewrites only fields
/// of the header, so the records are written from the client's buffer as they are.
#[derive(Debug)]
pub struct CheckedKafkaBatch {
    bytes: Bytes,
    head: [u8; HEADER_LEN],
    header: crate::storage::format::BatchHeader,
    /// The index of each record without a key (the key rule of a compacted topic).
    keyless: Vec<u32>,
}

impl CheckedKafkaBatch {
    /// Its size, in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    // Beside `len`, as clippy asks; only the `internals` feature's users call it.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// How many records it holds.
    pub fn records_count(&self) -> u32 {
        self.header.records_count
    }

    /// The index of each of its records that has no key, in order.
    pub fn keyless(&self) -> &[u32] {
        &self.keyless
    }
}

impl PartitionLog {
    /// Checks a Kafka client's batch whole, as [`PartitionLog::append_kafka_batch`] does
    /// before it writes, without appending it: for an owner that checks a produce before it
    /// queues it (a compacted topic's key rule needs the records), then appends it with
    /// [`PartitionLog::append_checked_kafka_batch`].
    ///
    /// # Errors
    /// `InvalidBatch`, `RecordTooLarge`, as [`PartitionLog::append_kafka_batch`].
    pub fn check_kafka_batch(&self, batch: Bytes) -> Result<CheckedKafkaBatch> {
        let checked = self.check_client_batch(&batch)?;
        let bytes = checked.stored.map_or(batch, Bytes::from);
        // Checked: a batch is longer than its header.
        let head = bytes[..HEADER_LEN].try_into().expect("a whole header");
        Ok(CheckedKafkaBatch {
            bytes,
            head,
            header: checked.header,
            keyless: checked.keyless,
        })
    }

    /// Appends a batch [`PartitionLog::check_kafka_batch`] checked, as
    /// [`PartitionLog::append_kafka_batch`] does (its records are not read again).
    ///
    /// # Errors
    /// `InvalidTimestamp`, `ProducerFenced`, `OutOfOrderSequence`, `Io`, as
    /// [`PartitionLog::append_kafka_batch`].
    pub fn append_checked_kafka_batch(
        &mut self,
        batch: &mut CheckedKafkaBatch,
        now_ms: u64,
    ) -> Result<KafkaAppend> {
        let records = &batch.bytes[HEADER_LEN..];
        self.append_verified_kafka_batch(&mut batch.head, records, batch.header, now_ms)
    }

    /// Rebuilds the producer state: the newest snapshot among `names` (the directory's
    /// entries), then the batches after it. Returns whether it removed snapshots (beyond the
    /// log end).
    ///
    /// # Errors
    /// `Io`.
    pub(super) fn load_producers(&mut self, names: &[String]) -> Result<bool> {
        let log_end = self.log_end_offset();
        let (from, state, removed) =
            producer_state::load_snapshot_among(self.fs.as_ref(), &self.dir, names, log_end)?;
        self.producers = state;
        let from = from.max(self.first_offset_on_disk());
        if from >= log_end {
            return Ok(removed);
        }
        let mut producers = std::mem::take(&mut self.producers);
        let scanned = self.scan_from(from, |frame| {
            producers.apply(&frame.header, frame.timestamp_ms);
            true
        });
        self.producers = producers;
        scanned.map(|()| removed)
    }

    /// The base offset of the first segment.
    fn first_offset_on_disk(&self) -> u64 {
        *self
            .segments
            .keys()
            .next()
            .expect("a log always has a segment")
    }

    /// Appends a Kafka client's record batch (one RecordBatch v2, as a producer sent it).
    /// Only its base offset and leader epoch are changed (they are outside its CRC); a
    /// CreateTime more than [`MAX_FUTURE_TIMESTAMP_MS`] after `now_ms` is refused, as Kafka 4
    /// refuses it by default (`log.message.timestamp.after.max.ms`); under
    /// `TimestampType::LogAppendTime` its timestamp type and max timestamp are set to the
    /// append time and its CRC recomputed, as Kafka does. A retry of an idempotent
    /// producer's batch already stored is not written again (see [`KafkaAppend::duplicate`]).
    /// Retention runs after it as after any append.
    ///
    /// Before anything is written the batch is checked whole: CRC and header, every record
    /// (decompressed within the log's cap when compressed: `format::MAX_DECOMPRESSED_BYTES` unless
    /// [`PartitionLog::set_max_decompressed_bytes`] lowered it), offset deltas
    /// `0..n`, each record's key, value and headers within the maximum record size, the batch
    /// within the log's batch size limit. A batch whose codec is not the log's is stored
    /// recompressed (see `stored_batch`), the caller's bytes left as they were.
    ///
    /// # Errors
    /// `InvalidBatch` when the bytes are not one such batch, or it is transactional or a
    /// control batch (this broker has no transactions); `InvalidTimestamp`; `RecordTooLarge`; `ProducerFenced`; `OutOfOrderSequence`;
    /// `Io` as [`PartitionLog::append`]. Nothing is written on any error.
    ///
    /// The broker checks and appends in two steps ([`PartitionLog::check_kafka_batch`], then
    /// [`PartitionLog::append_checked_kafka_batch`]); this one step serves the `internals`
    /// feature's users and tests.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn append_kafka_batch(&mut self, batch: &mut [u8], now_ms: u64) -> Result<KafkaAppend> {
        let checked = self.check_client_batch(batch)?;
        let mut stored = checked.stored;
        let batch = stored.as_deref_mut().unwrap_or(batch);
        // Checked: a batch is longer than its header.
        let (head, records) = batch.split_at_mut(HEADER_LEN);
        self.append_verified_kafka_batch(head, records, checked.header, now_ms)
    }

    /// [`PartitionLog::append_kafka_batch`] once [`check_client_batch`] verified the batch
    /// whose header is `header`: its first [`HEADER_LEN`] bytes `head`, which the append
    /// rewrites, then `records`, written as they are.
    fn append_verified_kafka_batch(
        &mut self,
        head: &mut [u8],
        records: &[u8],
        header: crate::storage::format::BatchHeader,
        now_ms: u64,
    ) -> Result<KafkaAppend> {
        let latest_allowed = now_ms.saturating_add(MAX_FUTURE_TIMESTAMP_MS);
        if self.config.timestamp_type == TimestampType::CreateTime
            && header.max_timestamp.max(0) as u64 > latest_allowed
        {
            return Err(StorageError::InvalidTimestamp {
                timestamp_ms: header.max_timestamp,
                now_ms,
                max_ahead_ms: MAX_FUTURE_TIMESTAMP_MS,
            });
        }
        if let SequenceCheck::Duplicate(stored) = self.producers.check(&header)? {
            // Under LogAppendTime the stored batch's largest timestamp is its append time,
            // the retry's answer as the first send's was (unknown from an old snapshot).
            let log_append_time_ms = match self.config.timestamp_type {
                TimestampType::CreateTime => None,
                TimestampType::LogAppendTime => u64::try_from(stored.max_timestamp).ok(),
            };
            return Ok(KafkaAppend {
                base_offset: stored.base_offset,
                last_offset: stored.last_offset,
                log_append_time_ms,
                log_start_offset: self.log_start_offset,
                duplicate: true,
            });
        }
        self.mark_unclean()?;
        let active = self.active();
        let batch_len = (head.len() + records.len()) as u64;
        if active.size() > 0 && active.size() + batch_len > self.config.segment_bytes {
            self.roll()?;
        }
        let base_offset = self.log_end_offset();
        crate::storage::format::assign_base_offset(head, base_offset);
        let mut max_timestamp = header.max_timestamp.max(0) as u64;
        let log_append_time_ms = match self.config.timestamp_type {
            TimestampType::CreateTime => None,
            TimestampType::LogAppendTime => {
                let append_time = now_ms.max(self.last_timestamp_ms);
                crate::storage::format::set_log_append_time(
                    head,
                    records,
                    i64::try_from(append_time).unwrap_or(i64::MAX),
                );
                max_timestamp = append_time;
                Some(append_time)
            }
        };
        let next_offset = base_offset + u64::from(header.last_offset_delta) + 1;
        let position = self.active().size();
        self.active_mut()
            .append_parts(&[head, records], next_offset, max_timestamp)?;
        // Checked by the validation above, so held like a native batch.
        self.hold_for_reader_at_end(&[head, records], position);
        self.last_timestamp_ms = self.last_timestamp_ms.max(max_timestamp);
        let stored = crate::storage::format::BatchHeader {
            base_offset,
            max_timestamp: i64::try_from(max_timestamp).unwrap_or(i64::MAX),
            ..header
        };
        self.producers.apply(&stored, now_ms);
        if self.config.fsync == FsyncPolicy::Always {
            self.sync_active()?;
        } else {
            self.dirty = true;
        }
        if let Err(e) = self.enforce_retention(now_ms) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "retention failed; will retry");
        }
        Ok(KafkaAppend {
            base_offset,
            last_offset: next_offset - 1,
            log_append_time_ms,
            log_start_offset: self.log_start_offset,
            duplicate: false,
        })
    }

    /// Visits verified batches holding `from` or later offsets, across segments, until `visit`
    /// says stop. Damage is stepped over (logged), never visited: the batches after it are.
    fn scan_from(
        &self,
        from: u64,
        mut visit: impl FnMut(&crate::storage::segment::ScannedFrame) -> bool,
    ) -> Result<()> {
        let (&first_base, _) = self
            .segments
            .range(..=from)
            .next_back()
            .expect("scans start at or above the log start, which is in a segment");
        for (&base, segment) in self.segments.range(first_base..) {
            let entry = if base == first_base {
                segment.lookup(from)?
            } else {
                segment.lookup(base)?
            };
            let mut stopped_early = false;
            let outcome = segment.scan_over_damage(entry.position, entry.offset, |frame| {
                if frame.next_offset <= from {
                    return true;
                }
                let go_on = visit(frame);
                stopped_early = !go_on;
                go_on
            })?;
            for damage in &outcome.damaged {
                tracing::warn!(
                    path = %segment.log_path().display(), position = damage.position,
                    first_offset = damage.first_offset, resumed_at = ?damage.resumed_at,
                    cause = %damage.reason, "stepped over damaged records"
                );
            }
            if stopped_early {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Writes the producer state as of `offset` (the log end: every batch appended so far is
    /// in it), forgetting producers silent for a day. Not yet synced: the roll's sealing, or
    /// `close`, syncs it before the older snapshots are removed.
    pub(super) fn write_producer_snapshot(&mut self, offset: u64) -> Result<()> {
        self.producers.expire();
        producer_state::write_snapshot(self.fs.as_ref(), &self.dir, offset, &self.producers)
    }
}

/// A client's batch as [`PartitionLog::check_client_batch`] found it.
struct ClientBatchCheck {
    /// The header of the batch as it will be stored.
    header: crate::storage::format::BatchHeader,
    /// The index of each record without a key.
    keyless: Vec<u32>,
    /// The batch recompressed with the log's codec, when its own differs.
    stored: Option<Vec<u8>>,
}

impl PartitionLog {
    /// Checks a client's batch before it is appended (see
    /// [`PartitionLog::append_kafka_batch`]), and recompresses it when the log's codec
    /// differs from its own.
    fn check_client_batch(&self, batch: &[u8]) -> Result<ClientBatchCheck> {
        self.check_batch_size(batch.len())?;
        let mut scratch = Vec::new();
        let (header, keyless, section) = check_client_records(
            batch,
            self.config.max_record_bytes,
            self.max_decompressed_bytes,
            &mut scratch,
        )?;
        let Some(codec) = self.recompress_to(&header) else {
            return Ok(ClientBatchCheck {
                header,
                keyless,
                stored: None,
            });
        };
        let (stored, header) = stored_batch::recompressed(&header, section, codec)?;
        self.check_batch_size(stored.len())?;
        Ok(ClientBatchCheck {
            header,
            keyless,
            stored: Some(stored),
        })
    }
}

/// Checks a client's batch: header, CRC and every record; returns its header, the index of
/// each record without a key, and its records section uncompressed (in `scratch` when the
/// batch is compressed).
fn check_client_records<'a>(
    batch: &'a [u8],
    max_record_bytes: usize,
    max_decompressed_bytes: usize,
    scratch: &'a mut Vec<u8>,
) -> Result<(crate::storage::format::BatchHeader, Vec<u32>, &'a [u8])> {
    use crate::storage::format::{decode, records_section, validate_records, Decoded};
    let invalid = |reason: String| StorageError::InvalidBatch { reason };
    let header = match decode(batch) {
        Decoded::Batch(header) => header,
        Decoded::Incomplete { batch_len } => {
            return Err(invalid(format!(
                "{} bytes, but the batch header says {}",
                batch.len(),
                batch_len.map_or("more".to_owned(), |l| l.to_string())
            )))
        }
        Decoded::Invalid { reason } => return Err(invalid(reason)),
    };
    if header.batch_len != batch.len() {
        return Err(invalid(format!(
            "{} bytes after the batch",
            batch.len() - header.batch_len
        )));
    }
    if !header.is_contiguous() {
        // Only the log cleaner leaves gaps in a batch; a producer's batch holds every offset.
        return Err(invalid(format!(
            "{} records but a last offset delta of {}",
            header.records_count, header.last_offset_delta
        )));
    }
    if header.is_transactional() || header.is_control() {
        return Err(invalid(
            "transactional and control batches are not supported".into(),
        ));
    }
    let section =
        records_section(batch, &header, max_decompressed_bytes, scratch).map_err(invalid)?;
    let (mut largest, mut index, mut keyless) = (0usize, 0u32, Vec::new());
    validate_records(section, &header, |record| {
        largest = largest.max(record.payload_len());
        if record.key.is_none() {
            keyless.push(index);
        }
        index += 1;
    })
    .map_err(invalid)?;
    if largest > max_record_bytes {
        return Err(StorageError::RecordTooLarge {
            size: largest,
            max: max_record_bytes,
        });
    }
    Ok((header, keyless, section))
}
