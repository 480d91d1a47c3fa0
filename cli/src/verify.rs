//! `nanokafka verify --data-dir DIR`: every segment of a stopped data directory checked,
//! batch by batch (CRC, header, records) and index entry by index entry, and every damaged
//! range reported (file, position, length, reason). Exit 0 when all is clean, 1 otherwise.
//!
//! It holds the directory's lock while it reads (a broker appending meanwhile would look
//! like a torn tail) but repairs nothing and writes nothing: repair is the broker's recovery,
//! when it next opens the directory (a torn tail past the recovery point is cut; damage below
//! it is kept, and reads of it fail).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use nanokafka::internals::inspect::{
    check_index, lock_for_reading, scan_segment, segment_base, segment_files,
};
use serde_json::json;

use crate::dump::damage_line;
use crate::offline::{self, Failure, OfflineArgs};

pub fn run(args: OfflineArgs) -> ExitCode {
    offline::finish(verify(&args))
}

/// What the scan found.
#[derive(Default)]
struct Report {
    segments: usize,
    batches: usize,
    bytes: u64,
    damage: Vec<nanokafka::internals::inspect::Damage>,
}

fn verify(args: &OfflineArgs) -> Result<(), Failure> {
    offline::check_data_dir(&args.data_dir)?;
    let _lock = lock_for_reading(&args.data_dir).map_err(offline::open_error(&args.data_dir))?;
    let files = segment_files(&args.data_dir)
        .map_err(|e| Failure(format!("cannot list {}: {e}", args.data_dir.display())))?;
    let progress = std::io::stderr().is_terminal();
    let mut report = Report::default();
    for (i, file) in files.iter().enumerate() {
        if progress {
            eprint!(
                "\r\x1b[Kverifying {}/{}: {}",
                i + 1,
                files.len(),
                file.display()
            );
        }
        check_segment(file, &mut report)?;
    }
    if progress {
        eprint!("\r\x1b[K");
        let _ = std::io::stderr().flush();
    }
    print(&report, args.json);
    if report.damage.is_empty() {
        Ok(())
    } else {
        Err(Failure(format!(
            "{} is damaged: {} damaged range(s); nothing was changed (see docs/durability.md \
             for what the broker does with each when it opens the directory)",
            args.data_dir.display(),
            report.damage.len()
        )))
    }
}

fn check_segment(file: &Path, report: &mut Report) -> Result<(), Failure> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| Failure(format!("cannot read {}: {e}", path.display())))
    };
    let bytes = read(file)?;
    let (batches, damage) = scan_segment(file, &bytes);
    let index = file.with_extension("index");
    if let (Some(base), true) = (segment_base(file), index.is_file()) {
        report
            .damage
            .extend(check_index(&index, &read(&index)?, base, &batches));
    }
    report.segments += 1;
    report.batches += batches.len();
    report.bytes += bytes.len() as u64;
    report.damage.extend(damage);
    Ok(())
}

fn print(report: &Report, json: bool) {
    if json {
        offline::print_json(&json!({
            "segments": report.segments,
            "batches": report.batches,
            "bytes": report.bytes,
            "clean": report.damage.is_empty(),
            "damage": report.damage,
        }));
        return;
    }
    for d in &report.damage {
        println!("{}", damage_line(d));
    }
    println!(
        "{} segments, {} batches, {} bytes checked: {}",
        report.segments,
        report.batches,
        report.bytes,
        match report.damage.len() {
            0 => "clean".to_owned(),
            n => format!("{n} damaged range(s)"),
        }
    );
}
