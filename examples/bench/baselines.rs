//! The same-run baselines: what the host does without NanoKafka.
//!
//! - raw append: 110-byte records (a 100 B payload in Kafka's record format, as a batch of
//!   1000 lays them out) one at a time into a 64 KiB `BufWriter<File>`, flushed every 1000
//!   records so the bytes are in the OS, as an append of a batch leaves them;
//! - `threads` threads sharing one file, each appending one 110-byte record with `write`
//!   (`O_APPEND`) and then `fdatasync`ing it before its next: what eight single-record
//!   producers get from the OS when each makes its own record durable (the file system may
//!   let concurrent syncs share a journal commit; the broker's group commit should beat it);
//! - a crossbeam channel handing fresh 100-byte `Vec`s from one thread to another (the
//!   floor for any design that crosses threads per record).
//!
//! The Redis Streams peer is not a baseline of the host but another broker: see `peer`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::Duration;

use crate::harness::{payload, Meter, Rate, Usage, BATCH, RECORD_LEN};

/// Flushes written to one file before it is replaced by a fresh one, outside the timed part:
/// 256 × 110 kB ≈ 28 MB keeps the disk from filling (as `benches/storage.rs` does).
const FLUSHES_PER_FILE: u64 = 256;

/// Raw appends per second, flushed to the OS every [`BATCH`] records.
pub fn raw_append(budget: Duration) -> Rate {
    let dir = tempfile::tempdir().expect("temp dir");
    let record = [0x5au8; RECORD_LEN];
    let mut timed = Usage::default();
    let mut records = 0u64;
    let mut file_no = 0u32;
    while timed.wall < budget {
        let path = dir.path().join(format!("raw-{file_no}.log"));
        file_no += 1;
        let mut writer = BufWriter::with_capacity(64 << 10, File::create(&path).expect("create"));
        let meter = Meter::start();
        for _ in 0..FLUSHES_PER_FILE {
            for _ in 0..BATCH {
                writer
                    .write_all(std::hint::black_box(&record))
                    .expect("write");
            }
            writer.flush().expect("flush");
            records += BATCH as u64;
        }
        timed += meter.usage();
        drop(writer);
        std::fs::remove_file(&path).expect("remove raw file");
    }
    Rate::of(records, timed)
}

/// Records per second of `threads` threads each doing `write` + `fdatasync` of one
/// [`RECORD_LEN`]-byte record at a time on one shared `O_APPEND` file, until `budget` has
/// passed. Few bytes are written (thousands of records a second), so one file serves.
pub fn shared_fdatasync(budget: Duration, threads: usize) -> Rate {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("shared.log"))
        .expect("create");
    let record = [0x5au8; RECORD_LEN];
    let meter = Meter::start();
    let records = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut written = 0u64;
                    while meter.elapsed() < budget {
                        // One `write` of an O_APPEND file: the record lands whole at the end.
                        (&file).write_all(&record).expect("write");
                        file.sync_data().expect("fdatasync");
                        written += 1;
                    }
                    written
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("fdatasync thread"))
            .sum()
    });
    meter.rate(records)
}

/// Messages per second through a bounded crossbeam channel, a fresh 100-byte `Vec` each.
pub fn crossbeam_channel(budget: Duration) -> Rate {
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(1024);
    let receiver = std::thread::spawn(move || {
        let mut bytes = 0usize;
        let mut count = 0u64;
        for value in rx {
            bytes += value.len();
            count += 1;
        }
        std::hint::black_box(bytes);
        count
    });
    let meter = Meter::start();
    let mut sent = 0u64;
    while meter.elapsed() < budget {
        for _ in 0..BATCH {
            tx.send(payload()).expect("send");
        }
        sent += BATCH as u64;
    }
    drop(tx);
    let received = receiver.join().expect("receiver thread");
    assert_eq!(sent, received);
    meter.rate(received)
}
