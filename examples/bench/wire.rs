//! Real Kafka clients against the Kafka listener, and against tansu in the same run.
//!
//! A broker with a listener on a loopback port (`FsyncPolicy::Never`, the policy of the
//! bench's other produce rows: records are written to the segment files, write-back is the
//! OS's) and one-partition topics bounded like the other rows' ([`RETENTION_BYTES`]). The
//! clients run as child processes:
//!
//! - kcat (librdkafka 2.0.2) produces N × 100 B from a file (`-l`, one record per line,
//!   `acks=all`, librdkafka's batching defaults: `linger.ms` 5, `batch.size` 1 MB), then
//!   consumes them (`-C -o beginning -e -c N`: `-c` ends it at the last record rather than
//!   after one more long poll finds the end; offsets written to a file and counted), once with
//!   `queued.min.messages` 1,000,000 and once with the defaults; the figure is N over the
//!   process's wall time, start-up included. librdkafka stops fetching while its queue holds
//!   `queued.min.messages` (default 100,000) records the application has not taken, and
//!   2.0.2 looks again only about once a second: a broker that fetches faster than kcat
//!   prints fills that queue, and kcat then idles most of each second. Raising the threshold
//!   is what a user who sees this does (confluent-kafka's newer librdkafka has
//!   `fetch.queue.backoff.ms` for it: `confluent_bench.py` sets 10 ms).
//! - `confluent_bench.py` (confluent-kafka, librdkafka 2.16) produces N × 100 B with a
//!   delivery report per record and a flush, consumes them with `assign()` and as the one
//!   member of a fresh group, and measures produce-to-consume latency at a fixed rate; it
//!   times itself (see its header). The group member's `session.timeout.ms` is 6 s (tansu
//!   holds the first JoinGroup for half of it; the default 45 s would cost 22 s a run).
//!
//! tansu gets the same confluent-kafka runs, alternating with NanoKafka's; kcat cannot talk
//! to it (librdkafka 2.0.2 rejects its ApiVersions response). Each slot is measured
//! `NANOKAFKA_BENCH_WIRE_REPEATS` times (default 1) and the median is reported. Consumption
//! stops after `2 × NANOKAFKA_BENCH_SECS` of reading (at least 2 s) even if records are left,
//! so a slow peer cannot stretch the run. A missing client or peer, or a run that fails,
//! becomes a skipped row with the reason.
//!
//! CPU per record is measured for the broker (this process's for NanoKafka: the bench thread
//! only waits on the child; tansu's own from `/proc`) and for the client (`RUSAGE_CHILDREN`
//! grows by the child's CPU when it is reaped), both over the client's whole run.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use nanokafka::{FsyncPolicy, NanoKafka, TopicConfig};
use tempfile::TempDir;

use crate::harness::RETENTION_BYTES;
use crate::tansu::Tansu;
use crate::wire_clients::{
    kcat, kcat_consume, kcat_input, kcat_produce, python, Confluent, Target,
};

/// Progress steps of one repeat.
pub const STEPS: usize = 5;

/// The wire rows' knobs, from the environment.
#[derive(Debug, Clone, Copy)]
pub struct WireSettings {
    /// `NANOKAFKA_BENCH_WIRE_RECORDS`: records each producer sends (default 1,000,000).
    pub records: u64,
    /// `NANOKAFKA_BENCH_WIRE_REPEATS`: measurements of each slot, alternating brokers (default 1).
    pub repeats: usize,
    /// How long a consumer reads at most: `2 × NANOKAFKA_BENCH_SECS`, at least 2 s.
    pub consume_budget: Duration,
    /// How long the latency run paces records.
    pub latency_run: Duration,
    /// Records per second of the latency run.
    pub latency_rate: u32,
    /// `NANOKAFKA_BENCH_WIRE_ONLY=1`: run the Redis peer and these rows only.
    pub only: bool,
}

impl WireSettings {
    pub fn from_env(measure: Duration, latency_run: Duration, latency_rate: u32) -> Self {
        let num = crate::harness::env_number;
        WireSettings {
            records: num("NANOKAFKA_BENCH_WIRE_RECORDS", 1e6, 1.0..=1e9) as u64,
            repeats: num("NANOKAFKA_BENCH_WIRE_REPEATS", 1.0, 1.0..=100.0) as usize,
            consume_budget: (measure * 2).max(Duration::from_secs(2)),
            latency_run,
            latency_rate,
            only: num("NANOKAFKA_BENCH_WIRE_ONLY", 0.0, 0.0..=1.0) != 0.0,
        }
    }
}

/// One throughput measurement: records per second, and the CPU time per record of the broker
/// (over the client's whole run) and of the client process.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub per_sec: f64,
    pub broker_cpu_us: f64,
    pub client_cpu_us: f64,
}

/// Produce-to-consume latency percentiles, microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub samples: u64,
}

/// What one slot gave over its repeats: the median, or why it has none.
pub type Slot<T> = Result<T, String>;

/// Every wire figure (medians over the repeats).
#[derive(Debug)]
pub struct WireFigures {
    pub kcat_produce: Slot<Run>,
    pub kcat_consume: Slot<Run>,
    pub kcat_consume_defaults: Slot<Run>,
    pub produce: Slot<Run>,
    pub assign: Slot<Run>,
    pub group: Slot<Run>,
    pub latency: Slot<Latency>,
    pub tansu_produce: Slot<Run>,
    pub tansu_assign: Slot<Run>,
    pub tansu_group: Slot<Run>,
    pub tansu_latency: Slot<Latency>,
    /// Median seconds from `subscribe()` to the first record (NanoKafka, tansu).
    pub join_secs: (Option<f64>, Option<f64>),
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("find a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("find a free port: {e}"))
}

/// A broker with a Kafka listener on a loopback port, in a temp dir.
struct ListeningBroker {
    broker: NanoKafka,
    addr: SocketAddr,
    _dir: TempDir,
}

impl ListeningBroker {
    fn start(fsync: FsyncPolicy) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = NanoKafka::builder()
            .data_dir(dir.path())
            .fsync(fsync)
            .listen("127.0.0.1:0")
            .build()
            .expect("start broker with a listener");
        let addr = broker.listener_addr().expect("listener address");
        ListeningBroker {
            broker,
            addr,
            _dir: dir,
        }
    }

    fn topic(&self, name: &str) -> String {
        let config = TopicConfig::default().retention_bytes(RETENTION_BYTES);
        self.broker.create_topic(name, config).expect("topic");
        name.to_owned()
    }
}

/// The median of the successful runs, or the first failure when none succeeded.
fn median<T: Copy>(runs: &[Result<T, String>], key: impl Fn(&T) -> f64) -> Slot<T> {
    let mut ok: Vec<T> = runs
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    if ok.is_empty() {
        return Err(runs
            .iter()
            .find_map(|r| r.as_ref().err().cloned())
            .unwrap_or_else(|| "not measured".into()));
    }
    ok.sort_by(|a, b| key(a).total_cmp(&key(b)));
    Ok(ok[ok.len() / 2])
}

/// Median of each field of the successful latency runs.
fn median_latency(runs: &[Result<Latency, String>]) -> Slot<Latency> {
    let pick = |f: fn(&Latency) -> f64| median(runs, f).map(|l| f(&l));
    Ok(Latency {
        p50_us: pick(|l| l.p50_us)?,
        p99_us: pick(|l| l.p99_us)?,
        p999_us: pick(|l| l.p999_us)?,
        samples: median(runs, |l| l.samples as f64)?.samples,
    })
}

/// Runs every wire measurement, `settings.repeats` times, NanoKafka and tansu alternating.
pub fn measure(settings: WireSettings, mut step: impl FnMut(&str)) -> WireFigures {
    let dir = tempfile::tempdir().expect("temp dir");
    let kcat = kcat();
    let python = python();
    let tansu_bin = crate::tansu::find();
    let confluent = python.as_ref().map(|p| Confluent {
        python: p,
        script: Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench/confluent_bench.py"),
    });
    let ours = ListeningBroker::start(FsyncPolicy::Never);
    let latency_broker = ListeningBroker::start(FsyncPolicy::default());
    let input = kcat
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|_| kcat_input(dir.path(), settings.records));
    let n = settings.records;
    let mut runs = Runs::default();
    for r in 0..settings.repeats {
        let tansu = tansu_bin
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|b| Tansu::start(b));
        let peer = tansu.as_ref().map(Target::Tansu).map_err(Clone::clone);
        let us = Target::NanoKafka(ours.addr);
        step(&format!(
            "wire {}/{}: kcat produce {n} x 100 B, then consume them",
            r + 1,
            settings.repeats
        ));
        let topic = ours.topic(&format!("kcat-{r}"));
        let produced = match (&kcat, &input) {
            (Ok(k), Ok(i)) => kcat_produce(k, ours.addr, &topic, i, n),
            (Err(e), _) | (_, Err(e)) => Err(e.clone()),
        };
        for (tuned, slot) in [
            (true, &mut runs.kcat_consume),
            (false, &mut runs.kcat_consume_defaults),
        ] {
            slot.push(match (&kcat, &produced) {
                (Ok(k), Ok(_)) => kcat_consume(k, ours.addr, &topic, dir.path(), n, tuned),
                (Err(e), _) | (_, Err(e)) => Err(e.clone()),
            });
        }
        runs.kcat_produce.push(produced);
        if confluent.is_err() {
            runs.note_last();
        }

        let Ok(client) = &confluent else { continue };
        let topic = ours.topic(&format!("confluent-{r}"));
        step(&format!(
            "wire {}/{}: confluent-kafka produce {n} x 100 B (NanoKafka, tansu)",
            r + 1,
            settings.repeats
        ));
        runs.produce.push(client.produce(&us, &topic, n));
        runs.tansu_produce.push(
            peer.as_ref()
                .map_err(Clone::clone)
                .and_then(|p| client.produce(p, &topic, n)),
        );
        step(&format!(
            "wire {}/{}: confluent-kafka assign() consume (NanoKafka, tansu)",
            r + 1,
            settings.repeats
        ));
        let budget = settings.consume_budget;
        runs.assign.push(
            client
                .consume(&us, &topic, n, None, budget)
                .map(|(rate, _)| rate),
        );
        runs.tansu_assign.push(
            peer.as_ref()
                .map_err(Clone::clone)
                .and_then(|p| client.consume(p, &topic, n, None, budget))
                .map(|(rate, _)| rate),
        );
        step(&format!(
            "wire {}/{}: confluent-kafka group consume (NanoKafka, tansu)",
            r + 1,
            settings.repeats
        ));
        let group = format!("bench-group-{r}");
        let ours_group = client.consume(&us, &topic, n, Some(&group), budget);
        let tansu_group = peer
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|p| client.consume(p, &topic, n, Some(&group), budget));
        runs.join.0.extend(ours_group.as_ref().ok().map(|g| g.1));
        runs.join.1.extend(tansu_group.as_ref().ok().map(|g| g.1));
        runs.group.push(ours_group.map(|(rate, _)| rate));
        runs.tansu_group.push(tansu_group.map(|(rate, _)| rate));
        step(&format!(
            "wire {}/{}: confluent-kafka produce->consume latency at {} rec/s (NanoKafka, tansu)",
            r + 1,
            settings.repeats,
            settings.latency_rate
        ));
        let topic = latency_broker.topic(&format!("latency-{r}"));
        let us = Target::NanoKafka(latency_broker.addr);
        runs.latency
            .push(client.latency(&us, &topic, settings.latency_rate, settings.latency_run));
        runs.tansu_latency.push(
            peer.as_ref().map_err(Clone::clone).and_then(|p| {
                client.latency(p, &topic, settings.latency_rate, settings.latency_run)
            }),
        );
        runs.note_last();
    }
    let reason = confluent.as_ref().err().copied();
    let per_sec = |r: &Run| r.per_sec;
    let mid = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    WireFigures {
        kcat_produce: median(&runs.kcat_produce, per_sec),
        kcat_consume: median(&runs.kcat_consume, per_sec),
        kcat_consume_defaults: median(&runs.kcat_consume_defaults, per_sec),
        produce: or_reason(median(&runs.produce, per_sec), reason),
        assign: or_reason(median(&runs.assign, per_sec), reason),
        group: or_reason(median(&runs.group, per_sec), reason),
        latency: or_reason(median_latency(&runs.latency), reason),
        tansu_produce: or_reason(median(&runs.tansu_produce, per_sec), reason),
        tansu_assign: or_reason(median(&runs.tansu_assign, per_sec), reason),
        tansu_group: or_reason(median(&runs.tansu_group, per_sec), reason),
        tansu_latency: or_reason(median_latency(&runs.tansu_latency), reason),
        join_secs: (mid(&mut runs.join.0), mid(&mut runs.join.1)),
    }
}

impl Runs {
    /// Prints each slot's latest run on stderr, under the progress line: the spread between
    /// repeats that the medians hide.
    fn note_last(&self) {
        let rates = [
            ("kcat produce", &self.kcat_produce),
            ("kcat consume", &self.kcat_consume),
            ("kcat consume, defaults", &self.kcat_consume_defaults),
            ("confluent produce", &self.produce),
            ("  tansu", &self.tansu_produce),
            ("confluent assign", &self.assign),
            ("  tansu", &self.tansu_assign),
            ("confluent group", &self.group),
            ("  tansu", &self.tansu_group),
        ];
        for (what, runs) in rates {
            match runs.last() {
                Some(Ok(r)) => eprintln!(
                    "              {what}: {:.0} rec/s, CPU µs/rec broker {:.3} client {:.3}",
                    r.per_sec, r.broker_cpu_us, r.client_cpu_us
                ),
                Some(Err(why)) => eprintln!("              {what}: {why}"),
                None => {}
            }
        }
        for (what, runs) in [("latency", &self.latency), ("  tansu", &self.tansu_latency)] {
            match runs.last() {
                Some(Ok(l)) => eprintln!(
                    "              {what}: p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us",
                    l.p50_us, l.p99_us, l.p999_us
                ),
                Some(Err(why)) => eprintln!("              {what}: {why}"),
                None => {}
            }
        }
    }
}

/// `slot`, or `missing` (why the client could not run) when that is why it is empty.
fn or_reason<T>(slot: Slot<T>, missing: Option<&String>) -> Slot<T> {
    match missing {
        Some(why) => Err(why.clone()),
        None => slot,
    }
}

/// Every run of every slot, before the medians.
#[derive(Default)]
struct Runs {
    kcat_produce: Vec<Result<Run, String>>,
    kcat_consume: Vec<Result<Run, String>>,
    kcat_consume_defaults: Vec<Result<Run, String>>,
    produce: Vec<Result<Run, String>>,
    assign: Vec<Result<Run, String>>,
    group: Vec<Result<Run, String>>,
    latency: Vec<Result<Latency, String>>,
    tansu_produce: Vec<Result<Run, String>>,
    tansu_assign: Vec<Result<Run, String>>,
    tansu_group: Vec<Result<Run, String>>,
    tansu_latency: Vec<Result<Latency, String>>,
    join: (Vec<f64>, Vec<f64>),
}
