//! `delete_records` (Kafka's DeleteRecords): the log start moves, groups read and count lag
//! from it, a reopen keeps it, offsets past the log end are refused with nothing changed, and
//! a producer parked by `Backpressure::Block` gets the room it frees.

use std::sync::mpsc;
use std::time::Duration;

use nanokafka::{Backpressure, Error, NanoKafka, TopicConfig};

use crate::common::{log_end, partition_stats};

#[test]
fn deleted_records_are_gone_for_every_group_and_stay_gone_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    for i in 0..10u64 {
        broker.produce_keyed("t", "k", &i).unwrap();
    }
    let p = broker.produce_keyed("t", "k", &10u64).unwrap().partition;
    broker.join_group("t", "g", "m").unwrap();

    let refused = broker.delete_records("t", p, 12);
    assert!(
        matches!(
            refused,
            Err(Error::OffsetOutOfRange {
                offset: 12,
                log_end_offset: 11,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(partition_stats(&broker, "t", p).log_start_offset, 0);
    assert!(matches!(
        broker.delete_records("t", 9, 0),
        Err(Error::UnknownPartition { partition: 9, .. })
    ));

    assert_eq!(broker.delete_records("t", p, 7).unwrap(), 7);
    assert_eq!(
        broker.delete_records("t", p, 3).unwrap(),
        7,
        "never backwards"
    );
    assert_eq!(broker.lag("t", "g").unwrap()[&p], 4);
    let first = broker.poll::<u64>("t", "g", "m").unwrap().unwrap();
    assert_eq!((first.offset, first.value), (7, 7));
    broker.commit("t", "g", p, first.offset).unwrap();
    broker.shutdown().unwrap();

    let broker = NanoKafka::open(dir.path()).unwrap();
    let stats = partition_stats(&broker, "t", p);
    assert_eq!((stats.log_start_offset, stats.log_end_offset), (7, 11));
    assert_eq!(broker.lag("t", "g").unwrap()[&p], 3);
    // Everything: the log end.
    assert_eq!(broker.delete_records("t", p, 11).unwrap(), 11);
    assert_eq!(broker.lag("t", "g").unwrap()[&p], 0);
    broker.join_group("t", "g", "m").unwrap();
    assert!(broker.poll::<u64>("t", "g", "m").unwrap().is_none());
}

#[test]
fn deleting_records_admits_a_producer_parked_by_backpressure() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let config = TopicConfig::default()
        .max_size(1)
        .backpressure(Backpressure::Block);
    broker.create_topic("t", config).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    broker.produce("t", &0u64).unwrap();

    let (done_tx, done_rx) = mpsc::channel();
    let producer = {
        let broker = broker.clone();
        std::thread::spawn(move || done_tx.send(broker.produce("t", &1u64)).unwrap())
    };
    // The partition is full: the producer parks until something frees room.
    let parked = done_rx.recv_timeout(Duration::from_millis(300));
    assert!(
        matches!(parked, Err(mpsc::RecvTimeoutError::Timeout)),
        "it did not park: {parked:?}"
    );
    assert_eq!(log_end(&broker, "t", 0), 1);

    broker.delete_records("t", 0, 1).unwrap();
    let delivery = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("released by the deletion")
        .expect("the produce succeeds");
    assert_eq!(delivery.offset, 1);
    producer.join().unwrap();
}
