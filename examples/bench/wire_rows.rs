//! The wire section of the table: each client's figure through the Kafka listener beside the
//! same client against tansu, or beside the Redis Streams figure it is held to (ratio =
//! NanoKafka / peer; the latency ratios are NanoKafka / tansu too, so lower is better there).

use crate::peer::RedisFigures;
use crate::report::{human, Figure, Row, Target};
use crate::wire::{Latency, Run, Slot, WireFigures};

/// A peer figure a row is compared with: its label and value, or why it is missing.
type Peer<'a> = (String, Result<f64, &'a str>);

/// A throughput row: skipped when the figure is missing, without a ratio when the peer is.
fn rate_row(
    key: &'static str,
    label: String,
    ours: &Slot<Run>,
    peer: Peer<'_>,
    target: Target,
) -> Row {
    let run = match ours {
        Ok(run) => *run,
        Err(why) => {
            return Row::Skipped {
                key,
                why: why.clone(),
            }
        }
    };
    let label = format!("{label}; client CPU {} µs/rec", human(run.client_cpu_us));
    let figure = |label| Figure::new(key, label, run.per_sec, "rec/s").cpu(run.broker_cpu_us);
    match peer {
        (peer_label, Ok(value)) => Row::Figure(figure(label).vs(peer_label, value).target(target)),
        (peer_label, Err(why)) => {
            Row::Figure(figure(format!("{label} ({peer_label} skipped: {why})")))
        }
    }
}

/// A tansu figure, and its broker's and client's CPU per record for the label.
fn tansu(slot: &Slot<Run>) -> Result<(f64, String), &str> {
    slot.as_ref()
        .map(|r| {
            let cpu = format!(
                "{} (client {})",
                human(r.broker_cpu_us),
                human(r.client_cpu_us)
            );
            (r.per_sec, cpu)
        })
        .map_err(String::as_str)
}

pub fn rows(wire: &WireFigures, redis: Result<&RedisFigures, &str>, records: u64) -> Vec<Row> {
    let n = human(records as f64);
    let xadd: Peer = (
        "Redis XADD pipelined".to_string(),
        redis.map(|r| r.xadd_pipelined),
    );
    let xread: Peer = (
        "Redis XREADGROUP 500 + XACK".to_string(),
        redis.map(|r| r.xreadgroup),
    );
    let mut rows = vec![Row::Section(
        "Kafka clients over the listener (100 B, 1 partition, FsyncPolicy::Never; ratio = NanoKafka / peer; CPU = the broker's)",
    )];
    rows.push(rate_row(
        "wire_kcat_produce",
        format!("kcat -P {n}, acks=all, librdkafka defaults (wall time of kcat)"),
        &wire.kcat_produce,
        xadd.clone(),
        Target::RatioAtLeast(2.0),
    ));
    let produce = format!("confluent-kafka produce {n}, acks=all, delivery reports + flush");
    let (tansu_produce, tansu_produce_cpu) = split(tansu(&wire.tansu_produce));
    rows.push(rate_row(
        "wire_confluent_produce",
        produce.clone(),
        &wire.produce,
        (
            format!("tansu (memory), same client, CPU {tansu_produce_cpu} µs/rec"),
            tansu_produce,
        ),
        Target::RatioAtLeast(1.0),
    ));
    rows.push(rate_row(
        "wire_confluent_produce_vs_redis",
        produce,
        &wire.produce,
        xadd,
        Target::RatioAtLeast(2.0),
    ));
    rows.push(rate_row(
        "wire_kcat_consume",
        format!("kcat -C -o beginning -e {n}, queued.min.messages 1 M (wall time of kcat)"),
        &wire.kcat_consume,
        xread.clone(),
        Target::RatioAtLeast(5.0),
    ));
    if let Row::Figure(context) = rate_row(
        "wire_kcat_consume_defaults",
        "the same with librdkafka's defaults (context: the client idles, see benches/README.md)"
            .to_string(),
        &wire.kcat_consume_defaults,
        xread.clone(),
        Target::RatioAtLeast(0.0),
    ) {
        rows.push(Row::Figure(Figure {
            target: None,
            ..context
        }));
    }
    let assign = "confluent-kafka assign() consume".to_string();
    let (tansu_assign, tansu_assign_cpu) = split(tansu(&wire.tansu_assign));
    rows.push(rate_row(
        "wire_confluent_assign",
        assign.clone(),
        &wire.assign,
        (
            format!("tansu, same client, CPU {tansu_assign_cpu} µs/rec"),
            tansu_assign,
        ),
        Target::RatioAtLeast(1.0),
    ));
    rows.push(rate_row(
        "wire_confluent_assign_vs_redis",
        assign,
        &wire.assign,
        xread.clone(),
        Target::RatioAtLeast(5.0),
    ));
    let join = |secs: Option<f64>| secs.map_or("-".to_string(), |s| format!("{s:.1} s"));
    let group = format!(
        "confluent-kafka group member, from its first record (join: {})",
        join(wire.join_secs.0)
    );
    let (tansu_group, tansu_group_cpu) = split(tansu(&wire.tansu_group));
    rows.push(rate_row(
        "wire_confluent_group",
        group.clone(),
        &wire.group,
        (
            format!(
                "tansu, same client (join: {}), CPU {tansu_group_cpu} µs/rec",
                join(wire.join_secs.1)
            ),
            tansu_group,
        ),
        Target::RatioAtLeast(1.0),
    ));
    rows.push(rate_row(
        "wire_confluent_group_vs_redis",
        group,
        &wire.group,
        xread,
        Target::RatioAtLeast(5.0),
    ));
    rows.push(Row::Skipped {
        key: "wire_kcat_vs_tansu",
        why: "kcat (librdkafka 2.0.2) cannot talk to tansu 0.6.0: it rejects the tagged fields of tansu's ApiVersions v3 response".into(),
    });
    rows.push(Row::Section(
        "produce→consume latency through the listener (confluent-kafka, linger.ms 0, fetch.wait.max.ms 100; FsyncPolicy default; ratio = NanoKafka / tansu)",
    ));
    rows.extend(latency_rows(&wire.latency, &wire.tansu_latency));
    rows
}

/// A latency row: its key, its label, how to read it from a [`Latency`], and its upper bound.
type Percentile = (&'static str, &'static str, fn(&Latency) -> f64, Option<f64>);

fn latency_rows(ours: &Slot<Latency>, theirs: &Slot<Latency>) -> Vec<Row> {
    let ours = match ours {
        Ok(l) => *l,
        Err(why) => {
            return vec![Row::Skipped {
                key: "wire_e2e",
                why: why.clone(),
            }]
        }
    };
    let pairs: [Percentile; 3] = [
        ("wire_e2e_p50", "p50", |l| l.p50_us, None),
        ("wire_e2e_p99", "p99", |l| l.p99_us, Some(5000.0)),
        ("wire_e2e_p999", "p99.9", |l| l.p999_us, None),
    ];
    pairs
        .into_iter()
        .map(|(key, label, pick, at_most)| {
            let mut figure = Figure::new(
                key,
                format!("{label} ({} records)", ours.samples),
                pick(&ours),
                "us",
            );
            figure = match theirs {
                Ok(t) => figure.vs("tansu, same client and pacing", pick(t)),
                Err(why) => {
                    figure.label = format!("{} (tansu skipped: {why})", figure.label);
                    figure
                }
            };
            if let Some(limit) = at_most {
                figure = figure.target(Target::AtMost(limit));
            }
            Row::Figure(figure)
        })
        .collect()
}

/// `(Ok(value), cpu)` or `(Err(why), "-")`.
fn split(peer: Result<(f64, String), &str>) -> (Result<f64, &str>, String) {
    match peer {
        Ok((value, cpu)) => (Ok(value), cpu),
        Err(why) => (Err(why), "-".to_string()),
    }
}
