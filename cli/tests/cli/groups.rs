//! `nanokafka groups list`, `groups describe`, `groups lag` and `groups delete`.

use crate::{assert_refused_while_locked, fails, fixture, json, ok, run_on, snapshot};

#[test]
fn list_shows_each_group_per_topic() {
    let dir = fixture();
    let table = ok(&run_on(dir.path(), &["groups", "list"]));
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["GROUP", "TOPIC", "COMMITTED", "LAG"], "{table}");
    assert_eq!(lines[1][..3], ["audit", "orders", "1/2"], "{table}");
    assert_eq!(lines[2], ["billing", "events", "1/1", "2"], "{table}");
    assert_eq!(lines.len(), 3, "{table}");
}

#[test]
fn list_json() {
    let dir = fixture();
    let doc = json(&run_on(dir.path(), &["groups", "list", "--json"]));
    let groups = doc["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[1]["group"], "billing");
    assert_eq!(groups[1]["topic"], "events");
    assert_eq!(groups[1]["partitions_committed"], 1);
    assert_eq!(groups[1]["lag"], 2);
    // audit committed one partition of orders; the other is read from its start.
    assert_eq!(groups[0]["partitions_committed"], 1);
    assert_eq!(groups[0]["partitions"], 2);
}

#[test]
fn lag_shows_committed_end_and_lag_per_partition() {
    let dir = fixture();
    let table = ok(&run_on(dir.path(), &["groups", "lag", "billing"]));
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["TOPIC", "PARTITION", "COMMITTED", "LOG", "END", "LAG"]
    );
    assert_eq!(lines[1], ["events", "0", "2", "4", "2"], "{table}");
    assert!(table.contains("total lag: 2"), "{table}");
}

#[test]
fn lag_json_sums_over_partitions() {
    let dir = fixture();
    let doc = json(&run_on(dir.path(), &["groups", "lag", "audit", "--json"]));
    assert_eq!(doc["group"], "audit");
    let partitions = doc["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 2);
    let mut total = 0;
    for p in partitions {
        assert_eq!(p["topic"], "orders");
        let end = p["log_end_offset"].as_u64().unwrap();
        match p["committed"].as_u64() {
            // audit committed the first record of its partition: next to read is 1.
            Some(committed) => {
                assert_eq!(committed, 1);
                assert_eq!(p["lag"], end - 1);
                total += end - 1;
            }
            // No commit there: no lag to tell (Kafka's tools show '-').
            None => assert!(p["lag"].is_null(), "{p}"),
        }
    }
    assert_eq!(doc["total_lag"], total);
    let table = ok(&run_on(dir.path(), &["groups", "lag", "audit"]));
    for row in table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
    {
        if row.get(2) == Some(&"-") {
            assert_eq!(row[4], "-", "no commit, no lag: {table}");
        }
    }
    assert!(table.contains(&format!("total lag: {total}")), "{table}");
}

#[test]
fn describe_shows_members_and_partitions() {
    let dir = fixture();
    let text = ok(&run_on(dir.path(), &["groups", "describe", "billing"]));
    assert!(text.contains("group: billing"), "{text}");
    assert!(text.contains("topic: events"), "{text}");
    assert!(text.contains("members: none"), "{text}");
    let row = text.lines().last().unwrap();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["0", "2", "0", "4", "2"]
    );
    let doc = json(&run_on(
        dir.path(),
        &["groups", "describe", "billing", "--json"],
    ));
    assert_eq!(doc["topics"][0]["topic"], "events");
    assert_eq!(doc["topics"][0]["partitions"][0]["committed"], 2);
    assert_eq!(doc["topics"][0]["partitions"][0]["lag"], 2);
}

#[test]
fn an_unknown_group_is_an_error_naming_the_known_ones() {
    let dir = fixture();
    for command in ["describe", "lag"] {
        let message = fails(&run_on(dir.path(), &["groups", command, "nope"]));
        assert!(message.contains("no group 'nope'"), "{message}");
        assert!(message.contains("audit, billing"), "{message}");
    }
}

#[test]
fn a_locked_data_directory_is_refused_at_once() {
    let dir = fixture();
    assert_refused_while_locked(dir.path(), &["groups", "list"]);
    assert_refused_while_locked(dir.path(), &["groups", "lag", "billing", "--json"]);
}

#[test]
fn delete_removes_a_groups_commits_and_an_unknown_group_changes_nothing() {
    let dir = fixture();
    let before = snapshot(dir.path());
    let message = fails(&run_on(dir.path(), &["groups", "delete", "nobody"]));
    assert!(message.contains("no group 'nobody'"), "{message}");
    assert_eq!(snapshot(dir.path()), before);
    let deleted = json(&run_on(
        dir.path(),
        &["groups", "delete", "billing", "--json"],
    ));
    assert_eq!(deleted["deleted"], "billing");
    let listed = ok(&run_on(dir.path(), &["groups", "list"]));
    assert!(
        !listed.contains("billing") && listed.contains("audit"),
        "{listed}"
    );
}
