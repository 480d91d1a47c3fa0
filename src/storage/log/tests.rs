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
