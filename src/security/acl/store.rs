//! [`AclStore`]: the ACL bindings on disk, shared by a running broker and the `nanokafka acls`
//! command.

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{AclBinding, Acls};
use crate::storage::fs::os;
use crate::storage::fsutil::write_atomically;

/// The directory of the security files, under the data directory.
pub const SECURITY_DIR: &str = "security";
/// The file of the ACL bindings, in [`SECURITY_DIR`].
pub const ACLS_FILE: &str = "acls";
/// Held with `flock(2)` while the bindings are read, changed and written, so a broker
/// answering CreateAcls and the `nanokafka acls` command never lose each other's change.
const LOCK_FILE: &str = "acls.lock";
/// The `format` every store file names: a file that does not is not one.
const FORMAT: &str = "nanokafka-acls";
/// The format's version; a file of another version is refused rather than half read.
const VERSION: u32 = 1;
/// A store file larger than this is refused unread: ten thousand bindings take ~2 MB.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// What can go wrong with the store. Both name the file.
#[derive(Debug, thiserror::Error)]
pub enum AclError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a store this version reads: restore it from a backup, or remove it
    /// (which leaves no ACL: only super users are allowed) and add the bindings again.
    #[error("the ACL file {path} is damaged: {reason}")]
    Damaged { path: PathBuf, reason: String },
}

impl From<AclError> for crate::error::Error {
    fn from(e: AclError) -> Self {
        match e {
            AclError::Io { op, path, source } => crate::error::Error::Io {
                op,
                path,
                source: Arc::new(source),
            },
            AclError::Damaged { path, reason } => crate::error::Error::Corrupt {
                path,
                position: 0,
                reason: format!("not an ACL file this version reads: {reason}"),
            },
        }
    }
}

/// The ACL bindings of a data directory, in `<data_dir>/security/acls`.
///
/// # Format
/// One JSON object, written atomically (temporary file, fsync, rename, fsync of the
/// directory), so a crash leaves the old bindings or the new ones:
///
/// ```json
/// {"format": "nanokafka-acls", "version": 1, "acls": [
///   {"resource_type": "TOPIC", "pattern_type": "LITERAL", "name": "orders",
///    "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}]}
/// ```
///
/// Names are Kafka's (`TOPIC`, `GROUP`, `CLUSTER`, `TRANSACTIONAL_ID`; `LITERAL`,
/// `PREFIXED`; `ALL`, `READ`, ..., `IDEMPOTENT_WRITE`; `ALLOW`, `DENY`). A missing file is a
/// store with no bindings. A file that does not parse, names another format or version, or
/// holds a binding Kafka would refuse ([`AclBinding::validate`]) is refused as a whole,
/// naming the file: never read as "no ACLs", which would deny all, nor skipped, which could
/// drop a DENY.
///
/// # Readers and writers
/// A change (`update`) holds `acls.lock` beside the file while it reads, changes and writes
/// the bindings. A running broker sees a change another process made at its next request:
/// [`AclStore::current`] looks at the file's inode, size and modification time (a stat, no
/// read) and reads it again when any differs; the rename of every write gives it a new inode.
#[derive(Debug)]
pub struct AclStore {
    path: PathBuf,
    cached: Mutex<Cached>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoreFile {
    format: String,
    version: u32,
    acls: Vec<AclBinding>,
}

/// The bindings last read, and what the file looked like then.
#[derive(Debug)]
struct Cached {
    stamp: Option<Stamp>,
    acls: Arc<Acls>,
}

/// What tells a changed file from the one read: a rename gives a new inode; a size or time
/// catches an edit in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl AclStore {
    /// The store of the data directory `data_dir`, read once.
    ///
    /// # Errors
    /// [`AclError`] when the file cannot be read or is damaged.
    pub fn open(data_dir: &Path) -> Result<Self, AclError> {
        let path = data_dir.join(SECURITY_DIR).join(ACLS_FILE);
        let stamp = stamp(&path)?;
        let acls = read(&path)?;
        Ok(AclStore {
            path,
            cached: Mutex::new(Cached {
                stamp,
                acls: Arc::new(acls),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bindings as the file holds them now: read again when it changed since last read.
    /// A file that became unreadable or damaged gives no bindings (nothing is allowed but to
    /// super users) and an error log line, once per change of the file.
    pub fn current(&self) -> Arc<Acls> {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let now = stamp(&self.path);
        let changed = match &now {
            Ok(now) => *now != cached.stamp,
            Err(_) => true,
        };
        if changed {
            let (stamp, acls) = match now.and_then(|stamp| Ok((stamp, read(&self.path)?))) {
                Ok((stamp, acls)) => {
                    tracing::info!(path = %self.path.display(), bindings = acls.len(),
                        "ACLs read");
                    (stamp, acls)
                }
                Err(e) => {
                    tracing::error!(error = %e, "ACLs cannot be read: only super users are \
                        allowed until the file is fixed");
                    (stamp(&self.path).ok().flatten(), Acls::default())
                }
            };
            *cached = Cached {
                stamp,
                acls: Arc::new(acls),
            };
        }
        cached.acls.clone()
    }

    /// Reads the bindings afresh under the store's lock, lets `change` change them, and
    /// writes them back when it did (`change` returns whether it did, with its result).
    ///
    /// # Errors
    /// [`AclError`] when the file is damaged (nothing is written) or cannot be written.
    pub fn update<R>(&self, change: impl FnOnce(&mut Acls) -> (bool, R)) -> Result<R, AclError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|source| AclError::Io {
            op: "create the security directory",
            path: dir.to_owned(),
            source,
        })?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .and_then(|file| file.lock().map(|()| file))
            .map_err(|source| AclError::Io {
                op: "lock",
                path: lock_path.clone(),
                source,
            })?;
        let mut acls = read(&self.path)?;
        let (changed, result) = change(&mut acls);
        if changed {
            let file = StoreFile {
                format: FORMAT.into(),
                version: VERSION,
                acls: acls.iter().cloned().collect(),
            };
            let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| AclError::Damaged {
                path: self.path.clone(),
                reason: format!("the bindings do not encode: {e}"),
            })?;
            bytes.push(b'\n');
            write_atomically(&*os(), &self.path, &bytes).map_err(|e| AclError::Io {
                op: "write",
                path: self.path.clone(),
                source: std::io::Error::other(e),
            })?;
        }
        let stamp = stamp(&self.path)?;
        drop(lock);
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Cached {
            stamp,
            acls: Arc::new(acls),
        };
        Ok(result)
    }
}

fn stamp(path: &Path) -> Result<Option<Stamp>, AclError> {
    match fs::metadata(path) {
        Ok(meta) => Ok(Some(Stamp {
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AclError::Io {
            op: "look at",
            path: path.to_owned(),
            source,
        }),
    }
}

/// Reads and checks the store file at `path`; a missing one holds no bindings.
fn read(path: &Path) -> Result<Acls, AclError> {
    let damaged = |reason: String| AclError::Damaged {
        path: path.to_owned(),
        reason,
    };
    let bytes = match File::open(path) {
        Ok(file) => {
            use std::io::Read;
            let mut bytes = Vec::new();
            file.take(MAX_FILE_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|source| AclError::Io {
                    op: "read",
                    path: path.to_owned(),
                    source,
                })?;
            bytes
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Acls::default()),
        Err(source) => {
            return Err(AclError::Io {
                op: "open",
                path: path.to_owned(),
                source,
            })
        }
    };
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(damaged(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    let file: StoreFile = serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string()))?;
    if file.format != FORMAT || file.version != VERSION {
        return Err(damaged(format!(
            "format '{}' version {}, where '{FORMAT}' version {VERSION} is read",
            file.format, file.version
        )));
    }
    for binding in &file.acls {
        binding
            .validate()
            .map_err(|reason| damaged(format!("{binding}: {reason}")))?;
    }
    Ok(Acls::new(file.acls))
}
