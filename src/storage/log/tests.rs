//! Reads of the partition log: sizes, and sequential reads that resume inside batches.

use super::*;
use crate::storage::batch::AppendRecord;
use crate::storage::sync_worker::SyncWorker;

/// A read that stops inside a batch leaves a hint to resume at the record: sequential
/// reads of any size must return exactly what one read of everything returns.
#[test]
fn sequential_reads_that_stop_inside_batches_resume_at_the_right_record() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    for b in 0..3u8 {
        let mut batch = RecordBatch::new();
        for i in 0..100u8 {
            let header: [super::super::batch::HeaderRef<'_>; 1] = [(b"h", Some(&[b, i]))];
            batch.push_header_refs(Some(&[i]), &vec![b; usize::from(i)], &header);
        }
        log.append_batch(&mut batch, 0).unwrap();
    }
    let all: Vec<_> = log
        .read(0, 1000, 1 << 20)
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.offset,
                r.key.map(<[u8]>::to_vec),
                r.value.to_vec(),
                r.headers
                    .iter()
                    .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(all.len(), 300);
    for step in [1, 7, 33, 99, 100, 150] {
        let mut offset = 0;
        let mut seen = Vec::new();
        while offset < 300 {
            let fetched = log.read(offset, step, 1 << 20).unwrap();
            assert!(fetched.len() <= step && !fetched.is_empty());
            seen.extend(fetched.iter().map(|r| {
                (
                    r.offset,
                    r.key.map(<[u8]>::to_vec),
                    r.value.to_vec(),
                    r.headers
                        .iter()
                        .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                        .collect::<Vec<_>>(),
                )
            }));
            offset = fetched.next_offset();
        }
        assert_eq!(seen, all, "reads of {step}");
    }
}

/// A batch's records are parsed as reads serve them, after its CRC was checked: a batch
/// whose CRC holds but whose record 7 does not parse (written by something other than this
/// broker) is served up to the read that reaches that record (parses it, also only to stop
/// before it), which reports it as corrupt with none of the batch's records it would have
/// returned; a read ahead meets the same, and leaves the read to report it.
#[test]
fn a_record_that_does_not_parse_in_a_checked_batch_is_reported_by_the_read_that_reaches_it() {
    use crate::storage::format::{self, HEADER_LEN};
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    let mut batch = RecordBatch::new();
    for i in 0..10u8 {
        batch.push_raw(None, &[i; 20]);
    }
    log.append_batch(&mut batch, 0).unwrap();
    // Record 7's offset delta (after its length, attributes and timestamp delta, one byte
    // each) says 8; the CRC is computed again so that the batch verifies.
    let path = log.dir().join("00000000000000000000.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let mut at = HEADER_LEN;
    for _ in 0..7 {
        at += format::parse_record(&bytes[at..]).unwrap().encoded_len;
    }
    assert_eq!(bytes[at + 3], 14, "record 7's offset delta, zigzag-encoded");
    bytes[at + 3] = 16;
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(&path, &bytes).unwrap();

    let offsets = |f: &FetchedRecords| f.iter().map(|r| r.offset).collect::<Vec<_>>();
    let corrupt = |read: Result<FetchedRecords>| match read {
        Err(StorageError::Corrupt { reason, .. }) => reason,
        other => panic!("expected Corrupt, got {other:?}"),
    };
    assert_eq!(offsets(&log.read(0, 5, 1 << 20).unwrap()), [0, 1, 2, 3, 4]);
    log.read_ahead(5, 1 << 20);
    let reason = corrupt(log.read(5, 5, 1 << 20));
    assert!(reason.contains("record 7 has offset delta 8"), "{reason}");
    // From the file, with nothing held: the same.
    corrupt(log.read(5, 5, 1 << 20));
    corrupt(log.read(0, 10, 1 << 20));
    // A read stops at the first record it does not take, parsed: the read of 7 reaches it.
    corrupt(log.read(0, 7, 1 << 20));
    assert_eq!(
        offsets(&log.read(0, 6, 1 << 20).unwrap()),
        (0..6).collect::<Vec<_>>()
    );
}

/// Reads are first sized from the segment's average record; records far larger than the
/// average must still come back exactly as `max_records` and `max_bytes` allow.
#[test]
fn a_read_of_frames_larger_than_the_average_returns_every_record_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    let small = [1u8; 10];
    let large = vec![2u8; 10_000];
    let record = |value| AppendRecord { key: None, value };
    log.append(&vec![record(&small[..]); 1000], 0).unwrap();
    log.append(&vec![record(&large[..]); 10], 0).unwrap();
    for from in [1000, 995] {
        let fetched = log.read(from, 10, 1 << 20).unwrap();
        let values: Vec<usize> = fetched.iter().map(|r| r.value.len()).collect();
        let expected: Vec<usize> = (from..from + 10)
            .map(|o| if o < 1000 { 10 } else { 10_000 })
            .collect();
        assert_eq!(values, expected, "reading from {from}");
    }
}

/// With a worker, rolled segments are sealed and segments below the log start deleted there:
/// once the log is closed (which waits for them) the directory holds exactly the live
/// segments, each sealed one synced with the checkpoint's recovery point past it.
#[test]
fn a_worker_seals_rolled_segments_and_deletes_those_below_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        fsync: FsyncPolicy::Never,
        retention: RetentionPolicy {
            records: Some(100),
            ..RetentionPolicy::default()
        },
        ..LogConfig::default()
    };
    let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    log.set_worker(Arc::new(SyncWorker::new()));
    let value = [3u8; 100];
    for _ in 0..500 {
        log.append(
            &[AppendRecord {
                key: None,
                value: &value,
            }],
            0,
        )
        .unwrap();
    }
    assert_eq!(log.log_start_offset(), 400);
    let live = log.segment_count();
    log.close().unwrap();
    let logs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert_eq!(logs, live, "the segments below the log start are gone");
    let (mut log, report) = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert_eq!(report.segments_scanned, 0, "a clean close");
    assert_eq!(log.log_start_offset(), 400);
    let (mut offset, mut read) = (0, 0);
    loop {
        let fetched = log.read(offset, 1000, 1 << 20).unwrap();
        if fetched.is_empty() {
            break;
        }
        (offset, read) = (fetched.next_offset(), read + fetched.len());
    }
    assert_eq!(read, 100);
}

/// A compressed batch packs many records into few bytes. When damage spans one, the batch
/// after it holds an offset far past the damaged ones although few bytes were stepped over,
/// and recovery must still resume there (the bound on a damaged base offset counts what a
/// compressed batch can hold, not only a record's smallest encoding).
#[test]
fn recovery_resumes_after_damage_that_spans_a_compressed_batch_of_many_records() {
    use crate::storage::compression::{self, Compression};
    use crate::storage::format::{self, ClientRecord, HEADER_LEN, LOG_OVERHEAD};

    let records = vec![
        ClientRecord {
            timestamp_ms: 1_000,
            key: None,
            value: Some(&[]),
            headers: &[],
        };
        20_000
    ];
    let plain = format::encode_client_batch(&records);
    let mut batch = plain[..HEADER_LEN].to_vec();
    batch.extend(compression::compress(Compression::Zstd, &plain[HEADER_LEN..]).unwrap());
    let attributes =
        i16::from_be_bytes([batch[21], batch[22]]) | Compression::Zstd.attribute_bits();
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(
        batch.len() * 2 < records.len() * format::MIN_RECORD_LEN,
        "20,000 records in {} bytes: room for them uncompressed",
        batch.len()
    );

    let dir = tempfile::tempdir().unwrap();
    let one = |log: &mut PartitionLog| {
        log.append(
            &[AppendRecord {
                key: None,
                value: b"v",
            }],
            1_000,
        )
        .unwrap()
        .base_offset
    };
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(one(&mut log), 0);
    assert_eq!(
        log.append_kafka_batch(&mut batch, 1_000)
            .unwrap()
            .base_offset,
        1
    );
    assert_eq!(one(&mut log), 20_001);
    log.close().unwrap();
    // Appends after the clean shutdown, then a crash: the segment is scanned, and the
    // damage lies below the recovery point (20,002), so it is stepped over.
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(one(&mut log), 20_002);
    drop(log);
    let path = dir.path().join(crate::storage::segment::file_names(0).0);
    let mut bytes = std::fs::read(&path).unwrap();
    let second = u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize + LOG_OVERHEAD;
    bytes[HEADER_LEN] ^= 0x5a; // the first batch's record
    bytes[second + HEADER_LEN + 4] ^= 0x5a; // the compressed batch's records
    std::fs::write(&path, bytes).unwrap();

    let (mut log, report) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    let kept: Vec<_> = report
        .corrupt_kept
        .iter()
        .map(|d| (d.position, d.first_offset, d.resumed_at))
        .collect();
    assert_eq!(kept, vec![(0, 0, Some(20_001))]);
    assert_eq!(log.log_end_offset(), 20_003);
    let fetched = log.read(20_001, 10, 1 << 20).unwrap();
    let offsets: Vec<u64> = fetched.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![20_001, 20_002]);
}

/// At the bytes-retention limit, every append of a large batch moves the log start on by
/// about one batch. The cut is found by hopping from the last one, not by searching the
/// segment's index (a `pread` per step of its binary search), and lands where it must.
#[test]
fn bytes_retention_after_large_appends_hops_from_the_last_cut_without_reading_the_index() {
    let sim = crate::storage::sim::SimFs::new(3);
    let fs: SharedFs = Arc::new(sim.clone());
    let dir = Path::new("/data/t_0");
    let value = [7u8; 100];
    let records = vec![
        AppendRecord {
            key: None,
            value: &value,
        };
        100
    ];
    let batch = 11_000; // 100 records of 100 B: about 10.9 kB, past the hop's threshold
    let config = LogConfig {
        segment_bytes: 1 << 20,
        retention: RetentionPolicy {
            bytes: Some(10 * batch),
            ..RetentionPolicy::default()
        },
        ..LogConfig::default()
    };
    let (mut log, _) = PartitionLog::open_with(&fs, dir, config, 0).unwrap();
    for _ in 0..12 {
        log.append(&records, 0).unwrap();
    }
    assert_eq!(log.log_start_offset(), 200, "the last ten batches kept");
    let index = dir.join(crate::storage::segment::file_names(0).1);
    let before = sim.reads(&index);
    for appended in 13..40u64 {
        log.append(&records, 0).unwrap();
        assert_eq!(log.log_start_offset(), (appended - 10) * 100);
    }
    assert_eq!(log.segment_count(), 1);
    assert_eq!(sim.reads(&index), before, "the index was searched");
}

/// Bytes retention trusts the batches this open appended (it does not read them back to
/// verify them, `PartitionLog::trusted_from`): on an undamaged log it must cut exactly where
/// the verifying path does, whatever the batch sizes (small ones are scanned, large ones
/// hopped over), the rolls and a reopen midway (batches from before it are verified).
mod trusted_cuts {
    use super::*;
    use proptest::prelude::*;

    fn append(log: &mut PartitionLog, records: u16, value_len: u16) {
        let value = vec![7u8; usize::from(value_len)];
        let records: Vec<_> = (0..records)
            .map(|_| AppendRecord {
                key: None,
                value: &value,
            })
            .collect();
        log.append(&records, 0).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn give_the_same_log_start_as_verifying_every_cut(
            batches in proptest::collection::vec((1u16..200, 0u16..300), 1..60),
            retained_kb in 8u64..200,
            segment_kb in 32u64..256,
            reopen_at in 0usize..60,
        ) {
            let config = LogConfig {
                segment_bytes: segment_kb << 10,
                retention: RetentionPolicy {
                    bytes: Some(retained_kb << 10),
                    ..RetentionPolicy::default()
                },
                ..LogConfig::default()
            };
            let (fast_dir, slow_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let open = |dir: &Path, verify_all: bool| {
                let mut log = PartitionLog::open(dir, config, 0).unwrap().0;
                if verify_all {
                    log.verify_all_at_cuts();
                }
                log
            };
            let (mut fast, mut slow) = (open(fast_dir.path(), false), open(slow_dir.path(), true));
            for (i, &(records, value_len)) in batches.iter().enumerate() {
                if i == reopen_at {
                    fast.close().unwrap();
                    slow.close().unwrap();
                    (fast, slow) = (open(fast_dir.path(), false), open(slow_dir.path(), true));
                }
                append(&mut fast, records, value_len);
                append(&mut slow, records, value_len);
                prop_assert_eq!(fast.log_start_offset(), slow.log_start_offset(), "after batch {}", i);
                prop_assert_eq!(fast.segment_count(), slow.segment_count());
            }
        }
    }
}

/// The appends and reads of a consumer caught up with a producer: each read starts where the
/// last one stopped, at the log end, right after an append.
mod reader_at_the_end {
    use super::*;
    use crate::storage::fetch::{FetchedRecords, HeldBudget};
    use crate::storage::format::{encode_client_batch, ClientRecord};
    use crate::storage::sim::SimFs;

    const MAX_BYTES: usize = 1 << 20;

    fn sim_log(sim: &SimFs) -> PartitionLog {
        let fs: SharedFs = Arc::new(sim.clone());
        PartitionLog::open_with(&fs, Path::new("/data/t_0"), LogConfig::default(), 0)
            .unwrap()
            .0
    }

    fn segment_reads(sim: &SimFs) -> u64 {
        sim.reads(&Path::new("/data/t_0").join(crate::storage::segment::file_names(0).0))
    }

    /// Appends records `from..to`, each with key `[n]`, value `n` repeated `n % 7` times
    /// and a header.
    fn append(log: &mut PartitionLog, range: std::ops::Range<u8>) {
        let mut batch = RecordBatch::new();
        for n in range {
            let header: [crate::storage::batch::HeaderRef<'_>; 1] = [(b"h", Some(&[n]))];
            batch.push_header_refs(Some(&[n]), &vec![n; usize::from(n % 7)], &header);
        }
        log.append_batch(&mut batch, 0).unwrap();
    }

    fn contents(records: &FetchedRecords) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
        records
            .iter()
            .map(|r| {
                let key = r.key.map(<[u8]>::to_vec).unwrap_or_default();
                (r.offset, key, r.value.to_vec())
            })
            .collect()
    }

    /// What a read of the file returns (a fresh log on the same files).
    fn from_file(sim: &SimFs, offset: u64, max_records: usize) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
        contents(&sim_log(sim).read(offset, max_records, MAX_BYTES).unwrap())
    }

    #[test]
    fn the_batch_an_append_wrote_is_read_from_memory_by_the_reader_waiting_for_it() {
        let sim = SimFs::new(7);
        let mut log = sim_log(&sim);
        append(&mut log, 0..3);
        assert_eq!(log.read(0, 100, MAX_BYTES).unwrap().next_offset(), 3);
        let before = segment_reads(&sim);
        append(&mut log, 3..6);
        let whole = contents(&log.read(3, 100, MAX_BYTES).unwrap());
        // A reader that takes the batch in parts: every part from memory too.
        append(&mut log, 6..16);
        let first = log.read(6, 4, MAX_BYTES).unwrap();
        let rest = log.read(first.next_offset(), 100, MAX_BYTES).unwrap();
        assert_eq!(rest.next_offset(), 16);
        // A client's batch, appended through the Kafka path, too.
        let value = b"from a client".as_slice();
        let record = ClientRecord {
            timestamp_ms: 5,
            key: None,
            value: Some(value),
            headers: &[],
        };
        let mut client = encode_client_batch(&[record, record]);
        log.append_kafka_batch(&mut client, 10).unwrap();
        let from_client = contents(&log.read(16, 100, MAX_BYTES).unwrap());
        assert_eq!(segment_reads(&sim), before, "the segment was read");
        // What the file holds for each read (limited to the log end of its time).
        assert_eq!(whole, from_file(&sim, 3, 3));
        assert_eq!(contents(&first), from_file(&sim, 6, 4));
        assert_eq!(contents(&rest), from_file(&sim, 10, 6));
        assert_eq!(from_client, from_file(&sim, 16, 100));
        assert_eq!(from_client.len(), 2);
    }

    /// Readers of other groups caught up at the same offset, woken by the same append, read
    /// the batch from memory too, whole or in parts, and get what the file holds; a reader
    /// behind them reads the file. The tail is kept until the next append, within the
    /// budget, which gets every byte back when the log is dropped.
    #[test]
    fn every_reader_caught_up_at_the_batch_reads_it_from_memory() {
        static BUDGET: HeldBudget = HeldBudget::new(1 << 20);
        let sim = SimFs::new(10);
        let mut log = sim_log(&sim);
        log.set_held_budget(&BUDGET);
        append(&mut log, 0..3);
        for _reader in 0..3 {
            assert_eq!(log.read(0, 100, MAX_BYTES).unwrap().next_offset(), 3);
        }
        for round in 0..20u8 {
            let at = 3 + 6 * round;
            let before = segment_reads(&sim);
            append(&mut log, at..at + 6);
            let first = contents(&log.read(u64::from(at), 100, MAX_BYTES).unwrap());
            let second = contents(&log.read(u64::from(at), 100, MAX_BYTES).unwrap());
            let part = log.read(u64::from(at), 2, MAX_BYTES).unwrap();
            let rest = log.read(part.next_offset(), 100, MAX_BYTES).unwrap();
            assert_eq!(
                segment_reads(&sim),
                before,
                "round {round}: the segment was read"
            );
            let whole = from_file(&sim, u64::from(at), 100);
            assert_eq!((first.len(), &second), (6, &first));
            assert_eq!(first, whole);
            assert_eq!(contents(&part), whole[..2]);
            assert_eq!(contents(&rest), whole[2..]);
            let kept = BUDGET.used();
            assert!(
                kept > 0 && kept <= super::super::MAX_SHARED_TAIL_BYTES,
                "{kept}"
            );
        }
        // A reader behind: from the file, what the file holds.
        let before = segment_reads(&sim);
        append(&mut log, 123..126);
        let behind = contents(&log.read(3, 200, MAX_BYTES).unwrap());
        assert!(segment_reads(&sim) > before, "read from memory alone");
        assert_eq!(behind, from_file(&sim, 3, 200));
        assert_eq!(behind.len(), 123);
        drop(log);
        assert_eq!(BUDGET.used(), 0);
    }

    /// Only the reader at the log end gets the batch from memory, and only for the records
    /// of that batch: a read that goes on past it (two appends since) or starts elsewhere
    /// reads the file, and returns what the file holds.
    #[test]
    fn a_read_that_goes_past_the_held_batch_or_starts_elsewhere_reads_the_file() {
        let sim = SimFs::new(8);
        let mut log = sim_log(&sim);
        append(&mut log, 0..3);
        log.read(0, 100, MAX_BYTES).unwrap();
        append(&mut log, 3..5);
        append(&mut log, 5..9);
        let before = segment_reads(&sim);
        let read = contents(&log.read(3, 100, MAX_BYTES).unwrap());
        assert!(segment_reads(&sim) > before, "read from memory alone");
        assert_eq!(read, from_file(&sim, 3, 100));
        assert_eq!(read.len(), 6);
        append(&mut log, 9..12);
        let read = contents(&log.read(1, 100, MAX_BYTES).unwrap());
        assert_eq!(read, from_file(&sim, 1, 100));
        assert_eq!(read.len(), 11);
    }

    #[test]
    fn over_the_budget_nothing_is_held_and_the_reader_reads_the_file() {
        static NOTHING: HeldBudget = HeldBudget::new(0);
        let sim = SimFs::new(9);
        let mut log = sim_log(&sim);
        log.set_held_budget(&NOTHING);
        append(&mut log, 0..3);
        log.read(0, 100, MAX_BYTES).unwrap();
        let before = segment_reads(&sim);
        append(&mut log, 3..6);
        assert_eq!(NOTHING.used(), 0);
        let read = contents(&log.read(3, 100, MAX_BYTES).unwrap());
        assert!(segment_reads(&sim) > before, "nothing read from the file");
        assert_eq!(read, from_file(&sim, 3, 100));
    }

    /// Alternating appends and reads of every size, as a caught-up consumer does: each read
    /// returns what a read of the file returns.
    #[test]
    fn reads_at_the_end_return_what_the_file_holds() {
        for step in [1, 2, 3, 5, 8, 100] {
            let sim = SimFs::new(step as u64);
            let mut log = sim_log(&sim);
            let mut at = 0;
            for n in 0..24u8 {
                let len = n % 5 + 1;
                let first = u8::try_from(log.log_end_offset()).unwrap();
                append(&mut log, first..first + len);
                while at < log.log_end_offset() {
                    let read = log.read(at, step, MAX_BYTES).unwrap();
                    assert_eq!(contents(&read), from_file(&sim, at, step), "read of {step}");
                    at = read.next_offset();
                }
            }
        }
    }
}

/// DeleteRecords: the log start moves to the offset asked for, also inside a batch; reads
/// start there, the segments wholly below it go, and a reopen (clean or after a crash)
/// keeps it. An offset past the log end is refused and changes nothing.
#[test]
fn records_deleted_before_an_offset_stay_deleted_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        fsync: FsyncPolicy::Never,
        ..LogConfig::default()
    };
    let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    let value = [3u8; 100];
    let records: Vec<AppendRecord<'_>> = (0..10)
        .map(|_| AppendRecord {
            key: None,
            value: &value,
        })
        .collect();
    for _ in 0..50 {
        log.append(&records, 0).unwrap();
    }
    let segments = log.segment_count();
    assert!(matches!(
        log.delete_records_before(501),
        Err(StorageError::OffsetOutOfRange { offset: 501, .. })
    ));
    assert_eq!(log.log_start_offset(), 0);
    // Inside a batch of ten, well past the first segments.
    assert_eq!(log.delete_records_before(255).unwrap(), 255);
    assert!(
        log.segment_count() < segments,
        "the segments below it are gone"
    );
    assert_eq!(
        log.delete_records_before(100).unwrap(),
        255,
        "never backwards"
    );
    let first = log.read(0, 1, 1 << 20).unwrap();
    assert_eq!(first.iter().next().map(|r| r.offset), Some(255));
    // A crash (no clean close) keeps it too.
    drop(log);
    let (log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert_eq!(log.log_start_offset(), 255);
    assert_eq!(log.log_end_offset(), 500);
}

/// A Kafka client's batch checked before it is queued names its keyless records (a
/// compacted topic refuses them), compressed or not, is refused past the decompression cap
/// as its append would be, and appends byte for byte as the unchecked path does.
#[test]
fn a_checked_kafka_batch_names_its_keyless_records_and_appends_as_the_batch_does() {
    use crate::storage::compression::{self, Compression};
    use crate::storage::format::{encode_client_batch, ClientRecord, HEADER_LEN, LOG_OVERHEAD};
    let record = |key: Option<&'static [u8]>, value: Option<&'static [u8]>| ClientRecord {
        timestamp_ms: 1_000,
        key,
        value,
        headers: &[],
    };
    // A keyed record, a keyless one, and a tombstone (a key, a null value).
    let plain = encode_client_batch(&[
        record(Some(b"k"), Some(b"v")),
        record(None, Some(b"v")),
        record(Some(b"k"), None),
    ]);
    let mut gzip = plain[..HEADER_LEN].to_vec();
    gzip.extend(compression::compress(Compression::Gzip, &plain[HEADER_LEN..]).unwrap());
    let attributes = i16::from_be_bytes([gzip[21], gzip[22]]) | Compression::Gzip.attribute_bits();
    gzip[21..23].copy_from_slice(&attributes.to_be_bytes());
    let length = (gzip.len() - LOG_OVERHEAD) as i32;
    gzip[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&gzip[21..]);
    gzip[17..21].copy_from_slice(&crc.to_be_bytes());
    for batch in [&plain, &gzip] {
        let (checked_dir, plain_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (mut checked_log, _) =
            PartitionLog::open(checked_dir.path(), LogConfig::default(), 0).unwrap();
        let (mut plain_log, _) =
            PartitionLog::open(plain_dir.path(), LogConfig::default(), 0).unwrap();
        let mut checked = checked_log.check_kafka_batch(batch.clone().into()).unwrap();
        assert_eq!((checked.keyless(), checked.records_count()), (&[1][..], 3));
        let appended = checked_log
            .append_checked_kafka_batch(&mut checked, 2_000)
            .unwrap();
        let expected = plain_log
            .append_kafka_batch(&mut batch.clone(), 2_000)
            .unwrap();
        assert_eq!(appended, expected);
        let read = |log: &mut PartitionLog| log.read_batches(0, 1 << 20, true).unwrap().bytes;
        assert_eq!(read(&mut checked_log), read(&mut plain_log));
    }
    // Decompressing past the cap is refused, as the append would refuse it.
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    log.set_max_decompressed_bytes(4);
    assert!(matches!(
        log.check_kafka_batch(gzip.clone().into()),
        Err(StorageError::InvalidBatch { .. })
    ));
}

/// A client's batch is appended from the client's buffer, which stays as it was: the stored
/// batch has its offset (and, under LogAppendTime, the append time and a new CRC) in its
/// header and the client's records after it, small (one write) or large (a write per part),
/// and reads back, after a reopen too, as the in-place append stores it.
#[test]
fn a_client_batch_is_stored_from_the_clients_buffer_which_is_left_unchanged() {
    use crate::storage::format::{encode_client_batch, ClientRecord};
    let value = [7u8; 400];
    let record = ClientRecord {
        timestamp_ms: 1_000,
        key: Some(b"k"),
        value: Some(&value),
        headers: &[],
    };
    let (small, large) = (vec![record; 3], vec![record; 100]);
    for timestamp_type in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
        let config = LogConfig {
            timestamp_type,
            ..LogConfig::default()
        };
        let (dir, in_place_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
        let (mut in_place, _) = PartitionLog::open(in_place_dir.path(), config, 0).unwrap();
        for records in [&small, &large, &small] {
            let sent = encode_client_batch(records);
            let client = bytes::Bytes::from(sent.clone());
            let mut checked = log.check_kafka_batch(client.clone()).unwrap();
            let appended = log.append_checked_kafka_batch(&mut checked, 2_000).unwrap();
            assert_eq!(client, sent, "the client's buffer changed");
            let expected = in_place.append_kafka_batch(&mut sent.clone(), 2_000);
            assert_eq!(appended, expected.unwrap());
        }
        let read = |log: &mut PartitionLog| log.read_batches(0, 1 << 20, true).unwrap().bytes;
        let stored = read(&mut log);
        assert_eq!(stored, read(&mut in_place), "{timestamp_type:?}");
        drop(log);
        let (mut reopened, report) = PartitionLog::open(dir.path(), config, 0).unwrap();
        assert_eq!(reopened.log_end_offset(), 106, "{report:?}");
        assert_eq!(read(&mut reopened), stored);
    }
}

/// A large client's batch whose records fail to write after its header was written leaves
/// the segment as it was: the append fails, and the next one goes where it would have.
#[test]
fn a_client_batch_whose_records_fail_to_write_leaves_nothing_behind() {
    use crate::storage::format::{encode_client_batch, ClientRecord};
    use crate::storage::sim::{FaultOp, SimFs};
    let value = [7u8; 400];
    let record = ClientRecord {
        timestamp_ms: 1_000,
        key: None,
        value: Some(&value),
        headers: &[],
    };
    let batch = bytes::Bytes::from(encode_client_batch(&vec![record; 100]));
    let sim = SimFs::new(3);
    let fs: SharedFs = Arc::new(sim.clone());
    let dir = Path::new("/data/t_0");
    let (mut log, _) = PartitionLog::open_with(&fs, dir, LogConfig::default(), 0).unwrap();
    let mut first = log.check_kafka_batch(batch.clone()).unwrap();
    log.append_checked_kafka_batch(&mut first, 1_000).unwrap();
    // The header's write goes through; the records' fails.
    sim.inject_after(".log", FaultOp::Write, std::io::ErrorKind::Other, 1, 1);
    let mut failing = log.check_kafka_batch(batch.clone()).unwrap();
    assert!(matches!(
        log.append_checked_kafka_batch(&mut failing, 1_000),
        Err(StorageError::Io { .. })
    ));
    assert_eq!(log.log_end_offset(), 100);
    let mut retried = log.check_kafka_batch(batch.clone()).unwrap();
    let appended = log.append_checked_kafka_batch(&mut retried, 1_000).unwrap();
    assert_eq!((appended.base_offset, appended.last_offset), (100, 199));
    let segment = dir.join(crate::storage::segment::file_names(0).0);
    assert_eq!(sim.contents(&segment).unwrap().len(), 2 * batch.len());
    drop(log);
    let (reopened, _) = PartitionLog::open_with(&fs, dir, LogConfig::default(), 0).unwrap();
    assert_eq!(reopened.log_end_offset(), 200);
}
