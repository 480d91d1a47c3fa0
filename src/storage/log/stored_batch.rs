//! The form a batch is stored in: the log's codec ([`LogConfig::recompress`], a topic's
//! `compression.type`) and its batch size limit ([`LogConfig::max_batch_bytes`], a topic's
//! `max.message.bytes`), applied to every append as Kafka's broker applies them.
//!
//! A batch whose codec differs from the log's is stored recompressed: the same header
//! (producer id, epoch and sequence, timestamps, offsets and count) with the log's codec in
//! its attributes, the records section compressed again (from its decompressed bytes, which
//! the append's check has already), batch length and CRC recomputed. The size limit is
//! checked on the batch as produced and again as it will be stored, since recompression can
//! make it larger; either refusal writes nothing.

use super::*;
use crate::storage::compression::{self, Compression};
use crate::storage::format::{encode_batch, BatchHeader, HEADER_LEN};

/// Attributes bits 0-2: the codec.
const CODEC_BITS: i16 = 0b111;

impl PartitionLog {
    /// Checks a batch of `len` bytes against the log's batch size limit.
    ///
    /// # Errors
    /// `RecordTooLarge` naming the size and the limit.
    pub(super) fn check_batch_size(&self, len: usize) -> Result<()> {
        check_batch_size(self.config.max_batch_bytes, len)
    }

    /// The log's codec when `header`'s differs from it: what a batch must be recompressed to.
    pub(super) fn recompress_to(&self, header: &BatchHeader) -> Option<Compression> {
        let target = self.config.recompress?;
        match header.compression() {
            Ok(codec) if codec == target => None,
            _ => Some(target),
        }
    }
}

/// Checks a batch of `len` bytes against `max` (`None`: no limit).
///
/// # Errors
/// `RecordTooLarge` naming the size and the limit.
pub(super) fn check_batch_size(max: Option<usize>, len: usize) -> Result<()> {
    match max {
        Some(max) if len > max => Err(StorageError::RecordTooLarge { size: len, max }),
        _ => Ok(()),
    }
}

/// The batch `header` describes, with `section` (its records, uncompressed) compressed with
/// `codec`, and its header.
///
/// # Errors
/// `InvalidBatch` when the codec library fails (none does on any input we know of).
pub(super) fn recompressed(
    header: &BatchHeader,
    section: &[u8],
    codec: Compression,
) -> Result<(Vec<u8>, BatchHeader)> {
    let records = compression::compress(codec, section)
        .map_err(|reason| StorageError::InvalidBatch { reason })?;
    let header = BatchHeader {
        attributes: (header.attributes & !CODEC_BITS) | codec.attribute_bits(),
        ..*header
    };
    let batch = encode_batch(&header, &records);
    let header = BatchHeader::parse(&batch).expect("an encoded batch has a header");
    Ok((batch, header))
}

/// A sealed native batch (records uncompressed) compressed with `codec`.
///
/// # Errors
/// As [`recompressed`].
pub(super) fn compressed_native(sealed: &[u8], codec: Compression) -> Result<Vec<u8>> {
    let header = BatchHeader::parse(sealed).expect("a sealed batch has a header");
    recompressed(&header, &sealed[HEADER_LEN..], codec).map(|(batch, _)| batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::format::{encode_client_batch, ClientRecord};

    fn log_with(dir: &Path, recompress: Option<Compression>, max: Option<usize>) -> PartitionLog {
        let config = LogConfig {
            recompress,
            max_batch_bytes: max,
            ..LogConfig::default()
        };
        PartitionLog::open(dir, config, 0).unwrap().0
    }

    fn client_batch(n: usize) -> Vec<u8> {
        let values: Vec<Vec<u8>> = (0..n).map(|i| vec![b'v'; 50 + i]).collect();
        let records: Vec<ClientRecord<'_>> = values
            .iter()
            .map(|v| ClientRecord {
                timestamp_ms: 1_000,
                key: Some(b"k"),
                value: Some(v),
                headers: &[],
            })
            .collect();
        encode_client_batch(&records)
    }

    /// Every stored batch's codec, and every record's value, as a reader gets them.
    fn stored(log: &mut PartitionLog) -> (Vec<Compression>, Vec<Vec<u8>>) {
        let bytes = log.read_batches(0, 1 << 20, true).unwrap().bytes;
        let mut codecs = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let header = BatchHeader::parse(&bytes[at..]).unwrap();
            codecs.push(header.compression().unwrap());
            at += header.batch_len;
        }
        let values = log.read(0, 1000, 1 << 20).unwrap();
        (codecs, values.iter().map(|r| r.value.to_vec()).collect())
    }

    #[test]
    fn a_log_with_a_codec_stores_client_and_native_batches_with_it_and_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_with(dir.path(), Some(Compression::Zstd), None);
        let mut plain = client_batch(20);
        let original = plain.clone();
        let appended = log.append_kafka_batch(&mut plain, 2_000).unwrap();
        assert_eq!((appended.base_offset, appended.last_offset), (0, 19));
        assert_eq!(
            plain, original,
            "the caller's bytes are not the stored ones"
        );
        let mut checked = log.check_kafka_batch(client_batch(20).into()).unwrap();
        assert!(
            checked.len() < original.len(),
            "compressed: {}",
            checked.len()
        );
        log.append_checked_kafka_batch(&mut checked, 2_000).unwrap();
        let mut native = RecordBatch::new();
        native.push_raw(None, &[b'n'; 200]);
        log.append_batch(&mut native, 2_000).unwrap();
        let (codecs, values) = stored(&mut log);
        assert_eq!(codecs, [Compression::Zstd; 3]);
        let expected: Vec<Vec<u8>> = (0..2)
            .flat_map(|_| (0..20).map(|i| vec![b'v'; 50 + i]))
            .chain([vec![b'n'; 200]])
            .collect();
        assert_eq!(values, expected);
        // Reopened, the stored batches verify as they are.
        drop(log);
        let mut log = log_with(dir.path(), Some(Compression::Zstd), None);
        assert_eq!(stored(&mut log).1, expected);
    }

    #[test]
    fn uncompressed_decompresses_and_producer_keeps_the_producers_codec() {
        let gzip = compressed_native(&client_batch(5), Compression::Gzip).unwrap();
        for (recompress, expected) in [
            (Some(Compression::None), Compression::None),
            (None, Compression::Gzip),
            (Some(Compression::Lz4), Compression::Lz4),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut log = log_with(dir.path(), recompress, None);
            log.append_kafka_batch(&mut gzip.clone(), 2_000).unwrap();
            let (codecs, values) = stored(&mut log);
            assert_eq!(codecs, [expected], "{recompress:?}");
            assert_eq!(values.len(), 5);
        }
    }

    #[test]
    fn a_batch_over_the_logs_limit_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let small = client_batch(1);
        let mut log = log_with(dir.path(), None, Some(small.len()));
        log.append_kafka_batch(&mut small.clone(), 2_000).unwrap();
        let large = client_batch(3);
        for refused in [
            log.check_kafka_batch(large.clone().into()).map(|_| ()),
            log.append_kafka_batch(&mut large.clone(), 2_000)
                .map(|_| ()),
        ] {
            assert!(
                matches!(refused, Err(StorageError::RecordTooLarge { size, max })
                    if size == large.len() && max == small.len()),
                "{refused:?}"
            );
        }
        let mut native = RecordBatch::new();
        native.push_raw(None, &[0; 200]);
        assert!(matches!(
            log.append_batch(&mut native, 2_000),
            Err(StorageError::RecordTooLarge { .. })
        ));
        assert_eq!(log.log_end_offset(), 1);
        // The limit holds for the batch as stored: gzip makes incompressible bytes larger.
        let noise: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let noisy = encode_client_batch(&[ClientRecord {
            timestamp_ms: 1_000,
            key: None,
            value: Some(&noise),
            headers: &[],
        }]);
        let dir = tempfile::tempdir().unwrap();
        let mut log = log_with(dir.path(), Some(Compression::Gzip), Some(noisy.len()));
        assert!(matches!(
            log.append_kafka_batch(&mut noisy.clone(), 2_000),
            Err(StorageError::RecordTooLarge { size, .. }) if size > noisy.len()
        ));
        assert_eq!(log.log_end_offset(), 0);
    }
}
