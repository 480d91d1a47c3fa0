//! `nanokafka dump`.

use std::path::{Path, PathBuf};

use crate::{fails, fixture, json, ok, run, snapshot};

/// The one segment of `events` (4 single-record batches: 3 of 72 bytes, then one of 98).
pub fn events_segment(dir: &Path) -> PathBuf {
    dir.join("events_0").join(format!("{:020}.log", 0))
}

/// Flips one byte of `file` at `position`.
pub fn flip_byte(file: &Path, position: usize) {
    let mut bytes = std::fs::read(file).unwrap();
    bytes[position] ^= 0xff;
    std::fs::write(file, bytes).unwrap();
}

#[test]
fn lists_every_batch_like_kafka_dump_log() {
    let dir = fixture();
    let segment = events_segment(dir.path());
    let text = ok(&run(&["dump", segment.to_str().unwrap()]));
    let batches: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("baseOffset"))
        .collect();
    assert_eq!(batches.len(), 4, "{text}");
    assert!(
        batches[2].starts_with("baseOffset: 2 lastOffset: 2 count: 1 position: 144 size: 72 "),
        "{text}"
    );
    assert!(batches[2].ends_with("codec: none crc: valid"), "{text}");
    assert!(
        !text.contains("| offset"),
        "records only with --records: {text}"
    );
}

#[test]
fn records_shows_each_records_sizes() {
    let dir = fixture();
    let segment = events_segment(dir.path());
    let text = ok(&run(&["dump", segment.to_str().unwrap(), "--records"]));
    let records: Vec<&str> = text.lines().filter(|l| l.starts_with("| offset")).collect();
    assert_eq!(records.len(), 4, "{text}");
    // {"n": 0} as MessagePack is 4 bytes; no key.
    assert!(
        records[0].contains("keySize: -1 valueSize: 4 headers: 0"),
        "{text}"
    );
    assert!(
        records[3].contains("keySize: 7 valueSize: 13 headers: 1"),
        "{text}"
    );
}

#[test]
fn json_gives_batches_records_and_no_damage() {
    let dir = fixture();
    let segment = events_segment(dir.path());
    let doc = json(&run(&[
        "dump",
        segment.to_str().unwrap(),
        "--records",
        "--json",
    ]));
    let batches = doc["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 4);
    let positions: Vec<u64> = batches
        .iter()
        .map(|b| b["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [0, 72, 144, 216]);
    assert_eq!(doc["size"], 216 + batches[3]["size"].as_u64().unwrap());
    for (i, b) in batches.iter().enumerate() {
        assert_eq!(b["base_offset"], i);
        assert_eq!(b["last_offset"], i);
        assert_eq!(b["crc_valid"], true);
        assert_eq!(b["codec"], "none");
        assert_eq!(b["records"][0]["offset"], i);
    }
    assert_eq!(batches[3]["records"][0]["key_size"], 7);
    assert!(batches[0]["records"][0]["key_size"].is_null());
    assert_eq!(doc["damage"], serde_json::json!([]));
}

#[test]
fn a_flipped_byte_shows_as_an_invalid_crc_and_exit_1() {
    let dir = fixture();
    let segment = events_segment(dir.path());
    flip_byte(&segment, 144 + 70);
    let output = run(&["dump", segment.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let text = crate::stdout(&output);
    let batches: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("baseOffset"))
        .collect();
    assert_eq!(
        batches.len(),
        4,
        "the batches after the damage are still shown: {text}"
    );
    assert!(
        batches[2].contains("crc: INVALID (crc32c mismatch"),
        "{text}"
    );
    assert!(batches[3].contains("crc: valid"), "{text}");
    assert!(text.contains("DAMAGED"), "{text}");
    assert!(
        crate::stderr(&output).contains("1 damaged range"),
        "{}",
        crate::stderr(&output)
    );

    let output = run(&["dump", segment.to_str().unwrap(), "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["batches"][2]["crc_valid"], false);
    let damage = doc["damage"].as_array().unwrap();
    assert_eq!(damage.len(), 1);
    assert_eq!(damage[0]["position"], 144);
    assert_eq!(damage[0]["length"], 72);
}

#[test]
fn a_torn_tail_is_reported_where_it_starts() {
    let dir = fixture();
    let segment = events_segment(dir.path());
    let bytes = std::fs::read(&segment).unwrap();
    std::fs::write(&segment, &bytes[..216 + 30]).unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&run(&["dump", segment.to_str().unwrap(), "--json"]).stdout)
            .unwrap();
    assert_eq!(doc["batches"].as_array().unwrap().len(), 3);
    assert_eq!(doc["damage"][0]["position"], 216);
    assert_eq!(doc["damage"][0]["length"], 30);
    assert!(doc["damage"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("torn tail"));
}

#[test]
fn works_on_a_locked_directory_and_changes_nothing() {
    let dir = fixture();
    let segment = events_segment(dir.path());
    let broker = nanokafka::NanoKafka::open(dir.path()).unwrap();
    let before = std::fs::read(&segment).unwrap();
    ok(&run(&["dump", segment.to_str().unwrap()]));
    assert_eq!(std::fs::read(&segment).unwrap(), before);
    broker.shutdown().unwrap();
    let before = snapshot(dir.path());
    ok(&run(&["dump", segment.to_str().unwrap(), "--records"]));
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_bad_path_is_an_error() {
    let dir = fixture();
    let missing = dir.path().join("nope.log");
    let message = fails(&run(&["dump", missing.to_str().unwrap()]));
    assert!(
        message.contains("cannot read") && message.contains("nope.log"),
        "{message}"
    );
    let message = fails(&run(&["dump", dir.path().to_str().unwrap()]));
    assert!(message.contains("cannot read"), "{message}");
}
