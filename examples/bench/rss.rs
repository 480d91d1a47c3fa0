//! Peak resident memory while producing gigabytes through the broker.
//!
//! The peak is `VmHWM` from `/proc/self/status`. The process has run other measurements
//! first, so the high-water mark is reset (`echo 5 > /proc/self/clear_refs`, Linux ≥ 4.0)
//! just before producing; the baseline is the resident size at that moment (`VmRSS`), so the
//! ratio shows what producing added. Page cache is not resident memory of the process.

use std::time::Instant;

use nanokafka::NanoKafka;

use crate::harness::{record_batch, BATCH, VALUE_LEN};

/// What the measurement found, in bytes.
#[derive(Debug, Clone, Copy)]
pub struct PeakRss {
    pub payload_bytes: u64,
    pub before: u64,
    pub peak: u64,
    /// Whether the high-water mark could be reset; if not, `peak` is the whole run's.
    pub reset: bool,
    pub records_per_sec: f64,
}

/// A `kB` field of `/proc/self/status`, in bytes.
pub fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Produces `bytes` of 100-byte payloads in batches of 1000 from one thread into `topic`
/// (whose retention bounds the disk it takes) and reports the peak RSS.
pub fn while_producing(broker: &NanoKafka, topic: &str, bytes: u64) -> PeakRss {
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_bytes("VmRSS");
    let batches = bytes.div_ceil((BATCH * VALUE_LEN) as u64);
    let start = Instant::now();
    for _ in 0..batches {
        broker
            .produce_batch(topic, Some(0), record_batch())
            .expect("produce_batch");
    }
    let records_per_sec = (batches * BATCH as u64) as f64 / start.elapsed().as_secs_f64();
    PeakRss {
        payload_bytes: batches * (BATCH * VALUE_LEN) as u64,
        before,
        peak: status_bytes("VmHWM"),
        reset,
        records_per_sec,
    }
}
