//! [`FsyncPolicy`]: when appended bytes (records, commits) are forced to stable storage.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// When appended bytes are forced to stable storage.
///
/// Whatever the policy, an append returns only after its bytes are handed to the operating
/// system in one `write` call, so an acknowledged record survives a process crash (`kill -9`,
/// a panic). The policy decides what survives a power loss or a kernel crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsyncPolicy {
    /// Leave write-back to the OS (Linux: dirty pages usually reach disk within ~30 s).
    Never,
    /// `fdatasync` dirty partitions at this interval: a power loss can cost at most the
    /// last interval of acknowledged records. The default is `Interval(1 s)`.
    Interval(Duration),
    /// `fdatasync` before acknowledging: nothing acknowledged is lost even on power loss.
    Always,
}

/// The policy as `nanokafka serve --fsync` takes it: `always`, `never` or `interval-ms N`
/// (the interval in whole milliseconds). The console shows it so.
impl std::fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsyncPolicy::Never => f.write_str("never"),
            FsyncPolicy::Interval(every) => write!(f, "interval-ms {}", every.as_millis()),
            FsyncPolicy::Always => f.write_str("always"),
        }
    }
}

impl Default for FsyncPolicy {
    /// `Interval(1 s)`: a process crash loses nothing, a power loss at most ~1 s of records.
    fn default() -> Self {
        FsyncPolicy::Interval(Duration::from_secs(1))
    }
}
