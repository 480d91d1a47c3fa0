//! tansu 0.6.0, an independent Kafka broker, as a child process of the test (with
//! `process.rs`: killed when dropped or when the thread that started it ends): its in-memory
//! engine on a free loopback port. `benches/peers/tansu.sh install` installs it.

#![allow(dead_code)] // each test binary uses the part it needs

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::Process;

/// A running tansu.
pub struct Tansu {
    pub process: Process,
    /// `host:port`, for `bootstrap.servers`.
    pub bootstrap: String,
}

impl Tansu {
    /// Starts tansu's in-memory engine and waits, up to `timeout`, for its `ready in` line.
    ///
    /// # Panics
    /// When it cannot be started, or exits or says nothing of the kind within `timeout`.
    pub fn start(binary: &Path, timeout: Duration) -> Tansu {
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
        process.wait_for_line("tansu's 'ready in' line", timeout, |l| {
            l.contains("ready in")
        });
        Tansu {
            process,
            bootstrap: format!("127.0.0.1:{port}"),
        }
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
    // The repository's script, whichever package's tests ask (the library's, or `cli/`'s).
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("benches/peers/tansu.sh"))
        .find(|script| script.is_file())
        .ok_or("no benches/peers/tansu.sh above this package")?;
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
