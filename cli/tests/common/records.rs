//! Reading a data directory's records back as they are stored (keys, values, tombstones,
//! headers), at positions: no group is joined, nothing is committed.

#![allow(dead_code)] // each test binary uses the part it needs

use std::path::Path;

use nanokafka::internals::inspect::{batch_records, StoredRecord};
use nanokafka::NanoKafka;

/// Every record of `topic` in `dir`, by partition, read with the embedded broker at
/// positions (no group involved).
pub fn records(dir: &Path, topic: &str) -> Vec<(u32, StoredRecord)> {
    let broker = NanoKafka::builder().data_dir(dir).build().expect("open");
    let stats = broker.stats().expect("stats");
    let mut all = Vec::new();
    for p in &stats.topics[topic].partitions {
        let mut offset = p.log_start_offset;
        while offset < p.log_end_offset {
            let read = futures::executor::block_on(broker.async_handle().fetch_kafka_batches(
                topic,
                p.partition,
                offset,
                1 << 20,
                true,
            ))
            .expect("read");
            for record in batch_records(&read.bytes).expect("batches decode") {
                if record.offset >= offset {
                    all.push((p.partition, record));
                }
            }
            offset = read.next_offset;
        }
    }
    broker.shutdown().expect("shutdown");
    all
}
