//! [`CleanerCheckpoint`]: where a partition's cleaning stands, kept across restarts in the
//! file `cleaner-offset-checkpoint` of its directory (Kafka's file of that name holds every
//! partition of a log directory; here each partition directory has its own).
//!
//! # Layout
//! 32 bytes, little-endian:
//!
//! ```text
//! offset  size  field
//!      0     4  magic                b"NKCC"
//!      4     1  version              1
//!      5     3  reserved             0
//!      8     8  clean_point          the first offset no pass cleaned: the next pass's dirty
//!                                    section starts here
//!     16     8  delete_horizon_ms    the earliest delete horizon of a tombstone the cleaned
//!                                    section holds; u64::MAX when it holds none
//!     24     4  crc                  CRC32C of bytes [0, 24)
//!     28     4  reserved             0
//! ```
//!
//! # When it is written, and what a crash leaves
//! Replaced atomically (temp file, fsync, rename, directory fsync) by
//! `PartitionLog::swap_in` once a pass's swaps are durable, whenever the pass moved either
//! field. It never runs ahead of the segments: a crash before it is written leaves the
//! previous checkpoint, and the next pass rereads what this one cleaned (more work, the same
//! result).
//!
//! # What is trusted
//! Nothing the reader relies on: a record below the clean point is never put in a pass's key
//! map, so a clean point too low only costs a reread. One too high would matter (a tombstone
//! in an unmapped range could get its delete horizon before the older records of its key
//! were removed), which is why the file is written only after the swap, and why an open
//! ignores a clean point past its log's active segment (records the cleaning covered are
//! gone). A missing file, or one whose magic, version or CRC does not verify, is ignored
//! (logged): the whole log counts as dirty, as before its first cleaning, and the next pass
//! rebuilds both fields.
//!
//! It does not replace `cleaner.marker` ([`super::swap::CLEANED_MARKER`]): that file says
//! the sealed segments may hold gaps, which reads rely on, so it must survive anything, while
//! this one must be harmless to lose.

use std::io::ErrorKind;
use std::path::Path;

use crate::storage::error::{Result, StorageError};
use crate::storage::fs::FileSystem;
use crate::storage::fsutil::{u32_at, u64_at, write_atomically};

/// The file's name in a partition's directory (Kafka's).
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

const MAGIC: &[u8; 4] = b"NKCC";
const VERSION: u8 = 1;
const LEN: usize = 32;
/// `delete_horizon_ms` when no tombstone has one.
const NO_HORIZON: u64 = u64::MAX;

/// The decoded file; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanerCheckpoint {
    /// The first offset no pass cleaned.
    pub clean_point: u64,
    /// The earliest delete horizon among the tombstones of the cleaned section, if any holds
    /// one: a pass is due then even if nothing was written since (it drops them).
    pub delete_horizon_ms: Option<u64>,
}

impl CleanerCheckpoint {
    /// Reads `dir`'s checkpoint; `Ok(None)` when it is absent or does not verify (logged).
    ///
    /// # Errors
    /// `Io` when the file exists but cannot be read.
    pub fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<CleanerCheckpoint>> {
        let path = dir.join(CLEANER_CHECKPOINT_FILE);
        let bytes = match fs.read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io("read the cleaner checkpoint", path, e)),
        };
        let valid = bytes.len() == LEN
            && &bytes[0..4] == MAGIC
            && bytes[4] == VERSION
            && u32_at(&bytes, 24) == crc32c::crc32c(&bytes[..24]);
        if !valid {
            tracing::warn!(
                path = %path.display(),
                "cleaner checkpoint does not verify; the whole log counts as dirty"
            );
            return Ok(None);
        }
        let horizon = u64_at(&bytes, 16);
        Ok(Some(CleanerCheckpoint {
            clean_point: u64_at(&bytes, 8),
            delete_horizon_ms: (horizon != NO_HORIZON).then_some(horizon),
        }))
    }

    /// Replaces `dir`'s checkpoint atomically and durably.
    ///
    /// # Errors
    /// `Io` when the temp file cannot be written or synced, renamed, or the directory synced.
    pub fn write(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        let mut bytes = [0u8; LEN];
        bytes[0..4].copy_from_slice(MAGIC);
        bytes[4] = VERSION;
        bytes[8..16].copy_from_slice(&self.clean_point.to_le_bytes());
        let horizon = self.delete_horizon_ms.unwrap_or(NO_HORIZON);
        bytes[16..24].copy_from_slice(&horizon.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[..24]);
        bytes[24..28].copy_from_slice(&crc.to_le_bytes());
        write_atomically(fs, &dir.join(CLEANER_CHECKPOINT_FILE), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::OsFs;

    #[test]
    fn round_trips_and_a_flipped_byte_or_a_short_file_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(CleanerCheckpoint::read(&OsFs, dir.path()).unwrap(), None);
        for checkpoint in [
            CleanerCheckpoint {
                clean_point: 1234,
                delete_horizon_ms: Some(1_700_000_000_000),
            },
            CleanerCheckpoint {
                clean_point: 0,
                delete_horizon_ms: None,
            },
        ] {
            checkpoint.write(&OsFs, dir.path()).unwrap();
            let read = CleanerCheckpoint::read(&OsFs, dir.path()).unwrap();
            assert_eq!(read, Some(checkpoint));
        }
        let path = dir.path().join(CLEANER_CHECKPOINT_FILE);
        let good = std::fs::read(&path).unwrap();
        for at in [0, 4, 9, 17, 25] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            std::fs::write(&path, bad).unwrap();
            assert_eq!(CleanerCheckpoint::read(&OsFs, dir.path()).unwrap(), None);
        }
        std::fs::write(&path, &good[..20]).unwrap();
        assert_eq!(CleanerCheckpoint::read(&OsFs, dir.path()).unwrap(), None);
    }
}
