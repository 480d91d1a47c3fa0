//! Helpers of the storage tests: partition numbers through a broker, every record of a topic,
//! and the segment files of a partition directory and the batches in them.

use std::fs;
use std::path::{Path, PathBuf};

use nanokafka::internals::storage::format::{self, BatchHeader, Decoded};

#[path = "../common/read.rs"]
mod read;
#[path = "../common/stats.rs"]
mod stats;

pub use read::read_topic;
pub use stats::{log_end, partition_stats};

/// The `.log` files of a partition directory, by base offset.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs
}

/// The base offset a segment file is named by.
pub fn base_of(segment: &Path) -> u64 {
    segment
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The batches of a segment file as `(position, header)`, found by decoding them one after
/// another from byte 0.
///
/// # Panics
/// When the file is not whole valid batches.
pub fn batches(segment: &Path) -> Vec<(u64, BatchHeader)> {
    let bytes = fs::read(segment).unwrap();
    let mut batches = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match format::decode(&bytes[at..]) {
            Decoded::Batch(header) => {
                batches.push((at as u64, header));
                at += header.batch_len;
            }
            other => panic!("{} at byte {at}: {other:?}", segment.display()),
        }
    }
    batches
}

/// Where the batches of a segment file start.
pub fn batch_starts(segment: &Path) -> Vec<u64> {
    batches(segment).into_iter().map(|(at, _)| at).collect()
}

/// Bytes of a record without headers in Kafka's record format (documented in
/// `storage::format`), counted here rather than by the code under test: its length, then
/// attributes, timestamp delta 0, offset delta, key (length -1 when absent), value and a
/// header count of 0, the numbers as zigzag varints.
pub fn record_len(offset_delta: u32, key_len: Option<usize>, value_len: usize) -> usize {
    fn varint_len(v: i64) -> usize {
        let zigzag = ((v << 1) ^ (v >> 63)) as u64;
        (64 - zigzag.leading_zeros() as usize).max(1).div_ceil(7)
    }
    let bytes_len = |len: Option<usize>| len.map_or(1, |n| varint_len(n as i64) + n);
    let body = 2
        + varint_len(i64::from(offset_delta))
        + bytes_len(key_len)
        + bytes_len(Some(value_len))
        + 1;
    varint_len(body as i64) + body
}
