//! Reads of the partition log: sizes, and sequential reads that resume inside batches.

use super::*;
use crate::storage::batch::AppendRecord;

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
