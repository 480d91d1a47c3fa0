//! A data directory exported to a Kafka cluster (`nanokafka serve`, a process of its own) and
//! imported back into a third directory keeps every record (partition, offset, timestamp,
//! key, null or empty value, headers in order with null values and repeated keys), every
//! group's committed offset and every topic's partition count and Kafka configs (a compacted
//! topic's policy and compaction settings among them).

use std::time::Duration;

use nanokafka::transfer::{export, import, ExportOptions, ImportOptions, Progress};
use nanokafka::NanoKafka;

use crate::harness::{
    after_round_trip, export_args, import_args, run_ok, seed_source, snapshot, Served,
};

#[test]
fn export_then_import_keeps_every_record_and_committed_offset() {
    let source = tempfile::tempdir().unwrap();
    let cluster = tempfile::tempdir().unwrap();
    let imported = tempfile::tempdir().unwrap();
    seed_source(source.path());
    let served = Served::start(cluster.path());

    let log = run_ok(&export_args(source.path(), &served.bootstrap, &[]));
    assert!(log.contains("created topic orders (3 partitions)"), "{log}");
    assert!(log.contains("exported orders[2]: 75 records"), "{log}");
    assert!(
        log.contains("note: topic retained: retention_size 5 records not carried over"),
        "{log}"
    );
    let last = log.lines().last().unwrap();
    assert!(
        last.starts_with(
            "exported 143 records of 7 partitions in 4 topics (4 created), offsets of 2 groups"
        ),
        "{last}"
    );
    let log = run_ok(&import_args(&served.bootstrap, imported.path()));
    assert!(
        log.lines()
            .last()
            .unwrap()
            .starts_with("imported 143 records"),
        "{log}"
    );
    served.stop();

    let source = snapshot(source.path());
    assert_eq!(source.count(), 143);
    let back = snapshot(imported.path());
    assert_eq!(back, after_round_trip(&source));
    // The offsets of a log that starts at 0 are unchanged, committed ones included.
    assert_eq!(
        back.records[&("orders".to_owned(), 2)],
        source.records[&("orders".to_owned(), 2)]
    );

    // The configs both sides have came back; NanoKafka's own stayed behind.
    let broker = NanoKafka::open(imported.path()).unwrap();
    let configs = broker.list_topics().unwrap();
    assert_eq!(configs["orders"].retention_ms, Some(30 * 24 * 3600 * 1000));
    assert_eq!(configs["orders"].segment_bytes, 1 << 20);
    assert_eq!(configs["retained"].retention_size, None);
    let compacted = &configs["empty"];
    assert_eq!(compacted.cleanup_policy, nanokafka::CleanupPolicy::Compact);
    assert_eq!(compacted.min_compaction_lag_ms, 60_000);
    assert_eq!(compacted.min_cleanable_dirty_ratio.to_string(), "0.25");
    broker.shutdown().unwrap();
}

#[test]
fn the_library_reports_progress_and_a_second_export_copies_nothing() {
    let source = tempfile::tempdir().unwrap();
    let cluster = tempfile::tempdir().unwrap();
    seed_source(source.path());
    let served = Served::start(cluster.path());
    let options = ExportOptions::new(source.path(), &served.bootstrap);

    let mut done = Vec::new();
    let summary = export(&options, |p| {
        if let Progress::PartitionDone {
            topic,
            partition,
            copied,
            already,
        } = *p
        {
            done.push((topic.to_owned(), partition, copied, already));
        }
    })
    .unwrap();
    assert_eq!(
        (summary.records, summary.partitions, summary.groups),
        (143, 7, 2)
    );
    assert_eq!((summary.offsets, summary.topics_created), (4, 4));
    assert!(done.contains(&("orders".to_owned(), 0, 40, 0)), "{done:?}");

    let again = export(&options, |_| {}).unwrap();
    assert_eq!((again.records, again.already_copied), (0, 143));
    assert_eq!((again.topics_created, again.groups), (0, 2));

    let imported = tempfile::tempdir().unwrap();
    let options = ImportOptions::new(&served.bootstrap, imported.path())
        .request_timeout(Duration::from_secs(20));
    let summary = import(&options, |_| {}).unwrap();
    assert_eq!(
        (summary.records, summary.groups, summary.offsets),
        (143, 2, 4)
    );
    served.stop();
    assert_eq!(
        snapshot(imported.path()),
        after_round_trip(&snapshot(source.path()))
    );
}

/// `--json`: export and import also print their final count as one JSON document on stdout.
#[test]
fn export_and_import_report_their_count_as_json() {
    let source = tempfile::tempdir().unwrap();
    let cluster = tempfile::tempdir().unwrap();
    let imported = tempfile::tempdir().unwrap();
    seed_source(source.path());
    let served = Served::start(cluster.path());
    let report = |args: &[&str]| -> serde_json::Value {
        let output = std::process::Command::new(crate::harness::BIN)
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let exported = report(&export_args(source.path(), &served.bootstrap, &["--json"]));
    assert_eq!(exported["exported"], served.bootstrap.as_str());
    assert_eq!(exported["complete"], true);
    assert_eq!(exported["records"], 143);
    assert_eq!(exported["topics_created"], 4);
    let mut args = import_args(&served.bootstrap, imported.path());
    args.push("--json");
    let back = report(&args);
    assert_eq!(back["records"], 143);
    served.stop();
}
