//! Many partitions under a low descriptor limit: the broker must not need `ulimit -n` tuning.
//!
//! Each partition has several files (segment, index, log start, offsets journal), so keeping
//! them all open would need thousands of descriptors. The parent test re-executes this test
//! binary in the mode [`fd_limit_child`] under `sh -c 'ulimit -n N && exec ...'`; the child
//! creates the partitions, produces a few records to each, shuts down, reopens, reads every
//! record back and checks that no partition failed. The broker runs with its default
//! `max_open_files`, which it derives from the (lowered) process limit.
//!
//! The CI test runs 2,000 partitions under `ulimit -n 256`, the same ratio of partitions to
//! descriptors as the full run: 10,000 partitions under `ulimit -n 1024`, which is ignored by
//! default (it takes longer) and runs with
//! `cargo test --test fd_limit -- --ignored ten_thousand_partitions_under_ulimit_1024`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use nanokafka::internals::storage::fs::SharedFs;
use nanokafka::internals::storage::sim::SimFs;
use nanokafka::{Error, FsyncPolicy, NanoKafka, ProduceRecord, TopicConfig};

/// Selects the child mode and names its data dir.
const CHILD_DIR_ENV: &str = "NANOKAFKA_FD_LIMIT_CHILD_DIR";
/// How many partitions the child creates.
const CHILD_PARTITIONS_ENV: &str = "NANOKAFKA_FD_LIMIT_PARTITIONS";
/// The descriptor limit the child must see (it checks that the `ulimit` took).
const CHILD_LIMIT_ENV: &str = "NANOKAFKA_FD_LIMIT_LIMIT";

const PARTITIONS_PER_TOPIC: u32 = 10;
const RECORDS_PER_PARTITION: u64 = 3;
const GROUP: &str = "checker";
const MEMBER: &str = "m";
/// A hung child fails the test instead of hanging it.
const WATCHDOG: Duration = Duration::from_secs(900);

#[test]
fn two_thousand_partitions_under_ulimit_256() {
    run_child(2_000, 256);
}

#[test]
#[ignore = "about 10,000 partitions: slow in a debug build; run it by name"]
fn ten_thousand_partitions_under_ulimit_1024() {
    run_child(10_000, 1024);
}

#[test]
fn max_open_files_below_the_minimum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for files in [0, 1, 15] {
        let built = NanoKafka::builder()
            .data_dir(dir.path())
            .max_open_files(files)
            .build();
        match built {
            Err(Error::InvalidArgument {
                name: "max_open_files",
                ..
            }) => {}
            other => panic!("max_open_files({files}): expected InvalidArgument, got {other:?}"),
        }
    }
}

/// The builder option in process: 60 partitions through 16 descriptors, across a reopen.
#[test]
fn a_small_max_open_files_serves_many_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        NanoKafka::builder()
            .data_dir(dir.path())
            .max_open_files(16)
            .build()
            .unwrap()
    };
    let broker = open();
    let topics: Vec<String> = (0..6).map(|t| format!("t{t}")).collect();
    for (t, topic) in topics.iter().enumerate() {
        broker
            .create_topic(
                topic,
                TopicConfig::default().partitions(PARTITIONS_PER_TOPIC),
            )
            .unwrap();
        for p in 0..PARTITIONS_PER_TOPIC {
            let records = (0..RECORDS_PER_PARTITION)
                .map(|i| ProduceRecord {
                    key: None,
                    value: value(t, p, i),
                })
                .collect();
            broker.produce_batch_raw(topic, Some(p), records).unwrap();
        }
    }
    broker.shutdown().unwrap();
    drop(broker);
    let broker = open();
    check_stats(&broker, &topics);
    read_back(&broker, &topics);
    broker.shutdown().unwrap();
}

/// On the simulated disk, through 16 descriptors: the clean shutdown syncs each partition's
/// files through descriptors reopened long after the records were written, and a power loss
/// right after it loses nothing.
#[test]
fn a_sync_through_reopened_descriptors_survives_a_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    let sim = SimFs::new(5);
    let open = || {
        let fs: SharedFs = Arc::new(sim.clone());
        NanoKafka::builder()
            .data_dir(dir.path())
            .fsync(FsyncPolicy::Never)
            .file_system(fs)
            .max_open_files(16)
            .build()
            .unwrap()
    };
    let broker = open();
    let topics: Vec<String> = (0..4).map(|t| format!("t{t}")).collect();
    for topic in &topics {
        broker
            .create_topic(
                topic,
                TopicConfig::default().partitions(PARTITIONS_PER_TOPIC),
            )
            .unwrap();
    }
    // Round-robin over the partitions: every file is evicted between its writes.
    for i in 0..RECORDS_PER_PARTITION {
        for (t, topic) in topics.iter().enumerate() {
            for p in 0..PARTITIONS_PER_TOPIC {
                let record = ProduceRecord {
                    key: None,
                    value: value(t, p, i),
                };
                broker
                    .produce_batch_raw(topic, Some(p), vec![record])
                    .unwrap();
            }
        }
    }
    broker.shutdown().unwrap();
    drop(broker);
    sim.crash();
    let broker = open();
    check_stats(&broker, &topics);
    read_back(&broker, &topics);
    broker.shutdown().unwrap();
}

/// Runs [`fd_limit_child`] under `ulimit -n limit` and fails with its output if it fails.
fn run_child(partitions: u32, limit: u64) {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(r#"ulimit -n {limit} && exec "$0" "$@""#))
        .arg(std::env::current_exe().unwrap())
        .args(["fd_limit_child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD_DIR_ENV, dir.path())
        .env(CHILD_PARTITIONS_ENV, partitions.to_string())
        .env(CHILD_LIMIT_ENV, limit.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut out, mut err) = (String::new(), String::new());
        let err_reader = thread::spawn(move || {
            let _ = stderr.read_to_string(&mut err);
            err
        });
        let _ = stdout.read_to_string(&mut out);
        let err = err_reader.join().unwrap_or_default();
        let _ = tx.send((child.wait(), out, err));
    });
    let Ok((status, out, err)) = rx.recv_timeout(WATCHDOG) else {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        panic!("the child did not finish within {WATCHDOG:?}");
    };
    let status = status.unwrap();
    let tail = |s: &str| s.lines().rev().take(40).collect::<Vec<_>>().join("\n");
    assert!(
        status.success() && out.contains("fd_limit_child: ok"),
        "child failed ({status}) with {partitions} partitions under ulimit -n {limit}\n\
         --- stdout (last lines, newest first)\n{}\n--- stderr (last lines, newest first)\n{}",
        tail(&out),
        tail(&err)
    );
    for line in out.lines().filter(|l| l.starts_with("phase ")) {
        println!("{line}");
    }
    println!(
        "{partitions} partitions under ulimit -n {limit}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The soft `RLIMIT_NOFILE` of this process, from `/proc/self/limits`.
fn soft_nofile_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[test]
#[ignore = "child process of the tests above"]
fn fd_limit_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let partitions: u32 = std::env::var(CHILD_PARTITIONS_ENV)
        .unwrap()
        .parse()
        .unwrap();
    let limit: u64 = std::env::var(CHILD_LIMIT_ENV).unwrap().parse().unwrap();
    assert_eq!(
        soft_nofile_limit(),
        Some(limit),
        "the child must run under the lowered limit"
    );
    let dir = Path::new(&dir);
    let topics: Vec<String> = (0..partitions.div_ceil(PARTITIONS_PER_TOPIC))
        .map(|t| format!("t{t}"))
        .collect();
    let phase = Instant::now();

    let broker = NanoKafka::builder().data_dir(dir).build().unwrap();
    for topic in &topics {
        broker
            .create_topic(
                topic,
                TopicConfig::default().partitions(PARTITIONS_PER_TOPIC),
            )
            .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    }
    for (t, topic) in topics.iter().enumerate() {
        for p in 0..PARTITIONS_PER_TOPIC {
            let records = (0..RECORDS_PER_PARTITION)
                .map(|i| ProduceRecord {
                    key: None,
                    value: value(t, p, i),
                })
                .collect();
            broker
                .produce_batch_raw(topic, Some(p), records)
                .unwrap_or_else(|e| panic!("produce to {topic}/{p}: {e}"));
        }
    }
    check_stats(&broker, &topics);
    broker.shutdown().expect("a clean shutdown");
    drop(broker);
    println!(
        "phase create and produce: {:.1} s",
        phase.elapsed().as_secs_f64()
    );

    let phase = Instant::now();
    let broker = NanoKafka::builder().data_dir(dir).build().unwrap();
    check_stats(&broker, &topics);
    read_back(&broker, &topics);
    check_stats(&broker, &topics);
    broker
        .shutdown()
        .expect("a clean shutdown after the reopen");
    println!(
        "phase reopen and read back: {:.1} s",
        phase.elapsed().as_secs_f64()
    );
    println!("fd_limit_child: ok");
}

fn value(topic: usize, partition: u32, i: u64) -> Vec<u8> {
    format!("{topic}/{partition}/{i}").into_bytes()
}

/// Reads every partition of every topic through a group and checks its records.
fn read_back(broker: &NanoKafka, topics: &[String]) {
    for (t, topic) in topics.iter().enumerate() {
        broker.join_group(topic, GROUP, MEMBER).unwrap();
        let mut seen = vec![Vec::new(); PARTITIONS_PER_TOPIC as usize];
        loop {
            let batch = broker
                .poll_batch_raw(topic, GROUP, MEMBER, 100, Duration::ZERO)
                .unwrap_or_else(|e| panic!("poll {topic}: {e}"));
            let Some(last) = batch.last() else { break };
            broker
                .commit(topic, GROUP, last.partition, last.offset)
                .unwrap();
            for record in &batch {
                seen[record.partition as usize].push((record.offset, record.value.clone()));
            }
        }
        for p in 0..PARTITIONS_PER_TOPIC {
            let expected: Vec<(u64, Vec<u8>)> = (0..RECORDS_PER_PARTITION)
                .map(|i| (i, value(t, p, i)))
                .collect();
            assert_eq!(seen[p as usize], expected, "records of {topic}/{p}");
        }
    }
}

/// Every partition of every topic is open (not failed) and holds its records.
fn check_stats(broker: &NanoKafka, topics: &[String]) {
    let stats = broker.stats().unwrap();
    for topic in topics {
        let partitions = &stats.topics[topic].partitions;
        assert_eq!(partitions.len(), PARTITIONS_PER_TOPIC as usize);
        for p in partitions {
            assert_eq!(p.failed, None, "{topic}/{} failed", p.partition);
            assert_eq!(
                p.log_end_offset, RECORDS_PER_PARTITION,
                "log end of {topic}/{}",
                p.partition
            );
        }
    }
}
