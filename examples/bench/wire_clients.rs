//! The wire rows' client runs: kcat and `confluent_bench.py` as child processes with a hard
//! timeout, against NanoKafka's listener or tansu, each run's rate with the broker's and the
//! client's CPU time (see `wire`'s documentation for what each run does).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::VALUE_LEN;
use crate::tansu::Tansu;
use crate::wire::{Latency, Run};

const KCAT_ENV: &str = "NANOKAFKA_KCAT";
const PYTHON_ENV: &str = "NANOKAFKA_PYTHON";
const DEFAULT_VENV_PYTHON: &str = ".cache/nanokafka/venv/bin/python";
/// A client run that takes longer than this, plus its budget, is killed and skipped.
const SLACK: Duration = Duration::from_secs(30);

/// kcat, or why not: `NANOKAFKA_KCAT`, else `kcat` on PATH.
pub fn kcat() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(KCAT_ENV) {
        let path = PathBuf::from(path);
        return match path.is_file() {
            true => Ok(path),
            false => Err(format!("{KCAT_ENV}={} is not a file", path.display())),
        };
    }
    let path = std::env::var_os("PATH").ok_or("no PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kcat"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| format!("kcat is not on PATH (or set {KCAT_ENV})"))
}

/// A Python that imports confluent_kafka, or why not: `NANOKAFKA_PYTHON`, else the clients'
/// venv under `$HOME`.
pub fn python() -> Result<PathBuf, String> {
    let path = match std::env::var_os(PYTHON_ENV) {
        Some(path) => PathBuf::from(path),
        None => {
            let home = std::env::var_os("HOME").ok_or("no HOME")?;
            Path::new(&home).join(DEFAULT_VENV_PYTHON)
        }
    };
    let ok = Command::new(&path)
        .args(["-c", "import confluent_kafka"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    match ok {
        true => Ok(path),
        false => Err(format!(
            "{} cannot import confluent_kafka (set {PYTHON_ENV})",
            path.display()
        )),
    }
}

/// What a finished client run gave: its stdout (when the caller piped it), its wall time, and
/// its CPU time (user + system).
struct Finished {
    stdout: String,
    wall: Duration,
    cpu: Duration,
}

/// Runs `command` to its end or `timeout` (then kills it). A failure's error is the last line
/// of its stderr.
fn run(command: &mut Command, timeout: Duration) -> Result<Finished, String> {
    let what = format!("{command:?}");
    // The child's CPU is what the reaped children's total grows by: one child at a time is
    // reaped here (tansu and redis-server are reaped only when they are stopped).
    let children_before = children_cpu();
    let started = Instant::now();
    let child = command
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {what}: {e}"))?;
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(timeout) {
        Ok(output) => output,
        Err(_) => {
            // SAFETY: kill has no memory effects; the child is not reaped until the waiting
            // thread's wait returns, so the pid is still ours.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let _ = rx.recv();
            return Err(format!("timed out after {timeout:?}"));
        }
    };
    let wall = started.elapsed();
    let output = output.map_err(|e| format!("wait for {what}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "{}: {}",
            output.status,
            last.unwrap_or("(no stderr)")
        ));
    }
    let cpu = children_cpu().saturating_sub(children_before);
    Ok(Finished { stdout, wall, cpu })
}

/// User + system CPU time of every reaped child of this process (`RUSAGE_CHILDREN`).
fn children_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage only writes the struct it is given; RUSAGE_CHILDREN is always valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    if rc != 0 {
        return Duration::ZERO;
    }
    // SAFETY: zeroed is a valid rusage (plain integers), and getrusage succeeded.
    let usage = unsafe { usage.assume_init() };
    let time =
        |t: libc::timeval| Duration::from_micros(t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// The JSON object on the last line of a client script's stdout.
fn last_json(stdout: &str) -> Result<Value, String> {
    let line = stdout.lines().rev().find(|l| !l.trim().is_empty());
    serde_json::from_str(line.unwrap_or("")).map_err(|e| format!("client output: {e}"))
}

fn field(doc: &Value, key: &str) -> Result<f64, String> {
    doc[key]
        .as_f64()
        .ok_or_else(|| format!("client output has no {key}: {doc}"))
}

/// Which broker a run is against: ours (CPU from this process) or tansu (CPU from /proc).
pub enum Target<'a> {
    NanoKafka(SocketAddr),
    Tansu(&'a Tansu),
}

impl Target<'_> {
    fn addr(&self) -> String {
        match self {
            Target::NanoKafka(addr) => addr.to_string(),
            Target::Tansu(t) => t.addr.to_string(),
        }
    }

    fn cpu(&self) -> Duration {
        match self {
            Target::NanoKafka(_) => crate::harness::cpu_time(),
            Target::Tansu(t) => t.cpu_time(),
        }
    }

    fn is_tansu(&self) -> bool {
        matches!(self, Target::Tansu(_))
    }
}

/// A run of `records` in `seconds`, the broker and the client using `broker` and `client` of
/// CPU time for them.
fn rate(records: f64, seconds: f64, broker: Duration, client: Duration) -> Run {
    let per_record = |cpu: Duration| cpu.as_secs_f64() * 1e6 / records.max(1.0);
    Run {
        per_sec: records / seconds,
        broker_cpu_us: per_record(broker),
        client_cpu_us: per_record(client),
    }
}

/// The confluent-kafka script, one role against one broker.
pub struct Confluent<'a> {
    pub python: &'a Path,
    pub script: PathBuf,
}

impl Confluent<'_> {
    /// The script's JSON answer, the broker's CPU time and the client's over the run.
    fn run(
        &self,
        target: &Target,
        topic: &str,
        args: &[&str],
        budget: Duration,
    ) -> Result<(Value, Duration, Duration), String> {
        let mut command = Command::new(self.python);
        command
            .arg(&self.script)
            .arg(target.addr())
            .arg(topic)
            .args(args);
        if target.is_tansu() {
            command.arg("--create");
        }
        let before = target.cpu();
        command.stdin(Stdio::null()).stdout(Stdio::piped());
        let finished = run(&mut command, budget + SLACK)?;
        let cpu = target.cpu().saturating_sub(before);
        Ok((last_json(&finished.stdout)?, cpu, finished.cpu))
    }

    pub fn produce(&self, target: &Target, topic: &str, records: u64) -> Result<Run, String> {
        let count = records.to_string();
        let (doc, cpu, client) = self.run(target, topic, &["produce", "--count", &count], SLACK)?;
        Ok(rate(
            field(&doc, "records")?,
            field(&doc, "seconds")?,
            cpu,
            client,
        ))
    }

    /// Consumes with `assign()`, or in `group`: the rate and the seconds to the first record.
    pub fn consume(
        &self,
        target: &Target,
        topic: &str,
        records: u64,
        group: Option<&str>,
        budget: Duration,
    ) -> Result<(Run, f64), String> {
        let count = records.to_string();
        let secs = budget.as_secs_f64().to_string();
        let mut args = vec!["consume", "--count", &count, "--budget", &secs];
        if let Some(group) = group {
            args.extend(["--group", group]);
        }
        let (doc, cpu, client) = self.run(target, topic, &args, budget)?;
        let read = field(&doc, "records")?;
        let run = rate(read, field(&doc, "seconds")?, cpu, client);
        Ok((run, field(&doc, "join_seconds")?))
    }

    pub fn latency(
        &self,
        target: &Target,
        topic: &str,
        rate: u32,
        run: Duration,
    ) -> Result<Latency, String> {
        let (rate, secs) = (rate.to_string(), run.as_secs_f64().to_string());
        let args = ["latency", "--rate", &rate, "--seconds", &secs];
        let (doc, _, _) = self.run(target, topic, &args, run)?;
        Ok(Latency {
            p50_us: field(&doc, "p50_us")?,
            p99_us: field(&doc, "p99_us")?,
            p999_us: field(&doc, "p999_us")?,
            samples: field(&doc, "samples")? as u64,
        })
    }
}

/// kcat produces the lines of `input` to partition 0 of `topic`: N over the wall time.
pub fn kcat_produce(
    kcat: &Path,
    addr: SocketAddr,
    topic: &str,
    input: &Path,
    records: u64,
) -> Result<Run, String> {
    let before = crate::harness::cpu_time();
    let mut command = Command::new(kcat);
    command
        .args(["-P", "-q", "-b", &addr.to_string(), "-t", topic, "-p", "0"])
        .args(["-X", "acks=all", "-l"])
        .arg(input)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let finished = run(&mut command, SLACK * 4)?;
    let broker = crate::harness::cpu_time().saturating_sub(before);
    let n = records as f64;
    Ok(rate(n, finished.wall.as_secs_f64(), broker, finished.cpu))
}

/// kcat consumes `topic` from the beginning to its end, writing offsets to a file; every
/// record must come back. `tuned`: `queued.min.messages` 1,000,000 instead of 100,000 (see
/// the module's documentation).
pub fn kcat_consume(
    kcat: &Path,
    addr: SocketAddr,
    topic: &str,
    dir: &Path,
    records: u64,
    tuned: bool,
) -> Result<Run, String> {
    let out_path = dir.join(format!("{topic}.offsets"));
    let out = File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let before = crate::harness::cpu_time();
    let mut command = Command::new(kcat);
    command
        .args([
            "-C",
            "-q",
            "-e",
            "-c",
            &records.to_string(),
            "-b",
            &addr.to_string(),
        ])
        .args(["-t", topic, "-p", "0"])
        .args(["-o", "beginning", "-f", "%o\n"])
        .args(if tuned {
            &["-X", "queued.min.messages=1000000"][..]
        } else {
            &[]
        })
        .stdin(Stdio::null())
        // To a file, so nothing is read back here while the clock runs.
        .stdout(out);
    let finished = run(&mut command, SLACK * 4)?;
    let broker = crate::harness::cpu_time().saturating_sub(before);
    let rate = rate(
        records as f64,
        finished.wall.as_secs_f64(),
        broker,
        finished.cpu,
    );
    let text = std::fs::read(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let read = text.iter().filter(|&&b| b == b'\n').count() as u64;
    match read == records {
        true => Ok(rate),
        false => Err(format!("kcat read {read} records of {records}")),
    }
}

/// Writes `records` lines of 100 bytes (no newline inside), kcat's `-l` input.
pub fn kcat_input(dir: &Path, records: u64) -> Result<PathBuf, String> {
    let path = dir.join("records.txt");
    let write = || -> std::io::Result<()> {
        let mut out = BufWriter::new(File::create(&path)?);
        let mut line = vec![b'a'; VALUE_LEN];
        line.push(b'\n');
        for _ in 0..records {
            out.write_all(&line)?;
        }
        out.flush()
    };
    write().map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}
