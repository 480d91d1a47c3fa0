//! The file layer under the storage engine: every byte the engine reads or writes goes
//! through [`FileSystem`] and [`StorageFile`], so tests can swap the operating system for
//! [`super::sim::SimFs`], which loses unsynced writes, tears the last one, and fails writes or
//! syncs on demand (power loss and I/O faults).
//!
//! The contract is POSIX's, reduced to what the engine uses: positional reads and writes,
//! `set_len`, `fdatasync`/`fsync` of a file, `fsync` of a directory to make its entries
//! durable, atomic `rename`. A write returns once the bytes are in the OS (the page cache);
//! only a sync makes them durable. A failed sync may have dropped the written pages: the
//! engine never retries a sync and trusts it (it reopens from what is on disk instead).

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One open file.
pub trait StorageFile: Send + Sync + Debug {
    fn size(&self) -> io::Result<u64>;
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()>;
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// `fdatasync`: the file's bytes are durable when it returns `Ok`.
    fn sync_data(&self) -> io::Result<()>;
    /// `fsync`: bytes and metadata.
    fn sync_all(&self) -> io::Result<()>;
}

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// An existing file; `NotFound` otherwise.
    Existing,
    /// The file, created empty if absent.
    CreateIfMissing,
    /// A new empty file, replacing any file of that name.
    Truncate,
}

/// The directory operations the engine uses.
pub trait FileSystem: Send + Sync + Debug {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>>;
    /// The whole file (small files: checkpoints, journals, configs).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    fn exists(&self, path: &Path) -> bool;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Atomic replace of `to` by `from` (durable once the directory is synced).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The names of the entries of a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Makes the directory's entries (created, renamed, removed files) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// A file system shared by the storage objects of a broker.
pub type SharedFs = Arc<dyn FileSystem>;

/// The operating system's file system.
pub fn os() -> SharedFs {
    Arc::new(OsFs)
}

/// [`FileSystem`] over `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

impl StorageFile for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, position)
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, position)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn sync_all(&self) -> io::Result<()> {
        File::sync_all(self)
    }
}

impl FileSystem for OsFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn StorageFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        match mode {
            OpenMode::Existing => {}
            OpenMode::CreateIfMissing => {
                options.create(true).truncate(false);
            }
            OpenMode::Truncate => {
                options.create(true).truncate(true);
            }
        }
        Ok(Box::new(options.open(path)?))
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// `path` with `suffix` appended to its file name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
