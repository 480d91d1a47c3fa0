//! Where an example keeps its data: a fresh temporary directory per run (so the demo is
//! repeatable), or `NANOKAFKA_DATA_DIR` when set, kept after the run (to look inside with any
//! reader of Kafka log segments, or to see a restart pick up where the last run stopped).

use std::path::{Path, PathBuf};

/// The example's data directory; dropped (and deleted, when temporary) at the end of `main`.
pub enum ExampleDir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl ExampleDir {
    pub fn new() -> Self {
        match std::env::var_os("NANOKAFKA_DATA_DIR") {
            Some(dir) => ExampleDir::Kept(PathBuf::from(dir)),
            None => ExampleDir::Temporary(tempfile::tempdir().expect("temporary directory")),
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            ExampleDir::Temporary(dir) => dir.path(),
            ExampleDir::Kept(dir) => dir,
        }
    }
}
