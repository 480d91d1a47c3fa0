//! The KIP-848 consumer group protocol (`group.protocol=consumer`) with confluent-kafka
//! (librdkafka): the broker assigns, members reconcile by heartbeat, a member that leaves
//! hands its partitions over, and a group of the classic protocol refuses such a member.

use std::collections::BTreeSet;

use crate::clients::{self, Client, Running};
use crate::common::{args, script_records, Broker, RUN};
use crate::confluent::{assignment, processed, producer, record_events};

/// A `confluent_consume.py` member of `group` on `topic` with the consumer protocol, reading
/// until its stdin closes.
fn member(consume: &Client, b: &Broker, topic: &str, group: &str) -> Running {
    let more = [
        group,
        "--until-stdin-closes",
        "--group-protocol",
        "consumer",
    ];
    consume.spawn(&args(&b.bootstrap, topic, &more))
}

/// Produces `count` records to `topic`; returns their (partition, offset).
fn produce(produce: &Client, b: &Broker, topic: &str, count: &str) -> BTreeSet<(u32, u64)> {
    let produced = produce.run_json(&args(&b.bootstrap, topic, &["--count", count]), RUN);
    let records = script_records(&produced);
    records.iter().map(|r| (r.partition, r.offset)).collect()
}

#[test]
fn two_members_share_a_topic_and_one_takes_everything_when_the_other_leaves() {
    let (Some(producer), Some(consume)) = (producer(), clients::python("confluent_consume.py"))
    else {
        return;
    };
    let b = Broker::start();
    b.create("kip848", 4);
    let first = member(&consume, &b, "kip848", "kip848-group");
    first.wait_for_stdout("every partition", RUN, |out| assignment(out).len() == 4);
    let second = member(&consume, &b, "kip848", "kip848-group");
    second.wait_for_stdout("half the partitions", RUN, |out| assignment(out).len() == 2);
    first.wait_for_stdout("the other half", RUN, |out| assignment(out).len() == 2);
    let mut sent = produce(&producer, &b, "kip848", "40");
    // Each member waits for its own partitions' records: a wait wakes on its member's output
    // only.
    for member in [&first, &second] {
        let mine: Vec<u32> = assignment(&member.stdout());
        let expected: BTreeSet<(u32, u64)> = sent
            .iter()
            .filter(|(p, _)| mine.contains(p))
            .copied()
            .collect();
        member.wait_for_stdout("its partitions' records", RUN, |out| {
            processed(out) == expected
        });
    }
    let second = second.finish(RUN);
    assert!(
        second.status.success(),
        "{}\nsecond:\n{}\nfirst:\n{}",
        second.stderr,
        second.stdout,
        first.stdout()
    );
    first.wait_for_stdout("every partition again", RUN, |out| {
        assignment(out).len() == 4
    });
    sent.extend(produce(&producer, &b, "kip848", "40"));
    // The second member has exited: its output no longer changes.
    first.wait_for_stdout("the rest read", RUN, |out| {
        let mut both = processed(out);
        both.extend(processed(&second.stdout));
        both == sent
    });
    let first = first.finish(RUN);
    let (by_first, by_second) = (processed(&first.stdout), processed(&second.stdout));
    let twice: Vec<_> = by_first.intersection(&by_second).collect();
    assert!(
        twice.is_empty(),
        "read by both members: {twice:?}\nfirst:\n{}\nsecond:\n{}",
        first.stdout,
        second.stdout
    );
    // Nor twice by one member.
    assert_eq!(record_events(&first.stdout), by_first.len());
    assert_eq!(record_events(&second.stdout), by_second.len());
    // Every record committed: the group's commits are at the log end.
    let lag = b.broker.lag("kip848", "kip848-group").unwrap();
    assert!(lag.values().all(|&l| l == 0), "{lag:?}");
}

#[test]
fn a_consumer_protocol_member_is_refused_a_classic_groups_name() {
    let Some(consume) = clients::python("confluent_consume.py") else {
        return;
    };
    let b = Broker::start();
    b.create("mixed", 2);
    let classic = consume.spawn(&args(
        &b.bootstrap,
        "mixed",
        &["mixed-group", "--until-stdin-closes"],
    ));
    classic.wait_for_stdout("the classic member's partitions", RUN, |out| {
        assignment(out).len() == 2
    });
    let more = [
        "mixed-group",
        "--count",
        "1",
        "--group-protocol",
        "consumer",
    ];
    let refused = consume.run(&args(&b.bootstrap, "mixed", &more), b"", RUN);
    assert!(!refused.status.success(), "{}", refused.stdout);
    assert!(
        refused.stderr.contains("The group id does not exist"),
        "{}",
        refused.stderr
    );
    assert!(classic.finish(RUN).status.success());
}
