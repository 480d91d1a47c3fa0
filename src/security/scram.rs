//! SCRAM credentials (RFC 5802, RFC 7677): what the broker keeps per user and mechanism to
//! check a SCRAM-SHA-256 or SCRAM-SHA-512 login, and the file that keeps them.
//!
//! The broker never holds a password. It keeps the salt, the iteration count, `StoredKey`
//! (`H(HMAC(SaltedPassword, "Client Key"))`) and `ServerKey` (`HMAC(SaltedPassword, "Server
//! Key")`), as Kafka does. A login is checked with one HMAC and one hash (RFC 5802 §3): the
//! PBKDF2 iterations are the client's cost, never the broker's, so wrong passwords cost the
//! broker no more than right ones.

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2, rand::SecureRandom};

use crate::storage::fs::OsFs;
use crate::storage::fsutil::write_atomically;

/// The fewest PBKDF2 iterations accepted (RFC 7677 asks at least 4096; Kafka's minimum).
pub const MIN_ITERATIONS: u32 = 4096;
/// The most PBKDF2 iterations accepted (Kafka's maximum): a client pays for each.
pub const MAX_ITERATIONS: u32 = 16384;
/// The iteration count `nanokafka users add` uses unless told (Kafka's minimum, as
/// `kafka-configs.sh` uses).
pub const DEFAULT_ITERATIONS: u32 = MIN_ITERATIONS;
/// The longest user name stored (and read from a SCRAM message), in bytes.
pub const MAX_USER_BYTES: usize = 256;
/// The longest salt stored, in bytes.
pub const MAX_SALT_BYTES: usize = 256;
/// The salt length the broker and the CLI generate.
pub const SALT_BYTES: usize = 32;

/// A SCRAM mechanism, named as SASL names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    ScramSha256,
    ScramSha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::ScramSha256, ScramMechanism::ScramSha512];

    /// The SASL name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::ScramSha256 => "SCRAM-SHA-256",
            ScramMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism SASL names `name` (case-sensitive, as RFC 4422 and Kafka compare).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's wire code (`ScramMechanism` in its admin API): 1 and 2; 0 is UNKNOWN.
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::ScramSha256 => 1,
            ScramMechanism::ScramSha512 => 2,
        }
    }

    pub fn from_kafka_type(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.kafka_type() == code)
    }

    /// The hash's output length: every key and proof has it.
    pub fn key_len(self) -> usize {
        self.digest().output_len()
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::ScramSha256 => &digest::SHA256,
            ScramMechanism::ScramSha512 => &digest::SHA512,
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::ScramSha256 => hmac::HMAC_SHA256,
            ScramMechanism::ScramSha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::ScramSha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::ScramSha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// `HMAC(key, message)`.
    pub fn hmac_of(self, key: &[u8], message: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac(), key), message)
            .as_ref()
            .to_vec()
    }

    /// `H(data)`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }

    /// `SaltedPassword := Hi(password, salt, i)`, PBKDF2: the client's work (and the CLI's).
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.key_len()];
        let iterations = NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN);
        pbkdf2::derive(self.pbkdf2(), iterations, salt, password, &mut out);
        out
    }
}

impl fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the broker keeps to check one user's logins with one mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl fmt::Debug for ScramCredential {
    /// The keys never reach a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential for a password (runs PBKDF2: the CLI's work, never a login's).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Self {
        let salted = mechanism.salted_password(password, salt, iterations);
        Self::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// The credential for a salted password, as AlterUserScramCredentials carries it.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Self {
        let client_key = mechanism.hmac_of(salted, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac_of(salted, b"Server Key"),
        }
    }
}

/// `count` bytes from the OS's random generator.
pub fn random_bytes(count: usize) -> Result<Vec<u8>, String> {
    let mut bytes = vec![0; count];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the OS random generator failed".to_owned())?;
    Ok(bytes)
}

/// Equality whose time depends only on the lengths, not on where the contents differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= std::hint::black_box(x ^ y);
    }
    diff == 0
}

/// Why a user name cannot be stored, if it cannot: empty, longer than [`MAX_USER_BYTES`], or
/// holding a control character (the file is line- and tab-separated; no client sends one).
pub fn check_user_name(user: &str) -> Result<(), String> {
    if user.is_empty() || user.len() > MAX_USER_BYTES {
        return Err(format!(
            "a SCRAM user name has 1 to {MAX_USER_BYTES} bytes, not {}",
            user.len()
        ));
    }
    if user.chars().any(char::is_control) {
        return Err("a SCRAM user name has no control characters".into());
    }
    Ok(())
}

/// Why an iteration count is refused, if it is (Kafka's UNACCEPTABLE_CREDENTIAL).
pub fn check_iterations(iterations: i64) -> Result<u32, String> {
    match u32::try_from(iterations) {
        Ok(i) if (MIN_ITERATIONS..=MAX_ITERATIONS).contains(&i) => Ok(i),
        _ => Err(format!(
            "iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}, not {iterations}"
        )),
    }
}

/// The file's first line.
const HEADER: &str = "nanokafka-scram-credentials v1";

/// Every SCRAM credential of a data directory, and the secret the unknown users' salts are
/// derived from. Kept in `<data_dir>/security/scram-credentials`, a text file:
///
/// ```text
/// nanokafka-scram-credentials v1
/// secret <base64 of 32 random bytes>
/// <user> TAB <mechanism> TAB <iterations> TAB <salt> TAB <StoredKey> TAB <ServerKey>
/// ...
/// crc32c <8 lowercase hex digits>
/// ```
///
/// one credential per line, sorted by user then mechanism; the salt and keys in standard
/// base64, the mechanism by its SASL name, the user as given (no control characters, at most
/// [`MAX_USER_BYTES`]). The last line is the CRC-32C of every byte before it: a file cut
/// short or edited by hand is refused with an error naming it, never read as fewer users.
/// Written atomically (temporary file, fsync, rename).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramStore {
    secret: Vec<u8>,
    users: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
}

impl fmt::Debug for ScramStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramStore")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The store's path under a data directory.
pub fn store_path(data_dir: &Path) -> PathBuf {
    data_dir.join("security").join("scram-credentials")
}

impl ScramStore {
    /// The store's path under a data directory: `<data_dir>/security/scram-credentials`.
    pub fn path(data_dir: &Path) -> PathBuf {
        store_path(data_dir)
    }

    /// A fresh salt of [`SALT_BYTES`] from the OS random generator.
    pub fn random_salt() -> Result<Vec<u8>, String> {
        random_bytes(SALT_BYTES)
    }

    /// An empty store with a fresh secret.
    pub fn new() -> Result<Self, String> {
        Ok(ScramStore {
            secret: random_bytes(32)?,
            users: BTreeMap::new(),
        })
    }

    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(&mechanism)
    }

    /// Every user with its mechanisms, by name.
    pub fn users(&self) -> impl Iterator<Item = (&str, Vec<ScramMechanism>)> {
        self.users
            .iter()
            .map(|(user, creds)| (user.as_str(), creds.keys().copied().collect()))
    }

    /// Every credential of `user`, by mechanism.
    pub fn credentials(&self, user: &str) -> Option<&BTreeMap<ScramMechanism, ScramCredential>> {
        self.users.get(user)
    }

    /// Adds or replaces a credential.
    pub fn upsert(
        &mut self,
        user: &str,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    ) -> Result<(), String> {
        check_user_name(user)?;
        check_iterations(i64::from(credential.iterations))?;
        if credential.salt.is_empty() || credential.salt.len() > MAX_SALT_BYTES {
            return Err(format!("a salt has 1 to {MAX_SALT_BYTES} bytes"));
        }
        self.users
            .entry(user.to_owned())
            .or_default()
            .insert(mechanism, credential);
        Ok(())
    }

    /// Removes `user`'s credential for `mechanism`, or all of them when `None`; whether
    /// there was one.
    pub fn delete(&mut self, user: &str, mechanism: Option<ScramMechanism>) -> bool {
        let Some(creds) = self.users.get_mut(user) else {
            return false;
        };
        let removed = match mechanism {
            Some(m) => creds.remove(&m).is_some(),
            None => !std::mem::take(creds).is_empty(),
        };
        if creds.is_empty() {
            self.users.remove(user);
        }
        removed
    }

    /// The credential an unknown user seems to have: a salt derived from the name and the
    /// store's secret (the same on every try, so it looks stored) and keys no proof matches.
    pub fn decoy(&self, user: &str, mechanism: ScramMechanism) -> ScramCredential {
        let derive = |label: &str| {
            let message = [
                label.as_bytes(),
                mechanism.name().as_bytes(),
                user.as_bytes(),
            ];
            mechanism.hmac_of(&self.secret, &message.join(&0u8))
        };
        ScramCredential {
            salt: derive("salt")[..SALT_BYTES.min(mechanism.key_len())].to_vec(),
            iterations: DEFAULT_ITERATIONS,
            stored_key: derive("stored"),
            server_key: derive("server"),
        }
    }

    /// The file's bytes (format on the type).
    pub fn encode(&self) -> String {
        let mut text = format!("{HEADER}\nsecret {}\n", BASE64.encode(&self.secret));
        for (user, creds) in &self.users {
            for (mechanism, c) in creds {
                text.push_str(&format!(
                    "{user}\t{mechanism}\t{}\t{}\t{}\t{}\n",
                    c.iterations,
                    BASE64.encode(&c.salt),
                    BASE64.encode(&c.stored_key),
                    BASE64.encode(&c.server_key)
                ));
            }
        }
        let crc = crc32c::crc32c(text.as_bytes());
        text.push_str(&format!("crc32c {crc:08x}\n"));
        text
    }

    /// Reads the file's bytes; the error says what is wrong (the caller names the file).
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or("no checksum line")?;
        let (body, last) = text.split_at(body_end);
        let crc = last
            .trim_end_matches('\n')
            .strip_prefix("crc32c ")
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .ok_or("the last line is not `crc32c <hex>`")?;
        if crc != crc32c::crc32c(body.as_bytes()) {
            return Err("checksum mismatch: the file is damaged or was edited by hand".into());
        }
        let mut lines = body.lines();
        if lines.next() != Some(HEADER) {
            return Err(format!("the first line is not `{HEADER}`"));
        }
        let secret = lines
            .next()
            .and_then(|l| l.strip_prefix("secret "))
            .and_then(|b| BASE64.decode(b).ok())
            .filter(|s| !s.is_empty())
            .ok_or("the second line is not `secret <base64>`")?;
        let mut store = ScramStore {
            secret,
            users: BTreeMap::new(),
        };
        for (n, line) in lines.enumerate() {
            let (user, mechanism, credential) =
                decode_line(line).map_err(|e| format!("credential line {}: {e}", n + 1))?;
            store
                .upsert(user, mechanism, credential)
                .map_err(|e| format!("credential line {}: {e}", n + 1))?;
        }
        Ok(store)
    }

    /// Reads the store at `path`; `None` when there is no file.
    pub fn load(path: &Path) -> Result<Option<Self>, String> {
        match std::fs::read(path) {
            Ok(bytes) => Self::decode(&bytes)
                .map(Some)
                .map_err(|e| format!("SCRAM credential store {}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!(
                "cannot read the SCRAM credential store {}: {e}",
                path.display()
            )),
        }
    }

    /// Reads the store at `path`, or a new empty one when there is no file.
    pub fn load_or_new(path: &Path) -> Result<Self, String> {
        match Self::load(path)? {
            Some(store) => Ok(store),
            None => Self::new(),
        }
    }

    /// Writes the store to `path` atomically, creating its directory.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        write_atomically(&OsFs, path, self.encode().as_bytes())
            .map_err(|e| format!("cannot write the SCRAM credential store: {e}"))
    }
}

fn decode_line(line: &str) -> Result<(&str, ScramMechanism, ScramCredential), String> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [user, mechanism, iterations, salt, stored, server] = fields[..] else {
        return Err(format!("{} fields, not 6", fields.len()));
    };
    let mechanism = ScramMechanism::from_name(mechanism).ok_or("unknown mechanism")?;
    let iterations = iterations
        .parse::<i64>()
        .map_err(|_| "iterations is not a number".to_owned())
        .and_then(check_iterations)?;
    let key = |b64: &str, what: &str| {
        BASE64
            .decode(b64)
            .ok()
            .filter(|k| k.len() == mechanism.key_len())
            .ok_or(format!("bad {what}"))
    };
    let credential = ScramCredential {
        salt: BASE64.decode(salt).map_err(|_| "bad salt".to_owned())?,
        iterations,
        stored_key: key(stored, "StoredKey")?,
        server_key: key(server, "ServerKey")?,
    };
    Ok((user, mechanism, credential))
}

/// The store as a running broker sees it: re-read when its file changed (another process,
/// `nanokafka users`, replaced it), checked each time a login needs it. A file that turns
/// bad is logged and the last good copy kept: a damaged file never lets anyone in.
#[derive(Debug)]
pub struct LiveScramStore {
    path: PathBuf,
    cached: Mutex<(Option<FileStamp>, Arc<ScramStore>)>,
}

/// What tells one version of the file from the next: `write_atomically` renames a new file
/// over it, so its inode changes with every write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        inode: meta.ino(),
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

impl LiveScramStore {
    /// Opens the store of `data_dir`. With `create`, a missing file is written empty (with
    /// its secret), so that unknown users' decoys stay the same across restarts; without,
    /// a missing file is an empty store until someone writes one. A bad file is an error
    /// naming it.
    pub fn open(data_dir: &Path, create: bool) -> Result<Self, String> {
        let path = store_path(data_dir);
        let store = match ScramStore::load(&path)? {
            Some(store) => store,
            None => {
                let store = ScramStore::new()?;
                if create {
                    store.save(&path)?;
                }
                store
            }
        };
        Ok(LiveScramStore {
            cached: Mutex::new((stamp(&path), Arc::new(store))),
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The store as the file now holds it.
    pub fn current(&self) -> Arc<ScramStore> {
        let now = stamp(&self.path);
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if now != cached.0 {
            cached.0 = now;
            match ScramStore::load(&self.path) {
                Ok(Some(store)) => cached.1 = Arc::new(store),
                Ok(None) => tracing::error!(
                    path = %self.path.display(),
                    "the SCRAM credential store is gone; keeping the last one read"
                ),
                Err(e) => tracing::error!(error = %e, "keeping the last SCRAM store read"),
            }
        }
        cached.1.clone()
    }

    /// Applies `change` to the file's current store and writes it back.
    pub fn update<T>(&self, change: impl FnOnce(&mut ScramStore) -> T) -> Result<T, String> {
        let mut store = ScramStore::load_or_new(&self.path)?;
        let out = change(&mut store);
        store.save(&self.path)?;
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        *cached = (stamp(&self.path), Arc::new(store));
        Ok(out)
    }
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
