//! The brokers a Kafka target runs against, each a child process of the test
//! ([`crate::process::Process`]: killed when dropped or when the test thread that started it
//! ends): `nanokafka serve` on a temporary data directory, or tansu with its in-memory engine.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{Log, Process};

/// How long a broker may take to say it is ready.
const STARTUP: Duration = Duration::from_secs(30);

/// A running broker process.
pub struct Broker {
    process: Process,
    /// `host:port`, for `bootstrap.servers`.
    pub bootstrap: String,
}

impl Broker {
    /// Its output, as a handle that outlives it.
    pub fn log(&self) -> Log {
        self.process.log()
    }
}

/// `nanokafka serve` on `data_dir`, on a port it picks. New groups rebalance at once
/// (`--initial-rebalance-delay-ms 0`) instead of waiting Kafka's 3 s for more members.
pub fn serve(data_dir: &Path) -> Broker {
    let mut process = Process::serve(&[
        "--data-dir",
        data_dir.to_str().expect("a UTF-8 temporary path"),
        "--listen",
        "127.0.0.1:0",
        "--initial-rebalance-delay-ms",
        "0",
        "--fsync",
        "never",
    ]);
    let bootstrap = process.listening_addr(STARTUP).to_string();
    Broker { process, bootstrap }
}

/// tansu 0.6.0 with its in-memory engine on a free loopback port.
pub fn tansu(binary: &Path) -> Broker {
    // The port is free when asked; tansu binds it a moment later (nothing else here binds
    // ports at random in between, so a clash is unlikely and fails the start visibly).
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port();
    let url = format!("tcp://127.0.0.1:{port}");
    let mut command = Command::new(binary);
    command.args([
        "broker",
        "--listener-url",
        &url,
        "--advertised-listener-url",
        &url,
        "--storage-engine",
        "memory://tansu/",
    ]);
    let mut process = Process::spawn(command);
    process.wait_for_line("its 'ready in' line", STARTUP, |l| l.contains("ready in"));
    Broker {
        process,
        bootstrap: format!("127.0.0.1:{port}"),
    }
}

/// tansu's binary: `NANOKAFKA_TANSU` (which must work), else what `benches/peers/tansu.sh
/// path` names when that is an executable file. `Err` says why there is none.
pub fn tansu_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("NANOKAFKA_TANSU").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            is_executable(&path),
            "NANOKAFKA_TANSU={} is not an executable file",
            path.display()
        );
        return Ok(path);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/tansu.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("path")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if out.status.success() && is_executable(&path) {
        return Ok(path);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = stderr.lines().last().unwrap_or_default();
    Err(format!(
        "`benches/peers/tansu.sh path` names no executable ('{}'; {why})",
        path.display()
    ))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
