//! Producer ids for Kafka's idempotent producers (InitProducerId): unique across restarts.
//!
//! Each partition remembers the last batches of every producer id that wrote to it
//! ([`super::producer_state`]), also across restarts. An id handed out twice would make a
//! new producer look like an old one: its first batches (epoch 0, sequence 0) would be
//! taken for retries or refused as out of order. So ids are never handed out twice, also
//! after a crash: they are allocated in blocks of [`BLOCK_SIZE`], and the end of the
//! current block is persisted (written and synced) before the first id of the block is
//! handed out. A crash loses at most the rest of a block, never repeats an id.
//!
//! # File: `<data_dir>/producer_ids`
//! ```text
//! offset  size  field (little-endian)
//!      0     4  magic "NKPI"
//!      4     8  next_block: every id below it may have been handed out
//!     12     4  CRC32C of bytes 0..12
//! ```
//! Replaced atomically (a temporary file, synced, renamed, the directory synced). A file that
//! does not verify is an error, not a restart from 0: that could repeat ids.

use std::path::{Path, PathBuf};

use super::error::{Result, StorageError};
use super::fs::FileSystem;
use super::fsutil::write_atomically;

/// The file's name in the data directory.
pub const FILE_NAME: &str = "producer_ids";
/// Ids per persisted block: one fsync per this many InitProducerId requests.
pub const BLOCK_SIZE: i64 = 1000;
const MAGIC: &[u8; 4] = b"NKPI";
const FILE_LEN: usize = 16;

/// The allocator; see the module docs. Owned by the broker (one per data directory).
#[derive(Debug)]
pub struct ProducerIdBlocks {
    path: PathBuf,
    /// The next id to hand out.
    next: i64,
    /// The end of the persisted block: `next == block_end` means a new block must be
    /// persisted first.
    block_end: i64,
}

impl ProducerIdBlocks {
    /// Loads the allocator of `data_dir` (none yet: ids start at 0). Nothing is written until
    /// the first id is asked for.
    ///
    /// # Errors
    /// `Io`; `Corrupt` when the file does not verify.
    pub fn open(fs: &dyn FileSystem, data_dir: &Path) -> Result<Self> {
        let path = data_dir.join(FILE_NAME);
        let next = if fs.exists(&path) {
            let bytes = fs
                .read(&path)
                .map_err(|e| StorageError::io("read producer ids", &path, e))?;
            decode(&bytes).map_err(|reason| StorageError::corrupt(&path, 0, reason))?
        } else {
            0
        };
        Ok(ProducerIdBlocks {
            path,
            next,
            block_end: next,
        })
    }

    /// A producer id never handed out before from this data directory.
    ///
    /// # Errors
    /// `Io` when a new block cannot be persisted (no id is handed out then).
    pub fn allocate(&mut self, fs: &dyn FileSystem) -> Result<i64> {
        if self.next >= self.block_end {
            let end = self
                .next
                .checked_add(BLOCK_SIZE)
                .ok_or_else(|| StorageError::corrupt(&self.path, 4, "producer ids exhausted"))?;
            write_atomically(fs, &self.path, &encode(end))?;
            self.block_end = end;
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }
}

fn encode(next_block: i64) -> [u8; FILE_LEN] {
    let mut bytes = [0u8; FILE_LEN];
    bytes[0..4].copy_from_slice(MAGIC);
    bytes[4..12].copy_from_slice(&next_block.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..12]);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn decode(bytes: &[u8]) -> std::result::Result<i64, String> {
    if bytes.len() != FILE_LEN || &bytes[0..4] != MAGIC {
        return Err(format!("not a producer id file ({} bytes)", bytes.len()));
    }
    let crc = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    if crc != crc32c::crc32c(&bytes[..12]) {
        return Err("crc32c mismatch".into());
    }
    let next = i64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
    if next < 0 {
        return Err(format!("negative next block {next}"));
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::os;

    #[test]
    fn ids_never_repeat_across_reopens_and_a_new_block_is_persisted_first() {
        let dir = tempfile::tempdir().unwrap();
        let fs = os();
        let mut blocks = ProducerIdBlocks::open(fs.as_ref(), dir.path()).unwrap();
        assert!(!dir.path().join(FILE_NAME).exists(), "nothing written yet");
        let first: Vec<i64> = (0..3)
            .map(|_| blocks.allocate(fs.as_ref()).unwrap())
            .collect();
        assert_eq!(first, [0, 1, 2]);
        // A crash now: the reopened allocator starts after the whole persisted block.
        let mut reopened = ProducerIdBlocks::open(fs.as_ref(), dir.path()).unwrap();
        assert_eq!(reopened.allocate(fs.as_ref()).unwrap(), BLOCK_SIZE);
        for _ in 0..BLOCK_SIZE {
            reopened.allocate(fs.as_ref()).unwrap();
        }
        let again = ProducerIdBlocks::open(fs.as_ref(), dir.path())
            .unwrap()
            .next;
        assert_eq!(again, 3 * BLOCK_SIZE);
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_restart_from_zero() {
        let dir = tempfile::tempdir().unwrap();
        let fs = os();
        let mut blocks = ProducerIdBlocks::open(fs.as_ref(), dir.path()).unwrap();
        blocks.allocate(fs.as_ref()).unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[5] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            ProducerIdBlocks::open(fs.as_ref(), dir.path()),
            Err(StorageError::Corrupt { .. })
        ));
    }
}
