//! I/O faults under a running broker: partition files live on a simulated disk (`SimFs`) that fails
//! writes or syncs on demand. A produce that meets a fault gets an error and is never acknowledged;
//! the partition restarts and recovers from what is on disk (a failed sync is never retried and
//! trusted); the other partitions keep serving; and nothing acknowledged is lost, even by a power
//! loss afterwards.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use nanokafka::internals::storage::fs::SharedFs;
use nanokafka::internals::storage::sim::{FaultOp, SimFs};
use nanokafka::{Error, FsyncPolicy, NanoKafka, TopicConfig};

use crate::common::read_topic;

const TOPIC: &str = "faults";

fn broker(dir: &Path, sim: &SimFs, fsync: FsyncPolicy) -> NanoKafka {
    let fs: SharedFs = Arc::new(sim.clone());
    NanoKafka::builder()
        .data_dir(dir)
        .fsync(fsync)
        .file_system(fs)
        .build()
        .unwrap()
}

/// Produces `value` to `partition`, retrying while the partition restarts.
fn produce_retrying(broker: &NanoKafka, partition: u32, value: u64) -> u64 {
    for _ in 0..1000 {
        let record = nanokafka::ProduceRecord {
            key: None,
            value: nanokafka::encode(&value).unwrap(),
        };
        match broker.produce_batch_raw(TOPIC, Some(partition), vec![record]) {
            Ok(d) => return d[0].offset,
            Err(Error::PartitionRestarted { .. } | Error::Io { .. }) => std::thread::yield_now(),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    panic!("partition {partition} did not come back");
}

fn restarts(broker: &NanoKafka, partition: usize) -> u64 {
    broker.stats().unwrap().topics[TOPIC].partitions[partition].restarts
}

#[test]
fn a_write_fault_fails_only_that_produce_and_the_partition_recovers() {
    for kind in [ErrorKind::Other, ErrorKind::StorageFull] {
        let dir = tempfile::tempdir().unwrap();
        let sim = SimFs::new(11);
        let broker = broker(dir.path(), &sim, FsyncPolicy::Never);
        broker
            .create_topic(TOPIC, TopicConfig::default().partitions(2))
            .unwrap();
        let mut acked: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
        for i in 0..20 {
            let offset = produce_retrying(&broker, (i % 2) as u32, i);
            acked.entry((i % 2) as u32).or_default().insert(offset, i);
        }
        sim.inject("faults_0", FaultOp::Write, kind, 1);
        let record = nanokafka::ProduceRecord {
            key: None,
            value: nanokafka::encode(&999u64).unwrap(),
        };
        let failed = broker.produce_batch_raw(TOPIC, Some(0), vec![record]);
        assert!(
            matches!(failed, Err(Error::Io { .. })),
            "{kind:?}: {failed:?}"
        );
        // Partition 1 never noticed.
        let offset = produce_retrying(&broker, 1, 100);
        acked.entry(1).or_default().insert(offset, 100);
        // Partition 0 restarted from disk and serves again.
        let offset = produce_retrying(&broker, 0, 101);
        acked.entry(0).or_default().insert(offset, 101);
        assert_eq!(restarts(&broker, 0), 1, "{kind:?}");
        assert_eq!(restarts(&broker, 1), 0);
        let log = read_topic(&broker, TOPIC, "check");
        for (partition, records) in &acked {
            for (offset, value) in records {
                assert_eq!(
                    log[partition].get(offset),
                    Some(value),
                    "{kind:?}: p{partition}@{offset}"
                );
            }
        }
        assert!(
            !log[&0].values().any(|&v| v == 999),
            "the failed produce was never written"
        );
    }
}

#[test]
fn a_sync_fault_under_always_is_fatal_for_the_partition_and_nothing_acknowledged_is_lost() {
    for seed in 1..=5 {
        let dir = tempfile::tempdir().unwrap();
        let sim = SimFs::new(seed);
        let mut acked: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
        {
            let broker = broker(dir.path(), &sim, FsyncPolicy::Always);
            broker
                .create_topic(TOPIC, TopicConfig::default().partitions(2))
                .unwrap();
            for i in 0..10 {
                let offset = produce_retrying(&broker, (i % 2) as u32, i);
                acked.entry((i % 2) as u32).or_default().insert(offset, i);
            }
            sim.inject("faults_0", FaultOp::Sync, ErrorKind::Other, 1);
            let record = nanokafka::ProduceRecord {
                key: None,
                value: nanokafka::encode(&999u64).unwrap(),
            };
            let failed = broker.produce_batch_raw(TOPIC, Some(0), vec![record]);
            assert!(
                matches!(failed, Err(Error::Io { .. })),
                "a failed sync is not an acknowledgement: {failed:?}"
            );
            for i in 10..30 {
                let offset = produce_retrying(&broker, (i % 2) as u32, i);
                acked.entry((i % 2) as u32).or_default().insert(offset, i);
            }
            assert_eq!(
                restarts(&broker, 0),
                1,
                "seed {seed}: the failed sync restarted the partition"
            );
            assert_eq!(restarts(&broker, 1), 0);
            // The power goes out under the running broker.
            sim.power_off();
            let _ = broker.shutdown();
        }
        sim.crash();
        let broker = broker(dir.path(), &sim, FsyncPolicy::Always);
        let log = read_topic(&broker, TOPIC, "check");
        for (partition, records) in &acked {
            for (offset, value) in records {
                assert_eq!(
                    log[partition].get(offset),
                    Some(value),
                    "seed {seed}: acknowledged p{partition}@{offset} lost"
                );
            }
        }
    }
}
