//! What an export or import cannot do safely, it refuses with a clear error, changing
//! nothing: a target partition with records the export did not write, a target written to
//! behind a finished export's back, a partition count that differs, a data directory another
//! broker has open, an import into a directory that has the topic.

use std::path::Path;
use std::time::Duration;

use nanokafka::{NanoKafka, TopicConfig};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;

use crate::harness::{export_args, import_args, produce_native, run, run_ok, snapshot, Served};

fn source_with(topics: &[(&str, u32)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    for &(topic, partitions) in topics {
        broker
            .create_topic(topic, TopicConfig::default().partitions(partitions))
            .unwrap();
        for partition in 0..partitions {
            produce_native(&broker, topic, partition, 10, 4);
        }
    }
    broker.shutdown().unwrap();
    dir
}

fn assert_refused(args: &[&str], wanted: &str) -> String {
    let (status, log) = run(args);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("refused") && log.contains(wanted),
        "{wanted:?} not in:\n{log}"
    );
    log
}

fn no_checkpoint(dir: &Path) {
    assert!(!dir.join(".export").exists(), "a checkpoint was written");
}

#[test]
fn a_first_export_into_a_partition_with_foreign_records_changes_nothing() {
    let source = source_with(&[("alpha", 1), ("orders", 2)]);
    let cluster = tempfile::tempdir().unwrap();
    let foreign = NanoKafka::open(cluster.path()).unwrap();
    foreign
        .create_topic("orders", TopicConfig::default().partitions(2))
        .unwrap();
    produce_native(&foreign, "orders", 1, 1, 1);
    foreign.shutdown().unwrap();
    let before = snapshot(cluster.path());
    let served = Served::start(cluster.path());

    let args = export_args(source.path(), &served.bootstrap, &[]);
    assert_refused(
        &args,
        "target partition orders[1] already holds records (offsets 0..1)",
    );
    served.stop();
    // Not even "alpha", which had no problem, was created.
    let after = snapshot(cluster.path());
    assert_eq!(after.topics, before.topics);
    assert_eq!(after.records, before.records);
    no_checkpoint(source.path());
}

#[test]
fn a_partition_count_that_differs_is_refused() {
    let source = source_with(&[("orders", 2)]);
    let cluster = tempfile::tempdir().unwrap();
    let other = NanoKafka::open(cluster.path()).unwrap();
    other
        .create_topic("orders", TopicConfig::default())
        .unwrap();
    other.shutdown().unwrap();
    let served = Served::start(cluster.path());
    let args = export_args(source.path(), &served.bootstrap, &[]);
    assert_refused(&args, "target topic orders has 1 partitions, the source 2");
    no_checkpoint(source.path());
}

#[test]
fn records_written_to_the_target_behind_the_exports_back_are_refused() {
    let source = source_with(&[("orders", 1)]);
    let cluster = tempfile::tempdir().unwrap();
    let served = Served::start(cluster.path());
    let args = export_args(source.path(), &served.bootstrap, &[]);
    run_ok(&args);

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &served.bootstrap)
        .create()
        .unwrap();
    producer
        .send(
            BaseRecord::<(), str>::to("orders")
                .payload("foreign")
                .partition(0),
        )
        .unwrap();
    producer.flush(Duration::from_secs(30)).unwrap();
    assert_refused(&args, "someone else wrote to the target topic");
}

#[test]
fn a_locked_source_and_an_import_over_existing_topics_are_refused() {
    let source = source_with(&[("orders", 1)]);
    let cluster = tempfile::tempdir().unwrap();
    let served = Served::start(cluster.path());

    // The source is open in another broker (this test's): export cannot take its lock.
    let open = NanoKafka::open(source.path()).unwrap();
    let (status, log) = run(&export_args(source.path(), &served.bootstrap, &[]));
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("is locked by another broker"), "{log}");
    open.shutdown().unwrap();
    run_ok(&export_args(source.path(), &served.bootstrap, &[]));

    // Importing into the source itself: it has the topic.
    let before = snapshot(source.path());
    assert_refused(
        &import_args(&served.bootstrap, source.path()),
        "already has topic orders",
    );
    let after = snapshot(source.path());
    assert_eq!(after.records, before.records);

    let (status, log) = run(&[
        "export",
        "--data-dir",
        "/nonexistent/dir",
        "--to",
        "127.0.0.1:9",
    ]);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("is not a NanoKafka data directory"), "{log}");
    assert!(!Path::new("/nonexistent/dir").exists());
    let (status, log) = run(&["export", "--data-dir", "x", "--to", "h:1", "-X", "novalue"]);
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("-X takes KEY=VALUE"), "{log}");
}
