//! Helpers of the storage tests: partition numbers through a broker, and the segment files of
//! a partition directory.

use std::fs;
use std::path::{Path, PathBuf};

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
