//! Idempotent producers' state across power losses: what the snapshots and the log left on
//! a simulated disk must still recognise a retry and accept the next batch.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::storage::format::{encode_client_batch, ClientRecord};
use crate::storage::producer_state::SequenceCheck;
use crate::storage::sim::SimFs;

const DIR: &str = "/data/t_0";
const PRODUCER_ID: i64 = 7;

/// A one-record batch of producer [`PRODUCER_ID`] (epoch 0) with sequence `sequence`.
fn idempotent_batch(sequence: i32) -> Vec<u8> {
    let value = [sequence as u8; 300];
    let record = ClientRecord {
        timestamp_ms: 1_000,
        key: None,
        value: Some(&value),
        headers: &[],
    };
    let mut batch = encode_client_batch(&[record]);
    batch[43..51].copy_from_slice(&PRODUCER_ID.to_be_bytes());
    batch[51..53].copy_from_slice(&0i16.to_be_bytes());
    batch[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

fn open(sim: &SimFs, config: LogConfig) -> PartitionLog {
    let fs: SharedFs = Arc::new(sim.clone());
    PartitionLog::open_with(&fs, Path::new(DIR), config, 1_000)
        .unwrap()
        .0
}

/// Every append is acknowledged synced; segments of 4 KiB (about ten batches) roll often,
/// and bytes retention keeps about two batches.
#[test]
fn a_power_loss_after_rolls_and_retention_keeps_the_producers_sequence() {
    let config = LogConfig {
        segment_bytes: 4096,
        fsync: FsyncPolicy::Always,
        retention: RetentionPolicy {
            bytes: Some(1000),
            ..RetentionPolicy::default()
        },
        ..LogConfig::default()
    };
    for seed in 0..40 {
        let sim = SimFs::new(seed);
        let mut log = open(&sim, config);
        let batches = 35 + seed as i32 % 10;
        for sequence in 0..batches {
            log.append_kafka_batch(&mut idempotent_batch(sequence), 1_000)
                .unwrap();
        }
        let last_offset = log.log_end_offset() - 1;
        // Other records after a roll, and rolls after them: retention deletes every segment
        // holding the producer's batches (a later roll's directory sync makes that durable),
        // so only the snapshots remember its sequence.
        log.roll().unwrap();
        let mut other = encode_client_batch(&[ClientRecord {
            timestamp_ms: 1_000,
            key: None,
            value: Some(&[0; 400]),
            headers: &[],
        }]);
        for _ in 0..15 {
            log.append_kafka_batch(&mut other, 1_000).unwrap();
        }
        assert!(log.log_start_offset() > last_offset, "seed {seed}");
        let log_end = log.log_end_offset();
        sim.crash();
        drop(log);
        let log = open(&sim, config);
        assert_eq!(log.log_end_offset(), log_end, "seed {seed}");
        let last = idempotent_batch(batches - 1);
        let next = idempotent_batch(batches);
        let header = |batch: &[u8]| match crate::storage::format::decode(batch) {
            crate::storage::format::Decoded::Batch(header) => header,
            other => panic!("{other:?}"),
        };
        assert!(
            matches!(
                log.producers.check(&header(&last)),
                Ok(SequenceCheck::Duplicate(stored)) if stored.last_offset == last_offset
            ),
            "seed {seed}: the retry of the last batch must be a duplicate"
        );
        assert_eq!(
            log.producers
                .check(&header(&next))
                .map_err(|e| e.to_string()),
            Ok(SequenceCheck::Append),
            "seed {seed}: the next batch must follow"
        );
    }
}
