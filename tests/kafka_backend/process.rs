//! The brokers a Kafka target runs against, each a child process of the test: `nanokafka
//! serve` on a temporary data directory, or tansu with its in-memory engine.
//!
//! A [`Broker`] is killed when dropped. It is also started with `PR_SET_PDEATHSIG`, so the
//! kernel kills it when the test thread that started it ends, even when the test body is
//! stuck on another thread (the watchdog gave up on it) or the test binary is killed: no
//! broker outlives its test.

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long a broker may take to say it is ready.
const STARTUP: Duration = Duration::from_secs(30);

/// A running broker process and what it has printed so far.
pub struct Broker {
    child: Child,
    output: Arc<Output>,
    /// `host:port`, for `bootstrap.servers`.
    pub bootstrap: String,
}

/// The child's stdout and stderr, interleaved as they came, with a condition variable
/// signalled on every chunk.
#[derive(Default)]
struct Output {
    seen: Mutex<Seen>,
    changed: Condvar,
}

#[derive(Default)]
struct Seen {
    text: String,
    /// Pipes at end of file: both are once the child has exited.
    closed: usize,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `nanokafka serve` on `data_dir`, on a port it picks. New groups rebalance at once
/// (`--initial-rebalance-delay-ms 0`) instead of waiting Kafka's 3 s for more members.
pub fn serve(binary: &Path, data_dir: &Path) -> Broker {
    let mut command = Command::new(binary);
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--initial-rebalance-delay-ms",
            "0",
        ])
        .args(["--fsync", "never"])
        .env("RUST_LOG", "info");
    let mut broker = spawn(command, String::new());
    let log = broker.wait_for("its 'listening on ADDR' line", |out| {
        out.split("listening on ")
            .nth(1)
            .is_some_and(|rest| rest.contains(char::is_whitespace))
    });
    let rest = log.split("listening on ").nth(1).unwrap_or_default();
    broker.bootstrap = rest
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    broker
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
    let broker = spawn(command, format!("127.0.0.1:{port}"));
    broker.wait_for("its 'ready in' line", |out| out.contains("ready in"));
    broker
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

fn spawn(mut command: Command, bootstrap: String) -> Broker {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: prctl is async-signal-safe and touches only the child being set up.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let output = Arc::new(Output::default());
    // Drained to the end, so the broker never blocks on a full pipe.
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    collect(stdout, Arc::clone(&output));
    collect(stderr, Arc::clone(&output));
    Broker {
        child,
        output,
        bootstrap,
    }
}

fn collect(mut pipe: impl Read + Send + 'static, output: Arc<Output>) {
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            let n = pipe.read(&mut chunk).unwrap_or(0);
            let mut seen = output.seen.lock().unwrap();
            match n {
                0 => seen.closed += 1,
                n => seen.text.push_str(&String::from_utf8_lossy(&chunk[..n])),
            }
            output.changed.notify_all();
            if n == 0 {
                return;
            }
        }
    });
}

/// What a broker has printed, readable after the broker is gone (a failed test prints it).
#[derive(Clone)]
pub struct Log(Arc<Output>);

impl Log {
    /// The last `lines` lines printed.
    pub fn tail(&self, lines: usize) -> String {
        let seen = self.0.seen.lock().unwrap_or_else(|e| e.into_inner());
        let all: Vec<&str> = seen.text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Broker {
    /// Its output, as a handle that outlives it.
    pub fn log(&self) -> Log {
        Log(Arc::clone(&self.output))
    }

    /// Waits until `ready` holds for the output so far and returns it; panics with the output
    /// when the broker exits or [`STARTUP`] passes first.
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + STARTUP;
        let mut seen = self.output.seen.lock().unwrap();
        while !ready(&seen.text) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                seen.closed < 2 && !left.is_zero(),
                "no {what} within {STARTUP:?} (exited: {}):\n{}",
                seen.closed == 2,
                seen.text
            );
            seen = self.output.changed.wait_timeout(seen, left).unwrap().0;
        }
        seen.text.clone()
    }
}
