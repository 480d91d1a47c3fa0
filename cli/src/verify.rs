//! `nanokafka verify --data-dir DIR`: every segment of a stopped data directory checked,
//! batch by batch (CRC, header, records) and index entry by index entry, and every
//! partition's offsets across its segments (increasing, no duplicate, no gap but those the
//! log cleaner left in a cleaned log); every damaged range reported (file, position, length,
//! offset, reason). Exit 0 when all is clean, 1 otherwise.
//!
//! The segments checked are those the broker's next open will have: a cleaned segment whose
//! swap a crash interrupted (`.log.swap`) in place of the segments it replaces. The cleaner's
//! files such a crash leaves are listed with what the next open does with each; they are not
//! damage.
//!
//! It holds the directory's lock while it reads (a broker appending meanwhile would look
//! like a torn tail) but repairs nothing and writes nothing: repair is the broker's recovery,
//! when it next opens the directory (a torn tail past the recovery point is cut; damage below
//! it is kept, and reads of it fail).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use nanokafka::internals::inspect::{
    check_index, lock_for_reading, partition_dirs, partition_files, scan_segment, CleanerFile,
    Damage, OffsetCheck, PartitionFiles, ScannedSegment,
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
    damage: Vec<Damage>,
    /// Partitions whose log was cleaned (`cleaner.marker`).
    cleaned_partitions: usize,
    /// Gaps between batches accepted as the cleaner's.
    cleaner_gaps: usize,
    cleaner_files: Vec<CleanerFile>,
}

/// Shows which file is being read, on a terminal only.
struct Progress {
    on: bool,
    done: usize,
    total: usize,
}

impl Progress {
    fn show(&mut self, file: &Path) {
        self.done += 1;
        if self.on {
            eprint!(
                "\r\x1b[Kverifying {}/{}: {}",
                self.done,
                self.total,
                file.display()
            );
        }
    }

    fn clear(&self) {
        if self.on {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
        }
    }
}

fn verify(args: &OfflineArgs) -> Result<(), Failure> {
    offline::check_data_dir(&args.data_dir)?;
    let _lock = lock_for_reading(&args.data_dir).map_err(offline::open_error(&args.data_dir))?;
    let partitions = partition_dirs(&args.data_dir)
        .and_then(|dirs| {
            dirs.iter()
                .map(|d| partition_files(d))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| Failure(format!("cannot read {}: {e}", args.data_dir.display())))?;
    let mut progress = Progress {
        on: std::io::stderr().is_terminal(),
        done: 0,
        total: partitions.iter().map(|p| p.segments.len()).sum(),
    };
    let mut report = Report::default();
    for partition in &partitions {
        check_partition(partition, &mut report, &mut progress)?;
    }
    progress.clear();
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

/// Scans each segment of one partition, then checks its offsets across them.
fn check_partition(
    partition: &PartitionFiles,
    report: &mut Report,
    progress: &mut Progress,
) -> Result<(), Failure> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| Failure(format!("cannot read {}: {e}", path.display())))
    };
    let mut offsets = OffsetCheck::new(partition.cleaned);
    for (i, segment) in partition.segments.iter().enumerate() {
        progress.show(&segment.log);
        let bytes = read(&segment.log)?;
        let (batches, damage) = scan_segment(&segment.log, &bytes);
        if let Some(index) = &segment.index {
            let entries = read(index)?;
            let base = segment.base_offset;
            report
                .damage
                .extend(check_index(index, &entries, base, &batches));
        }
        report.segments += 1;
        report.batches += batches.len();
        report.bytes += bytes.len() as u64;
        report.damage.extend(damage);
        offsets.segment(ScannedSegment {
            base_offset: segment.base_offset,
            log: &segment.log,
            batches: &batches,
            next_base: partition.segments.get(i + 1).map(|s| s.base_offset),
        });
    }
    report.damage.extend(offsets.damage);
    report.cleaner_gaps += offsets.cleaner_gaps;
    report.cleaned_partitions += usize::from(partition.cleaned);
    report
        .cleaner_files
        .extend(partition.cleaner_files.iter().cloned());
    Ok(())
}

fn print(report: &Report, json: bool) {
    if json {
        offline::print_json(&json!({
            "segments": report.segments,
            "batches": report.batches,
            "bytes": report.bytes,
            "cleaned_partitions": report.cleaned_partitions,
            "cleaner_gaps": report.cleaner_gaps,
            "cleaner_files": report.cleaner_files,
            "clean": report.damage.is_empty(),
            "damage": report.damage,
        }));
        return;
    }
    for file in &report.cleaner_files {
        println!("CLEANER FILE {}: {}", file.file.display(), file.fate);
    }
    for d in &report.damage {
        println!("{}", damage_line(d));
    }
    let cleaned = match report.cleaned_partitions {
        0 => String::new(),
        n => format!(
            " ({n} cleaned partition(s), {} gap(s) the cleaner left)",
            report.cleaner_gaps
        ),
    };
    println!(
        "{} segments, {} batches, {} bytes checked{cleaned}: {}",
        report.segments,
        report.batches,
        report.bytes,
        match report.damage.len() {
            0 => "clean".to_owned(),
            n => format!("{n} damaged range(s)"),
        }
    );
}
