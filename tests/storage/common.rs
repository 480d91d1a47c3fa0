//! Helpers of the storage tests: partition numbers through a broker, and the segment files of
//! a partition directory and the batches in them.

use std::fs;
use std::path::{Path, PathBuf};

use nanokafka::storage::format::{self, BatchHeader, Decoded};

#[path = "../common/stats.rs"]
mod stats;

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
