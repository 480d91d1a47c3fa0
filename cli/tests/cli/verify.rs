//! `nanokafka verify`: clean and damaged directories, and a compacted topic's cleaned log
//! (its gaps, damage in it, and the files an interrupted cleaning leaves).

use std::path::{Path, PathBuf};

use nanokafka::internals::inspect::{scan_segment, BatchSummary};
use nanokafka::{NanoKafka, TopicConfig};

use crate::dump::{events_segment, flip_byte};
use crate::{
    assert_refused_while_locked, cleaned_fixture, fails, fixture, json, ok, records, run_on,
    snapshot,
};

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
            "DAMAGED {} position 72 (72 bytes) at offset 1: crc32c mismatch",
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
    assert_eq!(doc["damage"][0]["offset"], 1);
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

/// The segment files of partition 0 of `topic`, in offset order.
fn segments_of(dir: &Path, topic: &str) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir.join(format!("{topic}_0")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

/// The first sealed segment of `prices` in [`cleaned_fixture`] with at least three batches,
/// and its batches.
fn sealed_segment_with_batches(dir: &Path) -> (PathBuf, Vec<BatchSummary>) {
    let logs = segments_of(dir, "prices");
    logs[..logs.len() - 1]
        .iter()
        .map(|log| {
            let (batches, damage) = scan_segment(log, &std::fs::read(log).unwrap());
            assert!(damage.is_empty(), "{damage:?}");
            (log.clone(), batches)
        })
        .find(|(_, batches)| batches.len() >= 3)
        .expect("a sealed segment of three batches")
}

/// Writes `offset` as the base offset of the batch at `position` of `file` (outside the
/// batch's CRC: the batch still verifies).
fn set_base_offset(file: &Path, position: u64, offset: u64) {
    let mut bytes = std::fs::read(file).unwrap();
    let at = position as usize;
    bytes[at..at + 8].copy_from_slice(&offset.to_be_bytes());
    std::fs::write(file, bytes).unwrap();
}

/// Runs `verify --json` expecting damage, and returns the one damaged range whose reason
/// starts with `reason`.
fn damage_starting(dir: &Path, reason: &str) -> serde_json::Value {
    let output = run_on(dir, &["verify", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", crate::stderr(&output));
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["clean"], false);
    let found: Vec<&serde_json::Value> = doc["damage"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["reason"].as_str().unwrap().starts_with(reason))
        .collect();
    assert_eq!(found.len(), 1, "one '{reason}' damage expected: {doc:#}");
    found[0].clone()
}

#[test]
fn a_cleaned_compacted_log_verifies_clean_with_the_gaps_the_cleaner_left() {
    let dir = cleaned_fixture();
    let before = snapshot(dir.path());
    let doc = json(&run_on(dir.path(), &["verify", "--json"]));
    assert_eq!(doc["clean"], true, "{doc:#}");
    assert_eq!(doc["cleaned_partitions"], 1);
    let gaps = doc["cleaner_gaps"].as_u64().unwrap();
    assert!(gaps > 0, "the cleaner removed whole batches: {doc:#}");
    assert_eq!(doc["cleaner_files"], serde_json::json!([]));
    let text = ok(&run_on(dir.path(), &["verify"]));
    assert!(
        text.ends_with(&format!(
            "bytes checked (1 cleaned partition(s), {gaps} gap(s) the cleaner left): clean\n"
        )),
        "{text}"
    );
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn the_same_gaps_in_a_log_that_was_never_cleaned_are_damage() {
    let dir = cleaned_fixture();
    std::fs::remove_file(dir.path().join("prices_0").join("cleaner.marker")).unwrap();
    let doc = json_of_failed_verify(dir.path());
    let damage = doc["damage"].as_array().unwrap();
    assert!(!damage.is_empty());
    for d in damage {
        let reason = d["reason"].as_str().unwrap();
        assert!(reason.contains("never cleaned (no cleaner.marker)"), "{d}");
        assert!(d["offset"].is_u64(), "{d}");
    }
    assert_eq!(doc["cleaner_gaps"], 0);
}

#[test]
fn a_gap_in_the_active_segment_of_a_cleaned_log_is_damage() {
    let dir = cleaned_fixture();
    let active = segments_of(dir.path(), "prices").pop().unwrap();
    let (batches, _) = scan_segment(&active, &std::fs::read(&active).unwrap());
    let last = batches.last().unwrap();
    set_base_offset(&active, last.position, last.base_offset + 5);
    let damage = damage_starting(dir.path(), &format!("offset {}", last.base_offset + 5));
    assert_eq!(damage["file"], active.to_str().unwrap());
    assert_eq!(damage["position"], last.position);
    assert!(
        damage["reason"]
            .as_str()
            .unwrap()
            .ends_with("in the active segment, which the cleaner never rewrites"),
        "{damage}"
    );
}

#[test]
fn a_duplicate_offset_in_a_cleaned_log_is_reported_with_its_file_and_offset() {
    let dir = cleaned_fixture();
    let (segment, batches) = sealed_segment_with_batches(dir.path());
    let (first, second) = (&batches[0], &batches[1]);
    set_base_offset(&segment, second.position, first.base_offset);
    let damage = damage_starting(dir.path(), "duplicate offsets");
    assert_eq!(damage["file"], segment.to_str().unwrap());
    assert_eq!(damage["position"], second.position);
    assert_eq!(damage["offset"], first.base_offset);
    let text = crate::stdout(&run_on(dir.path(), &["verify"]));
    assert!(
        text.contains(&format!(
            "DAMAGED {} position {} ({} bytes) at offset {}: duplicate offsets",
            segment.display(),
            second.position,
            second.size,
            first.base_offset
        )),
        "{text}"
    );
}

#[test]
fn a_batch_out_of_order_in_a_cleaned_log_is_reported_with_its_file_and_offset() {
    let dir = cleaned_fixture();
    let (segment, batches) = sealed_segment_with_batches(dir.path());
    // The second and third batches change places.
    let bytes = std::fs::read(&segment).unwrap();
    let range = |b: &BatchSummary| b.position as usize..(b.position + b.size) as usize;
    let (second, third) = (&batches[1], &batches[2]);
    let mut swapped = bytes[..second.position as usize].to_vec();
    swapped.extend_from_slice(&bytes[range(third)]);
    swapped.extend_from_slice(&bytes[range(second)]);
    swapped.extend_from_slice(&bytes[range(third).end..]);
    std::fs::write(&segment, swapped).unwrap();
    let damage = damage_starting(dir.path(), "out of order");
    assert_eq!(damage["file"], segment.to_str().unwrap());
    assert_eq!(damage["position"], second.position + third.size);
    assert_eq!(damage["offset"], second.base_offset);
    assert!(
        damage["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("after offset {}", third.last_offset)),
        "{damage}"
    );
}

#[test]
fn a_bad_crc_in_a_cleaned_log_is_reported_with_its_file_and_offset() {
    let dir = cleaned_fixture();
    let (segment, batches) = sealed_segment_with_batches(dir.path());
    let second = &batches[1];
    flip_byte(&segment, (second.position + second.size - 1) as usize);
    let damage = damage_starting(dir.path(), "crc32c mismatch");
    assert_eq!(damage["file"], segment.to_str().unwrap());
    assert_eq!(damage["position"], second.position);
    assert_eq!(damage["offset"], second.base_offset);
}

#[test]
fn an_interrupted_cleaning_is_checked_as_the_next_open_will_finish_it() {
    let dir = cleaned_fixture();
    let records_before = records(dir.path(), "prices");
    let partition = dir.path().join("prices_0");
    let logs = segments_of(dir.path(), "prices");
    assert!(logs.len() >= 4, "{logs:?}");
    // A swap killed after its commit, within its step 2: the cleaned segment of the first two
    // sealed segments is `<first>.log.swap`, the second one is renamed `.deleted` (to be
    // unlinked), the first is left.
    let mut cleaned = std::fs::read(&logs[0]).unwrap();
    cleaned.extend(std::fs::read(&logs[1]).unwrap());
    let swap = with_suffix(&logs[0], ".swap");
    std::fs::write(&swap, cleaned).unwrap();
    let retired: Vec<PathBuf> = ["log", "index", "timeindex"]
        .iter()
        .map(|ext| {
            let file = logs[1].with_extension(ext);
            let to = with_suffix(&file, ".deleted");
            std::fs::rename(&file, &to).unwrap();
            to
        })
        .collect();
    // A pass killed before its swap, and an index of a swap that had not committed.
    let pending = with_suffix(&logs[2], ".cleaned");
    std::fs::copy(&logs[2], &pending).unwrap();
    let orphan = with_suffix(&logs[2].with_extension("index"), ".swap");
    std::fs::write(&orphan, []).unwrap();

    let doc = json(&run_on(dir.path(), &["verify", "--json"]));
    assert_eq!(doc["clean"], true, "{doc:#}");
    let fates: Vec<(String, String)> = doc["cleaner_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let name = f["file"].as_str().unwrap().rsplit('/').next().unwrap();
            (name.to_owned(), f["fate"].as_str().unwrap().to_owned())
        })
        .collect();
    let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_owned();
    assert_eq!(fates.len(), 6, "{fates:?}");
    let fate_of = |file: &Path| {
        let wanted = name(file);
        fates
            .iter()
            .find(|(n, _)| *n == wanted)
            .unwrap_or_else(|| panic!("{wanted} not listed: {fates:?}"))
            .1
            .clone()
    };
    let swap_fate = fate_of(&swap);
    assert!(
        swap_fate.starts_with(&format!("renamed to {} by the next open", name(&logs[0]))),
        "{swap_fate}"
    );
    assert!(
        swap_fate.ends_with(&format!("in place of {}", name(&logs[0]))),
        "{swap_fate}"
    );
    assert!(fate_of(&pending).starts_with("deleted by the next open"));
    assert!(fate_of(&orphan).starts_with("deleted by the next open"));
    for file in &retired {
        assert!(fate_of(file).starts_with("deleted by the next open"));
    }
    let text = ok(&run_on(dir.path(), &["verify"]));
    assert!(
        text.contains(&format!("CLEANER FILE {}: renamed to", swap.display())),
        "{text}"
    );

    // The open finishes the swap as verify said: the same records, and nothing left over.
    assert_eq!(records(dir.path(), "prices"), records_before);
    let doc = json(&run_on(dir.path(), &["verify", "--json"]));
    assert_eq!(doc["clean"], true, "{doc:#}");
    assert_eq!(doc["cleaner_files"], serde_json::json!([]));
    assert!(!partition.join(name(&logs[1])).exists());
    assert!(retired.iter().all(|file| !file.exists()));
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap().to_owned();
    name.push(suffix);
    path.with_file_name(name)
}

/// Runs `verify --json`, expecting exit 1, and returns its document.
fn json_of_failed_verify(dir: &Path) -> serde_json::Value {
    let output = run_on(dir, &["verify", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", crate::stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}
