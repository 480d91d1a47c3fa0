//! The Kafka-API peer: tansu (an independent Kafka broker in Rust) with its in-memory storage
//! engine, on a loopback port, measured by the same clients in the same run as the listener.
//!
//! The binary is `NANOKAFKA_TANSU` if set, else what `benches/peers/tansu.sh path` prints
//! (`benches/peers/tansu.sh install` puts it there). Without it, its rows are skipped with the
//! reason. The process is killed when [`Tansu`] drops, on a panic too. Its CPU time is read
//! from `/proc/<pid>/stat`, so its rows carry the peer broker's CPU per record as ours carry
//! NanoKafka's.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TANSU_ENV: &str = "NANOKAFKA_TANSU";
/// How long a fresh tansu has to accept a connection.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the tansu binary is, or why it is not found.
pub fn find() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(TANSU_ENV) {
        let path = PathBuf::from(path);
        return match path.is_file() {
            true => Ok(path),
            false => Err(format!("{TANSU_ENV}={} is not a file", path.display())),
        };
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/tansu.sh");
    let out = Command::new(&script)
        .arg("path")
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    match out.status.success() && path.is_file() {
        true => Ok(path),
        false => Err(format!(
            "tansu is not installed (benches/peers/tansu.sh install, or {TANSU_ENV})"
        )),
    }
}

/// A running tansu, killed on drop.
pub struct Tansu {
    child: Child,
    pub addr: SocketAddr,
}

impl Tansu {
    /// Starts `binary` as an in-memory broker on a free loopback port and waits until the
    /// port accepts a connection.
    pub fn start(binary: &Path) -> Result<Self, String> {
        let port = crate::wire::free_port()?;
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(binary)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", binary.display()))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut tansu = Tansu { child, addr };
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = tansu.child.try_wait() {
                return Err(format!("tansu exited at start ({status})"));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(tansu);
            }
            if start.elapsed() >= START_TIMEOUT {
                return Err(format!(
                    "tansu did not accept on {addr} within {START_TIMEOUT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process's CPU time so far (user + system, every thread), from `/proc`.
    pub fn cpu_time(&self) -> Duration {
        proc_cpu_time(self.child.id()).unwrap_or_default()
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// utime + stime of `pid` (fields 14 and 15 of `/proc/<pid>/stat`, in clock ticks).
fn proc_cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it are plain numbers.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_sec = u64::try_from(per_sec).ok().filter(|&t| t > 0)?;
    Some(Duration::from_micros(ticks * 1_000_000 / per_sec))
}
