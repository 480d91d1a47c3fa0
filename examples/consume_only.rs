//! The raw consume loop alone, for same-run A/B comparisons of its CPU cost between builds:
//! prefills one partition with `N` 100-byte records (`produce_batch` of 1000,
//! `FsyncPolicy::Never`; `N` is the first argument, 2,000,000 by default), then loops
//! `poll_batch_raw(500, ZERO)` + `commit` of the last offset until the topic is drained, and
//! prints the records per second and the process's CPU time (user + system, every thread) per
//! record over that loop only. The whole-broker benchmark (`examples/bench`) runs the same loop
//! for a fixed time after other rows; this one isolates it, so that alternating runs of two
//! builds can be compared on a noisy host.
//!
//! It measures the embedded broker only and ignores `NANOKAFKA_BOOTSTRAP`: on the Kafka
//! backend this loop would measure the cluster and librdkafka, not this crate.
//!
//! To profile the loop only, run it under `perf record --control=fifo:CTL,ACK -D -1` with
//! `PERF_CTL=CTL PERF_ACK=ACK` (two FIFOs): it enables the events before the loop and disables
//! them after.

use std::io::Read;
use std::time::{Duration, Instant};

use nanokafka::{FsyncPolicy, NanoKafka, RecordBatch, TopicConfig};

const VALUE_LEN: usize = 100;
const BATCH: u64 = 1000;
const POLL_BATCH: usize = 500;

fn main() {
    let records: u64 = std::env::args()
        .nth(1)
        .map_or(2_000_000, |a| a.parse().expect("the record count"));
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .fsync(FsyncPolicy::Never)
        .build()
        .expect("start broker");
    let topic = "consume";
    broker
        .create_topic(topic, TopicConfig::default().partitions(1))
        .expect("create topic");
    let value = vec![0xa5; VALUE_LEN];
    let mut left = records;
    while left > 0 {
        let n = left.min(BATCH);
        let mut batch = RecordBatch::with_capacity(n as usize, n as usize * VALUE_LEN);
        for _ in 0..n {
            batch.push_raw(None, &value);
        }
        broker
            .produce_batch(topic, Some(0), batch)
            .expect("prefill");
        left -= n;
    }
    let (group, member) = ("consume-only", "member-0");
    broker.join_group(topic, group, member).expect("join");

    perf_control("enable\n");
    let (started, cpu_before) = (Instant::now(), cpu_time());
    let mut consumed = 0u64;
    loop {
        let polled = broker
            .poll_batch_raw(topic, group, member, POLL_BATCH, Duration::ZERO)
            .expect("poll_batch_raw");
        let Some(last) = polled.last() else { break };
        broker
            .commit(topic, group, last.partition, last.offset)
            .expect("commit");
        consumed += polled.len() as u64;
    }
    let (wall, cpu) = (started.elapsed(), cpu_time() - cpu_before);
    perf_control("disable\n");

    assert_eq!(consumed, records, "every record consumed once");
    println!(
        "consumed {consumed} rate {:.3} Mrec/s cpu_ns_per_rec {:.1} wall_ns_per_rec {:.1}",
        consumed as f64 / wall.as_secs_f64() / 1e6,
        cpu.as_nanos() as f64 / consumed as f64,
        wall.as_nanos() as f64 / consumed as f64,
    );
}

/// Sends `command` to `perf record --control` when `PERF_CTL` and `PERF_ACK` name its FIFOs,
/// and waits for its acknowledgement, so that no sample of the other phase is taken.
fn perf_control(command: &str) {
    let (Ok(ctl), Ok(ack)) = (std::env::var("PERF_CTL"), std::env::var("PERF_ACK")) else {
        return;
    };
    std::fs::write(ctl, command).expect("perf control FIFO");
    // perf keeps its end of the FIFO open: read the reply ("ack\n"), not to the end.
    let mut reply = [0u8; 5];
    let _ = std::fs::File::open(ack)
        .expect("perf ack FIFO")
        .read(&mut reply)
        .expect("perf ack");
}

/// The process's CPU time so far: user + system, every thread (`getrusage(RUSAGE_SELF)`).
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage only writes the struct it is given, and RUSAGE_SELF is always valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: zeroed is a valid rusage (plain integers), and getrusage succeeded.
    let usage = unsafe { usage.assume_init() };
    let time =
        |t: libc::timeval| Duration::from_micros(t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64);
    time(usage.ru_utime) + time(usage.ru_stime)
}
