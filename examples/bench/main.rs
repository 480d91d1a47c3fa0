//! `cargo run --release --example bench`: NanoKafka's figures beside same-run baselines.
//!
//! It measures the embedded broker (and, through its listener, Kafka clients against it) and
//! ignores `NANOKAFKA_BOOTSTRAP`: the Kafka backend's figures would be the cluster's and
//! librdkafka's, not this crate's.
//!
//! Absolute figures drift between runs on a shared or virtual host, so every figure is printed
//! next to a baseline measured in the same run, and a target stated as a ratio is judged on
//! that ratio (the targets and the latest figures: `benches/README.md`). Progress goes to
//! stderr; stdout gets a Markdown table, a summary line, and, as its last line, one JSON
//! object with every figure. Every throughput row also shows the process's CPU time (user +
//! system, all threads) per record over exactly its measured interval.
//!
//! Beyond throughput and latency: a busy-neighbour row (one producer while another thread
//! spins), four partitions from one and from four threads, an idle row (CPU of a broker whose
//! consumers are parked in long polls) and scale rows (a topic of 10,000 partitions: create,
//! reopen, RSS per idle partition, open descriptors).
//!
//! Environment (all optional):
//! - `NANOKAFKA_BENCH_SECS`: seconds per throughput measurement (default 3);
//! - `NANOKAFKA_BENCH_OPEN_BYTES`: size of the partition whose open is timed (default 1 GiB);
//! - `NANOKAFKA_BENCH_RSS_BYTES`: payload bytes produced for the peak-RSS figure (default 2 GiB);
//! - `NANOKAFKA_BENCH_SCALE_PARTITIONS`: partitions of the scale rows' topic (default 10,000,
//!   the maximum);
//! - `NANOKAFKA_BENCH_ONLY=scale`: only the scale rows (quick to compare builds).
//! - `NANOKAFKA_BENCH_ONLY=idle`: only the idle row.
//! - `NANOKAFKA_BENCH_ONLY=e2e`: only the end-to-end latency rows of the default policy
//!   (`poll_batch_raw`, then a `Consumer`) and their crossbeam baseline, each with the share
//!   of records its consumer took on the producer's CPU, then the same channel with its
//!   receiver pinned to the other CPU than its sender (the host's cross-vCPU wake-up).
//! - `NANOKAFKA_BENCH_ONLY=consume`: only the consume rows and the raw append baseline.
//! - `NANOKAFKA_BENCH_ONLY=typed`: only the typed readers and their decode floor (`typed`).
//! - `NANOKAFKA_BENCH_ONLY=low_rate`: only the low-rate actor row, its bare-hops baseline and
//!   its producer alone, in turns as in the full run; `low_rate_row`: only the row, in one
//!   run, with each broker thread's sleeps. For either, the row's rate
//!   (`NANOKAFKA_BENCH_LOW_RATE`, events/s, default 500) and readers
//!   (`NANOKAFKA_BENCH_LOW_READERS`: `both`, the default, `subscription` or `stream`).
//! - `NANOKAFKA_BENCH_ONLY=loaded`: only the rows under load (`loaded`): one blocking thread
//!   and its std-channel baseline, quiet and under two busy processes and a busy thread,
//!   then an awaited produce and a subscription under that load.
//! - `NANOKAFKA_BENCH_ONLY=neighbour`: only the busy-neighbour row and its one-thread baseline.
//! - `NANOKAFKA_BENCH_ONLY=pipelined`: only the pipelined row (256 `produce_raw` in flight).
//! - `NANOKAFKA_BENCH_ONLY=partitions`: only the rows of one thread over 1 and 4 partitions
//!   and four threads over 4.
//! - `NANOKAFKA_BENCH_ONLY=cleaner`: only the log cleaner's rows (throughput, peak RSS,
//!   produce latency during a pass); `NANOKAFKA_BENCH_CLEANER_RECORDS` and
//!   `NANOKAFKA_BENCH_CLEANER_TURNS` size them (`cleaner`).
//! - `NANOKAFKA_BENCH_ONLY=console`: only the web console's rows (`console`): the overview of
//!   1,000 topics, a partition of `NANOKAFKA_BENCH_CONSOLE_RECORDS` (10 M) opened at its middle.
//!
//! The rows compared with one blocking thread over one partition (beside a busy neighbour,
//! over 4 partitions, four threads over 4) are measured in turns with it
//! (`produce::interleaved`), in the full run and in both switches above.
//!
//! The idle row watches for `min(5 s, 2 × NANOKAFKA_BENCH_SECS)`. A numeric variable that does
//! not parse or is out of range ends the run at once, named, with exit code 2
//! (`harness::env_number`).
//!
//! A quick run: `NANOKAFKA_BENCH_SECS=0.5 NANOKAFKA_BENCH_OPEN_BYTES=1e8
//! NANOKAFKA_BENCH_RSS_BYTES=1e8 NANOKAFKA_BENCH_SCALE_PARTITIONS=1000 cargo run --release
//! --example bench`.
//!
//! Kafka clients (kcat, confluent-kafka) produce, consume and measure latency through a Kafka
//! listener, beside tansu (another Kafka broker) and Redis in the same run: see `wire`.
//! `NANOKAFKA_BENCH_WIRE_RECORDS` (default 1,000,000), `NANOKAFKA_BENCH_WIRE_REPEATS`
//! (default 1; medians) and `NANOKAFKA_BENCH_WIRE_ONLY=1` (only these rows and Redis).
//! `NANOKAFKA_BENCH_PRODUCE_ONLY=1` runs only the batch-produce and `FsyncPolicy::Always`
//! rows and their baselines (`produce_rows`).
//!
//! If `redis-server` is on PATH, a private instance on a loopback port is the peer: Redis
//! Streams `XADD` (one at a time and pipelined) and `XREADGROUP` + `XACK`, each beside the
//! NanoKafka figure it compares to. Without it (or if it fails to start) the peer rows are
//! reported as skipped, with the reason.
//!
//! The actor developer's path (`actor`): a service producing through `Topic<T>` at 500
//! events/s, a subscriber actor and a `RecordStream` committing each (CPU per event end to
//! end, every event read and committed), an actor awaiting each `produce_keyed` against one
//! blocking thread, and `ProduceBatch` messages of 100 records to the broker's `Addr` against
//! single `Produce` messages. `NANOKAFKA_BENCH_ACTOR_ONLY=1` runs only these rows;
//! `NANOKAFKA_BENCH_IDLE_SPIN_US` sets their broker's `idle_spin` (default: the builder's).
//!
//! Layout: `actor`, `loaded` (rows under load), `harness` (settings, the CPU meter, timed loop, temp brokers), `baselines` (raw
//! append, fdatasync, crossbeam), `peer` (Redis Streams), `produce`, `consume`, `latency`,
//! `idle`, `open`, `rss`, `scale`, `cleaner` (the log cleaner; its memory cases in
//! `cleaner_memory`, its latency rows in `cleaner_latency`), `wire` (Kafka clients through
//! the listener and against `tansu`; the client runs in `wire_clients`, their rows in
//! `wire_rows`), and `report` (the table, the targets and the JSON line).

mod actor;
mod baselines;
mod cleaner;
mod cleaner_latency;
mod cleaner_memory;
mod console;
mod consume;
mod harness;
mod idle;
mod latency;
mod loaded;
mod open;
mod peer;
mod produce;
mod produce_rows;
mod report;
mod rss;
mod scale;
mod tansu;
mod typed;
mod wire;
mod wire_clients;
mod wire_rows;

use std::time::Duration;

use nanokafka::{FsyncPolicy, NanoKafka};
use serde_json::json;

use harness::{Progress, Rate, Settings, TempBroker};
use report::{Figure, Row, Target};

/// The fixed rate of the end-to-end latency measurement, records per second.
const LATENCY_RATE: u32 = 2_000;
const MB: f64 = 1e6;

fn main() {
    if loaded::busy_child() || cleaner_memory::child() {
        return;
    }
    let settings = Settings::from_env();
    let budget = settings.measure;
    let latency_run = budget.max(Duration::from_secs(1)) * 2;
    let redis_server = peer::redis_server();
    let peer_steps = if redis_server.is_some() {
        peer::STEPS
    } else {
        1
    };
    let wire_settings = wire::WireSettings::from_env(budget, latency_run, LATENCY_RATE);
    if wire_settings.only {
        return wire_only(wire_settings, redis_server.as_deref(), budget, peer_steps);
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "scale") {
        return scale::only(settings.scale_partitions);
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "e2e") {
        let default_broker = TempBroker::start(FsyncPolicy::default());
        let topic = default_broker.topic("latency");
        let e2e = latency::broker_e2e(&default_broker.broker, topic, LATENCY_RATE, latency_run);
        println!(
            "e2e (default FsyncPolicy): p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us, {:.2} us \
             CPU/rec, {:.1} % on the producer's CPU",
            e2e.p50_us, e2e.p99_us, e2e.p999_us, e2e.cpu_us_per_record, e2e.same_cpu
        );
        let topic = default_broker.topic("latency-consumer");
        let typed = latency::consumer_e2e(&default_broker.broker, topic, LATENCY_RATE, latency_run);
        println!(
            "e2e through a Consumer: p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us, {:.2} us \
             CPU/rec, {:.1} % on the producer's CPU",
            typed.p50_us, typed.p99_us, typed.p999_us, typed.cpu_us_per_record, typed.same_cpu
        );
        let channel = latency::channel_e2e(LATENCY_RATE, latency_run);
        println!(
            "crossbeam channel: p50 {:.1} us, p99 {:.0} us, {:.2} us CPU/rec, {:.1} % on the \
             producer's CPU; e2e p50 ratio {:.2}",
            channel.p50_us,
            channel.p99_us,
            channel.cpu_us_per_record,
            channel.same_cpu,
            e2e.p50_us / channel.p50_us
        );
        match latency::channel_e2e_other_cpu(LATENCY_RATE, latency_run) {
            Some(other) => println!(
                "crossbeam channel, receiver on the other CPU: p50 {:.1} us, p99 {:.0} us, \
                 {:.1} % on the producer's CPU; / crossbeam's p50 {:.2}",
                other.p50_us,
                other.p99_us,
                other.same_cpu,
                other.p50_us / channel.p50_us
            ),
            None => println!(
                "crossbeam channel, receiver on the other CPU: skipped ({})",
                latency::OTHER_CPU_UNAVAILABLE
            ),
        }
        return;
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "console") {
        return console::only();
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "cleaner") {
        return cleaner::only(LATENCY_RATE, latency_run);
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "idle") {
        let idle_broker = TempBroker::start(FsyncPolicy::default());
        let idle = idle::parked_polls(&idle_broker.broker, settings.idle());
        println!(
            "idle_cpu: {:.2} % of a core over {:.1} s",
            idle.core_percent(),
            idle.wall.as_secs_f64()
        );
        return;
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "partitions") {
        return partitions_only(budget);
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "loaded") {
        return loaded::only(budget);
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "neighbour") {
        return neighbour_only(budget);
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "pipelined") {
        let broker = TempBroker::start(FsyncPolicy::Never);
        let rate = produce::pipelined(&broker.broker, broker.topic("pipelined"), budget);
        println!(
            "pipelined, 256 in flight: {:.0} rec/s ({:.2} us CPU/rec)",
            rate.per_sec, rate.cpu_us_per_record
        );
        return;
    }
    if let Ok(only @ ("low_rate" | "low_rate_row")) =
        std::env::var("NANOKAFKA_BENCH_ONLY").as_deref()
    {
        return low_rate_only(budget, only == "low_rate_row");
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "consume") {
        return consume_only(budget);
    }
    if std::env::var("NANOKAFKA_BENCH_ONLY").is_ok_and(|only| only == "typed") {
        let rows = typed::rows(budget, &mut Progress::new(typed::STEPS));
        report::print_table(&rows);
        let settings_json = json!({ "measure_secs": budget.as_secs_f64() });
        println!("{}", report::json_line(&rows, settings_json));
        return;
    }
    if std::env::var_os("NANOKAFKA_BENCH_PRODUCE_ONLY").is_some_and(|v| v == "1") {
        return produce_only(budget);
    }
    if std::env::var_os("NANOKAFKA_BENCH_ACTOR_ONLY").is_some_and(|v| v == "1") {
        let mut progress = Progress::new(ACTOR_STEPS);
        let rows = actor_rows(budget, &mut progress);
        report::print_table(&rows);
        let settings_json = json!({ "measure_secs": budget.as_secs_f64() });
        println!("{}", report::json_line(&rows, settings_json));
        return;
    }
    let mut progress = Progress::new(
        22 + cleaner::STEPS
            + typed::STEPS
            + ACTOR_STEPS
            + peer_steps
            + wire::STEPS * wire_settings.repeats,
    );
    let mut rows = Vec::new();

    // The fsync-bound pair first and back to back: the write-back of the gigabytes written
    // later would otherwise sit in front of every fdatasync.
    let always = produce_rows::measure_always(budget, &mut progress);

    progress.step("baseline: crossbeam channel, 100-byte Vecs between two threads");
    let channel = baselines::crossbeam_channel(budget);
    progress.step("baseline: raw BufWriter append");
    let raw = baselines::raw_append(budget);

    let never = TempBroker::start(FsyncPolicy::Never);
    let broker = &never.broker;
    progress.step("produce: four blocking threads, produce_raw");
    let four = produce::blocking_threads(broker, never.topic("four-threads"), 4, budget);
    progress.step(&format!(
        "produce, in {} turns: one blocking thread (1 partition; beside a thread spinning on \
         an atomic flag; keyless over 4 partitions), four over 4 partitions",
        produce::SLICES
    ));
    let [one, neighbour, one_of_four, four_of_four] = one_thread_rows(&never, budget);
    progress.step("produce: pipelined AsyncNanoKafka::produce_raw from an actix System");
    let pipelined = produce::pipelined(broker, never.topic("pipelined"), budget);
    progress.step(
        "produce under load (2 busy processes + 1 busy thread): one blocking thread and a \
         std-channel round trip in turns, quiet and loaded; an awaited produce and a \
         subscription, loaded",
    );
    let loaded = loaded::measure(budget);
    // The rows above leave up to a gigabyte of page cache. Deleted, it is freed unwritten, so
    // the batch rows (gigabytes each) start nearer to where their baseline does: on a VM, page
    // cache grown into memory the host has taken back costs a fault per page on first touch,
    // which the baseline (rewriting the same few files' pages) hardly pays.
    let produced = [
        "one-thread",
        "four-threads",
        "busy-neighbour",
        "one-4p",
        "four-4p",
        "pipelined",
    ];
    for topic in produced {
        broker
            .delete_topic(topic)
            .expect("delete a produce row's topic");
    }
    let batches = produce_rows::measure_batches(budget, &mut progress);

    let (poll_raw, poll_typed) = measure_consume(broker, budget, &mut progress);
    drop(never);
    let typed_rows = typed::rows(budget, &mut progress);

    // The peer right after the figures it is compared with, before the gigabytes of the open
    // and RSS steps are written.
    let redis = match &redis_server {
        None => {
            progress.step("peer: Redis Streams");
            Err("redis-server is not on PATH".to_string())
        }
        Some(server) => peer::measure(server, budget, |what| progress.step(what)),
    };
    if let Err(why) = &redis {
        progress.note(&format!("Redis Streams peer skipped: {why}"));
    }

    progress.step("latency: end to end at 2,000 records/s (default FsyncPolicy)");
    // The gigabytes the rows before wrote are still being written back; a latency row that
    // shares the disk and the cores with that measures the leftovers, not the broker.
    harness::settle_disk();
    let default_broker = TempBroker::start(FsyncPolicy::default());
    let e2e = latency::broker_e2e(
        &default_broker.broker,
        default_broker.topic("latency"),
        LATENCY_RATE,
        latency_run,
    );
    progress.step("latency: the same through a Consumer<Vec<u8>> (poll_batch, commit)");
    let e2e_consumer = latency::consumer_e2e(
        &default_broker.broker,
        default_broker.topic("latency-consumer"),
        LATENCY_RATE,
        latency_run,
    );
    drop(default_broker);
    progress.step("latency baseline: the same stamps through a crossbeam channel");
    let e2e_channel = latency::channel_e2e(LATENCY_RATE, latency_run);
    progress.step("latency context: the same channel, its receiver pinned to the other CPU");
    let e2e_other_cpu = latency::channel_e2e_other_cpu(LATENCY_RATE, latency_run);

    // Real Kafka clients through the listener and against tansu, beside the Redis figures;
    // after the in-process latency rows, whose conditions stay as they were.
    let wired = wire::measure(wire_settings, |what| progress.step(what));
    for (what, slot) in [
        ("tansu", &wired.tansu_produce),
        ("listener", &wired.produce),
    ] {
        if let Err(why) = slot {
            progress.note(&format!("{what} rows skipped: {why}"));
        }
    }

    let idle_for = settings.idle();
    progress.step(&format!(
        "idle: {} consumers parked in long polls on {} partitions, {:.1} s",
        idle::CONSUMERS,
        idle::PARTITIONS,
        idle_for.as_secs_f64()
    ));
    let idle_broker = TempBroker::start(FsyncPolicy::default());
    let idle = idle::parked_polls(&idle_broker.broker, idle_for);
    drop(idle_broker);

    progress.step(&format!(
        "open: build a {:.0} MB partition, time a crash open and a clean open",
        settings.open_bytes as f64 / MB
    ));
    let opened = open::open_times(settings.open_bytes);
    progress.note(&format!(
        "{:.0} MB in {} segments; the crash open scanned {} segment(s)",
        opened.log_bytes as f64 / MB,
        opened.segments,
        opened.crash_segments_scanned
    ));

    progress.step(&format!(
        "peak RSS: produce {:.0} MB through the broker",
        settings.rss_bytes as f64 / MB
    ));
    let rss_broker = TempBroker::start(FsyncPolicy::Never);
    let peak = rss::while_producing(
        &rss_broker.broker,
        rss_broker.topic("rss"),
        settings.rss_bytes,
    );
    drop(rss_broker);
    if !peak.reset {
        progress.note("could not reset VmHWM: the peak is the whole run's");
    }

    progress.step(&format!(
        "scale: create, fill and reopen a topic of {} partitions",
        settings.scale_partitions
    ));
    let scaled = scale::many_partitions(settings.scale_partitions);

    harness::settle_disk();
    let cleaned = cleaner::measure(
        cleaner::CleanerSettings::from_env(),
        LATENCY_RATE,
        latency_run,
        &mut progress,
    );

    // The low-rate actor row measures CPU per event: not the write-back of the rows before.
    harness::settle_disk();
    let actor = actor_rows(budget, &mut progress);

    let raw_label = "raw BufWriter append";
    let chan_label = "crossbeam channel";
    rows.push(Row::Section(
        "produce (FsyncPolicy::Never, 1 partition, 100 B)",
    ));
    rows.push(Row::Figure(
        Figure::rate("produce_one_thread", "1 blocking thread, produce_raw", one)
            .vs(chan_label, channel.per_sec)
            .target(Target::AtLeast(80e3)),
    ));
    rows.push(Row::Figure(
        Figure::rate(
            "produce_four_threads",
            "4 blocking threads, produce_raw",
            four,
        )
        .vs(chan_label, channel.per_sec)
        .target(Target::AtLeast(150e3)),
    ));
    rows.push(Row::Figure(
        Figure::rate(
            "produce_pipelined",
            "pipelined async, 256 in flight, produce_raw",
            pipelined,
        )
        .vs(chan_label, channel.per_sec)
        .target(Target::AtLeast(1e6)),
    ));
    rows.extend(produce_rows::batch_rows(&batches, raw_label, raw.per_sec));
    let one_label = "1 thread, 1 partition, quiet";
    rows.push(Row::Section(
        "produce: neighbours and partitions (FsyncPolicy::Never, 100 B, keyless)",
    ));
    rows.push(Row::Figure(
        Figure::rate(
            "produce_busy_neighbour",
            "1 blocking thread, 1 partition, another thread spinning (its CPU counted)",
            neighbour,
        )
        .vs(one_label, one.per_sec)
        .target(Target::RatioAtLeast(0.3)),
    ));
    rows.push(Row::Figure(
        Figure::rate(
            "produce_one_thread_4_partitions",
            "1 blocking thread over 4 partitions",
            one_of_four,
        )
        .vs(one_label, one.per_sec)
        .target(Target::RatioAtLeast(0.7)),
    ));
    rows.push(Row::Figure(
        Figure::new(
            "produce_one_thread_4_partitions_cpu",
            "1 blocking thread over 4 partitions: CPU per record",
            one_of_four.cpu_us_per_record,
            "us/rec",
        )
        .vs(
            "1 thread, 1 partition, quiet: CPU per record",
            one.cpu_us_per_record,
        )
        .target(Target::RatioAtMost(1.5)),
    ));
    rows.push(Row::Figure(
        Figure::rate(
            "produce_four_threads_4_partitions",
            "4 blocking threads over 4 partitions",
            four_of_four,
        )
        .vs(one_label, one.per_sec)
        .target(Target::RatioAbove(1.0)),
    ));
    rows.extend(loaded::rows(&loaded));
    rows.extend(consume_rows(raw_label, raw.per_sec, poll_raw, poll_typed));
    rows.extend(typed_rows);
    rows.extend(produce_rows::always_rows(&always));
    rows.push(Row::Section(
        "end-to-end latency at 2,000 rec/s (FsyncPolicy default)",
    ));
    let pairs = [
        (
            "e2e_p50",
            "p50",
            e2e.p50_us,
            e2e_channel.p50_us,
            Some(Target::RatioAtMost(4.0)),
        ),
        (
            "e2e_p99",
            "p99",
            e2e.p99_us,
            e2e_channel.p99_us,
            Some(Target::AtMost(1000.0)),
        ),
        ("e2e_p999", "p99.9", e2e.p999_us, e2e_channel.p999_us, None),
    ];
    for (key, label, ours, theirs, target) in pairs {
        let mut figure = Figure::new(
            key,
            format!("{label} ({} records)", e2e.samples),
            ours,
            "us",
        )
        .vs("crossbeam channel, same pacing", theirs)
        .cpu(e2e.cpu_us_per_record);
        if let Some(target) = target {
            figure = figure.target(target);
        }
        rows.push(Row::Figure(figure));
    }
    rows.push(Row::Figure(
        Figure::new(
            "e2e_same_cpu",
            "records the consumer took on the CPU their producer sent them from (context: on \
             a VM whose idle vCPUs halt, a consumer woken on the other vCPU waits for the host)",
            e2e.same_cpu,
            "%",
        )
        .vs("crossbeam channel, same pacing", e2e_channel.same_cpu),
    ));
    rows.push(Row::Figure(
        Figure::new(
            "e2e_consumer_p50",
            format!(
                "p50 through a Consumer<Vec<u8>> (poll_batch, commit; {} records; p99 {:.0} us, \
                 context)",
                e2e_consumer.samples, e2e_consumer.p99_us
            ),
            e2e_consumer.p50_us,
            "us",
        )
        .vs("crossbeam channel, same pacing", e2e_channel.p50_us)
        .cpu(e2e_consumer.cpu_us_per_record),
    ));
    rows.push(match e2e_other_cpu {
        Some(other) => Row::Figure(
            Figure::new(
                "e2e_channel_other_cpu_p50",
                "p50 of the crossbeam channel with its receiver pinned to the other CPU than \
                 its sender (context: what a consumer woken on the other vCPU waits in this \
                 run, with no broker)",
                other.p50_us,
                "us",
            )
            .vs("crossbeam channel, same pacing", e2e_channel.p50_us)
            .cpu(other.cpu_us_per_record),
        ),
        None => Row::Skipped {
            key: "e2e_channel_other_cpu_p50",
            why: latency::OTHER_CPU_UNAVAILABLE.into(),
        },
    });
    rows.push(Row::Section(
        "open a partition (PartitionLog::open, page cache hot)",
    ));
    let size = format!("{:.0} MB", opened.log_bytes as f64 / MB);
    let read_label = "read every segment once";
    let full_read_ms = opened.full_read.as_secs_f64() * 1e3;
    rows.push(Row::Figure(
        Figure::new(
            "open_clean",
            format!("{size}, after a clean shutdown"),
            opened.clean_open.as_secs_f64() * 1e3,
            "ms",
        )
        .vs(read_label, full_read_ms)
        .target(Target::AtMost(500.0)),
    ));
    rows.push(Row::Figure(
        Figure::new(
            "open_crash",
            format!(
                "{size}, after a crash ({} segment(s) scanned)",
                opened.crash_segments_scanned
            ),
            opened.crash_open.as_secs_f64() * 1e3,
            "ms",
        )
        .vs(read_label, full_read_ms)
        .target(Target::AtMost(2000.0)),
    ));
    rows.push(Row::Section(
        "idle: 32 partitions, 4 consumers parked in 30 s long polls, nothing produced",
    ));
    rows.push(Row::Figure(
        Figure::new(
            "idle_cpu",
            format!(
                "process CPU over {:.1} s, % of one core",
                idle.wall.as_secs_f64()
            ),
            idle.core_percent(),
            "%",
        )
        .target(Target::AtMost(1.0)),
    ));
    rows.push(Row::Section("memory"));
    rows.push(Row::Figure(
        Figure::new(
            "peak_rss",
            format!(
                "peak RSS producing {:.0} MB ({} rec/s)",
                peak.payload_bytes as f64 / MB,
                report::human(peak.records_per_sec)
            ),
            peak.peak as f64 / MB,
            "MB",
        )
        .vs("RSS before producing", peak.before as f64 / MB)
        .target(Target::AtMost(150.0)),
    ));
    rows.extend(scale::rows(&scaled));
    rows.extend(cleaner::rows(&cleaned));
    rows.push(Row::Section("baselines"));
    rows.push(Row::Figure(Figure::rate(
        "baseline_raw_append",
        raw_label,
        raw,
    )));
    rows.push(produce_rows::always_baseline_row(&always));
    rows.push(Row::Figure(Figure::rate(
        "baseline_crossbeam",
        chan_label,
        channel,
    )));
    rows.extend(actor);
    rows.extend(wire_rows::rows(
        &wired,
        redis.as_ref().map_err(String::as_str),
        wire_settings.records,
    ));
    rows.extend(peer_rows(
        redis,
        one.per_sec,
        pipelined.per_sec,
        poll_raw.per_sec,
    ));

    report::print_table(&rows);
    let settings_json = json!({
        "measure_secs": budget.as_secs_f64(),
        "latency_secs": latency_run.as_secs_f64(),
        "latency_rate": LATENCY_RATE,
        "open_bytes": opened.log_bytes,
        "rss_payload_bytes": peak.payload_bytes,
        "rss_hwm_reset": peak.reset,
        "idle_secs": idle.wall.as_secs_f64(),
        "scale_partitions": scaled.partitions,
        "wire_records": wire_settings.records,
        "wire_repeats": wire_settings.repeats,
    });
    println!("{}", report::json_line(&rows, settings_json));
}

/// The consume rows' topics, prefilled on `broker`, then read: `(poll_batch_raw + commit,
/// Consumer<String>::poll_batch)`.
fn measure_consume(broker: &NanoKafka, budget: Duration, progress: &mut Progress) -> (Rate, Rate) {
    progress.step("consume: prefill, then poll_batch_raw of 500 + commit");
    // No retention on the consumed topics: the reader must find every prefilled record.
    let config = nanokafka::TopicConfig::default();
    broker
        .create_topic("consume-raw", config.clone())
        .expect("topic");
    consume::prefill(broker, "consume-raw", consume::PREFILL_RECORDS, false);
    // The prefill's 660 MB are written back before the read is timed, not during it.
    harness::settle_disk();
    let poll_raw = consume::poll_batch_raw(broker, "consume-raw", budget);
    progress.step("consume: prefill, then Consumer<String>::poll_batch of 500");
    broker.create_topic("consume-typed", config).expect("topic");
    consume::prefill(broker, "consume-typed", consume::PREFILL_RECORDS, true);
    harness::settle_disk();
    let poll_typed = consume::consumer_poll_batch(broker, "consume-typed", budget);
    (poll_raw, poll_typed)
}

/// The consume rows, held to the raw append baseline `raw_append` (labelled `raw_label`).
fn consume_rows(raw_label: &str, raw_append: f64, poll_raw: Rate, poll_typed: Rate) -> Vec<Row> {
    vec![
        Row::Section("consume (pre-filled, page cache hot)"),
        Row::Figure(
            Figure::rate(
                "consume_poll_batch_raw",
                "poll_batch_raw 500 + commit",
                poll_raw,
            )
            .vs(raw_label, raw_append)
            .target(Target::RatioAtLeast(0.4)),
        ),
        Row::Figure(
            Figure::rate(
                "consume_consumer_poll_batch",
                "Consumer<String>::poll_batch 500",
                poll_typed,
            )
            .vs(raw_label, raw_append)
            .target(Target::RatioAtLeast(0.4)),
        ),
    ]
}

/// `NANOKAFKA_BENCH_ONLY=consume`: the raw append baseline and the consume rows, nothing else.
fn consume_only(budget: Duration) {
    let mut progress = Progress::new(3);
    progress.step("baseline: raw BufWriter append");
    let raw = baselines::raw_append(budget);
    let never = TempBroker::start(FsyncPolicy::Never);
    let (poll_raw, poll_typed) = measure_consume(&never.broker, budget, &mut progress);
    let raw_label = "raw BufWriter append";
    let mut rows = consume_rows(raw_label, raw.per_sec, poll_raw, poll_typed);
    rows.push(Row::Section("baselines"));
    rows.push(Row::Figure(Figure::rate(
        "baseline_raw_append",
        raw_label,
        raw,
    )));
    report::print_table(&rows);
    let settings_json = json!({ "measure_secs": budget.as_secs_f64() });
    println!("{}", report::json_line(&rows, settings_json));
}

/// `NANOKAFKA_BENCH_PRODUCE_ONLY=1`: the `FsyncPolicy::Always` and batch-produce rows with
/// their baselines, nothing else.
fn produce_only(budget: Duration) {
    let steps = produce_rows::ALWAYS_STEPS + 1 + produce_rows::BATCH_STEPS;
    let mut progress = Progress::new(steps);
    let always = produce_rows::measure_always(budget, &mut progress);
    progress.step("baseline: raw BufWriter append");
    let raw = baselines::raw_append(budget);
    let batches = produce_rows::measure_batches(budget, &mut progress);
    let raw_label = "raw BufWriter append";
    let mut rows = vec![Row::Section(
        "produce (FsyncPolicy::Never, 1 partition, 100 B)",
    )];
    rows.extend(produce_rows::batch_rows(&batches, raw_label, raw.per_sec));
    rows.extend(produce_rows::always_rows(&always));
    rows.push(Row::Section("baselines"));
    rows.push(Row::Figure(Figure::rate(
        "baseline_raw_append",
        raw_label,
        raw,
    )));
    rows.push(produce_rows::always_baseline_row(&always));
    report::print_table(&rows);
    let settings_json = json!({ "measure_secs": budget.as_secs_f64() });
    println!("{}", report::json_line(&rows, settings_json));
}

/// `NANOKAFKA_BENCH_WIRE_ONLY=1`: the Redis peer and the wire rows, nothing else.
fn wire_only(
    wire_settings: wire::WireSettings,
    redis_server: Option<&std::path::Path>,
    budget: Duration,
    peer_steps: usize,
) {
    let mut progress = Progress::new(peer_steps + wire::STEPS * wire_settings.repeats);
    let redis = match redis_server {
        None => {
            progress.step("peer: Redis Streams");
            Err("redis-server is not on PATH".to_string())
        }
        Some(server) => peer::measure(server, budget, |what| progress.step(what)),
    };
    let wired = wire::measure(wire_settings, |what| progress.step(what));
    let rows = wire_rows::rows(
        &wired,
        redis.as_ref().map_err(String::as_str),
        wire_settings.records,
    );
    report::print_table(&rows);
    let settings_json = json!({
        "measure_secs": budget.as_secs_f64(),
        "latency_secs": wire_settings.latency_run.as_secs_f64(),
        "latency_rate": LATENCY_RATE,
        "wire_records": wire_settings.records,
        "wire_repeats": wire_settings.repeats,
    });
    println!("{}", report::json_line(&rows, settings_json));
}

/// The peer section: each Redis figure beside the NanoKafka figure it compares to (so the
/// ratio is Redis / NanoKafka), or one skipped row with the reason.
fn peer_rows(
    redis: Result<peer::RedisFigures, String>,
    one: f64,
    pipelined: f64,
    poll_raw: f64,
) -> Vec<Row> {
    let mut rows = vec![Row::Section(
        "peer: Redis Streams on loopback (same run; ratio = Redis / NanoKafka)",
    )];
    let redis = match redis {
        Ok(figures) => figures,
        Err(why) => {
            rows.push(Row::Skipped {
                key: "peer_redis_streams",
                why,
            });
            return rows;
        }
    };
    let figures = [
        Figure::new(
            "peer_redis_xadd",
            "XADD one at a time, 1 client",
            redis.xadd,
            "rec/s",
        )
        .vs("NanoKafka 1 blocking thread, produce_raw", one),
        Figure::new(
            "peer_redis_xadd_pipelined",
            format!("XADD pipelined, {} per round trip", peer::PIPELINE),
            redis.xadd_pipelined,
            "rec/s",
        )
        .vs("NanoKafka pipelined async produce_raw", pipelined),
        Figure::new(
            "peer_redis_xreadgroup",
            format!(
                "XREADGROUP COUNT 500 + XACK ({} of {} pre-filled read)",
                report::human(redis.read as f64),
                report::human(peer::PREFILL_RECORDS as f64)
            ),
            redis.xreadgroup,
            "rec/s",
        )
        .vs("NanoKafka poll_batch_raw 500 + commit", poll_raw),
    ];
    rows.extend(figures.into_iter().map(Row::Figure));
    rows
}

/// `NANOKAFKA_BENCH_ONLY=low_rate`: the low-rate actor row, its bare-hops baseline and its
/// producer alone, measured in turns as in the full run ([`actor::low_rate_rows`]), one line
/// (quick to compare builds). All three run at `NANOKAFKA_BENCH_LOW_RATE` events/s, the row
/// with `NANOKAFKA_BENCH_LOW_READERS`. `NANOKAFKA_BENCH_ONLY=low_rate_row`: the row alone, in
/// one run, with the sleeps per event of each broker thread (for a profiler: per event = the
/// difference of two runs of different lengths over the difference of their events).
fn low_rate_only(budget: Duration, row_only: bool) {
    let rate = harness::env_number(
        "NANOKAFKA_BENCH_LOW_RATE",
        actor::LOW_RATE.into(),
        1.0..=1e5,
    );
    let readers = match std::env::var("NANOKAFKA_BENCH_LOW_READERS").as_deref() {
        Err(_) | Ok("both") => actor::Readers::Both,
        Ok("subscription") => actor::Readers::Subscription,
        Ok("stream") => actor::Readers::Stream,
        Ok(other) => {
            eprintln!(
                "NANOKAFKA_BENCH_LOW_READERS={other:?}: expected both, subscription or stream"
            );
            std::process::exit(2);
        }
    };
    let broker = TempBroker::start(FsyncPolicy::Never);
    let low_for = budget.max(Duration::from_secs(1));
    let at = (rate as u32, low_for);
    if !row_only {
        let rows = actor::low_rate_rows(&broker.broker, at, readers);
        check_low_rate(&rows.row);
        let (low, bare, alone) = (rows.row, rows.bare, rows.alone);
        println!(
            "low rate: {:.1} us/event ({:.2} sleeps/event); bare hops: {:.1} us/event ({:.2} \
             sleeps/event); ratio {:.2}; producer alone: {:.1} us/event ({:.2} sleeps/event); \
             in turns, {} slices each",
            low.rate().cpu_us_per_record,
            low.sleeps_per_event(),
            bare.rate().cpu_us_per_record,
            bare.sleeps_per_event(),
            low.rate().cpu_us_per_record / bare.rate().cpu_us_per_record,
            alone.rate().cpu_us_per_record,
            alone.sleeps_per_event(),
            produce::SLICES
        );
        return;
    }
    let threads = harness::thread_sleeps();
    let low = actor::low_rate_with(&broker.broker, "actor-low-rate", at, readers);
    check_low_rate(&low);
    println!(
        "low rate ({rate} events/s, {readers:?}): {} events, {:.1} us/event ({:.2} sleeps/event)",
        low.produced(),
        low.rate().cpu_us_per_record,
        low.sleeps_per_event()
    );
    for (thread, sleeps) in harness::thread_sleeps() {
        let before = threads
            .iter()
            .find(|(t, _)| *t == thread)
            .map_or(0, |t| t.1);
        let per_event = sleeps.saturating_sub(before) as f64 / low.produced().max(1) as f64;
        if per_event >= 0.01 {
            println!("  thread {thread}: {per_event:.2} sleeps/event");
        }
    }
}

/// The low-rate row's counts: every event delivered, streamed and committed.
fn check_low_rate(low: &actor::LowRate) {
    assert_eq!(low.delivered, low.produced(), "every event delivered");
    assert_eq!(low.streamed, low.produced(), "every event streamed");
    assert_eq!(low.lag, 0, "every event committed");
}

/// `NANOKAFKA_BENCH_ONLY=neighbour`: one blocking producer alone and beside a busy
/// neighbour, one line (the busy-neighbour row and its baseline, measured in turns with the
/// rows over 4 partitions, as in the full run).
fn neighbour_only(budget: Duration) {
    let never = TempBroker::start(FsyncPolicy::Never);
    let [one, neighbour, ..] = one_thread_rows(&never, budget);
    println!(
        "busy neighbour: {:.0} rec/s ({:.1} us CPU/rec); alone: {:.0} rec/s ({:.1} us CPU/rec); \
         ratio {:.3}",
        neighbour.per_sec,
        neighbour.cpu_us_per_record,
        one.per_sec,
        one.cpu_us_per_record,
        neighbour.per_sec / one.per_sec
    );
}

/// The rows whose ratios are to one blocking thread over one partition, measured in turns
/// ([`produce::interleaved`]): that thread, the same beside a busy neighbour, one thread over
/// 4 partitions, four threads over 4.
fn one_thread_rows(never: &TempBroker, budget: Duration) -> [harness::Rate; 4] {
    let broker = &never.broker;
    let (one, neighbour) = (never.topic("one-thread"), never.topic("busy-neighbour"));
    let (one_4p, four_4p) = (
        never.partitioned("one-4p", 4),
        never.partitioned("four-4p", 4),
    );
    produce::interleaved(
        budget,
        [
            &|slice| produce::blocking_tally(broker, one, 1, slice),
            &|slice| produce::with_busy_neighbour(broker, neighbour, slice),
            &|slice| produce::blocking_tally(broker, one_4p, 1, slice),
            &|slice| produce::blocking_tally(broker, four_4p, 4, slice),
        ],
    )
}

/// `NANOKAFKA_BENCH_ONLY=partitions`: one blocking thread over 1 and over 4 partitions, and
/// four threads over 4, as the full run measures them (the no-collapse targets; in turns with
/// the busy-neighbour row, which is not printed).
fn partitions_only(budget: Duration) {
    let never = TempBroker::start(FsyncPolicy::Never);
    let [one, _, one_of_four, four_of_four] = one_thread_rows(&never, budget);
    println!(
        "1 thread, 1 partition: {:.0} rec/s ({:.1} us CPU/rec); 1 thread over 4: {:.3}x \
         (CPU {:.2}x); 4 threads over 4: {:.3}x",
        one.per_sec,
        one.cpu_us_per_record,
        one_of_four.per_sec / one.per_sec,
        one_of_four.cpu_us_per_record / one.cpu_us_per_record,
        four_of_four.per_sec / one.per_sec
    );
}

/// Progress steps of [`actor_rows`].
const ACTOR_STEPS: usize = 5;

/// The actor developer's path (see `actor`), on a broker of its own: measured, then as rows.
fn actor_rows(budget: Duration, progress: &mut Progress) -> Vec<Row> {
    // The builder refuses more than `MAX_IDLE_SPIN` (1 ms).
    let idle_spin = std::env::var_os("NANOKAFKA_BENCH_IDLE_SPIN_US").map(|_| {
        let us = harness::env_number("NANOKAFKA_BENCH_IDLE_SPIN_US", 0.0, 0.0..=1000.0);
        Duration::from_micros(us as u64)
    });
    let broker = TempBroker::start_with(FsyncPolicy::Never, idle_spin);
    let broker = &broker.broker;
    let low_for = budget.max(Duration::from_secs(1));
    progress.step(&format!(
        "actor: Topic<T> producer at {} events/s + subscriber + stream reader, in turns with \
         the same hops over actix mailboxes + a tokio channel and the producer alone, {:.1} s each",
        actor::LOW_RATE,
        low_for.as_secs_f64()
    ));
    let rows = actor::low_rate_rows(broker, (actor::LOW_RATE, low_for), actor::Readers::Both);
    let (low, bare, alone) = (rows.row, rows.bare.rate(), rows.alone.rate());
    let (bare_sleeps, alone_sleeps) = (rows.bare.sleeps_per_event(), rows.alone.sleeps_per_event());
    progress.step("actor: one blocking thread, NanoKafka::produce_keyed, 4 partitions");
    let blocking = actor::blocking_keyed(broker, "actor-blocking", budget);
    progress.step("actor: an actor awaiting each Topic::produce_keyed, 4 partitions");
    let awaited = actor::awaited(broker, "actor-awaited", budget);
    progress.step("actor: Produce messages of 1 record to the broker's Addr, awaited");
    let single = actor::single_messages(broker, "actor-single", budget);
    progress.step(&format!(
        "actor: ProduceBatch messages of {} records to the broker's Addr, awaited",
        actor::BATCH_RECORDS
    ));
    let batch = actor::batch_messages(broker, "actor-batch", budget);
    check_low_rate(&low);
    let mut rows = vec![Row::Section(
        "actor path (FsyncPolicy::Never, 4 partitions, keyed, ~110 B events)",
    )];
    rows.push(Row::Figure(
        Figure::new(
            "actor_low_rate_cpu",
            format!(
                "Topic<T> producer at {} ev/s + subscriber (Ack::Commit) + RecordStream \
                 committing each record (StreamCommitter): CPU per event, in turns with its \
                 baseline, {} slices each ({} rec/s reached, {}/{} of {} delivered/streamed, lag {})",
                actor::LOW_RATE,
                produce::SLICES,
                report::human(low.rate().per_sec),
                low.delivered,
                low.streamed,
                low.produced(),
                low.lag
            ),
            low.rate().cpu_us_per_record,
            "us/event",
        )
        .cpu(low.rate().cpu_us_per_record)
        .vs(
            "the same hops over actix mailboxes + a tokio channel (no broker)",
            bare.cpu_us_per_record,
        )
        .target(Target::RatioAtMost(2.0)),
    ));
    rows.push(Row::Figure(Figure::new(
        "actor_low_rate_sleeps",
        "the same: the process's sleeps (voluntary context switches) per event",
        low.sleeps_per_event(),
        "sleeps/event",
    )));
    rows.push(Row::Figure(
        Figure::new(
            "actor_low_rate_bare_hops",
            format!(
                "the same hops over actix mailboxes + a tokio channel, no broker: CPU per event \
                 ({bare_sleeps:.2} sleeps/event, context)"
            ),
            bare.cpu_us_per_record,
            "us/event",
        )
        .cpu(bare.cpu_us_per_record),
    ));
    rows.push(Row::Figure(
        Figure::new(
            "actor_low_rate_produce_only",
            format!(
                "the same producer alone, no readers: CPU per event \
                 ({alone_sleeps:.2} sleeps/event, context)"
            ),
            alone.cpu_us_per_record,
            "us/event",
        )
        .cpu(alone.cpu_us_per_record),
    ));
    rows.push(Row::Figure(
        Figure::rate(
            "actor_awaited_produce_keyed",
            "actor awaiting each Topic::produce_keyed",
            awaited,
        )
        .vs("1 blocking thread, produce_keyed", blocking.per_sec)
        .target(Target::RatioAtLeast(0.5)),
    ));
    rows.push(Row::Figure(
        Figure::rate(
            "actor_produce_batch_message",
            format!(
                "actor: ProduceBatch of {} to the broker's Addr, per record",
                actor::BATCH_RECORDS
            ),
            batch,
        )
        .vs("single Produce messages, awaited", single.per_sec)
        .target(Target::RatioAtLeast(1.0)),
    ));
    rows.push(Row::Figure(Figure::rate(
        "actor_single_produce_message",
        "actor: single Produce messages to the broker's Addr, awaited (context)",
        single,
    )));
    rows.push(Row::Figure(Figure::rate(
        "actor_blocking_produce_keyed",
        "1 blocking thread, NanoKafka::produce_keyed (baseline)",
        blocking,
    )));
    rows
}
