//! `nanokafka consume`.

use serde_json::Value;

use crate::{assert_refused_while_locked, fails, fixture, ok, run, run_on, snapshot};

/// The JSON lines of a `consume --json`.
fn records(args: &[&str], dir: &std::path::Path) -> Vec<Value> {
    let mut all = vec!["consume"];
    all.extend(args);
    all.push("--json");
    ok(&run_on(dir, &all))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn json_lines_decode_msgpack_values_and_show_raw_ones_as_text() {
    let dir = fixture();
    let lines = records(&["events"], dir.path());
    assert_eq!(lines.len(), 4);
    for (i, line) in lines[..3].iter().enumerate() {
        assert_eq!(line["topic"], "events");
        assert_eq!(line["partition"], 0);
        assert_eq!(line["offset"], i);
        assert_eq!(line["value"], serde_json::json!({ "n": i }));
        assert_eq!(line["value_format"], "msgpack");
        assert!(line["key"].is_null());
        assert!(line["timestamp_ms"].as_i64().unwrap() > 0);
    }
    let raw = &lines[3];
    assert_eq!(raw["value_format"], "raw");
    assert_eq!(raw["value"], "not msgpack \u{fffd}");
    assert_eq!(raw["key"], "raw-key");
    assert_eq!(
        raw["headers"],
        serde_json::json!([{ "key": "trace", "value": "abc" }])
    );
}

#[test]
fn every_partition_is_read_with_its_keys() {
    let dir = fixture();
    let lines = records(&["orders", "--from-beginning"], dir.path());
    let mut keys: Vec<&str> = lines.iter().map(|l| l["key"].as_str().unwrap()).collect();
    keys.sort();
    assert_eq!(keys, ["k0", "k1", "k2", "k3", "k4"]);
    for line in &lines {
        let key = line["key"].as_str().unwrap();
        assert_eq!(line["value"], format!("order {}", &key[1..]));
    }
}

#[test]
fn offset_partition_and_max_bound_the_read() {
    let dir = fixture();
    let lines = records(
        &["events", "--partition", "0", "--offset", "1", "--max", "2"],
        dir.path(),
    );
    let offsets: Vec<u64> = lines
        .iter()
        .map(|l| l["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [1, 2]);
    assert!(records(&["events", "--offset", "4", "--partition", "0"], dir.path()).is_empty());
}

#[test]
fn the_text_form_shows_offset_key_value_and_headers() {
    let dir = fixture();
    let text = ok(&run_on(dir.path(), &["consume", "events"]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].starts_with("events[0]@0  timestamp="), "{text}");
    assert!(lines[0].ends_with("key=-  value={\"n\":0}"), "{text}");
    assert!(
        lines[3].ends_with("key=raw-key  value=not msgpack \u{fffd}  header trace=abc"),
        "{text}"
    );
}

#[test]
fn reading_commits_nothing_and_creates_no_group() {
    let dir = fixture();
    let before = snapshot(dir.path());
    ok(&run_on(dir.path(), &["consume", "events"]));
    ok(&run_on(dir.path(), &["consume", "orders", "--json"]));
    assert_eq!(snapshot(dir.path()), before);
    let groups = crate::json(&run_on(dir.path(), &["groups", "list", "--json"]));
    assert_eq!(groups["groups"].as_array().unwrap().len(), 2);
}

#[test]
fn bad_input_is_an_error() {
    let dir = fixture();
    let message = fails(&run_on(dir.path(), &["consume", "nope"]));
    assert!(message.contains("no topic 'nope'"), "{message}");
    let message = fails(&run_on(
        dir.path(),
        &["consume", "events", "--partition", "3"],
    ));
    assert!(message.contains("no partition 3"), "{message}");
    let message = fails(&run_on(
        dir.path(),
        &["consume", "events", "--partition", "0", "--offset", "9"],
    ));
    assert!(
        message.contains("offset 9 is outside events[0]"),
        "{message}"
    );
    // --offset without --partition is a usage error (exit 2).
    let usage = run(&["consume", "events", "--offset", "1", "--data-dir", "x"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn a_locked_data_directory_is_refused_at_once() {
    let dir = fixture();
    assert_refused_while_locked(dir.path(), &["consume", "events"]);
}

#[test]
fn group_starts_at_its_committed_offsets_and_leaves_them_as_they_are() {
    let dir = fixture();
    // `billing` committed events offset 1: it reads on from 2.
    let before = snapshot(dir.path());
    let lines = records(&["events", "--group", "billing"], dir.path());
    let offsets: Vec<i64> = lines
        .iter()
        .map(|l| l["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, [2, 3]);
    assert_eq!(snapshot(dir.path()), before, "nothing committed or created");
    let message = fails(&run_on(
        dir.path(),
        &["consume", "events", "--group", "nobody"],
    ));
    assert!(message.contains("no group 'nobody'"), "{message}");
}

#[test]
fn from_timestamp_starts_at_the_first_record_at_or_after_it() {
    let dir = fixture();
    let all = records(&["events"], dir.path());
    let second = all[1]["timestamp_ms"].as_u64().unwrap();
    // Records produced within one millisecond share a timestamp: the first of them starts.
    let first_at = all
        .iter()
        .find(|l| l["timestamp_ms"].as_u64().unwrap() >= second)
        .unwrap()["offset"]
        .as_i64()
        .unwrap();
    let lines = records(
        &["events", "--from-timestamp", &second.to_string()],
        dir.path(),
    );
    let offsets: Vec<i64> = lines
        .iter()
        .map(|l| l["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, (first_at..4).collect::<Vec<_>>());
    let newest = all
        .iter()
        .map(|l| l["timestamp_ms"].as_u64().unwrap())
        .max()
        .unwrap();
    let later = records(
        &["events", "--from-timestamp", &(newest + 1).to_string()],
        dir.path(),
    );
    assert!(later.is_empty(), "{later:?}");
    let as_rfc3339 = records(
        &["events", "--from-timestamp", "1970-01-01T00:00:00Z"],
        dir.path(),
    );
    assert_eq!(as_rfc3339.len(), 4);
}
