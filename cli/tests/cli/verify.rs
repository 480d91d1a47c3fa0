//! `nanokafka verify`.

use nanokafka::{NanoKafka, TopicConfig};

use crate::dump::{events_segment, flip_byte};
use crate::{assert_refused_while_locked, fails, fixture, json, ok, run_on, snapshot};

/// The fixture plus `big`: 300 records of ~100 bytes, enough for its segment's sparse index
/// to hold entries (one per 4 KiB), which verify checks against the batches.
fn fixture_with_index() -> tempfile::TempDir {
    let dir = fixture();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.create_topic("big", TopicConfig::default()).unwrap();
    for i in 0..300 {
        broker.produce("big", &format!("{i:0>100}")).unwrap();
    }
    broker.shutdown().unwrap();
    let index = dir.path().join("big_0").join(format!("{:020}.index", 0));
    assert!(
        std::fs::metadata(&index).unwrap().len() >= 16,
        "no index entries"
    );
    dir
}

#[test]
fn a_clean_directory_exits_0() {
    let dir = fixture_with_index();
    let before = snapshot(dir.path());
    let text = ok(&run_on(dir.path(), &["verify"]));
    assert!(text.ends_with("clean\n"), "{text}");
    assert!(text.starts_with("4 segments, 309 batches"), "{text}");
    let doc = json(&run_on(dir.path(), &["verify", "--json"]));
    assert_eq!(doc["clean"], true);
    assert_eq!(doc["segments"], 4);
    assert_eq!(doc["damage"], serde_json::json!([]));
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_flipped_byte_is_reported_with_its_range_and_exit_1() {
    let dir = fixture_with_index();
    let segment = events_segment(dir.path());
    flip_byte(&segment, 72 + 40);
    let before = snapshot(dir.path());
    let output = run_on(dir.path(), &["verify"]);
    let message = fails_with_stdout(&output);
    assert!(message.contains("1 damaged range"), "{message}");
    let text = crate::stdout(&output);
    assert!(
        text.contains(&format!(
            "DAMAGED {} position 72 (72 bytes): crc32c mismatch",
            segment.display()
        )),
        "{text}"
    );
    let output = run_on(dir.path(), &["verify", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["clean"], false);
    assert_eq!(doc["damage"][0]["file"], segment.to_str().unwrap());
    assert_eq!(doc["damage"][0]["position"], 72);
    assert_eq!(doc["damage"][0]["length"], 72);
    assert_eq!(snapshot(dir.path()), before, "verify repairs nothing");
}

#[test]
fn a_bad_index_entry_is_reported() {
    let dir = fixture_with_index();
    let index = dir.path().join("big_0").join(format!("{:020}.index", 0));
    flip_byte(&index, 4); // the first entry's position
    let output = run_on(dir.path(), &["verify", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let damage = doc["damage"].as_array().unwrap();
    assert_eq!(damage.len(), 1, "{doc}");
    assert_eq!(damage[0]["file"], index.to_str().unwrap());
    assert_eq!(damage[0]["position"], 0);
    assert!(
        damage[0]["reason"].as_str().unwrap().contains("entry 0"),
        "{doc}"
    );
}

#[test]
fn a_locked_directory_is_refused_at_once() {
    let dir = fixture();
    assert_refused_while_locked(dir.path(), &["verify"]);
}

#[test]
fn a_path_that_is_no_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let message = fails(&run_on(dir.path(), &["verify"]));
    assert!(
        message.contains("not a NanoKafka data directory"),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Asserts exit 1 (the report is on stdout) and returns stderr.
fn fails_with_stdout(output: &std::process::Output) -> String {
    assert_eq!(output.status.code(), Some(1), "{}", crate::stderr(output));
    crate::stderr(output)
}
