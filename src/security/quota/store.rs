//! The quotas file, `<data_dir>/security/quotas`, and the quotas a running listener enforces.
//!
//! # Format
//! JSON, one object, written whole and atomically (temporary file, fsync, rename):
//!
//! ```text
//! {"version":1,"quotas":[
//!   {"entity":{"user":"alice","client-id":null},"values":{"producer_byte_rate":1048576.0}},
//!   {"entity":{"client-id":"greedy"},"values":{"consumer_byte_rate":2097152.0}}]}
//! ```
//!
//! * `version`: 1, the only one; any other is refused.
//! * `entity`: Kafka's entity, type to name: `user` and/or `client-id`; a `null` name is
//!   the default (`<default>`). At least one type; no other type; no empty name.
//! * `values`: quota key to value (`producer_byte_rate`, `consumer_byte_rate`: whole bytes
//!   per second; `request_percentage`: percent of one thread), each > 0; at least one.
//!
//! A file that breaks any of this is refused whole, naming the file: at open the broker does
//! not start; when a running broker rereads it, it keeps enforcing what it had and logs why.
//! No file is no quotas.
//!
//! # Another process's changes
//! A running listener rereads the file when a request comes at least a second (by the
//! broker's clock) after the last look and its bytes changed, so `nanokafka quotas` or
//! another broker process's AlterClientQuotas takes effect without a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::{QuotaConfig, QuotaEntity, QuotaKey, Sensors};
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::storage::fs::SharedFs;
use crate::storage::fsutil::write_atomically;

/// The file's name under `<data_dir>/security/`.
pub const QUOTAS_FILE: &str = "quotas";

/// How often (broker clock) a running listener looks at the file for another process's change.
const RECHECK_MS: u64 = 1_000;

/// The only version of the format.
const FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileForm {
    version: u32,
    quotas: Vec<EntryForm>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryForm {
    entity: BTreeMap<String, Option<String>>,
    values: BTreeMap<String, f64>,
}

impl QuotaConfig {
    /// The file's bytes for these quotas (the module's format).
    pub fn encode(&self) -> Vec<u8> {
        let quotas = self
            .entries()
            .map(|(entity, values)| EntryForm {
                entity: entity
                    .parts()
                    .into_iter()
                    .map(|(t, n)| (t.to_owned(), n.map(str::to_owned)))
                    .collect(),
                values: values
                    .iter()
                    .map(|(k, v)| (k.name().to_owned(), *v))
                    .collect(),
            })
            .collect();
        let form = FileForm {
            version: FORMAT_VERSION,
            quotas,
        };
        // Maps of strings and finite numbers always serialize.
        serde_json::to_vec(&form).unwrap_or_default()
    }

    /// Quotas from the file's bytes, every entry checked.
    ///
    /// # Errors
    /// Why the bytes are not a quotas file, for an error that names it.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        let form: FileForm = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if form.version != FORMAT_VERSION {
            return Err(format!(
                "version {} (this broker reads {FORMAT_VERSION})",
                form.version
            ));
        }
        let mut config = QuotaConfig::default();
        for entry in form.quotas {
            let entity = QuotaEntity::from_parts(
                entry.entity.iter().map(|(t, n)| (t.as_str(), n.as_deref())),
            )?;
            if entry.values.is_empty() {
                return Err(format!("{entity}: no values"));
            }
            for (name, value) in entry.values {
                let key = QuotaKey::parse(&name)
                    .ok_or_else(|| format!("{entity}: unknown quota key {name}"))?;
                key.validate(value).map_err(|e| format!("{entity}: {e}"))?;
                config.set(&entity, key, Some(value));
            }
        }
        Ok(config)
    }
}

/// The quotas a listener enforces, with their file and the measured rates.
#[derive(Debug)]
pub struct ClientQuotas {
    path: PathBuf,
    fs: SharedFs,
    clock: SharedClock,
    /// Any quota set: while false a request costs one load of this and of `next_check_ms`.
    active: AtomicBool,
    next_check_ms: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    config: QuotaConfig,
    /// The file's bytes when last read or written (`None`: no file).
    on_disk: Option<Vec<u8>>,
    sensors: Sensors,
}

impl ClientQuotas {
    /// The quotas in `<data_dir>/security/quotas`; none when there is no file.
    ///
    /// # Errors
    /// `Io` when the file cannot be read, `Corrupt` when it is not a quotas file.
    pub fn open(fs: SharedFs, data_dir: &Path, clock: SharedClock) -> Result<Self> {
        let path = data_dir.join("security").join(QUOTAS_FILE);
        let on_disk = read(fs.as_ref(), &path)?;
        let config = match &on_disk {
            Some(bytes) => QuotaConfig::decode(bytes).map_err(|reason| corrupt(&path, reason))?,
            None => QuotaConfig::default(),
        };
        Ok(ClientQuotas {
            active: AtomicBool::new(!config.is_empty()),
            next_check_ms: AtomicU64::new(clock.now_ms().saturating_add(RECHECK_MS)),
            state: Mutex::new(State {
                config,
                on_disk,
                sensors: Sensors::default(),
            }),
            path,
            fs,
            clock,
        })
    }

    /// The quotas of the data directory `data_dir`, by the operating system's files and clock:
    /// what `nanokafka quotas` changes while a broker may be serving the same directory.
    ///
    /// # Errors
    /// As [`ClientQuotas::open`].
    pub fn open_data_dir(data_dir: &Path) -> Result<Self> {
        let clock: SharedClock = std::sync::Arc::new(crate::clock::SystemClock);
        Self::open(crate::storage::fs::os(), data_dir, clock)
    }

    /// Records `value` for `user`'s client `client_id` against `key` and returns the throttle
    /// time in milliseconds; 0 at once when no quota is set.
    pub fn record(&self, key: QuotaKey, user: &str, client_id: &str, value: f64) -> u64 {
        self.refresh_if_due();
        if !self.active.load(Ordering::Relaxed) {
            return 0;
        }
        let now = self.clock.now_ms();
        let state = &mut *self.state();
        state
            .sensors
            .record(&state.config, key, (user, client_id), value, now)
    }

    /// True when a quota is set (after a look at the file, if one is due).
    pub fn is_active(&self) -> bool {
        self.refresh_if_due();
        self.active.load(Ordering::Relaxed)
    }

    /// The quotas now in force, with the file reread first.
    pub fn config(&self) -> QuotaConfig {
        let mut state = self.state();
        self.reload(&mut state);
        state.config.clone()
    }

    /// Applies `change` to the quotas as they are on disk and writes them back; the listener
    /// enforces the result at once.
    ///
    /// # Errors
    /// `Io` when the file cannot be written; nothing changes then.
    pub fn alter(&self, change: impl FnOnce(&mut QuotaConfig)) -> Result<()> {
        let mut state = self.state();
        self.reload(&mut state);
        let mut config = state.config.clone();
        change(&mut config);
        if config == state.config {
            return Ok(());
        }
        let bytes = config.encode();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        self.fs
            .create_dir_all(dir)
            .map_err(|e| Error::io("create the security directory", dir, e))?;
        write_atomically(self.fs.as_ref(), &self.path, &bytes)?;
        self.active.store(!config.is_empty(), Ordering::Relaxed);
        state.config = config;
        state.on_disk = Some(bytes);
        Ok(())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every method leaves the state whole before it can panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn refresh_if_due(&self) {
        let now = self.clock.now_ms();
        let due = self.next_check_ms.load(Ordering::Relaxed);
        if now < due
            || self
                .next_check_ms
                .compare_exchange(due, now + RECHECK_MS, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let mut state = self.state();
        self.reload(&mut state);
    }

    /// Rereads the file; a change replaces the quotas (rates measured so far stay), a file
    /// that does not read leaves them as they were.
    fn reload(&self, state: &mut State) {
        let bytes = match read(self.fs.as_ref(), &self.path) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::error!(error = %e, "keeping the client quotas in force");
                return;
            }
        };
        if bytes == state.on_disk {
            return;
        }
        let config = match bytes.as_deref().map(QuotaConfig::decode) {
            None => QuotaConfig::default(),
            Some(Ok(config)) => config,
            Some(Err(reason)) => {
                let e = corrupt(&self.path, reason);
                tracing::error!(error = %e, "keeping the client quotas in force");
                return;
            }
        };
        tracing::info!(path = %self.path.display(), "client quotas changed on disk");
        self.active.store(!config.is_empty(), Ordering::Relaxed);
        state.config = config;
        state.on_disk = bytes;
    }
}

fn read(fs: &dyn crate::storage::fs::FileSystem, path: &Path) -> Result<Option<Vec<u8>>> {
    if !fs.exists(path) {
        return Ok(None);
    }
    fs.read(path)
        .map(Some)
        .map_err(|e| Error::io("read the client quotas", path, e))
}

fn corrupt(path: &Path, reason: String) -> Error {
    Error::Corrupt {
        path: path.to_owned(),
        position: 0,
        reason: format!("not a client quotas file: {reason}"),
    }
}
