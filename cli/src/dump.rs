//! `nanokafka dump SEGMENT_FILE`: the batches of one segment file, as Kafka's
//! kafka-dump-log shows them (base and last offset, count, position, size, timestamps,
//! codec, whether the CRC verifies), with `--records` each record's offset, timestamp and
//! sizes.
//!
//! A read of one file: it takes no lock, so it also works on a copy, or on a directory a
//! broker is serving (the last batch may then be caught half written, and is shown as a
//! torn tail). Exit 1 when the file holds damage, after showing all of it.

use std::path::PathBuf;
use std::process::ExitCode;

use nanokafka::internals::inspect::{batch_records, scan_segment, BatchSummary, Damage};
use serde_json::{json, Value};

use crate::offline::{self, Failure};

#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    /// The segment file (`<topic>_<partition>/<base offset>.log` in a data directory).
    segment: PathBuf,

    /// Also print each record: offset, timestamp, key and value sizes, header count.
    #[arg(long)]
    records: bool,

    /// Print one JSON document on stdout instead of lines.
    #[arg(long)]
    json: bool,
}

pub fn run(args: DumpArgs) -> ExitCode {
    offline::finish(dump(&args))
}

fn dump(args: &DumpArgs) -> Result<(), Failure> {
    let bytes = std::fs::read(&args.segment)
        .map_err(|e| Failure(format!("cannot read {}: {e}", args.segment.display())))?;
    let (batches, damage) = scan_segment(&args.segment, &bytes);
    let records = |batch: &BatchSummary| -> Vec<Value> {
        if !args.records || !batch.crc_valid {
            return Vec::new();
        }
        let start = batch.position as usize;
        let whole = &bytes[start..start + batch.size as usize];
        let decoded = batch_records(whole).unwrap_or_default(); // verified by the scan
        decoded
            .iter()
            .map(|r| {
                json!({
                    "offset": r.offset,
                    "timestamp_ms": r.timestamp_ms,
                    "key_size": r.key.as_ref().map(Vec::len),
                    "value_size": r.value.as_ref().map(Vec::len),
                    "headers": r.headers.len(),
                })
            })
            .collect()
    };
    if args.json {
        let batches: Vec<Value> = batches
            .iter()
            .map(|b| {
                let mut value = json!(b);
                if args.records {
                    value["records"] = json!(records(b));
                }
                value
            })
            .collect();
        offline::print_json(&json!({
            "file": args.segment,
            "size": bytes.len(),
            "batches": batches,
            "damage": damage,
        }));
    } else {
        println!("Dumping {} ({} bytes)", args.segment.display(), bytes.len());
        for batch in &batches {
            println!("{}", batch_line(batch));
            for record in records(batch) {
                println!("{}", record_line(&record));
            }
        }
        for d in &damage {
            println!("{}", damage_line(d));
        }
    }
    if damage.is_empty() {
        Ok(())
    } else {
        Err(Failure(format!(
            "{} is damaged: {} damaged range(s)",
            args.segment.display(),
            damage.len()
        )))
    }
}

fn batch_line(b: &BatchSummary) -> String {
    let mut line = format!(
        "baseOffset: {} lastOffset: {} count: {} position: {} size: {} baseTimestamp: {} \
         maxTimestamp: {} codec: {} crc: {}",
        b.base_offset,
        b.last_offset,
        b.count,
        b.position,
        b.size,
        b.base_timestamp,
        b.max_timestamp,
        b.codec,
        if b.crc_valid { "valid" } else { "INVALID" },
    );
    if b.control {
        line.push_str(" control: true");
    }
    if let Some(error) = &b.error {
        line.push_str(&format!(" ({error})"));
    }
    line
}

/// A record line, kafka-dump-log style: sizes of -1 for a null key or value.
fn record_line(record: &Value) -> String {
    let size = |v: &Value| v.as_i64().unwrap_or(-1);
    format!(
        "| offset: {} timestamp: {} keySize: {} valueSize: {} headers: {}",
        record["offset"],
        record["timestamp_ms"],
        size(&record["key_size"]),
        size(&record["value_size"]),
        record["headers"]
    )
}

/// `DAMAGED FILE position P (N bytes)[ at offset O]: REASON`.
pub fn damage_line(d: &Damage) -> String {
    let offset = d
        .offset
        .map(|o| format!(" at offset {o}"))
        .unwrap_or_default();
    format!(
        "DAMAGED {} position {} ({} bytes){offset}: {}",
        d.file.display(),
        d.position,
        d.length,
        d.reason
    )
}
