//! `FsyncPolicy::Interval` syncs run off the I/O thread: while one partition's `fdatasync` is
//! stuck (a disk writing back gigabytes), the partitions and coordinators sharing its I/O
//! thread, and the partition itself, keep serving; the sync then completes, and what it
//! counts as synced is what was written before it began; a failed one still restarts the
//! partition, and nothing acknowledged and synced is lost.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanokafka::internals::storage::fs::SharedFs;
use nanokafka::internals::storage::sim::{FaultOp, GatedFs, SimFs, SyncGate};
use nanokafka::{Error, FsyncPolicy, NanoKafka, ProduceRecord, TopicConfig};

use crate::common::read_topic;

const TOPIC: &str = "interval";
/// Partition 0's first segment: the only file whose syncs the tests hold or fail.
const P0_SEGMENT: &str = "interval_0/00000000000000000000.log";
const DEADLINE: Duration = Duration::from_secs(20);
/// Short, so that the syncs come fast; the tests wait for conditions, never for this.
const EVERY: Duration = Duration::from_millis(10);

/// One I/O thread: both partitions and the group coordinator share it.
fn broker(dir: &Path, fs: SharedFs) -> NanoKafka {
    NanoKafka::builder()
        .data_dir(dir)
        .fsync(FsyncPolicy::Interval(EVERY))
        .io_threads(1)
        .file_system(fs)
        .build()
        .unwrap()
}

fn produce(broker: &NanoKafka, partition: u32, values: &[u64]) -> Vec<u64> {
    let records = values
        .iter()
        .map(|v| ProduceRecord {
            key: None,
            value: nanokafka::encode(v).unwrap(),
        })
        .collect();
    broker
        .produce_batch_raw(TOPIC, Some(partition), records)
        .unwrap()
        .iter()
        .map(|d| d.offset)
        .collect()
}

/// Runs `f` on another thread and returns its result, or `None` if it has not answered
/// within the deadline (it is then stuck behind something: the test fails, not hangs).
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(DEADLINE).ok()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn stat(broker: &NanoKafka, partition: usize) -> (u64, u64) {
    let stats = broker.stats().unwrap();
    let p = &stats.topics[TOPIC].partitions[partition];
    (p.fsyncs, p.restarts)
}

/// Opens the gate when dropped: a failed assertion must not leave the broker's shutdown
/// waiting for a sync held at it.
struct OpenOnDrop(Arc<SyncGate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

#[test]
fn a_stuck_interval_sync_stalls_nothing_on_its_io_thread() {
    let dir = tempfile::tempdir().unwrap();
    let gate = SyncGate::new(P0_SEGMENT);
    let _open_at_the_end = OpenOnDrop(gate.clone());
    let fs: SharedFs = Arc::new(GatedFs::new(Arc::new(SimFs::new(7)), gate.clone()));
    let broker = broker(dir.path(), fs);
    let _open_before_shutdown = OpenOnDrop(gate.clone());
    broker
        .create_topic(TOPIC, TopicConfig::default().partitions(2))
        .unwrap();
    gate.close();
    produce(&broker, 0, &[1]);
    assert!(
        gate.wait_for_waiting(1, DEADLINE),
        "partition 0's interval sync reached its fdatasync"
    );

    // Its fdatasync is stuck. Everything on the same I/O thread is still served: produces
    // to the other partition and to this one, and polls (coordinator, then both partitions).
    let b = broker.clone();
    let served = within(move || {
        produce(&b, 1, &[10, 11]);
        produce(&b, 0, &[2]);
        read_topic(&b, TOPIC, "during")
    })
    .expect("produces and polls are answered while a sync is stuck");
    assert_eq!(served[&0].values().copied().collect::<Vec<_>>(), [1, 2]);
    assert_eq!(served[&1].values().copied().collect::<Vec<_>>(), [10, 11]);
    assert_eq!(stat(&broker, 0).0, 0, "the stuck sync is not done");
    // (Partition 1's own sync waits behind it: the broker has one sync thread.)

    // Released, it completes (and is counted).
    gate.let_through(1);
    wait_for("the released sync to complete", || stat(&broker, 0).0 >= 1);
    // It covered only what was written before it began: record 2, written during it, keeps
    // the partition dirty, so another sync comes without any new produce.
    assert!(
        gate.wait_for_waiting(1, DEADLINE),
        "the record written during the sync gets a sync of its own"
    );
    assert_eq!(gate.passed(), 1);
    gate.open();
    wait_for("the second sync, and partition 1's, to complete", || {
        stat(&broker, 0).0 >= 2 && stat(&broker, 1).0 >= 1
    });
    assert_eq!(stat(&broker, 0).1, 0, "no restart");
    broker.shutdown().unwrap();
}

#[test]
fn a_failed_interval_sync_restarts_the_partition_and_loses_nothing_synced() {
    let dir = tempfile::tempdir().unwrap();
    let sim = SimFs::new(9);
    let fs: SharedFs = Arc::new(sim.clone());
    let mut synced = BTreeMap::new();
    {
        let broker = broker(dir.path(), fs.clone());
        broker
            .create_topic(TOPIC, TopicConfig::default().partitions(2))
            .unwrap();
        // Nothing is dirty before these, so the first sync of each partition covers them.
        for (partition, values) in [(0u32, [1u64, 2, 3]), (1, [10, 11, 12])] {
            let offsets = produce(&broker, partition, &values);
            synced.insert(
                partition,
                offsets.into_iter().zip(values).collect::<Vec<_>>(),
            );
        }
        wait_for("the first syncs", || {
            stat(&broker, 0).0 >= 1 && stat(&broker, 1).0 >= 1
        });

        sim.inject(P0_SEGMENT, FaultOp::Sync, ErrorKind::Other, 1);
        produce(&broker, 0, &[4]);
        wait_for("the failed sync to restart partition 0", || {
            stat(&broker, 0).1 == 1
        });
        assert_eq!(stat(&broker, 1).1, 0, "partition 1 is not restarted");

        // The reopened partition serves, with every acknowledged record.
        let deadline = Instant::now() + DEADLINE;
        let record = || ProduceRecord {
            key: None,
            value: nanokafka::encode(&5u64).unwrap(),
        };
        while let Err(e) = broker.produce_batch_raw(TOPIC, Some(0), vec![record()]) {
            assert!(matches!(e, Error::PartitionRestarted { .. }), "{e}");
            assert!(Instant::now() < deadline, "partition 0 did not come back");
        }
        let log = read_topic(&broker, TOPIC, "after-restart");
        assert_eq!(
            log[&0].values().copied().collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert_eq!(stat(&broker, 0).1, 1, "one failed sync, one restart");
        // The power goes out under the running broker.
        sim.power_off();
        let _ = broker.shutdown();
    }
    sim.crash();
    let broker = broker(dir.path(), fs);
    let log = read_topic(&broker, TOPIC, "after-power-loss");
    for (partition, records) in &synced {
        for (offset, value) in records {
            assert_eq!(
                log[partition].get(offset),
                Some(value),
                "acknowledged and synced p{partition}@{offset} lost"
            );
        }
    }
}
