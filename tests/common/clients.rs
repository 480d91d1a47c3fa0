//! Running real Kafka clients against a broker: kcat, and the scripts of
//! `tests/tools/clients/` (kafka-python, confluent-kafka and aiokafka with the venv's
//! interpreter, Quix Streams with its own venv's, kafkajs with node). `.ci/run` installs them
//! all; `tests/tools/clients/README.md` documents each script's arguments and JSON, and the
//! kcat command lines.
//!
//! A client is found once per test binary ([`kcat`], [`python`], [`quix`], [`node`]). When it is missing
//! the finder returns `None` after a line on stderr, and the caller skips its check, except
//! under `CI`, which panics instead: CI never skips a client. A path named by an environment
//! variable that does not work also panics, since whoever set it asked for the check.
//!
//! Every run is bounded: [`Client::run`] kills the child when its timeout passes and panics with
//! its stderr. [`Client::spawn`] starts a long-running client (a group member) whose output is
//! followed as it comes ([`Running::wait_for_stdout`], [`Running::wait_for_stderr`]) and which is
//! stopped when the test says so (stdin closed, SIGTERM or SIGKILL), always with a deadline.

#![allow(dead_code)] // each test binary uses the part it needs

use std::env;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// kcat's path (`.ci/run` sets it); `kcat` on PATH otherwise.
const KCAT_ENV: &str = "NANOKAFKA_KCAT";
/// The interpreter with kafka-python, confluent-kafka and aiokafka (`.ci/run`'s venv).
const PYTHON_ENV: &str = "NANOKAFKA_PYTHON";
const DEFAULT_VENV_PYTHON: &str = ".cache/nanokafka/venv/bin/python";
/// The interpreter with Quix Streams: a venv of its own, as quixstreams pins a confluent-kafka
/// older than the one of the venv above.
const QUIX_PYTHON_ENV: &str = "NANOKAFKA_QUIX_PYTHON";
const DEFAULT_QUIX_PYTHON: &str = ".cache/nanokafka/quix-venv/bin/python";
/// The node_modules folder that holds kafkajs; `node` itself is taken from PATH.
const NODE_MODULES_ENV: &str = "NANOKAFKA_NODE_MODULES";
const DEFAULT_NODE_MODULES: &str = ".cache/nanokafka/node/node_modules";

/// How long a probe of an installed client (`kcat -V`, an import) may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// One client, ready to run with arguments: a program, the arguments that come before the
/// caller's (the script), and its environment.
#[derive(Debug, Clone)]
pub struct Client {
    program: PathBuf,
    leading: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
}

/// What a finished client did.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The last non-empty line of stdout as JSON: every script ends with its result document.
    pub fn json(&self) -> serde_json::Value {
        let last = self.stdout.lines().rev().find(|l| !l.trim().is_empty());
        let last = last.unwrap_or_else(|| panic!("no output; stderr:\n{}", self.stderr));
        serde_json::from_str(last).unwrap_or_else(|e| {
            panic!(
                "last line is not JSON ({e}): {last}\nstderr:\n{}",
                self.stderr
            )
        })
    }

    /// Every non-empty line of stdout as JSON (the event stream of `confluent_consume.py`,
    /// kcat's `-J`).
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        json_lines(&self.stdout)
    }
}

/// The non-empty lines of `text`, each parsed as JSON; panics on one that is not.
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// kcat, or `None` (after a line on stderr) when it is not installed and `CI` is not set.
pub fn kcat() -> Option<Client> {
    static FOUND: OnceLock<Option<Client>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let named = env::var_os(KCAT_ENV).filter(|v| !v.is_empty());
            let client = Client {
                program: named
                    .clone()
                    .map_or_else(|| PathBuf::from("kcat"), PathBuf::from),
                leading: Vec::new(),
                env: Vec::new(),
            };
            probe(client, named.is_some(), "kcat", &["-V"])
        })
        .clone()
}

/// The venv's interpreter running `tests/tools/clients/<script>`, or `None` (after a line on
/// stderr) when the venv lacks the three Python clients and `CI` is not set.
pub fn python(script: &str) -> Option<Client> {
    static FOUND: OnceLock<Option<Client>> = OnceLock::new();
    let client = FOUND.get_or_init(|| {
        let import = "import kafka, confluent_kafka, aiokafka, \
            confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.protobuf, \
            confluent_kafka.schema_registry.json_schema";
        venv_python("python clients", PYTHON_ENV, DEFAULT_VENV_PYTHON, import)
    });
    client.clone().map(|c| c.with_script(script))
}

/// The Quix Streams venv's interpreter running `tests/tools/clients/<script>`, or `None`
/// (after a line on stderr) when that venv lacks quixstreams and `CI` is not set.
pub fn quix(script: &str) -> Option<Client> {
    static FOUND: OnceLock<Option<Client>> = OnceLock::new();
    let client = FOUND.get_or_init(|| {
        let import = "import quixstreams";
        venv_python("quixstreams", QUIX_PYTHON_ENV, DEFAULT_QUIX_PYTHON, import)
    });
    client.clone().map(|c| c.with_script(script))
}

/// The interpreter the environment variable `named_by` names, else `default` under HOME, if
/// it runs `import`: [`probe`]'s answer.
fn venv_python(what: &str, named_by: &str, default: &str, import: &str) -> Option<Client> {
    let named = env::var_os(named_by).filter(|v| !v.is_empty());
    let program = match (&named, env::var_os("HOME")) {
        (Some(python), _) => PathBuf::from(python),
        (None, Some(home)) => Path::new(&home).join(default),
        (None, None) => return skip(what, format!("{named_by} and HOME are not set")),
    };
    let client = Client {
        program,
        leading: Vec::new(),
        env: Vec::new(),
    };
    probe(client, named.is_some(), what, &["-c", import])
}

/// `node` running `tests/tools/clients/<script>` with NODE_PATH at the kafkajs install, or
/// `None` (after a line on stderr) when node or kafkajs is missing and `CI` is not set.
pub fn node(script: &str) -> Option<Client> {
    static FOUND: OnceLock<Option<Client>> = OnceLock::new();
    let client = FOUND.get_or_init(|| {
        let named = env::var_os(NODE_MODULES_ENV).filter(|v| !v.is_empty());
        let modules = match (&named, env::var_os("HOME")) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(home)) => Path::new(&home).join(DEFAULT_NODE_MODULES),
            (None, None) => {
                return skip(
                    "kafkajs",
                    format!("{NODE_MODULES_ENV} and HOME are not set"),
                )
            }
        };
        let client = Client {
            program: PathBuf::from("node"),
            leading: Vec::new(),
            env: vec![("NODE_PATH", modules.into_os_string())],
        };
        probe(
            client,
            named.is_some(),
            "kafkajs",
            &["-e", "require('kafkajs')"],
        )
    });
    client.clone().map(|c| c.with_script(script))
}

/// Any program, run with the same bounds and capture: a broker the test starts itself (tansu,
/// the reference the scripts were proven against).
pub fn program(path: impl Into<PathBuf>) -> Client {
    Client {
        program: path.into(),
        leading: Vec::new(),
        env: Vec::new(),
    }
}

/// `client` if running it with `args` succeeds; otherwise a panic when the caller named it
/// (or under CI), a skip line and `None` when it was only the default location.
fn probe(client: Client, named: bool, what: &str, args: &[&str]) -> Option<Client> {
    let why = match client.try_run(args, b"", PROBE_TIMEOUT) {
        Ok(done) if done.status.success() => return Some(client),
        Ok(done) => format!(
            "{} {args:?} failed: {}",
            client.program.display(),
            done.stderr.trim()
        ),
        Err(e) => format!("{} cannot be run: {e}", client.program.display()),
    };
    assert!(
        !named,
        "{what}: the environment names it, but {why} (`bash .ci/run` installs it)"
    );
    skip(what, why)
}

fn skip(what: &str, why: String) -> Option<Client> {
    let under_ci = env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(!under_ci, "CI must run the {what} checks, but {why}");
    eprintln!("skipping the {what} checks: {why} (`bash .ci/run` installs it)");
    None
}

impl Client {
    /// The client with `name=value` in its environment (a password kept off its command line).
    pub fn with_env(mut self, name: &'static str, value: impl Into<OsString>) -> Client {
        self.env.push((name, value.into()));
        self
    }

    fn with_script(mut self, script: &str) -> Client {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/clients");
        self.leading.push(dir.join(script).into_os_string());
        self
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.leading).args(args);
        // `cargo test` puts the build's native library directories on LD_LIBRARY_PATH, among
        // them the kafka feature's librdkafka.so.1 (built without OpenSSL); kcat would load
        // it instead of its own and lose TLS and SCRAM. A client runs with its own libraries.
        command.env_remove("LD_LIBRARY_PATH");
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// Runs the client with `args`, `stdin` as its standard input, and waits for it to exit.
    ///
    /// # Panics
    /// When it cannot be started, or is still running after `timeout` (it is killed first; the
    /// message has its stderr). A nonzero exit is returned, not a panic: see [`Client::run_ok`].
    pub fn run(&self, args: &[&str], stdin: &[u8], timeout: Duration) -> Finished {
        self.try_run(args, stdin, timeout)
            .unwrap_or_else(|e| panic!("{}: {e}", self.describe(args)))
    }

    /// [`Client::run`], and a panic with its stderr unless it exited 0.
    pub fn run_ok(&self, args: &[&str], stdin: &[u8], timeout: Duration) -> Finished {
        let done = self.run(args, stdin, timeout);
        assert!(
            done.status.success(),
            "{} exited with {}; stderr:\n{}",
            self.describe(args),
            done.status,
            done.stderr
        );
        done
    }

    /// [`Client::run_ok`] with no input, and the last line of its output as JSON.
    pub fn run_json(&self, args: &[&str], timeout: Duration) -> serde_json::Value {
        self.run_ok(args, b"", timeout).json()
    }

    fn try_run(&self, args: &[&str], stdin: &[u8], timeout: Duration) -> Result<Finished, String> {
        let mut running = self
            .try_spawn(args)
            .map_err(|e| format!("cannot start: {e}"))?;
        if let Some(mut pipe) = running.stdin.take() {
            // A writer thread, so that a child that does not read its input cannot block us.
            let input = stdin.to_vec();
            thread::spawn(move || {
                let _ = pipe.write_all(&input);
            });
        }
        running.finish_within(timeout)
    }

    /// Starts the client with `args` and returns at once; its output is captured as it comes
    /// and its stdin stays open until [`Running::close_stdin`] (or the end).
    ///
    /// # Panics
    /// When it cannot be started.
    pub fn spawn(&self, args: &[&str]) -> Running {
        self.try_spawn(args)
            .unwrap_or_else(|e| panic!("{}: cannot start: {e}", self.describe(args)))
    }

    fn try_spawn(&self, args: &[&str]) -> std::io::Result<Running> {
        let mut child = self.command(args).spawn()?;
        let output = Arc::new(Output::default());
        let out = child.stdout.take().expect("stdout is piped");
        let err = child.stderr.take().expect("stderr is piped");
        // Detached: each ends at its pipe's end of file, which the child's exit brings.
        spawn_reader(out, Arc::clone(&output), Stream::Stdout);
        spawn_reader(err, Arc::clone(&output), Stream::Stderr);
        Ok(Running {
            stdin: child.stdin.take(),
            child: Some(child),
            output,
            what: self.describe(args),
        })
    }

    fn describe(&self, args: &[&str]) -> String {
        let mut words = vec![self.program.display().to_string()];
        words.extend(
            self.leading
                .iter()
                .map(|a| a.to_string_lossy().into_owned()),
        );
        words.extend(args.iter().map(|a| a.to_string()));
        words.join(" ")
    }
}

/// A client started by [`Client::spawn`]. Dropping it kills the child if it is still running,
/// so a failing test leaves no client behind.
pub struct Running {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    output: Arc<Output>,
    what: String,
}

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// What a child has written so far, with a condition variable signalled on every chunk.
#[derive(Default)]
struct Output {
    captured: Mutex<Captured>,
    changed: Condvar,
}

#[derive(Default)]
struct Captured {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// Streams that reached end of file: both do when the child has exited.
    closed: usize,
}

fn spawn_reader(mut pipe: impl Read + Send + 'static, output: Arc<Output>, stream: Stream) {
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            let n = pipe.read(&mut chunk).unwrap_or(0);
            let mut captured = output.captured.lock().unwrap();
            match (n, stream) {
                (0, _) => captured.closed += 1,
                (n, Stream::Stdout) => captured.stdout.extend_from_slice(&chunk[..n]),
                (n, Stream::Stderr) => captured.stderr.extend_from_slice(&chunk[..n]),
            }
            output.changed.notify_all();
            if n == 0 {
                return;
            }
        }
    });
}

impl Output {
    /// Waits until `done` holds for what was captured, or until `deadline`; returns whether it
    /// held.
    fn wait_until(&self, deadline: Instant, done: impl Fn(&Captured) -> bool) -> bool {
        let mut captured = self.captured.lock().unwrap();
        loop {
            if done(&captured) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            captured = self.changed.wait_timeout(captured, left).unwrap().0;
        }
    }

    fn text(&self, stream: Stream) -> String {
        let captured = self.captured.lock().unwrap();
        let bytes = match stream {
            Stream::Stdout => &captured.stdout,
            Stream::Stderr => &captured.stderr,
        };
        String::from_utf8_lossy(bytes).into_owned()
    }
}

impl Running {
    /// Stdout so far.
    pub fn stdout(&self) -> String {
        self.output.text(Stream::Stdout)
    }

    /// Stderr so far.
    pub fn stderr(&self) -> String {
        self.output.text(Stream::Stderr)
    }

    /// Waits until `done` holds for the stdout so far and returns that stdout.
    ///
    /// # Panics
    /// When `timeout` passes first, or the child exits first, with both its outputs and `what`
    /// (what was awaited) in the message.
    pub fn wait_for_stdout(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        self.wait_for(Stream::Stdout, what, timeout, done)
    }

    /// [`Running::wait_for_stdout`] on stderr: kcat reports group rebalances there.
    pub fn wait_for_stderr(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        self.wait_for(Stream::Stderr, what, timeout, done)
    }

    fn wait_for(
        &self,
        stream: Stream,
        what: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        let check = |c: &Captured| {
            let bytes = match stream {
                Stream::Stdout => &c.stdout,
                Stream::Stderr => &c.stderr,
            };
            c.closed == 2 || done(&String::from_utf8_lossy(bytes))
        };
        let held = self.output.wait_until(deadline, check);
        let text = self.output.text(stream);
        assert!(
            held && done(&text),
            "{}: {} while waiting for {what} (after {timeout:?})\nstdout:\n{}\nstderr:\n{}",
            self.what,
            if held { "exited" } else { "timed out" },
            self.stdout(),
            self.stderr()
        );
        text
    }

    /// Closes the child's standard input: `confluent_consume.py --until-stdin-closes` takes that
    /// as the signal to commit, leave its group and print its result.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Closes stdin, then waits for the child to exit on its own.
    ///
    /// # Panics
    /// When it is still running after `timeout` (it is killed; the message has its stderr).
    pub fn finish(mut self, timeout: Duration) -> Finished {
        self.close_stdin();
        let what = self.what.clone();
        self.finish_within(timeout)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    /// Sends SIGTERM (kcat then leaves its group and exits) and waits for the exit; SIGKILL if
    /// it is still running after `timeout`. Returns what it did either way.
    pub fn terminate(mut self, timeout: Duration) -> Finished {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) has no memory effects; the pid is our child's, not yet reaped
            // (we hold its `Child`), so it cannot name another process.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        self.close_stdin();
        match self.finish_within(timeout) {
            Ok(done) => done,
            Err(_) => self.collect(),
        }
    }

    /// SIGKILL at once (a member that vanishes without leaving its group), then waits for it.
    pub fn kill(mut self) -> Finished {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
        }
        self.collect()
    }

    /// Waits until both outputs are closed and reaps the child; when `timeout` passes first,
    /// kills it and returns an error carrying its stderr.
    fn finish_within(&mut self, timeout: Duration) -> Result<Finished, String> {
        let deadline = Instant::now() + timeout;
        if self.output.wait_until(deadline, |c| c.closed == 2) {
            return Ok(self.collect());
        }
        if let Some(child) = &mut self.child {
            let _ = child.kill();
        }
        let done = self.collect();
        Err(format!(
            "still running after {timeout:?}, killed\nstdout:\n{}\nstderr:\n{}",
            done.stdout, done.stderr
        ))
    }

    /// Reaps the child (its outputs are closed or it was killed) and returns all it wrote.
    fn collect(&mut self) -> Finished {
        self.stdin = None;
        let mut child = self.child.take().expect("a child is collected once");
        let status = child.wait().expect("waiting for a child");
        // The readers end at end of file, which the exit (or kill) has caused.
        let deadline = Instant::now() + PROBE_TIMEOUT;
        self.output.wait_until(deadline, |c| c.closed == 2);
        Finished {
            status,
            stdout: self.stdout(),
            stderr: self.stderr(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
