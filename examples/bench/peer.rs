//! The peer: Redis Streams on loopback, measured in the same run as NanoKafka.
//!
//! When `redis-server` is on PATH, a private instance is started on a free loopback port with
//! no persistence (`--save "" --appendonly no`, a temp dir as `--dir`), and one synchronous
//! client measures, with 100-byte payloads and the same time budget as the broker's figures:
//!
//! - `XADD` one at a time, a round trip per record (beside `produce_raw` from one thread);
//! - `XADD` pipelined, [`PIPELINE`] commands per round trip (beside the pipelined produce);
//! - `XREADGROUP COUNT 500` then `XACK` of the ids read, on a stream pre-filled with
//!   [`PREFILL_RECORDS`], until drained (beside `poll_batch_raw` 500 + commit).
//!
//! The streams are capped with `MAXLEN ~` at about what the broker's topics keep under their
//! retention, so a long run holds Redis's memory as the broker's disk use is held. The server
//! is killed when [`RedisServer`] drops, on a panic too. Anything that goes wrong with the peer (no
//! `redis-server`, a failed start, a lost connection) is returned as an error for the report
//! to show as a skipped row, never a panic.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::{Commands, Connection, ErrorKind, RedisResult};
use tempfile::TempDir;

use crate::harness::{payload, BATCH, POLL_BATCH, RECORD_LEN, RETENTION_BYTES};

/// Progress steps [`measure`] takes when `redis-server` is found (one when it is not).
pub const STEPS: usize = 3;
/// `XADD` commands per pipeline round trip (as many as the pipelined produce keeps in flight).
pub const PIPELINE: usize = 256;
/// Records in the stream that `XREADGROUP` drains: more than one budget's reading at the rates
/// seen so far; a measurement that runs out stops early, as the broker's does.
pub const PREFILL_RECORDS: u64 = 2_000_000;
/// `MAXLEN ~` of the produced streams: about the records the broker's topics retain.
const MAX_LEN: u64 = RETENTION_BYTES / RECORD_LEN as u64;
/// How long a fresh `redis-server` has to answer `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// A reply slower than this means the server is gone or stuck: the peer is skipped.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// The one field of every stream entry; its value is the 100-byte payload.
const FIELD: &str = "v";
const GROUP: &str = "bench-group";
const CONSUMER: &str = "member-0";

/// Records per second of the three peer measurements.
#[derive(Debug, Clone, Copy)]
pub struct RedisFigures {
    pub xadd: f64,
    pub xadd_pipelined: f64,
    pub xreadgroup: f64,
    /// Records the `XREADGROUP` measurement read before the budget ran out or the stream did.
    pub read: u64,
}

/// Where `redis-server` is, if it is on PATH.
pub fn redis_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

/// Starts a private `redis-server` from `server` and takes the three measurements, calling
/// `step` before each with what it is about to do. Errors say what failed, for a skip row.
pub fn measure(
    server: &Path,
    budget: Duration,
    mut step: impl FnMut(&str),
) -> Result<RedisFigures, String> {
    step(&format!(
        "peer: start {}, XADD one at a time",
        server.display()
    ));
    let redis = RedisServer::start(server)?;
    let mut con = redis.connect()?;
    let xadd = xadd_one(&mut con, budget).map_err(|e| format!("XADD one at a time: {e}"))?;
    step(&format!("peer: XADD pipelined, {PIPELINE} per round trip"));
    let xadd_pipelined =
        xadd_pipelined(&mut con, budget).map_err(|e| format!("pipelined XADD: {e}"))?;
    step(&format!(
        "peer: prefill {PREFILL_RECORDS} records, then XREADGROUP COUNT {POLL_BATCH} + XACK"
    ));
    prefill(&mut con, "consume", PREFILL_RECORDS).map_err(|e| format!("prefill: {e}"))?;
    let (xreadgroup, read) =
        xreadgroup_ack(&mut con, "consume", budget).map_err(|e| format!("XREADGROUP: {e}"))?;
    Ok(RedisFigures {
        xadd,
        xadd_pipelined,
        xreadgroup,
        read,
    })
}

/// A `redis-server` child on a loopback port, killed (and its dir removed) on drop.
struct RedisServer {
    child: Child,
    port: u16,
    /// Dropped after `Drop::drop` has killed the child: the server's `--dir` and log file.
    dir: TempDir,
}

impl RedisServer {
    /// Spawns `server` on a free loopback port, without persistence, and waits until it
    /// answers `PING`.
    fn start(server: &Path) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir for redis-server: {e}"))?;
        let port = free_port()?;
        let log = File::create(dir.path().join("redis.log"))
            .map_err(|e| format!("redis-server log file: {e}"))?;
        let child = Command::new(server)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", server.display()))?;
        let mut redis = RedisServer { child, port, dir };
        redis.wait_for_ping()?;
        Ok(redis)
    }

    /// Polls with `PING` until the server answers, it exits, or [`START_TIMEOUT`] passes.
    fn wait_for_ping(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "redis-server exited at start ({status}): {}",
                    self.log_tail()
                ));
            }
            let answer = self.connect().and_then(|mut con| {
                redis::cmd("PING")
                    .query::<String>(&mut con)
                    .map_err(|e| e.to_string())
            });
            match answer {
                Ok(pong) if pong == "PONG" => return Ok(()),
                Ok(other) => return Err(format!("PING answered {other:?}")),
                Err(e) if start.elapsed() >= START_TIMEOUT => {
                    return Err(format!(
                        "redis-server on port {} did not answer PING within {:?}: {e}",
                        self.port, START_TIMEOUT
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// A fresh connection whose replies time out after [`REPLY_TIMEOUT`].
    fn connect(&self) -> Result<Connection, String> {
        let url = format!("redis://127.0.0.1:{}/", self.port);
        let client = redis::Client::open(url.as_str()).map_err(|e| format!("{url}: {e}"))?;
        let con = client
            .get_connection_with_timeout(Duration::from_secs(1))
            .map_err(|e| format!("connect to {url}: {e}"))?;
        con.set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| format!("read timeout on {url}: {e}"))?;
        Ok(con)
    }

    /// The last line of the server's log, to explain a failed start.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
        log.lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("(empty log)")
            .to_string()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // Already exited is fine; the wait reaps the child so no zombie is left.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on right now (the OS picks it; redis-server binds it a
/// moment later, and a lost race shows as a failed start).
fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|addr| addr.port())
        .map_err(|e| format!("find a free port: {e}"))
}

/// `XADD stream MAXLEN ~ MAX_LEN * v <100 bytes>`: one record, a fresh payload each, as
/// `produce_raw` takes one.
fn xadd_cmd(stream: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(stream)
        .arg("MAXLEN")
        .arg("~")
        .arg(MAX_LEN)
        .arg("*")
        .arg(FIELD)
        .arg(payload());
    cmd
}

/// One `XADD` per round trip, waiting for each id. Records per second.
fn xadd_one(con: &mut Connection, budget: Duration) -> RedisResult<f64> {
    try_rate_for(budget, || {
        let _id: String = xadd_cmd("one").query(con)?;
        Ok(1)
    })
}

/// `XADD`s in pipelines of [`PIPELINE`], one round trip each; every id is awaited.
fn xadd_pipelined(con: &mut Connection, budget: Duration) -> RedisResult<f64> {
    try_rate_for(budget, || {
        add_pipeline(con, "pipelined", PIPELINE).map(|n| n as u64)
    })
}

/// [`crate::harness::rate_for`] for rounds that can fail: the first error ends the run.
fn try_rate_for(budget: Duration, mut round: impl FnMut() -> RedisResult<u64>) -> RedisResult<f64> {
    let start = Instant::now();
    let mut records = 0u64;
    while start.elapsed() < budget {
        records += round()?;
    }
    Ok(records as f64 / start.elapsed().as_secs_f64())
}

/// Sends `n` `XADD`s to `stream` in one pipeline; returns how many ids came back.
fn add_pipeline(con: &mut Connection, stream: &str, n: usize) -> RedisResult<usize> {
    let mut pipe = redis::Pipeline::with_capacity(n);
    for _ in 0..n {
        pipe.add_command(xadd_cmd(stream));
    }
    let ids: Vec<String> = pipe.query(con)?;
    Ok(ids.len())
}

/// Fills `stream` with `records` entries (pipelines of [`BATCH`], untimed) and creates the
/// consumer group at its start.
fn prefill(con: &mut Connection, stream: &str, records: u64) -> RedisResult<()> {
    let mut left = records;
    while left > 0 {
        let n = left.min(BATCH as u64) as usize;
        add_pipeline(con, stream, n)?;
        left -= n as u64;
    }
    con.xgroup_create(stream, GROUP, "0")
}

/// `XREADGROUP COUNT 500` of new entries, then `XACK` of the ids read, until the stream is
/// drained or `budget` has passed. Records per second, and the records read.
fn xreadgroup_ack(con: &mut Connection, stream: &str, budget: Duration) -> RedisResult<(f64, u64)> {
    let options = StreamReadOptions::default()
        .group(GROUP, CONSUMER)
        .count(POLL_BATCH);
    let start = Instant::now();
    let mut read = 0u64;
    while start.elapsed() < budget {
        let reply: Option<StreamReadReply> = con.xread_options(&[stream], &[">"], &options)?;
        let ids: Vec<String> = reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|key| key.ids)
            .map(|entry| entry.id)
            .collect();
        if ids.is_empty() {
            break;
        }
        let acked: usize = con.xack(stream, GROUP, &ids)?;
        if acked != ids.len() {
            let detail = format!("{acked} of {} ids", ids.len());
            return Err((ErrorKind::UnexpectedReturnType, "XACK acknowledged", detail).into());
        }
        read += ids.len() as u64;
    }
    Ok((read as f64 / start.elapsed().as_secs_f64(), read))
}
