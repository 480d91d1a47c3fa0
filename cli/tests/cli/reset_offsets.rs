//! `nanokafka groups reset-offsets`, and `NanoKafka::reset_offset` under it: committed
//! offsets checked by reopening the directory with the embedded broker.

use std::collections::BTreeMap;
use std::path::Path;

use nanokafka::{Error, NanoKafka};

use crate::{
    assert_refused_while_locked, fails, fixture, json, ok, records, run_on, snapshot, usage_error,
};

/// `group`'s committed offset per partition of `topic` (absent: no commit).
fn committed(dir: &Path, topic: &str, group: &str) -> BTreeMap<u32, u64> {
    let broker = NanoKafka::builder().data_dir(dir).build().expect("open");
    let stats = broker.stats().expect("stats");
    broker.shutdown().expect("shutdown");
    stats.topics[topic]
        .partitions
        .iter()
        .filter_map(|p| Some((p.partition, *p.committed.get(group)?)))
        .collect()
}

/// `groups reset-offsets ARGS --execute`: the offsets are written.
fn reset(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["groups", "reset-offsets"];
    all.extend_from_slice(args);
    all.push("--execute");
    ok(&run_on(dir, &all))
}

#[test]
fn to_earliest_and_to_latest_move_every_partition() {
    let dir = fixture();
    let table = reset(
        dir.path(),
        &["billing", "--topic", "events", "--to-earliest"],
    );
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["TOPIC", "PARTITION", "PREVIOUS", "NEW"],
        "{table}"
    );
    assert_eq!(lines[1], ["events", "0", "2", "0"], "{table}");
    assert!(table.contains("reset group billing on events"), "{table}");
    assert_eq!(committed(dir.path(), "events", "billing"), [(0, 0)].into());
    let lag = json(&run_on(dir.path(), &["groups", "lag", "billing", "--json"]));
    assert_eq!(lag["total_lag"], 4);

    // audit had a commit on one partition of orders only: now both are at their log end.
    let doc = json(&run_on(
        dir.path(),
        &[
            "groups",
            "reset-offsets",
            "audit",
            "--topic",
            "orders",
            "--to-latest",
            "--json",
            "--execute",
        ],
    ));
    assert_eq!(doc["group"], "audit");
    assert_eq!(doc["dry_run"], false);
    let partitions = doc["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 2);
    assert_eq!(
        partitions.iter().filter(|p| p["previous"] == 1).count(),
        1,
        "{doc}"
    );
    let stats = {
        let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
        let stats = broker.stats().unwrap();
        broker.shutdown().unwrap();
        stats
    };
    for (p, moved) in stats.topics["orders"].partitions.iter().zip(partitions) {
        assert_eq!(moved["new"], p.log_end_offset);
        assert_eq!(p.committed["audit"], p.log_end_offset);
    }
    let lag = json(&run_on(dir.path(), &["groups", "lag", "audit", "--json"]));
    assert_eq!(lag["total_lag"], 0);
}

#[test]
fn to_offset_moves_one_partition_and_a_group_reads_from_there() {
    let dir = fixture();
    reset(
        dir.path(),
        &[
            "billing",
            "--topic",
            "events",
            "--partition",
            "0",
            "--to-offset",
            "3",
        ],
    );
    assert_eq!(committed(dir.path(), "events", "billing"), [(0, 3)].into());
    // A member of the group reads on from the reset offset.
    let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
    broker.join_group("events", "billing", "m").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut offsets = Vec::new();
    while offsets.is_empty() && std::time::Instant::now() < deadline {
        let batch = broker
            .poll_batch_raw(
                "events",
                "billing",
                "m",
                10,
                std::time::Duration::from_millis(200),
            )
            .unwrap();
        offsets.extend(batch.iter().map(|r| r.offset));
    }
    assert_eq!(offsets, [3]);
    broker.leave_group("events", "billing", "m").unwrap();
    broker.shutdown().unwrap();
}

#[test]
fn to_datetime_takes_rfc3339_or_epoch_ms_and_falls_back_to_the_log_end() {
    let dir = fixture();
    let stored = records(dir.path(), "events");
    let second = stored[1].1.timestamp_ms;
    let first_at_or_after = stored
        .iter()
        .position(|(_, r)| r.timestamp_ms >= second)
        .unwrap() as u64;
    reset(
        dir.path(),
        &[
            "billing",
            "--topic",
            "events",
            "--to-datetime",
            &second.to_string(),
        ],
    );
    assert_eq!(
        committed(dir.path(), "events", "billing"),
        [(0, first_at_or_after)].into()
    );
    reset(
        dir.path(),
        &[
            "billing",
            "--topic",
            "events",
            "--to-datetime",
            "2000-01-01T00:00:00Z",
        ],
    );
    assert_eq!(committed(dir.path(), "events", "billing"), [(0, 0)].into());
    // No record is that recent: the log end, nothing left to read.
    reset(
        dir.path(),
        &[
            "billing",
            "--topic",
            "events",
            "--to-datetime",
            "2999-01-01T00:00:00+01:00",
        ],
    );
    assert_eq!(committed(dir.path(), "events", "billing"), [(0, 4)].into());
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let dir = fixture();
    let before = snapshot(dir.path());
    let doc = json(&run_on(
        dir.path(),
        &[
            "groups",
            "reset-offsets",
            "billing",
            "--topic",
            "events",
            "--to-earliest",
            "--dry-run",
            "--json",
        ],
    ));
    assert_eq!(doc["dry_run"], true);
    assert_eq!(doc["partitions"][0]["previous"], 2);
    assert_eq!(doc["partitions"][0]["new"], 0);
    assert_eq!(snapshot(dir.path()), before);
    let text = ok(&run_on(
        dir.path(),
        &[
            "groups",
            "reset-offsets",
            "billing",
            "--topic",
            "events",
            "--to-latest",
            "--dry-run",
        ],
    ));
    assert!(text.contains("dry run: nothing was changed"), "{text}");
    assert_eq!(snapshot(dir.path()), before);
}

/// As Kafka's `kafka-consumer-groups --reset-offsets`: only `--execute` writes, so a script
/// ported from Kafka that meant to preview changes nothing.
#[test]
fn without_execute_the_plan_is_printed_and_nothing_changes() {
    let dir = fixture();
    let before = snapshot(dir.path());
    let args = ["groups", "reset-offsets", "billing", "--topic", "events"];
    let preview = run_on(dir.path(), &[&args[..], &["--to-earliest"]].concat());
    let text = ok(&preview);
    assert!(text.contains("events  0          2         0"), "{text}");
    assert!(text.contains("dry run: nothing was changed"), "{text}");
    let warning = String::from_utf8_lossy(&preview.stderr);
    assert!(warning.contains("--execute is missing"), "{warning}");
    let doc = json(&run_on(
        dir.path(),
        &[&args[..], &["--to-earliest", "--json"]].concat(),
    ));
    assert_eq!(doc["dry_run"], true, "{doc}");
    assert_eq!(snapshot(dir.path()), before);
    assert_eq!(committed(dir.path(), "events", "billing"), [(0, 2)].into());
    let both = [&args[..], &["--to-earliest", "--dry-run", "--execute"]].concat();
    usage_error(&run_on(dir.path(), &both));
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn bad_input_fails_and_changes_nothing() {
    let dir = fixture();
    let before = snapshot(dir.path());
    let refused = |args: &[&str]| {
        let mut all = vec!["groups", "reset-offsets"];
        all.extend_from_slice(args);
        fails(&run_on(dir.path(), &all))
    };
    let message = refused(&["billing", "--topic", "events", "--to-offset", "5"]);
    assert!(
        message.contains("offset 5 is outside events[0]"),
        "{message}"
    );
    assert!(message.contains("0 to 4"), "{message}");
    let message = refused(&["nobody", "--topic", "events", "--to-earliest"]);
    assert!(
        message.contains("no group 'nobody' on topic 'events'"),
        "{message}"
    );
    assert!(message.contains("it has: billing"), "{message}");
    let message = refused(&["billing", "--topic", "nope", "--to-earliest"]);
    assert!(message.contains("no topic 'nope'"), "{message}");
    let message = refused(&[
        "billing",
        "--topic",
        "events",
        "--partition",
        "1",
        "--to-earliest",
    ]);
    assert!(message.contains("no partition 1"), "{message}");
    for args in [
        &["billing", "--topic", "events"][..],
        &[
            "billing",
            "--topic",
            "events",
            "--to-earliest",
            "--to-latest",
        ],
        &["billing", "--to-earliest"],
        &["billing", "--topic", "events", "--to-offset", "-1"],
        &["billing", "--topic", "events", "--to-datetime", "yesterday"],
        &[
            "billing",
            "--topic",
            "events",
            "--to-datetime",
            "2026-02-30T00:00:00Z",
        ],
    ] {
        let mut all = vec!["groups", "reset-offsets"];
        all.extend_from_slice(args);
        usage_error(&run_on(dir.path(), &all));
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_group_with_live_members_is_refused_by_the_library() {
    // Offline a group never has live members (membership is in memory); the rule the
    // command relies on is the library's, checked here on a broker with a member.
    let dir = fixture();
    let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
    broker.join_group("events", "billing", "alive").unwrap();
    let refused = broker.reset_offset("events", "billing", 0, 0);
    match refused {
        Err(Error::GroupNotEmpty { members, .. }) => assert_eq!(members, ["alive"]),
        other => panic!("expected GroupNotEmpty, got {other:?}"),
    }
    let stats = broker.stats().unwrap();
    assert_eq!(stats.topics["events"].partitions[0].committed["billing"], 2);
    broker.leave_group("events", "billing", "alive").unwrap();
    broker.reset_offset("events", "billing", 0, 1).unwrap();
    let out_of_range = broker.reset_offset("events", "billing", 0, 5);
    assert!(
        matches!(
            out_of_range,
            Err(Error::InvalidArgument { name: "offset", .. })
        ),
        "{out_of_range:?}"
    );
    // A group that never committed can be given offsets before its first member starts.
    broker.reset_offset("events", "new-group", 0, 4).unwrap();
    assert_eq!(broker.lag("events", "new-group").unwrap(), [(0, 0)].into());
    let stats = broker.stats().unwrap();
    assert_eq!(stats.topics["events"].partitions[0].committed["billing"], 1);
    broker.shutdown().unwrap();
}

#[test]
fn a_locked_data_directory_is_refused_at_once() {
    let dir = fixture();
    assert_refused_while_locked(
        dir.path(),
        &[
            "groups",
            "reset-offsets",
            "billing",
            "--topic",
            "events",
            "--to-earliest",
        ],
    );
}
