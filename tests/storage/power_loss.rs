//! Simulated power loss: a partition log and its offsets store run on `SimFs`, a disk that loses
//! unsynced writes and tears the last one at a random byte when it "loses power". Over many seeds:
//! with `FsyncPolicy::Always` nothing acknowledged is lost; with `Never` (syncs only when the owner
//! calls `sync`, as the `Interval` timer does) the log reopens to a valid prefix that holds at
//! least everything synced.

use std::path::Path;
use std::sync::Arc;

use nanokafka::internals::storage::fs::SharedFs;
use nanokafka::internals::storage::sim::FaultOp;
use nanokafka::internals::storage::sim::SimFs;
use nanokafka::internals::storage::{
    AppendInfo, AppendRecord, LogConfig, OffsetStore, PartitionLog, StorageError,
};
use nanokafka::FsyncPolicy;

const NOW: u64 = 1_700_000_000_000;
const DIR: &str = "/sim/topic_0";
const SEEDS: u64 = 60;

/// A tiny deterministic generator for the test's own choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn config(fsync: FsyncPolicy) -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        fsync,
        ..LogConfig::default()
    }
}

fn value(i: u64) -> Vec<u8> {
    format!("record-{i}-{}", "v".repeat((i % 40) as usize)).into_bytes()
}

fn open(fs: &SharedFs, fsync: FsyncPolicy) -> (PartitionLog, OffsetStore) {
    let dir = Path::new(DIR);
    let (log, _) =
        PartitionLog::open_with(fs, dir, config(fsync), NOW).expect("reopen after a power loss");
    let offsets = OffsetStore::open_with(fs, dir, fsync).expect("offsets reopen");
    (log, offsets)
}

/// Appends record `i` (its value is `value(i)`) on its own.
fn append_value(log: &mut PartitionLog, i: u64) -> Result<AppendInfo, StorageError> {
    let v = value(i);
    log.append(
        &[AppendRecord {
            key: None,
            value: &v,
        }],
        NOW,
    )
}

fn read_all(log: &mut PartitionLog) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let fetched = log
            .read(offset, 100, 1 << 20)
            .expect("no corrupt record is served");
        if fetched.is_empty() {
            return out;
        }
        out.extend(fetched.iter().map(|r| (r.offset, r.value.to_vec())));
        offset = fetched.next_offset();
    }
}

/// What the test acknowledged: appended values in order, the last commit, and how much of
/// each was synced.
#[derive(Default)]
struct Acked {
    values: Vec<Vec<u8>>,
    synced_values: usize,
    commits: Vec<u64>,
    synced_commits: usize,
}

fn run(seed: u64, fsync: FsyncPolicy) -> (usize, usize) {
    let sim = SimFs::new(seed);
    let fs: SharedFs = Arc::new(sim.clone());
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut log, mut offsets) = open(&fs, fsync);
    let mut acked = Acked::default();
    let mut crashes = 0;
    for step in 0..200 {
        match rng.below(20) {
            0..=11 => {
                let n = 1 + rng.below(4);
                let first = acked.values.len() as u64;
                let values: Vec<Vec<u8>> = (first..first + n).map(value).collect();
                let batch: Vec<AppendRecord<'_>> = values
                    .iter()
                    .map(|v| AppendRecord {
                        key: None,
                        value: v,
                    })
                    .collect();
                let info = log.append(&batch, NOW).expect("append");
                assert_eq!(info.base_offset, first, "seed {seed} step {step}");
                acked.values.extend(values);
                if fsync == FsyncPolicy::Always {
                    acked.synced_values = acked.values.len();
                }
            }
            12..=14 => {
                let end = acked.values.len() as u64;
                if end > 0 {
                    let offset = rng.below(end) + 1;
                    offsets.commit("g", offset).expect("commit");
                    acked.commits.push(offset);
                    if fsync == FsyncPolicy::Always {
                        acked.synced_commits = acked.commits.len();
                    }
                }
            }
            15..=16 => {
                // What the Interval timer does.
                log.sync().expect("sync");
                offsets.sync().expect("sync");
                acked.synced_values = acked.values.len();
                acked.synced_commits = acked.commits.len();
            }
            17 => {
                // A clean shutdown and reopen: the reopened log writes nothing until its
                // first append, and a power loss after that must still be recovered.
                offsets.sync().expect("sync");
                log.close().expect("close");
                (log, offsets) = open(&fs, fsync);
                assert!(log.is_clean_on_disk(), "seed {seed} step {step}");
                acked.synced_values = acked.values.len();
                acked.synced_commits = acked.commits.len();
            }
            _ => {
                drop((log, offsets));
                sim.crash();
                crashes += 1;
                (log, offsets) = open(&fs, fsync);
                check_after_power_loss(seed, step, &mut log, &offsets, &mut acked);
            }
        }
    }
    (crashes, acked.values.len())
}

fn check_after_power_loss(
    seed: u64,
    step: usize,
    log: &mut PartitionLog,
    offsets: &OffsetStore,
    acked: &mut Acked,
) {
    let recovered = read_all(log);
    let at = format!("seed {seed} step {step}");
    assert!(
        recovered.len() >= acked.synced_values,
        "{at}: synced records lost ({} < {})",
        recovered.len(),
        acked.synced_values
    );
    assert!(
        recovered.len() <= acked.values.len(),
        "{at}: records that were never written"
    );
    for (i, (offset, bytes)) in recovered.iter().enumerate() {
        assert_eq!(
            (*offset, bytes),
            (i as u64, &acked.values[i]),
            "{at}: not a prefix of what was appended"
        );
    }
    // Unsynced records are gone for good: the model forgets them too.
    acked.values.truncate(recovered.len());
    acked.synced_values = recovered.len();
    // The committed offset is one that was committed, no older than the last synced one.
    let committed = offsets.get("g");
    match acked.synced_commits {
        0 => assert!(
            committed.is_none() || acked.commits.contains(&committed.unwrap()),
            "{at}"
        ),
        n => {
            let survivors = &acked.commits[n - 1..];
            assert!(
                committed.is_some_and(|c| survivors.contains(&c)),
                "{at}: commit {committed:?} not in {survivors:?}"
            );
        }
    }
    if let Some(c) = committed {
        acked.commits = vec![c];
        acked.synced_commits = 1;
    } else {
        acked.commits.clear();
        acked.synced_commits = 0;
    }
}

#[test]
fn with_fsync_always_nothing_acknowledged_is_lost_by_a_power_loss() {
    let mut total = (0, 0);
    for seed in 1..=SEEDS {
        let (crashes, records) = run(seed, FsyncPolicy::Always);
        total = (total.0 + crashes, total.1 + records);
    }
    assert!(
        total.0 > SEEDS as usize,
        "too few power losses simulated: {}",
        total.0
    );
    eprintln!(
        "Always: {} power losses, {} records surviving",
        total.0, total.1
    );
}

#[test]
fn without_fsync_a_power_loss_leaves_a_valid_prefix_holding_everything_synced() {
    let mut total = (0, 0);
    for seed in 1..=SEEDS {
        let (crashes, records) = run(seed, FsyncPolicy::Never);
        total = (total.0 + crashes, total.1 + records);
    }
    assert!(
        total.0 > SEEDS as usize,
        "too few power losses simulated: {}",
        total.0
    );
    eprintln!(
        "Never: {} power losses, {} records surviving",
        total.0, total.1
    );
}

/// fsyncgate (Rebello et al., ATC'20): a failed `fdatasync` may mark the pages clean
/// without writing them; trusting the next sync would leave a hole that a power loss turns
/// into the loss of every record acknowledged after it.
#[test]
fn records_acknowledged_after_a_failed_sync_survive_a_power_loss() {
    for seed in 1..=20 {
        let sim = SimFs::new(seed);
        let fs: SharedFs = Arc::new(sim.clone());
        let (mut log, _offsets) = open(&fs, FsyncPolicy::Always);
        for i in 0..5 {
            append_value(&mut log, i).unwrap();
        }
        sim.inject(".log", FaultOp::Sync, std::io::ErrorKind::Other, 1);
        assert!(
            append_value(&mut log, 5).is_err(),
            "a failed sync is not an acknowledgement"
        );
        // The owner reopens after a failed sync (the partition actor restarts).
        drop(log);
        let (mut log, _offsets) = open(&fs, FsyncPolicy::Always);
        let end = log.log_end_offset();
        for i in end..end + 5 {
            append_value(&mut log, i).unwrap();
        }
        let acknowledged = log.log_end_offset();
        drop(log);
        sim.crash();
        let (mut log, _offsets) = open(&fs, FsyncPolicy::Always);
        let recovered = read_all(&mut log);
        assert!(
            recovered.len() as u64 >= acknowledged,
            "seed {seed}: {} of {acknowledged} acknowledged records survived",
            recovered.len()
        );
    }
}

#[test]
fn commits_acknowledged_after_a_failed_sync_survive_a_power_loss() {
    for seed in 1..=20 {
        let sim = SimFs::new(seed);
        let fs: SharedFs = Arc::new(sim.clone());
        let (_log, mut offsets) = open(&fs, FsyncPolicy::Always);
        offsets.commit("g", 1).unwrap();
        sim.inject(
            "offsets.journal",
            FaultOp::Sync,
            std::io::ErrorKind::Other,
            1,
        );
        assert!(
            offsets.commit("g", 2).is_err(),
            "a failed sync is not an acknowledgement"
        );
        offsets.commit("h", 7).unwrap();
        drop(offsets);
        sim.crash();
        let (_log, offsets) = open(&fs, FsyncPolicy::Always);
        assert_eq!(
            offsets.get("h"),
            Some(7),
            "seed {seed}: an acknowledged commit was lost"
        );
        assert!(matches!(offsets.get("g"), Some(1) | Some(2)), "seed {seed}");
    }
}

/// Without `Always`, a roll seals the old segment on its own thread. A `sync` waits for that
/// sealing, so everything appended before it (in sealed segments and the new one, whose name
/// the sealing makes durable) survives a power loss that follows.
#[test]
fn a_sync_after_rolls_covers_the_segments_sealed_in_the_background() {
    for seed in 1..=20 {
        let sim = SimFs::new(seed);
        let fs: SharedFs = Arc::new(sim.clone());
        let policy = FsyncPolicy::Interval(std::time::Duration::from_secs(3600));
        let (mut log, _offsets) = open(&fs, policy);
        // About 100 bytes a batch of one record: 400 records roll the 4 KiB segments several
        // times.
        for i in 0..400 {
            append_value(&mut log, i).unwrap();
        }
        log.sync().unwrap();
        sim.crash();
        drop(log);
        let (mut log, _offsets) = open(&fs, policy);
        let recovered = read_all(&mut log);
        assert_eq!(recovered.len(), 400, "seed {seed}: synced records survive");
        for (i, (offset, v)) in recovered.into_iter().enumerate() {
            assert_eq!((offset, v), (i as u64, value(i as u64)), "seed {seed}");
        }
    }
}

/// A sealing that cannot sync its segment fails the next `sync` (the owner then reopens, as
/// after any failed sync), instead of passing unnoticed.
#[test]
fn a_failed_background_sealing_fails_the_next_sync() {
    let sim = SimFs::new(7);
    let fs: SharedFs = Arc::new(sim.clone());
    let (mut log, _offsets) = open(&fs, FsyncPolicy::Never);
    sim.inject(".log", FaultOp::Sync, std::io::ErrorKind::Other, 1);
    let mut rolled = false;
    for i in 0.. {
        let info = append_value(&mut log, i).unwrap();
        if log.segment_count() > 1 {
            rolled = info.base_offset > 0;
            break;
        }
    }
    assert!(rolled);
    assert!(matches!(log.sync(), Err(StorageError::Io { .. })));
}

/// A broker whose partitions live on `sim`, in `dir` (topic configs stay on the OS).
fn sim_broker(dir: &Path, sim: &SimFs, fsync: FsyncPolicy) -> nanokafka::NanoKafka {
    let fs: SharedFs = Arc::new(sim.clone());
    nanokafka::NanoKafka::builder()
        .data_dir(dir)
        .fsync(fsync)
        .file_system(fs)
        .build()
        .unwrap()
}

/// Under `Never` (or `Interval`) the offsets journal and the log are written back
/// independently, so a power loss can keep a commit while losing the records it covered. The commit is then above the
/// log end: the group's lag must stay sane (no underflow, no crashed partition), and the
/// records produced after the reopen, at offsets the commit claimed, must reach the group.
#[test]
fn a_commit_that_outlived_its_records_is_clamped_to_the_log_end_and_skips_nothing_later() {
    use std::time::Duration;
    const TOPIC: &str = "clamp";
    let mut clamped = 0;
    for seed in 1..=20 {
        let dir = tempfile::tempdir().unwrap();
        let sim = SimFs::new(seed);
        {
            let broker = sim_broker(dir.path(), &sim, FsyncPolicy::Never);
            broker.create_topic(TOPIC, Default::default()).unwrap();
            for value in 0..10u64 {
                broker.produce(TOPIC, &value).unwrap();
            }
            broker.join_group(TOPIC, "g", "m").unwrap();
            let batch = broker
                .poll_batch::<u64>(TOPIC, "g", "m", 100, Duration::ZERO)
                .unwrap();
            assert_eq!(batch.len(), 10, "seed {seed}");
            broker.commit(TOPIC, "g", 0, 9).unwrap();
            // The shutdown syncs the journal, but the log's pages never reach the disk (as
            // when the OS wrote the journal back first), then the power goes out.
            sim.inject(".log", FaultOp::Sync, std::io::ErrorKind::Other, usize::MAX);
            let _ = broker.shutdown();
        }
        sim.crash();
        let partition_dir = dir.path().join(format!("{TOPIC}_0"));
        let fs: SharedFs = Arc::new(sim.clone());
        let journal_commit = OffsetStore::open_with(&fs, &partition_dir, FsyncPolicy::Never)
            .unwrap()
            .get("g");

        let broker = sim_broker(dir.path(), &sim, FsyncPolicy::Never);
        let stats = broker.stats().unwrap().topics[TOPIC].partitions[0].clone();
        let log_end = stats.log_end_offset;
        if journal_commit.is_none_or(|c| c <= log_end) {
            continue;
        }
        clamped += 1;
        broker.join_group(TOPIC, "g", "m").unwrap();
        let lag = broker.lag(TOPIC, "g").expect("lag of a clamped group");
        assert_eq!(lag.get(&0), Some(&0), "seed {seed}");
        // Past the old commit: a commit clamped only in memory would skip offsets up to it.
        for value in 100..115u64 {
            broker.produce(TOPIC, &value).unwrap();
        }
        assert_eq!(broker.lag(TOPIC, "g").unwrap().get(&0), Some(&15));
        let batch = broker
            .poll_batch::<u64>(TOPIC, "g", "m", 100, Duration::ZERO)
            .unwrap();
        let got: Vec<(u64, u64)> = batch.iter().map(|r| (r.offset, r.value)).collect();
        let expected: Vec<(u64, u64)> = (0..15).map(|i| (log_end + i, 100 + i)).collect();
        assert_eq!(
            got, expected,
            "seed {seed}: records after the reopen skipped"
        );
        assert_eq!(
            stats.committed.get("g"),
            Some(&log_end),
            "seed {seed}: commit {journal_commit:?} above log end {log_end} not clamped"
        );
        broker.shutdown().unwrap();
        drop(broker);
        // The clamp was persisted: it holds after another reopen too.
        let broker = sim_broker(dir.path(), &sim, FsyncPolicy::Never);
        let stats = broker.stats().unwrap().topics[TOPIC].partitions[0].clone();
        assert_eq!(stats.committed.get("g"), Some(&log_end), "seed {seed}");
    }
    assert!(clamped > 0, "no seed kept a commit above the log end");
    eprintln!("{clamped} of 20 power losses kept a commit above the log end");
}

/// fsyncgate on the sealing thread: when the background sync of a rolled segment fails, its
/// unsynced records (B) may be in pages the kernel marked clean. Unless the sealing writes
/// them again before it reports, the reopen's own sync "succeeds" without persisting them,
/// and a power loss after later records (C, D) were synced leaves a hole where B was.
#[test]
fn records_of_a_segment_whose_background_sealing_failed_survive_a_later_power_loss() {
    let policy = FsyncPolicy::Interval(std::time::Duration::from_secs(3600));
    for seed in 1..=20 {
        let sim = SimFs::new(seed);
        let fs: SharedFs = Arc::new(sim.clone());
        let (mut log, _offsets) = open(&fs, policy);
        // A, synced.
        append_value(&mut log, 0).unwrap();
        log.sync().unwrap();
        // B: about 3 KiB more in the first segment, not synced.
        let b: Vec<Vec<u8>> = (1..60).map(value).collect();
        let batch: Vec<AppendRecord<'_>> = b
            .iter()
            .map(|v| AppendRecord {
                key: None,
                value: v,
            })
            .collect();
        log.append(&batch, NOW).unwrap();
        assert_eq!(log.segment_count(), 1);
        let (first_segment, _) = nanokafka::internals::storage::segment::file_names(0);
        sim.inject(&first_segment, FaultOp::Sync, std::io::ErrorKind::Other, 1);
        // C does not fit: the first segment is sealed in the background, and fails.
        let c = vec![b'c'; 2000];
        log.append(
            &[AppendRecord {
                key: None,
                value: &c,
            }],
            NOW,
        )
        .unwrap();
        assert_eq!(log.segment_count(), 2, "C rolled the log");
        assert!(log.sync().is_err(), "the failed sealing fails the sync");
        // The owner reopens after a failed sync.
        drop(log);
        let (mut log, _offsets) = open(&fs, policy);
        assert_eq!(
            log.log_end_offset(),
            61,
            "seed {seed}: A, B and C are in the OS"
        );
        // D, synced: everything before it was acknowledged synced by this sync.
        append_value(&mut log, 61).unwrap();
        log.sync().unwrap();
        drop(log);
        sim.crash();
        let (mut log, _offsets) = open(&fs, policy);
        let recovered: Vec<u64> = read_all(&mut log).into_iter().map(|(o, _)| o).collect();
        assert_eq!(
            recovered,
            (0..62).collect::<Vec<u64>>(),
            "seed {seed}: records lost after a sync that succeeded"
        );
    }
}

/// The same rule when the failed sync is recovery's own: records a crashed process left
/// unsynced are validated and synced on open; if that sync fails the open fails, and the next
/// open's sync must not be trusted on pages the failure may have marked clean, or a power
/// loss after later synced records leaves a hole (and cuts those records with it).
#[test]
fn records_survive_a_power_loss_after_a_failed_sync_during_recovery() {
    let policy = FsyncPolicy::Never;
    for seed in 1..=20 {
        let sim = SimFs::new(seed);
        let fs: SharedFs = Arc::new(sim.clone());
        let (mut log, _offsets) = open(&fs, policy);
        for i in 0..20 {
            append_value(&mut log, i).unwrap();
        }
        // A process crash: the records are in the OS, none synced.
        drop(log);
        sim.inject(".log", FaultOp::Sync, std::io::ErrorKind::Other, 1);
        let failed = PartitionLog::open_with(&fs, Path::new(DIR), config(policy), NOW);
        assert!(
            failed.is_err(),
            "seed {seed}: recovery's failed sync fails the open"
        );
        drop(failed);
        let (mut log, _offsets) = open(&fs, policy);
        assert_eq!(log.log_end_offset(), 20, "seed {seed}");
        for i in 20..25 {
            append_value(&mut log, i).unwrap();
        }
        log.sync().unwrap();
        drop(log);
        sim.crash();
        let (mut log, _offsets) = open(&fs, policy);
        assert_eq!(
            read_all(&mut log).len(),
            25,
            "seed {seed}: records lost after a sync that succeeded"
        );
    }
}

/// The offsets journal's first sync after a restart covers entries the previous process
/// wrote: if it fails, those too must be written again, not only this process's.
#[test]
fn commits_of_a_previous_process_survive_a_failed_sync_and_a_power_loss() {
    let policy = FsyncPolicy::Never;
    for seed in 1..=20 {
        let sim = SimFs::new(seed);
        let fs: SharedFs = Arc::new(sim.clone());
        let dir = Path::new(DIR);
        let mut offsets = OffsetStore::open_with(&fs, dir, policy).unwrap();
        offsets.commit("g", 1).unwrap();
        // A process crash: the entry is in the OS, not synced.
        drop(offsets);
        let mut offsets = OffsetStore::open_with(&fs, dir, policy).unwrap();
        offsets.commit("h", 2).unwrap();
        sim.inject(
            "offsets.journal",
            FaultOp::Sync,
            std::io::ErrorKind::Other,
            1,
        );
        assert!(offsets.sync().is_err());
        offsets.commit("k", 3).unwrap();
        offsets.sync().unwrap();
        drop(offsets);
        sim.crash();
        let offsets = OffsetStore::open_with(&fs, dir, policy).unwrap();
        let all: Vec<(&str, u64)> = offsets.all().collect();
        assert_eq!(
            all,
            [("g", 1), ("h", 2), ("k", 3)],
            "seed {seed}: commits lost after a sync that succeeded"
        );
    }
}

#[test]
fn a_commit_to_a_journal_whose_name_was_never_synced_survives_a_power_loss() {
    // The process that created the journal died before syncing its directory: the next
    // open finds the file, and its first synced commit must make the name durable too.
    let sim = SimFs::new(7);
    let fs: SharedFs = Arc::new(sim.clone());
    let dir = Path::new(DIR);
    fs.open(
        &dir.join("offsets.journal"),
        nanokafka::internals::storage::fs::OpenMode::CreateIfMissing,
    )
    .unwrap();
    let mut offsets = OffsetStore::open_with(&fs, dir, FsyncPolicy::Always).unwrap();
    offsets.commit("g", 5).unwrap();
    drop(offsets);
    sim.crash();
    let offsets = OffsetStore::open_with(&fs, dir, FsyncPolicy::Always).unwrap();
    assert_eq!(offsets.get("g"), Some(5));
}

#[test]
fn records_appended_after_a_clean_reopen_survive_a_power_loss() {
    for fsync in [FsyncPolicy::Always, FsyncPolicy::Never] {
        let sim = SimFs::new(11);
        let fs: SharedFs = Arc::new(sim.clone());
        let (mut log, offsets) = open(&fs, fsync);
        for i in 0..50 {
            append_value(&mut log, i).unwrap();
        }
        log.close().unwrap();
        drop(offsets);
        let before = sim.stats();
        let (mut log, _offsets) = open(&fs, fsync);
        let after = sim.stats();
        assert_eq!(
            (after.writes, after.syncs),
            (before.writes, before.syncs),
            "{fsync:?}: a clean reopen writes and syncs nothing"
        );
        for i in 50..60 {
            append_value(&mut log, i).unwrap();
        }
        log.sync().unwrap();
        drop(log);
        sim.crash();
        let (mut log, report) =
            PartitionLog::open_with(&fs, Path::new(DIR), config(fsync), NOW).unwrap();
        assert!(!report.clean_shutdown, "{fsync:?}");
        let values: Vec<Vec<u8>> = read_all(&mut log).into_iter().map(|(_, v)| v).collect();
        assert_eq!(values, (0..60).map(value).collect::<Vec<_>>(), "{fsync:?}");
    }
}
