//! kill -9 while the log cleaner runs: a compacted topic survives SIGKILL at any point of a
//! cleaning pass, its swap and the recovery that finishes it.
//!
//! A child process (this test binary, re-executed in the mode [`cleaning_child`]) produces
//! keyed records and tombstones to a compacted topic of 4 KiB segments, one at a time,
//! printing each write before it sends it and its offset once acknowledged, while its broker
//! cleans continuously (`cleaner_backoff` 2 ms, any dirty byte makes a pass due, tombstones
//! kept 100 ms). The parent SIGKILLs it after a random number of acknowledgements (a seeded
//! xorshift; replay a failure with the printed `NANOKAFKA_CLEANING_KILL9_SEED`), in every
//! third round once a swap has then passed its commit point too (a `.log.swap` appeared),
//! round after round on the same data directory, each child recovering what the last one
//! left. After each kill, before the next child opens the directory, `nanokafka verify`
//! reads it as the kill left it: the only damage it may report is a torn tail of the active
//! segment (which the next open cuts), and the cleaner files it lists (an interrupted pass's
//! `.cleaned` and `.swap` files, and the `.deleted` segments of a swap not yet unlinked) are
//! those in the directory.
//!
//! At the end the parent reopens the directory and checks every record against the writes:
//! offsets strictly increase; every record is one the children wrote (its key, value or
//! tombstone, and its acknowledged offset); for each key the records read are a suffix of
//! those written to it, ending with its latest (so no older value is served after a newer
//! one was removed), or nothing at all when its latest was a tombstone whose time ran out;
//! the cleaner ran (its marker, its figures after the reopen) and records were removed, and
//! kills landed in swaps; and `nanokafka verify` finds the directory clean.

#[path = "common/binary.rs"]
mod binary;
#[path = "../../tests/common/client_batch.rs"]
mod client_batch;
#[path = "../../tests/common/process.rs"]
mod process;
#[path = "common/records.rs"]
mod stored;
#[path = "../../tests/common/watchdog.rs"]
mod watchdog;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use nanokafka::{CleanupPolicy, DirtyRatio, Header, NanoKafka, TopicConfig, MIN_SEGMENT_BYTES};

/// Selects the child mode of this test binary and names its data directory.
const CHILD_DIR_ENV: &str = "NANOKAFKA_CLEANING_KILL9_DIR";
/// The child's round number (part of every record's identity) and its RNG seed.
const CHILD_ROUND_ENV: &str = "NANOKAFKA_CLEANING_KILL9_ROUND";
const CHILD_SEED_ENV: &str = "NANOKAFKA_CLEANING_KILL9_CHILD_SEED";
/// Overrides the parent's seed (printed by every run) to replay a failure.
const SEED_ENV: &str = "NANOKAFKA_CLEANING_KILL9_SEED";

const TOPIC: &str = "state";
/// Few keys, so that most records are superseded and every pass removes some.
const KEYS: u64 = 24;
/// One write in this many is a tombstone.
const TOMBSTONE_EVERY: u64 = 7;
/// Short enough that tombstones are dropped during the test, so that kills land on passes
/// that drop them too.
const DELETE_RETENTION_MS: u64 = 100;
const ROUNDS: u32 = 30;
/// Every `EARLY_KILL_EVERY`th round is killed within its first few acknowledgements: right
/// after an open, whose recovery may have finished an interrupted swap, and whose first pass
/// cleans the whole log again.
const EARLY_KILL_EVERY: u32 = 5;
/// Every `SWAP_KILL_EVERY`th round (but the early ones) is killed in a swap, after its
/// commit point (see [`Kill::AtSwapAfterAcks`]).
const SWAP_KILL_EVERY: u32 = 3;
/// The header naming each record's write: `<round>.<seq>`.
const WRITE_HEADER: &str = "w";
const WATCHDOG: Duration = Duration::from_secs(120);
/// How long the parent waits for the child's next line before it declares it hung.
const LINE_TIMEOUT: Duration = Duration::from_secs(30);

/// A tiny xorshift64* generator: reproducible kill moments and writes without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `low..high` for picking kill moments and keys.
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low)
    }
}

/// The topic: one partition of 4 KiB segments, compacted whenever anything is dirty.
fn topic_config() -> TopicConfig {
    TopicConfig::default()
        .partitions(1)
        .segment_bytes(MIN_SEGMENT_BYTES)
        .cleanup_policy(CleanupPolicy::Compact)
        .min_cleanable_dirty_ratio(DirtyRatio::from_basis_points(1).unwrap())
        .delete_retention_ms(DELETE_RETENTION_MS)
}

/// A write: `(round, seq)`, unique over the whole test.
type WriteId = (u32, u64);

/// One line of the child's stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    /// About to send this write (it may reach the log without its acknowledgement).
    Send {
        id: WriteId,
        key: String,
        tombstone: bool,
    },
    /// The write was acknowledged at this offset.
    Acked { id: WriteId, offset: u64 },
    /// The child's broker opened the directory (recovery done).
    Opened,
}

impl Line {
    fn parse(line: &str) -> Option<Line> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let id = |round: &str, seq: &str| Some((round.parse().ok()?, seq.parse().ok()?));
        match words[..] {
            ["send", round, seq, key, kind] => Some(Line::Send {
                id: id(round, seq)?,
                key: key.to_owned(),
                tombstone: kind == "tombstone",
            }),
            ["acked", round, seq, offset] => Some(Line::Acked {
                id: id(round, seq)?,
                offset: offset.parse().ok()?,
            }),
            ["opened"] => Some(Line::Opened),
            _ => None, // the test harness's own output
        }
    }
}

/// Prints one line and flushes it, so that a line the parent reads was true when printed.
fn emit(line: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    out.write_fmt(line).unwrap();
    out.write_all(b"\n").unwrap();
    out.flush().unwrap();
}

fn env_var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"))
}

/// A tombstone of `key` as a Kafka producer's batch (native produces always carry a value),
/// its write named in a header.
fn tombstone_batch(key: &str, write: &str) -> Vec<u8> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let record = client_batch::ClientRecord {
        timestamp: now_ms as i64,
        key: Some(Bytes::from(key.to_owned())),
        value: None,
        headers: vec![(WRITE_HEADER, Some(Bytes::from(write.to_owned())))],
    };
    client_batch::encode(&[record], client_batch::BatchOptions::default()).to_vec()
}

/// The child process: recovers the directory, then writes until it is killed. Any error is
/// a test failure (it exits at once, and the parent sees it stop before its kill).
#[test]
#[ignore = "child process of kill_9_during_cleaning_keeps_every_keys_latest_value"]
fn cleaning_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let round: u32 = env_var(CHILD_ROUND_ENV).parse().unwrap();
    let mut rng = XorShift(env_var(CHILD_SEED_ENV).parse().unwrap());
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::exit(101);
    }));
    let broker = NanoKafka::builder()
        .data_dir(&dir)
        .cleaner_backoff(Duration::from_millis(2))
        .cleaner_key_map_bytes(1 << 20)
        .build()
        .unwrap();
    emit(format_args!("opened"));
    for seq in 0.. {
        let key = format!("k{:02}", rng.range(0, KEYS));
        let tombstone = rng.range(0, TOMBSTONE_EVERY) == 0;
        let write = format!("{round}.{seq}");
        let kind = if tombstone { "tombstone" } else { "value" };
        emit(format_args!("send {round} {seq} {key} {kind}"));
        let offset = if tombstone {
            let batch = tombstone_batch(&key, &write);
            broker
                .produce_kafka_batch(TOPIC, 0, batch)
                .unwrap()
                .base_offset
        } else {
            let header = Header::new(WRITE_HEADER, write.clone());
            broker
                .produce_raw_with_headers(TOPIC, Some(key.as_bytes()), write.as_bytes(), &[header])
                .unwrap()
                .offset
        };
        emit(format_args!("acked {round} {seq} {offset}"));
    }
}

/// Kills the child if the test fails before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// When a round's child is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// Once this many writes were acknowledged.
    AfterAcks(u64),
    /// Once this many writes were acknowledged and then a swap's commit point passed (a
    /// `.log.swap` file appeared; or after `SWAP_WAIT`): a kill right after an
    /// acknowledgement rarely lands in a swap, which holds up the partition's produces.
    AtSwapAfterAcks(u64),
}

/// How long a [`Kill::AtSwapAfterAcks`] round watches for a swap before it kills anyway.
const SWAP_WAIT: Duration = Duration::from_secs(2);

/// Runs one child round on `dir`, SIGKILLs it as `kill` says, and returns every line it
/// printed (those after the kill-deciding one included: the pipe keeps them).
fn run_child_then_kill(dir: &Path, round: u32, seed: u64, kill: Kill) -> Vec<Line> {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["cleaning_child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_ROUND_ENV, round.to_string())
        .env(CHILD_SEED_ENV, seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit()) // a child's panic shows in the test's output
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    // Read on a thread, so that a hung child fails the round instead of blocking the parent.
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(parsed) = Line::parse(&line) {
                if tx.send(parsed).is_err() {
                    return;
                }
            }
        }
    });
    let (Kill::AfterAcks(acks) | Kill::AtSwapAfterAcks(acks)) = kill;
    let mut lines = Vec::new();
    let mut acked = 0;
    while acked < acks {
        let line = rx.recv_timeout(LINE_TIMEOUT).unwrap_or_else(|e| {
            panic!("round {round}: the child stopped after {acked} of {acks} acknowledgements: {e}")
        });
        acked += u64::from(matches!(line, Line::Acked { .. }));
        lines.push(line);
    }
    if let Kill::AtSwapAfterAcks(_) = kill {
        // Polled without a pause: a swap's commit lasts a few milliseconds.
        let partition = dir.join(format!("{TOPIC}_0"));
        let watching = Instant::now();
        while watching.elapsed() < SWAP_WAIT
            && !cleaner_files(&partition)
                .iter()
                .any(|n| n.ends_with(".log.swap"))
        {}
    }
    child.0.kill().unwrap(); // SIGKILL: no shutdown, no flush, no checkpoint
    child.0.wait().unwrap();
    // What it printed before it died is still in the pipe.
    lines.extend(rx.iter());
    lines
}

/// Everything the children wrote, as far as the parent knows.
#[derive(Default)]
struct History {
    /// Every write sent, acknowledged or not: its key and whether it is a tombstone.
    writes: BTreeMap<WriteId, (String, bool)>,
    /// The acknowledged offset of each acknowledged write.
    acked: BTreeMap<WriteId, u64>,
    anomalies: Vec<String>,
}

impl History {
    fn record(&mut self, lines: Vec<Line>) {
        for line in lines {
            match line {
                Line::Send { id, key, tombstone } => {
                    self.writes.insert(id, (key, tombstone));
                }
                Line::Acked { id, offset } => {
                    if !self.writes.contains_key(&id) {
                        self.anomalies
                            .push(format!("{id:?} acknowledged but never sent"));
                    }
                    self.acked.insert(id, offset);
                }
                Line::Opened => {}
            }
        }
    }
}

/// The cleaner's files an interrupted pass left in `partition` (`.cleaned`, `.swap`,
/// `.deleted`).
fn cleaner_files(partition: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(partition)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted"))
        .collect();
    names.sort();
    names
}

/// `nanokafka verify --json` on `dir`, with its exit code.
fn verify(dir: &Path) -> (Option<i32>, serde_json::Value) {
    let output = Command::new(binary::BIN)
        .args(["verify", "--json", "--data-dir"])
        .arg(dir)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code(), doc)
}

/// Checks the directory as a kill left it (see the module docs); returns the names of the
/// cleaner's files verify listed.
fn check_killed_dir(dir: &Path, round: u32, anomalies: &mut Vec<String>) -> Vec<String> {
    let partition = dir.join(format!("{TOPIC}_0"));
    let on_disk = cleaner_files(&partition);
    let (code, doc) = verify(dir);
    let active = std::fs::read_dir(&partition)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    for damage in doc["damage"].as_array().unwrap() {
        let torn_active_tail = damage["file"] == active.to_str().unwrap()
            && damage["reason"].as_str().unwrap().starts_with("torn tail");
        if !torn_active_tail {
            anomalies.push(format!("round {round}: verify after the kill: {damage}"));
        }
    }
    let expected_exit = if doc["clean"] == true { 0 } else { 1 };
    if code != Some(expected_exit) {
        anomalies.push(format!("round {round}: verify exited {code:?}: {doc}"));
    }
    let listed: Vec<String> = doc["cleaner_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f["file"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort();
    if listed_sorted != on_disk {
        anomalies.push(format!(
            "round {round}: verify listed the cleaner files {listed_sorted:?}, the directory has {on_disk:?}"
        ));
    }
    listed
}

/// The final check of every record of the reopened log against the history (see the module
/// docs); returns how many records were read.
fn check_log(history: &mut History, dir: &Path) -> usize {
    let records = stored::records(dir, TOPIC);
    let anomalies = &mut history.anomalies;
    // Per key, the writes known to have reached the log, by offset: every acknowledged one,
    // and those read back without an acknowledgement (sent just before a kill).
    let mut reached: BTreeMap<String, BTreeMap<u64, (WriteId, bool)>> = BTreeMap::new();
    for (&id, &offset) in &history.acked {
        let (key, tombstone) = &history.writes[&id];
        reached
            .entry(key.clone())
            .or_default()
            .insert(offset, (id, *tombstone));
    }
    let mut read: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut previous: Option<u64> = None;
    for (_, record) in &records {
        if previous.is_some_and(|p| p >= record.offset) {
            anomalies.push(format!(
                "offset {} read after offset {previous:?}",
                record.offset
            ));
        }
        previous = Some(record.offset);
        let write = record
            .headers
            .iter()
            .find(|(k, _)| k == WRITE_HEADER.as_bytes())
            .and_then(|(_, v)| std::str::from_utf8(v.as_deref()?).ok())
            .and_then(|w| {
                let (round, seq) = w.split_once('.')?;
                Some((round.parse().ok()?, seq.parse().ok()?))
            });
        let known = write.and_then(|id: WriteId| Some((id, history.writes.get(&id)?)));
        let Some((id, (key, tombstone))) = known else {
            anomalies.push(format!(
                "offset {}: a record no child wrote: {record:?}",
                record.offset
            ));
            continue;
        };
        let as_written = record.key.as_deref() == Some(key.as_bytes())
            && record.value.is_none() == *tombstone
            && (*tombstone
                || record.value.as_deref() == Some(format!("{}.{}", id.0, id.1).as_bytes()));
        if !as_written {
            anomalies.push(format!(
                "offset {}: not as written by {id:?}: {record:?}",
                record.offset
            ));
        }
        match history.acked.get(&id) {
            Some(&acked) if acked != record.offset => anomalies.push(format!(
                "{id:?} acknowledged at offset {acked}, read at {}",
                record.offset
            )),
            Some(_) => {}
            None => {
                reached
                    .entry(key.clone())
                    .or_default()
                    .insert(record.offset, (id, *tombstone));
            }
        }
        read.entry(key.clone()).or_default().push(record.offset);
    }
    for (key, writes) in &reached {
        let read = read.get(key).cloned().unwrap_or_default();
        let offsets: Vec<u64> = writes.keys().copied().collect();
        let latest_is_tombstone = writes.values().next_back().is_some_and(|&(_, t)| t);
        let suffix = offsets.ends_with(&read) && (!read.is_empty() || latest_is_tombstone);
        if !suffix {
            anomalies.push(format!(
                "{key}: read at offsets {read:?}, which is not a suffix ending with its latest of those written at {offsets:?}"
            ));
        }
    }
    records.len()
}

#[test]
fn kill_9_during_cleaning_keeps_every_keys_latest_value() {
    watchdog::within(WATCHDOG, || {
        let seed = std::env::var(SEED_ENV)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x2545_f491_4f6c_dd1d_u64);
        eprintln!("cleaning kill -9 seed {seed} (replay with {SEED_ENV}={seed})");
        let mut rng = XorShift(seed.max(1));
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        broker.create_topic(TOPIC, topic_config()).unwrap();
        broker.shutdown().unwrap();

        let mut history = History::default();
        // Kills of a child that had opened the directory, landing while a pass had files
        // out (`.cleaned` or `.swap`), and among them after a swap's commit point.
        let (mut kills_amid_pass, mut kills_amid_swap) = (0, 0);
        let mut anomalies = Vec::new();
        for round in 0..ROUNDS {
            let kill = if round % EARLY_KILL_EVERY == EARLY_KILL_EVERY - 1 {
                Kill::AfterAcks(rng.range(0, 5))
            } else if round % SWAP_KILL_EVERY == SWAP_KILL_EVERY - 1 {
                Kill::AtSwapAfterAcks(rng.range(20, 300))
            } else {
                Kill::AfterAcks(rng.range(20, 300))
            };
            let lines = run_child_then_kill(dir.path(), round, rng.next().max(1), kill);
            let opened = lines.contains(&Line::Opened);
            history.record(lines);
            let listed = check_killed_dir(dir.path(), round, &mut anomalies);
            if opened && !listed.is_empty() {
                kills_amid_pass += 1;
                kills_amid_swap += usize::from(listed.iter().any(|n| n.ends_with(".log.swap")));
            }
        }
        history.anomalies.extend(anomalies);

        let read = check_log(&mut history, dir.path());
        let broker = NanoKafka::open(dir.path()).unwrap();
        let partition = broker.stats().unwrap().topics[TOPIC].partitions[0].clone();
        broker.shutdown().unwrap();
        let (code, doc) = verify(dir.path());
        eprintln!(
            "cleaning kill -9 summary: rounds {ROUNDS}, writes {} ({} acknowledged), records read {read} of {}, kills amid a pass {kills_amid_pass} (after its swap's commit {kills_amid_swap}), cleaner {:?}, verify {doc}",
            history.writes.len(),
            history.acked.len(),
            partition.log_end_offset,
            partition.cleaner,
        );
        assert!(
            history.anomalies.is_empty(),
            "anomalies:\n{}",
            history.anomalies.join("\n")
        );
        assert_eq!(
            (code, &doc["clean"]),
            (Some(0), &serde_json::json!(true)),
            "{doc:#}"
        );
        // The cleaner ran, across the kills: its marker, the records it removed, the gaps
        // verify accepted, and its figures (kept across the restarts) when a pass wrote
        // them: a kill between a pass's swap and the write of its figures costs that pass's
        // figures (as documented on `Partition::swap_in`), so when every pass was killed
        // there, there are none.
        let marker = dir.path().join(format!("{TOPIC}_0")).join("cleaner.marker");
        assert!(marker.exists(), "the cleaner never swapped a segment in");
        if let Some(cleaner) = partition.cleaner {
            assert!(
                cleaner.passes > 0 && cleaner.records_removed > 0,
                "{cleaner:?}"
            );
        }
        assert!(
            (read as u64) < partition.log_end_offset / 2,
            "{read} records left"
        );
        assert!(doc["cleaner_gaps"].as_u64().unwrap() > 0, "{doc:#}");
        assert!(
            kills_amid_swap > 0,
            "no kill landed after a swap's commit point: recovery never had one to finish"
        );
    });
}
