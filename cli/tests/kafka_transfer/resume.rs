//! An export stopped part way (deterministically by the hidden `--max-records`, as a crash
//! after those deliveries; then by SIGKILL at whatever point it has reached) and run again
//! ends with every record exactly once, in place, and the groups' offsets.

use nanokafka::{NanoKafka, TopicConfig};

use crate::harness::{
    after_round_trip, commit, export_args, import_args, produce_native, run, run_ok, snapshot,
    Process, Served, DEADLINE,
};

#[test]
fn a_stopped_then_killed_export_resumes_without_duplicates() {
    let source = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(source.path()).unwrap();
    broker
        .create_topic("big", TopicConfig::default().partitions(3))
        .unwrap();
    for partition in 0..3 {
        produce_native(&broker, "big", partition, 3000, 100);
    }
    commit(&broker, "big", "readers", 1, 1500);
    broker.shutdown().unwrap();
    let cluster = tempfile::tempdir().unwrap();
    let served = Served::start(cluster.path());

    // Stops inside partition 1, its deliveries flushed.
    let args = export_args(source.path(), &served.bootstrap, &["--max-records", "4000"]);
    let (status, log) = run(&args);
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("stopped after 4000 records"), "{log}");
    assert!(log.contains("exported big[1]: 1000 records"), "{log}");
    assert!(
        !log.contains("committed offsets"),
        "no group offsets yet: {log}"
    );

    // Killed wherever it is once it has finished a partition (possibly already done).
    let mut second = Process::nanokafka(&export_args(source.path(), &served.bootstrap, &[]));
    let line = second.wait_for_line("an 'exported big[' line", DEADLINE, |l| {
        l.starts_with("exported big[")
    });
    assert_eq!(line, "exported big[0]: 0 records (3000 by an earlier run)");
    second.signal(libc::SIGKILL);
    second.wait(DEADLINE);

    let log = run_ok(&export_args(source.path(), &served.bootstrap, &[]));
    assert!(
        log.contains("committed offsets of 1 groups (1 partitions)"),
        "{log}"
    );
    let imported = tempfile::tempdir().unwrap();
    run_ok(&import_args(&served.bootstrap, imported.path()));
    served.stop();

    let expected = after_round_trip(&snapshot(source.path()));
    let back = snapshot(imported.path());
    assert_eq!(back.count(), 9000);
    assert_eq!(back, expected);
}
