//! Bad input from the environment rather than from the arguments: a data dir the process may not
//! write, and a `shutdown()` racing other threads' produces and polls. Each gets a clear error,
//! never a hang, and loses nothing acknowledged.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nanokafka::{Error, NanoKafka, TopicConfig};

/// Bounds every wait for a thread: a hang fails the test instead of stalling CI.
const WATCHDOG: Duration = Duration::from_secs(30);

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Whether this process can create a file in `dir` in spite of its mode (root bypasses
/// permissions, as in most CI containers): then a read-only dir tests nothing.
fn permissions_bypassed(dir: &Path) -> bool {
    let probe = dir.join(".probe");
    let created = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    if created {
        eprintln!(
            "skipped: this process can write to the read-only {} (running as root?)",
            dir.display()
        );
    }
    created
}

fn assert_io_error_naming(err: &Error, path: &Path) {
    match err {
        Error::Io { path: p, .. } => assert!(
            p.starts_with(path),
            "the Io error names {p:?}, not a path under {path:?}: {err}"
        ),
        other => panic!("expected Error::Io naming {path:?}, got {other:?}"),
    }
    assert!(
        err.to_string().contains(&*path.to_string_lossy()),
        "the message names the path: {err}"
    );
}

#[test]
fn opening_a_read_only_data_dir_is_an_io_error_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let read_only = root.path().join("ro");
    std::fs::create_dir(&read_only).unwrap();
    set_mode(&read_only, 0o555);
    if !permissions_bypassed(&read_only) {
        // The data dir itself is read-only: the lock file cannot be created in it.
        let err = NanoKafka::open(&read_only).unwrap_err();
        assert_io_error_naming(&err, &read_only);
        // A data dir to be created inside a read-only directory.
        let below = read_only.join("data");
        let err = NanoKafka::open(&below).unwrap_err();
        assert_io_error_naming(&err, &below);
        assert!(!below.exists(), "the failed open created nothing");
        assert_eq!(std::fs::read_dir(&read_only).unwrap().count(), 0);
    }
    set_mode(&read_only, 0o755); // so the temp dir can be removed
}

#[test]
fn create_topic_in_a_data_dir_turned_read_only_is_an_io_error_and_changes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let broker = NanoKafka::open(&dir).unwrap();
    broker.create_topic("kept", TopicConfig::default()).unwrap();
    broker.produce("kept", &1u64).unwrap();
    set_mode(&dir, 0o555);
    if !permissions_bypassed(&dir) {
        let err = broker
            .create_topic("new", TopicConfig::default().partitions(2))
            .unwrap_err();
        assert_io_error_naming(&err, &dir);
        let topics = broker.stats().unwrap().topics;
        assert_eq!(
            topics.keys().collect::<Vec<_>>(),
            ["kept"],
            "nothing changed"
        );
        // The existing topic still serves: its partition dir is writable.
        broker.produce("kept", &2u64).unwrap();
    }
    set_mode(&dir, 0o755);
    // Writable again: the same call now succeeds, so the error was about the permissions.
    broker.create_topic("new", TopicConfig::default()).unwrap();
    broker.shutdown().unwrap();
}

/// What one producer thread saw: its acknowledged (partition, offset, value) and the error
/// that ended it.
type ProducerOutcome = (Vec<(u32, u64, u64)>, Error);

/// Joins the threads behind `outcomes`, failing the test if one is still running when the
/// watchdog runs out.
fn collect<T>(outcomes: &mpsc::Receiver<T>, count: usize, deadline: Instant) -> Vec<T> {
    (0..count)
        .map(|i| {
            let left = deadline.saturating_duration_since(Instant::now());
            outcomes
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("thread {i} of {count} hung after shutdown: {e}"))
        })
        .collect()
}

#[test]
fn shutdown_while_threads_produce_and_poll_answers_each_and_loses_nothing_acknowledged() {
    const PRODUCERS: u64 = 4;
    /// Acknowledgements before the shutdown, so it lands in the middle of the traffic.
    const ACKS_BEFORE_SHUTDOWN: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(3))
        .unwrap();
    broker.join_group("t", "g", "c").unwrap();

    let (acks_tx, acks_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<ProducerOutcome>();
    for thread in 0..PRODUCERS {
        let (broker, acks_tx, done_tx) = (broker.clone(), acks_tx.clone(), done_tx.clone());
        thread::spawn(move || {
            let mut acked = Vec::new();
            for seq in 0.. {
                // Distinct values over all threads: thread in the high bits.
                let value = thread << 32 | seq;
                match broker.produce_keyed("t", format!("{thread}-{}", seq % 7), &value) {
                    Ok(d) => {
                        acked.push((d.partition, d.offset, value));
                        let _ = acks_tx.send(());
                    }
                    Err(e) => {
                        let _ = done_tx.send((acked, e));
                        return;
                    }
                }
            }
        });
    }
    // A consumer in a long poll (longer than the watchdog): the shutdown must wake it.
    let (poll_tx, poll_rx) = mpsc::channel();
    let consumer = broker.clone();
    thread::spawn(move || {
        let mut committed = BTreeMap::new();
        let error = loop {
            match consumer.poll_timeout::<u64>("t", "g", "c", Duration::from_secs(120)) {
                Ok(Some(r)) => match consumer.commit("t", "g", r.partition, r.offset) {
                    Ok(()) => {
                        committed.insert(r.partition, r.offset);
                    }
                    Err(e) => break e,
                },
                Ok(None) => continue,
                Err(e) => break e,
            }
        };
        let _ = poll_tx.send((committed, error));
    });

    for _ in 0..ACKS_BEFORE_SHUTDOWN {
        acks_rx
            .recv_timeout(WATCHDOG)
            .expect("the producers make progress");
    }
    broker.shutdown().expect("a clean shutdown under load");
    let deadline = Instant::now() + WATCHDOG;
    let producers = collect(&done_rx, PRODUCERS as usize, deadline);
    let (committed, poll_error) = collect(&poll_rx, 1, deadline).remove(0);

    // Every call in flight got Ok or a "stopped" answer: nothing else, no hang.
    let stopped = |e: &Error| matches!(e, Error::BrokerStopped | Error::PartitionRestarted { .. });
    for (_, e) in &producers {
        assert!(stopped(e), "a produce racing the shutdown got {e:?}");
    }
    assert!(
        stopped(&poll_error),
        "a poll racing the shutdown got {poll_error:?}"
    );

    // Reopened: every acknowledged record at its offset, offsets contiguous, no duplicate.
    drop(broker);
    let broker = NanoKafka::open(dir.path()).unwrap();
    let stats = broker.stats().unwrap();
    for (partition, offset) in &committed {
        assert!(
            stats.topics["t"].partitions[*partition as usize].committed["g"] > *offset,
            "the acknowledged commit of {partition}@{offset} holds"
        );
    }
    broker.join_group("t", "check", "check").unwrap();
    let mut log: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    loop {
        let batch = broker
            .poll_batch::<u64>("t", "check", "check", 1000, Duration::ZERO)
            .unwrap();
        let Some(last) = batch.last() else { break };
        broker
            .commit("t", "check", last.partition, last.offset)
            .unwrap();
        log.extend(
            batch
                .into_iter()
                .map(|r| ((r.partition, r.offset), r.value)),
        );
    }
    let mut acknowledged = 0;
    for (acked, _) in &producers {
        for &(partition, offset, value) in acked {
            assert_eq!(
                log.get(&(partition, offset)),
                Some(&value),
                "acknowledged {value:#x} at {partition}@{offset}"
            );
            acknowledged += 1;
        }
    }
    assert!(acknowledged >= ACKS_BEFORE_SHUTDOWN);
    for p in &stats.topics["t"].partitions {
        let offsets: Vec<u64> = log
            .range((p.partition, 0)..=(p.partition, u64::MAX))
            .map(|(&(_, o), _)| o)
            .collect();
        assert_eq!(offsets, (0..p.log_end_offset).collect::<Vec<_>>());
    }
    let mut values: Vec<u64> = log.values().copied().collect();
    values.sort_unstable();
    values.dedup();
    assert_eq!(values.len(), log.len(), "no value twice");
    // At most the one produce per thread that was in flight at the shutdown went unanswered.
    assert!(log.len() - acknowledged <= PRODUCERS as usize);
    broker.shutdown().unwrap();
}

#[test]
fn a_partition_whose_files_are_read_only_fails_naming_them_and_the_rest_serves() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let broker = NanoKafka::open(&dir).unwrap();
    for topic in ["locked", "free"] {
        broker.create_topic(topic, TopicConfig::default()).unwrap();
        broker.produce(topic, &1u64).unwrap();
    }
    broker.shutdown().unwrap();
    let partition_dir = dir.join("locked_0");
    let files: Vec<_> = std::fs::read_dir(&partition_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for file in &files {
        set_mode(file, 0o444);
    }
    set_mode(&partition_dir, 0o555);
    if !permissions_bypassed(&partition_dir) {
        let broker = NanoKafka::open(&dir).unwrap();
        let err = broker.produce("locked", &2u64).unwrap_err();
        match &err {
            Error::PartitionFailed { reason, .. } => assert!(
                reason.contains(&*partition_dir.to_string_lossy()),
                "the reason names the file: {err}"
            ),
            other => panic!("expected PartitionFailed, got {other:?}"),
        }
        broker
            .produce("free", &2u64)
            .expect("other partitions serve");
        broker
            .shutdown()
            .expect("a failed partition does not fail the shutdown");
    }
    set_mode(&partition_dir, 0o755);
    for file in &files {
        set_mode(file, 0o644);
    }
    // Writable again: the partition opens with its record, the refused produce absent.
    let broker = NanoKafka::open(&dir).unwrap();
    let stats = broker.stats().unwrap();
    assert_eq!(stats.topics["locked"].partitions[0].log_end_offset, 1);
    broker.shutdown().unwrap();
}
