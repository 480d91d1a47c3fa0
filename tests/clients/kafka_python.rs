//! kafka-python against the listener: its default (idempotent) producer, a group consumer
//! committing by hand that resumes from its commits after the broker restarts, its fetch
//! sessions, and a static member restarted without a rebalance.

use std::time::{Duration, Instant};

use crate::clients::{self, Client};
use crate::common::{
    args, assert_consecutive_per_partition, assert_read_back_natively, native_records,
    next_offsets, script_commits, script_records, Broker, RUN,
};

fn producer() -> Option<Client> {
    clients::python("kafka_python_produce.py")
}

#[test]
fn idempotent_producer_reads_back_natively() {
    let Some(produce) = producer() else { return };
    let b = Broker::start();
    b.create("kp", 3);
    let produced = produce.run_json(
        &args(
            &b.bootstrap,
            "kp",
            &["--count", "30", "--compression", "gzip"],
        ),
        RUN,
    );
    assert_eq!(produced["idempotent"], true, "{produced}");
    assert_read_back_natively(&b, "kp", &produced, "r");
}

/// A group consumer commits what it read, the broker restarts on the same address, and the
/// group resumes from the committed offsets: every record read once, nothing lost. The
/// idempotent producer after the restart gets new producer ids (they are persisted).
#[test]
fn group_consumer_resumes_from_its_commits_across_a_restart() {
    let (Some(produce), Some(consume)) = (producer(), clients::python("kafka_python_consume.py"))
    else {
        return;
    };
    let b = Broker::start_on_fixed_port();
    b.create("kr", 3);
    let before = produce.run_json(
        &args(&b.bootstrap, "kr", &["--count", "30", "--prefix", "a"]),
        RUN,
    );
    let first = consume.run_json(
        &args(&b.bootstrap, "kr", &["kr-group", "--count", "12"]),
        RUN,
    );
    let first_read = script_records(&first);
    assert_eq!(first_read.len(), 12);
    assert_eq!(script_commits(&first), next_offsets(&first_read));
    let b = b.restart();
    let after = produce.run_json(
        &args(&b.bootstrap, "kr", &["--count", "10", "--prefix", "b"]),
        RUN,
    );
    let second = consume.run_json(
        &args(&b.bootstrap, "kr", &["kr-group", "--count", "28"]),
        RUN,
    );
    let mut read = first_read.clone();
    read.extend(script_records(&second));
    read.sort();
    let mut produced = script_records(&before);
    produced.extend(script_records(&after));
    produced.sort();
    assert_eq!(read, produced, "every record read once, none lost");
    // The committed offsets are the log ends: the group's lag is 0 everywhere.
    let ends = next_offsets(&produced);
    assert_eq!(script_commits(&second), ends);
    let lag = b.broker.lag("kr", "kr-group").unwrap();
    assert!(lag.values().all(|&l| l == 0), "{lag:?}");
}

/// kafka-python fetches in a fetch session (KIP-227): one full fetch opens it, then each
/// fetch names only the partitions whose offsets moved. Records produced on every partition
/// while it reads reach it through those incremental fetches (from the offsets the session
/// remembers for partitions the request does not name), each once, in order per partition.
#[test]
fn group_consumer_reads_a_multi_partition_topic_through_a_fetch_session() {
    let Some(consume) = clients::python("kafka_python_consume.py") else {
        return;
    };
    let b = Broker::start();
    b.create("ks", 4);
    b.produce_keyed("ks", 0..20);
    let running = consume.spawn(&args(&b.bootstrap, "ks", &["ks-group", "--count", "40"]));
    let listener = || b.broker.stats().unwrap().listener.unwrap();
    let deadline = Instant::now() + RUN;
    while listener().incremental_fetches == 0 {
        assert!(
            Instant::now() < deadline,
            "no incremental fetch: {:?}",
            listener()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    b.produce_keyed("ks", 20..40);
    let result = running.finish(RUN).json();
    assert_consecutive_per_partition(&result);
    assert_eq!(
        script_records(&result),
        native_records(&b.read_all("ks", 40)),
        "every record once"
    );
    let stats = listener();
    assert!(stats.fetch_sessions_opened >= 1, "{stats:?}");
}

/// A static member (`group_instance_id`) reads and commits half the records and closes,
/// sending no LeaveGroup, as static members do; started again with the same instance id
/// within its session timeout, it takes its own place: the group does not rebalance (the
/// native group's generation and assignment stay as they were) and it reads on from its
/// commits.
#[test]
fn a_restarted_static_member_takes_its_place_without_a_rebalance() {
    let (Some(produce), Some(consume)) = (producer(), clients::python("kafka_python_consume.py"))
    else {
        return;
    };
    let session = Duration::from_secs(30);
    let b = Broker::start_with(|builder| builder.session_timeout(session));
    b.create("ks", 2);
    let produced = produce.run_json(&args(&b.bootstrap, "ks", &["--count", "20"]), RUN);
    let member = [
        "ks-group",
        "--count",
        "10",
        "--instance-id",
        "ks-1",
        "--session-timeout-ms",
        "30000",
    ];
    let native = |b: &Broker| b.broker.stats().unwrap().topics["ks"].groups["ks-group"].clone();
    let first = consume.run_json(&args(&b.bootstrap, "ks", &member), RUN);
    let before = native(&b);
    let second = consume.run_json(&args(&b.bootstrap, "ks", &member), RUN);
    let after = native(&b);
    assert_eq!(
        (after.generation, &after.assignment),
        (before.generation, &before.assignment),
        "no rebalance"
    );
    let mut read = script_records(&first);
    read.extend(script_records(&second));
    read.sort();
    let mut sent = script_records(&produced);
    sent.sort();
    assert_eq!(read, sent, "every record read once");
}
