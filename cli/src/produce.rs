//! `nanokafka produce TOPIC`: lines from stdin written to a stopped data directory, one
//! record per line (like kafka-console-producer).
//!
//! A line is its bytes without the `\n` (or `\r\n`) that ends it, any bytes: the value is
//! written as is, or with `--msgpack-json` the line's JSON value encoded as MessagePack,
//! what the typed produce methods write (so a `Consumer<serde_json::Value>` reads it, and
//! `nanokafka consume` shows it as JSON). `--key-separator` splits a key off each line.
//!
//! The whole input is read and checked before anything is written, so a bad line (no key
//! separator, not JSON) changes nothing; the records are then written in batches of up to
//! [`BATCH_RECORDS`] records or [`BATCH_BYTES`] bytes, in input order.

use std::io::BufRead;
use std::process::ExitCode;

use nanokafka::{Delivery, Header, NanoKafka, RecordBatch};
use serde_json::json;

use crate::offline::{self, Failure, WriteArgs};

/// Records per produce request at most.
const BATCH_RECORDS: usize = 1000;
/// Bytes of keys and values per produce request at most (a single larger record still goes,
/// alone, up to the broker's record size limit).
const BATCH_BYTES: usize = 256 * 1024;

#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    /// The topic (it must exist: `nanokafka topics create`).
    topic: String,

    /// Split each line at the first SEP: key before, value after. A line without SEP is an
    /// error (nothing is written).
    #[arg(long, value_name = "SEP", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    key_separator: Option<String>,

    /// A header added to every record (repeatable): K=V, split at the first `=`.
    #[arg(long = "header", value_name = "K=V", value_parser = parse_header)]
    headers: Vec<Header>,

    /// Write every record to this partition [default: by key hash, round-robin without key].
    #[arg(long, value_name = "P")]
    partition: Option<u32>,

    /// Encode each line's value, a JSON document, as MessagePack (what typed consumers
    /// read) instead of writing the line's bytes.
    #[arg(long)]
    msgpack_json: bool,

    #[command(flatten)]
    args: WriteArgs,
}

/// `K=V` as a header; a usage error (exit 2) without `=` or with an empty key.
fn parse_header(text: &str) -> Result<Header, String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok(Header::new(key, value)),
        _ => Err(format!("expected K=V with a non-empty K, got '{text}'")),
    }
}

/// One record parsed from a line.
struct Line {
    key: Option<Vec<u8>>,
    value: Vec<u8>,
}

pub fn run(args: ProduceArgs) -> ExitCode {
    offline::finish(produce(&args))
}

fn produce(args: &ProduceArgs) -> Result<(), Failure> {
    // Opened first, so that a locked directory is refused before stdin is waited for.
    let broker = offline::open_for_write(&args.args.data_dir)?;
    let deliveries =
        read_lines(args, std::io::stdin().lock()).and_then(|lines| write(&broker, args, &lines));
    offline::close(broker)?;
    let deliveries = deliveries?;
    if args.args.json {
        let deliveries: Vec<_> = deliveries
            .iter()
            .map(|d| json!({ "partition": d.partition, "offset": d.offset }))
            .collect();
        offline::print_json(&json!({
            "topic": args.topic,
            "records": deliveries.len(),
            "deliveries": deliveries,
        }));
    } else {
        let count = deliveries.len();
        let records = if count == 1 { "record" } else { "records" };
        println!("produced {count} {records} to {}", args.topic);
    }
    Ok(())
}

/// Every line of `input` as a record, or the first bad line's error.
fn read_lines(args: &ProduceArgs, input: impl BufRead) -> Result<Vec<Line>, Failure> {
    let mut lines = Vec::new();
    for (index, line) in input.split(b'\n').enumerate() {
        let mut line = line.map_err(|e| Failure(format!("cannot read stdin: {e}")))?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let number = index + 1;
        lines.push(
            parse_line(args, line).map_err(|reason| {
                Failure(format!("line {number}: {reason}; nothing was written"))
            })?,
        );
    }
    Ok(lines)
}

fn parse_line(args: &ProduceArgs, line: Vec<u8>) -> Result<Line, String> {
    let (key, value) = match &args.key_separator {
        None => (None, line),
        Some(separator) => {
            let separator = separator.as_bytes();
            let at = line
                .windows(separator.len())
                .position(|w| w == separator)
                .ok_or_else(|| {
                    format!(
                        "no key separator '{}' in it",
                        String::from_utf8_lossy(separator)
                    )
                })?;
            let value = line[at + separator.len()..].to_vec();
            (Some(line[..at].to_vec()), value)
        }
    };
    let value = if args.msgpack_json {
        let parsed: serde_json::Value =
            serde_json::from_slice(&value).map_err(|e| format!("the value is not JSON ({e})"))?;
        rmp_serde::to_vec_named(&parsed).map_err(|e| format!("cannot encode the value: {e}"))?
    } else {
        value
    };
    Ok(Line { key, value })
}

/// Writes `lines` in batches, in order; the deliveries in input order.
fn write(broker: &NanoKafka, args: &ProduceArgs, lines: &[Line]) -> Result<Vec<Delivery>, Failure> {
    let topics = broker.list_topics()?;
    let Some(config) = topics.get(&args.topic) else {
        return Err(offline::no_such_topic(
            &args.topic,
            &args.args.data_dir,
            topics.keys(),
        ));
    };
    if let Some(partition) = args.partition.filter(|p| *p >= config.partitions) {
        return Err(Failure(format!(
            "topic '{}' has no partition {partition} (it has {}: 0 to {})",
            args.topic,
            config.partitions,
            config.partitions - 1
        )));
    }
    let mut deliveries = Vec::with_capacity(lines.len());
    for chunk in batches(lines) {
        let mut batch = RecordBatch::new();
        for line in chunk {
            batch.push_raw_with_headers(line.key.as_deref(), &line.value, &args.headers);
        }
        let written = broker
            .produce_batch(&args.topic, args.partition, batch)
            .map_err(|e| Failure(format!("{} records written, then: {e}", deliveries.len())))?;
        deliveries.extend(written);
    }
    Ok(deliveries)
}

/// `lines` cut into runs of at most [`BATCH_RECORDS`] records and [`BATCH_BYTES`] bytes
/// (a run holds at least one record).
fn batches(lines: &[Line]) -> Vec<&[Line]> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, line) in lines.iter().enumerate() {
        let size = line.value.len() + line.key.as_ref().map_or(0, Vec::len);
        if i > start && (i - start == BATCH_RECORDS || bytes + size > BATCH_BYTES) {
            runs.push(&lines[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < lines.len() {
        runs.push(&lines[start..]);
    }
    runs
}
