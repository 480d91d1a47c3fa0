//! The KIP-848 consumer group protocol (`group.protocol=consumer`) with confluent-kafka
//! (librdkafka): the broker assigns, members reconcile by heartbeat, a member that leaves
//! hands its partitions over, a static member restarted takes its partitions back, and a
//! group of the classic protocol refuses such a member.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::clients::{self, Client, Running};
use crate::common::{args, script_records, Broker, RUN};
use crate::confluent::{assignment, complete_lines, processed, producer, record_events};

/// A `confluent_consume.py` member of `group` on `topic` with the consumer protocol, reading
/// until its stdin closes.
fn member(consume: &Client, b: &Broker, topic: &str, group: &str) -> Running {
    static_member(consume, b, topic, group, None)
}

/// [`member`], static with `instance` as its `group.instance.id` when given.
fn static_member(
    consume: &Client,
    b: &Broker,
    topic: &str,
    group: &str,
    instance: Option<&str>,
) -> Running {
    let mut more = vec![
        group,
        "--until-stdin-closes",
        "--group-protocol",
        "consumer",
    ];
    if let Some(instance) = instance {
        more.extend(["--instance-id", instance]);
    }
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

/// A static member closing leaves with epoch -2: its partitions wait for its instance's next
/// process (within the session timeout), which gets them back; the other member is never
/// given them.
#[test]
fn a_restarted_static_member_takes_its_partitions_back() {
    let Some(consume) = clients::python("confluent_consume.py") else {
        return;
    };
    // A session timeout far longer than a restart takes, on a machine as busy as CI's.
    let b = Broker::start_with(|builder| builder.session_timeout(Duration::from_secs(30)));
    b.create("kip848-static", 4);
    let instance = |name| static_member(&consume, &b, "kip848-static", "static", Some(name));
    let first = instance("instance-a");
    first.wait_for_stdout("every partition", RUN, |out| assignment(out).len() == 4);
    let other = member(&consume, &b, "kip848-static", "static");
    other.wait_for_stdout("half the partitions", RUN, |out| assignment(out).len() == 2);
    first.wait_for_stdout("the other half", RUN, |out| assignment(out).len() == 2);
    let held = assignment(&first.stdout());
    let first = first.finish(RUN);
    assert!(first.status.success(), "{}", first.stderr);
    let again = instance("instance-a");
    again.wait_for_stdout("its partitions back", RUN, |out| {
        !assignment(out).is_empty()
    });
    assert_eq!(assignment(&again.stdout()), held);
    // Nothing of `held` was ever assigned to the other member.
    let events = complete_lines(&other.stdout());
    let given = events.iter().filter(|e| e["event"] == "assigned");
    let partitions = given.flat_map(|e| e["partitions"].as_array().cloned().unwrap_or_default());
    let taken: Vec<u64> = partitions.filter_map(|p| p.as_u64()).collect();
    assert!(
        taken.iter().all(|p| !held.contains(&(*p as u32))),
        "the other member was given {taken:?}: {events:?}"
    );
    again.finish(RUN);
    other.finish(RUN);
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
