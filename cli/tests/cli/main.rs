//! The `nanokafka` offline subcommands, run as a process against a data directory the
//! embedded broker wrote in the test: their tables, their `--json` documents (parsed and
//! checked), bad input, and a data directory locked by a running broker. The write
//! subcommands' effects are checked by reopening the directory with the embedded broker.

mod consume;
mod dump;
mod follow;
mod groups;
mod produce;
mod quotas;
mod reset_offsets;
mod topics;
mod topics_compacted;
mod topics_write;
mod users;
mod verify;

#[path = "../common/binary.rs"]
mod binary;
#[path = "../../../tests/wire/client.rs"]
#[allow(dead_code)] // the part the SCRAM login uses
mod client;
#[path = "../../../tests/common/compacted.rs"]
mod compacted_topic;
#[path = "../../../tests/common/process.rs"]
mod process;
#[path = "../../../tests/common/scram_client.rs"]
mod scram_client;
#[path = "../common/records.rs"]
mod stored;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanokafka::clock::ManualClock;
use nanokafka::{CleanerSummary, NanoKafka, TopicConfig};
use tempfile::TempDir;

pub use binary::BIN;
pub use stored::records;

/// Runs `nanokafka ARGS`.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run nanokafka")
}

/// Runs `nanokafka ARGS --data-dir DIR`.
pub fn run_on(dir: &Path, args: &[&str]) -> Output {
    let dir = dir.to_str().expect("UTF-8 temp path");
    let mut all = args.to_vec();
    all.extend(["--data-dir", dir]);
    run(&all)
}

/// Runs `nanokafka ARGS --data-dir DIR` with `input` on its stdin.
pub fn run_with_stdin(dir: &Path, args: &[&str], input: &[u8]) -> Output {
    let dir = dir.to_str().expect("UTF-8 temp path");
    let mut child = Command::new(BIN)
        .args(args)
        .args(["--data-dir", dir])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nanokafka");
    let mut stdin = child.stdin.take().expect("stdin");
    // A command that fails before reading its input closes the pipe: not this helper's
    // failure, the caller checks the exit.
    if let Err(e) = stdin.write_all(input) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    drop(stdin);
    child.wait_with_output().expect("wait for nanokafka")
}

/// Asserts a usage error: exit 2, nothing on stdout, clap's message on stderr.
pub fn usage_error(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(2),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
    assert!(stdout(output).is_empty(), "stdout: {}", stdout(output));
    stderr(output)
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts exit 0 and returns stdout.
pub fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout(output),
        stderr(output)
    );
    stdout(output)
}

/// Asserts exit 1 with nothing on stdout and returns stderr.
pub fn fails(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
    assert!(stdout(output).is_empty(), "stdout: {}", stdout(output));
    stderr(output)
}

/// Asserts exit 0 and parses stdout as one JSON document.
pub fn json(output: &Output) -> serde_json::Value {
    let text = ok(output);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// A data directory written by the embedded broker, closed again:
/// * `orders`: 2 partitions, retention 1 h, 5 records with MessagePack values keyed `k0`..
///   `k4` (the key's hash picks the partition);
/// * `events`: 1 partition, no retention, 3 records (values `{"n": i}`), one raw non-
///   MessagePack value with a header;
/// * group `billing` committed offset 2 on `events` (next to read: 2, lag 2 of the 4);
///   group `audit` committed on `orders` partition of `k0`.
pub fn fixture() -> TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .build()
        .expect("open");
    let orders = TopicConfig::default().partitions(2).retention_ms(3_600_000);
    broker
        .create_topic("orders", orders)
        .expect("create orders");
    broker
        .create_topic("events", TopicConfig::default())
        .expect("create events");
    let mut audit = None;
    for i in 0..5 {
        let key = format!("k{i}");
        let delivery = broker
            .produce_keyed("orders", &key, &format!("order {i}"))
            .expect("produce");
        audit.get_or_insert(delivery);
    }
    for i in 0..3 {
        broker
            .produce("events", &serde_json::json!({ "n": i }))
            .expect("produce");
    }
    let header = nanokafka::Header::new("trace", "abc");
    broker
        .produce_raw_with_headers("events", Some(b"raw-key"), b"not msgpack \xc1", &[header])
        .expect("produce raw");
    let audit = audit.expect("a delivery");
    for (topic, group, partition, offset) in [
        ("events", "billing", 0, 1),
        ("orders", "audit", audit.partition, audit.offset),
    ] {
        broker.join_group(topic, group, "m").expect("join");
        broker
            .commit(topic, group, partition, offset)
            .expect("commit");
        broker.leave_group(topic, group, "m").expect("leave");
    }
    broker.shutdown().expect("shutdown");
    dir
}

/// When the cleaner of [`cleaned_fixture`] made its pass: its clock (ms since the epoch).
pub const CLEANED_AT_MS: u64 = 1_000_000 + compacted_topic::LAG_MS;

/// A data directory holding `prices`, the one-partition compacted topic of small segments of
/// `tests/common/compacted.rs` (60 rounds of the keys `k0`..`k9`), which the broker's
/// cleaner cleaned in one pass at [`CLEANED_AT_MS`] (a `ManualClock`), closed again: its
/// sealed segments hold gaps where records were removed, and `cleaner.marker`.
pub fn cleaned_fixture() -> TempDir {
    cleaned_fixture_with_stats().0
}

/// [`cleaned_fixture`], and the cleaner's figures `stats()` gave before the broker closed.
pub fn cleaned_fixture_with_stats() -> (TempDir, CleanerSummary) {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = ManualClock::new(CLEANED_AT_MS - compacted_topic::LAG_MS);
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .clock(Arc::new(clock.clone()))
        .cleaner_backoff(Duration::from_millis(10))
        .build()
        .expect("open");
    broker
        .create_topic("prices", compacted_topic::compacted())
        .expect("create prices");
    compacted_topic::produce_rounds(&broker, "prices");
    // Every sealed segment becomes cleanable at once; the next check runs the pass.
    clock.advance(compacted_topic::LAG_MS);
    let cleaner = compacted_topic::wait_for_cleaning(&broker, "prices");
    broker.shutdown().expect("shutdown");
    (dir, cleaner)
}

/// Every file of `dir` with its bytes but the lock (which names the last opener's pid), to
/// show a command changed no data.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files_except(dir, |name| name == ".lock")
}

/// Every file of `dir` with its bytes, the lock included, but for the partitions' recovery
/// checkpoints, which a broker holding the directory rewrites on its own after opening it.
fn snapshot_beside_holder(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files_except(dir, |name| name.starts_with("checkpoint"))
}

fn files_except(dir: &Path, skip: impl Fn(&str) -> bool) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if skip(&path.file_name().unwrap().to_string_lossy()) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                files.push((path, bytes));
            }
        }
    }
    files.sort();
    files
}

/// Runs `args` against `dir` while this process holds it open; checks the command fails at
/// once (well within a second: it does not wait for the lock), names this process's pid and
/// the listener, and changes nothing.
pub fn assert_refused_while_locked(dir: &Path, args: &[&str]) {
    let broker = NanoKafka::builder().data_dir(dir).build().expect("open");
    let before = snapshot_beside_holder(dir);
    let started = Instant::now();
    let output = run_on(dir, args);
    let took = started.elapsed();
    let message = fails(&output);
    assert!(message.contains("locked"), "{message}");
    assert!(
        message.contains(&format!("pid {}", std::process::id())),
        "{message}"
    );
    assert!(message.contains("Kafka listener"), "{message}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(
        snapshot_beside_holder(dir),
        before,
        "the refused command changed the directory"
    );
    broker.shutdown().expect("shutdown");
}
