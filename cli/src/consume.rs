//! `nanokafka consume TOPIC`: a stopped data directory's records, printed, read-only.
//!
//! Records are read at positions (the batch reads the Kafka listener serves Fetch with),
//! never through a consumer group: nothing is committed and no group is created. Each
//! partition starts at its log start, an `--offset`, the first record at or after a
//! `--from-timestamp`, or a `--group`'s committed offset.
//!
//! `--follow` tails a running broker instead (whose data directory is locked): through its
//! Kafka listener at `--bootstrap`, with the Kafka backend (`kafka` feature), as the member
//! of a group of its own that starts at the log start and commits nothing. A value
//! that decodes as MessagePack (what the typed produce methods write) is shown as JSON; any
//! other value as text (lossy UTF-8). Keys and header values are shown as text.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nanokafka::internals::inspect::{batch_records, StoredRecord};
use nanokafka::{NanoKafka, PartitionStats};
use serde_json::{json, Value};

use crate::offline::{self, Failure};

/// How many bytes of batches one read asks for (a larger batch still comes whole).
const READ_BYTES: usize = 1 << 20;

#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    /// The topic.
    topic: String,

    /// Read only this partition [default: every partition, one after the other].
    #[arg(long, value_name = "P")]
    partition: Option<u32>,

    /// Start at this offset (of --partition) instead of the log start.
    #[arg(
        long,
        value_name = "N",
        requires = "partition",
        conflicts_with = "from_beginning"
    )]
    offset: Option<u64>,

    /// Start at each partition's log start (the default).
    #[arg(long, conflicts_with_all = ["from_timestamp", "group"])]
    from_beginning: bool,

    /// Start at each partition's first record at or after this time (RFC 3339, or
    /// milliseconds since the epoch); a partition with no record that recent prints nothing.
    #[arg(long, value_name = "TIME", value_parser = crate::time::parse_time, conflicts_with_all = ["offset", "group"])]
    from_timestamp: Option<u64>,

    /// Start at GROUP's committed offsets (its log start where it has none). Read-only: the
    /// group's offsets stay as they are.
    #[arg(long, value_name = "GROUP", conflicts_with = "offset")]
    group: Option<String>,

    /// Stop after N records.
    #[arg(long, value_name = "N")]
    max: Option<u64>,

    /// Keep printing records as they are produced, until interrupted (or --max): reads a
    /// running broker through its Kafka listener at --bootstrap (its data directory is
    /// locked), as a member of a group of its own that commits nothing, from the log start.
    /// Needs a build with `--features kafka`.
    #[arg(long, requires = "bootstrap")]
    follow: bool,

    /// The Kafka listener (host:port) of the running broker to --follow, or any Kafka
    /// cluster.
    #[arg(long, value_name = "HOST:PORT", requires = "follow", conflicts_with_all = ["data_dir", "partition", "offset", "from_timestamp", "group"])]
    bootstrap: Option<String>,

    /// The data directory to read. It must not be open in a running broker (follow that
    /// one with --bootstrap --follow); it is only read.
    #[arg(long, value_name = "DIR", required_unless_present = "bootstrap")]
    data_dir: Option<PathBuf>,

    /// Print one JSON document per record on stdout instead of a line of text.
    #[arg(long)]
    json: bool,
}

impl ConsumeArgs {
    fn data_dir(&self) -> &Path {
        self.data_dir.as_deref().unwrap_or(Path::new(""))
    }
}

pub fn run(args: ConsumeArgs) -> ExitCode {
    match &args.bootstrap {
        Some(bootstrap) => follow(&args, bootstrap),
        // clap lets `requires` go when the required flag conflicts with one given
        // (--data-dir): said here instead.
        None if args.follow => {
            eprintln!(
                "error: --follow reads a running broker: give its Kafka listener with \
                 --bootstrap HOST:PORT instead of --data-dir\n\nFor more information, try '--help'."
            );
            ExitCode::from(2)
        }
        None => offline::finish(consume(&args)),
    }
}

/// `--follow`: a private group's member on the broker at `bootstrap`, printing what it
/// reads until interrupted or `--max`.
#[cfg(feature = "kafka")]
fn follow(args: &ConsumeArgs, bootstrap: &str) -> ExitCode {
    offline::finish(follow_records(args, bootstrap))
}

#[cfg(feature = "kafka")]
fn follow_records(args: &ConsumeArgs, bootstrap: &str) -> Result<(), Failure> {
    use nanokafka::{GroupOptions, StartFrom};
    use std::time::Duration;
    let broker = NanoKafka::builder()
        .kafka_bootstrap(bootstrap)
        .session_timeout(Duration::from_secs(10))
        .build()?;
    let (topic, member) = (args.topic.as_str(), "nanokafka-consume");
    let group = format!("nanokafka-consume-{}", std::process::id());
    let options = GroupOptions::default().start(StartFrom::Earliest);
    broker.join_group_with(topic, &group, member, options)?;
    let mut remaining = args.max.unwrap_or(u64::MAX);
    while remaining > 0 {
        let max = usize::try_from(remaining.min(500)).unwrap_or(500);
        let records =
            broker.poll_batch_raw(topic, &group, member, max, Duration::from_millis(500))?;
        for record in records {
            let stored = StoredRecord {
                offset: record.offset,
                timestamp_ms: i64::try_from(record.timestamp_ms).unwrap_or(-1),
                key: record.key,
                value: Some(record.value),
                headers: record
                    .headers
                    .into_iter()
                    .map(|h| (h.key.into_bytes(), h.value))
                    .collect(),
            };
            print_record(topic, record.partition, &stored, args.json)?;
            remaining -= 1;
        }
    }
    broker.leave_group(topic, &group, member)?;
    broker.shutdown()?;
    Ok(())
}

#[cfg(not(feature = "kafka"))]
fn follow(_: &ConsumeArgs, _: &str) -> ExitCode {
    eprintln!(
        "error: consume --follow reads through a Kafka listener, which needs a build with \
         --features kafka (cargo install --path cli --features kafka)\n\nFor more information, try '--help'."
    );
    ExitCode::from(2)
}

fn consume(args: &ConsumeArgs) -> Result<(), Failure> {
    let broker = offline::open(args.data_dir())?;
    let result = print_records(&broker, args);
    offline::close(broker)?;
    result
}

fn print_records(broker: &NanoKafka, args: &ConsumeArgs) -> Result<(), Failure> {
    let mut remaining = args.max.unwrap_or(u64::MAX);
    for (partition, start) in starts(broker, args)? {
        if remaining == 0 {
            break;
        }
        let mut offset = start;
        while offset < partition.log_end_offset && remaining > 0 {
            let read = futures::executor::block_on(broker.async_handle().fetch_kafka_batches(
                &args.topic,
                partition.partition,
                offset,
                READ_BYTES,
                true,
            ))?;
            let records = batch_records(&read.bytes).map_err(|(position, reason)| {
                Failure(format!(
                    "{}[{}] at offset {offset}: a stored batch does not decode (byte {position} \
                     of the read): {reason}",
                    args.topic, partition.partition
                ))
            })?;
            for record in records.iter().filter(|r| r.offset >= offset) {
                if remaining == 0 {
                    break;
                }
                print_record(&args.topic, partition.partition, record, args.json)?;
                remaining -= 1;
            }
            if read.next_offset <= offset {
                break; // nothing more to read (a read always moves on otherwise)
            }
            offset = read.next_offset;
        }
    }
    Ok(())
}

/// The partitions to read and the offset each starts at, checked against the topic.
fn starts(broker: &NanoKafka, args: &ConsumeArgs) -> Result<Vec<(PartitionStats, u64)>, Failure> {
    let group_lag = match &args.group {
        Some(group) => Some(broker.lag(&args.topic, group).map_err(|e| match e {
            nanokafka::Error::UnknownGroup { .. } => Failure(format!(
                "no group '{group}' on topic '{}' in {}",
                args.topic,
                args.data_dir().display()
            )),
            e => Failure::from(e),
        })?),
        None => None,
    };
    let mut stats = broker.stats()?.topics;
    let Some(topic) = stats.remove(&args.topic) else {
        let known: Vec<String> = stats.into_keys().collect();
        return Err(Failure(format!(
            "no topic '{}' in {} ({})",
            args.topic,
            args.data_dir().display(),
            if known.is_empty() {
                "it has none".to_owned()
            } else {
                format!("it has: {}", known.join(", "))
            }
        )));
    };
    let count = topic.partitions.len();
    let mut partitions = topic.partitions;
    if let Some(wanted) = args.partition {
        partitions.retain(|p| p.partition == wanted);
        if partitions.is_empty() {
            return Err(Failure(format!(
                "topic '{}' has no partition {wanted} (it has {count}: 0 to {})",
                args.topic,
                count.saturating_sub(1)
            )));
        }
    }
    partitions
        .into_iter()
        .map(|p| {
            if let Some(reason) = &p.failed {
                return Err(Failure(format!(
                    "{}[{}] cannot be read: {reason}",
                    args.topic, p.partition
                )));
            }
            let start = match args.offset {
                Some(offset) if !(p.log_start_offset..=p.log_end_offset).contains(&offset) => {
                    return Err(Failure(format!(
                        "offset {offset} is outside {}[{}], which holds offsets {} to {} \
                         (the log end)",
                        args.topic, p.partition, p.log_start_offset, p.log_end_offset
                    )))
                }
                Some(offset) => offset,
                None => match (args.from_timestamp, &group_lag) {
                    (Some(time), _) => broker
                        .offset_for_timestamp(&args.topic, p.partition, time)?
                        .unwrap_or(p.log_end_offset),
                    // The lag is log end minus the group's position.
                    (None, Some(lag)) => lag
                        .get(&p.partition)
                        .map_or(p.log_start_offset, |lag| p.log_end_offset - lag),
                    (None, None) => p.log_start_offset,
                },
            };
            Ok((p, start))
        })
        .collect()
}

fn print_record(
    topic: &str,
    partition: u32,
    record: &StoredRecord,
    json: bool,
) -> Result<(), Failure> {
    let (value, format) = match &record.value {
        None => (Value::Null, "null"),
        Some(bytes) => match msgpack(bytes) {
            Some(value) => (value, "msgpack"),
            None => (Value::String(text(bytes)), "raw"),
        },
    };
    let line = if json {
        let headers: Vec<Value> = record
            .headers
            .iter()
            .map(|(key, value)| json!({ "key": text(key), "value": value.as_deref().map(text) }))
            .collect();
        json!({
            "topic": topic,
            "partition": partition,
            "offset": record.offset,
            "timestamp_ms": record.timestamp_ms,
            "key": record.key.as_deref().map(text),
            "value": value,
            "value_format": format,
            "headers": headers,
        })
        .to_string()
    } else {
        let key = record.key.as_deref().map_or_else(|| "-".to_owned(), text);
        let value = match value {
            Value::String(raw) if format == "raw" => raw,
            other => other.to_string(),
        };
        let mut line = format!(
            "{topic}[{partition}]@{}  timestamp={}  key={key}  value={value}",
            record.offset, record.timestamp_ms
        );
        for (key, value) in &record.headers {
            let value = value.as_deref().map_or_else(|| "null".to_owned(), text);
            line.push_str(&format!("  header {}={value}", text(key)));
        }
        line
    };
    // A closed pipe (`| head`) ends the read with an error line, not a panic.
    writeln!(std::io::stdout(), "{line}")
        .map_err(|e| Failure(format!("cannot write to stdout: {e}")))
}

/// `bytes` as JSON when they are exactly one MessagePack value (no bytes left over).
fn msgpack(bytes: &[u8]) -> Option<Value> {
    use serde::Deserialize;
    let mut cursor = std::io::Cursor::new(bytes);
    let value = Value::deserialize(&mut rmp_serde::Deserializer::new(&mut cursor)).ok()?;
    (cursor.position() == bytes.len() as u64).then_some(value)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
