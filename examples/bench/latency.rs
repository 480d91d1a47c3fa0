//! End-to-end latency at a fixed rate: a producer thread sends a record every 1/rate
//! seconds, stamped with the nanoseconds since a shared `Instant`; a consumer thread
//! long-polls (`poll_batch_raw`, or a `Consumer`'s `poll_batch`) and records, per record,
//! how long after its stamp it was handed over.
//! The baseline sends the same stamps through a crossbeam channel at the same rate.
//! Both also report the process's CPU time per record over the run: what holding a steady
//! trickle costs (spinning waits included), not what a saturated pipe does.
//!
//! Each record also carries the CPU its producer sent it from, and each measurement reports
//! the share of records its consumer took on that same CPU ([`Percentiles::same_cpu`]). On a
//! virtual machine whose idle vCPUs halt, that share is most of what sets a p50: a consumer
//! woken on the other, halted vCPU waits for the host to run it again (tens of microseconds),
//! and one that runs on the producer's vCPU once the producer sleeps does not.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nanokafka::NanoKafka;

use crate::harness::{Meter, Usage, POLL_BATCH, VALUE_LEN};

/// How long a consumer poll waits for data: it is woken by the next produce, so this only
/// bounds how late it notices the end of the run.
const LONG_POLL: Duration = Duration::from_millis(100);

/// p50, p99 and p99.9 in microseconds, how many records were measured, the process's CPU
/// time per record over the run, and the share of records (%) the consumer took on the CPU
/// their producer sent them from.
#[derive(Debug, Clone, Copy)]
pub struct Percentiles {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub samples: u64,
    pub cpu_us_per_record: f64,
    pub same_cpu: f64,
}

impl Percentiles {
    fn of(histogram: &Histogram<u64>, usage: Usage, same_cpu: u64) -> Self {
        let us = |q: f64| histogram.value_at_quantile(q) as f64 / 1e3;
        let records = histogram.len().max(1) as f64;
        Percentiles {
            p50_us: us(0.50),
            p99_us: us(0.99),
            p999_us: us(0.999),
            samples: histogram.len(),
            cpu_us_per_record: usage.cpu.as_secs_f64() * 1e6 / records,
            same_cpu: same_cpu as f64 * 100.0 / records,
        }
    }
}

/// The CPU this thread runs on now (`u32::MAX` if the kernel cannot tell).
fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
    u32::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(u32::MAX)
}

/// A [`VALUE_LEN`]-byte value stamped with `stamp` and the CPU it is sent from.
fn stamped_value(stamp: u64) -> Vec<u8> {
    let mut value = vec![0u8; VALUE_LEN];
    value[..8].copy_from_slice(&stamp.to_le_bytes());
    value[8..12].copy_from_slice(&current_cpu().to_le_bytes());
    value
}

/// The stamp and the producer's CPU a [`stamped_value`] carries.
fn stamp_of(value: &[u8]) -> (u64, u32) {
    let stamp = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
    let cpu = u32::from_le_bytes(value[8..12].try_into().expect("4 bytes"));
    (stamp, cpu)
}

/// Records one latency (from `stamp` to `now`, in ns) and counts it in `same_cpu` when the
/// consumer, on `consumer_cpu`, took it on the CPU it was sent from.
fn record(
    histogram: &mut Histogram<u64>,
    same_cpu: &mut u64,
    (stamp, producer_cpu): (u64, u32),
    now: u64,
    consumer_cpu: u32,
) {
    histogram.saturating_record(now.saturating_sub(stamp).max(1));
    if producer_cpu == consumer_cpu && consumer_cpu != u32::MAX {
        *same_cpu += 1;
    }
}

fn histogram() -> Histogram<u64> {
    // 1 ns .. 100 s, three significant digits.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("histogram bounds")
}

/// Calls `send(seq)` `rate` times a second for `duration`, sleeping between sends; a send
/// that falls behind schedule goes at once (no catch-up burst is skipped).
fn paced(rate: u32, duration: Duration, mut send: impl FnMut(u64)) -> u64 {
    let interval = Duration::from_secs(1) / rate;
    let start = Instant::now();
    let mut seq = 0u64;
    loop {
        let due = interval * seq as u32;
        if due >= duration {
            return seq;
        }
        if let Some(wait) = (start + due).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        send(seq);
        seq += 1;
    }
}

/// Produce-to-consume latency through `broker` on a fresh one-partition `topic`.
pub fn broker_e2e(broker: &NanoKafka, topic: &str, rate: u32, duration: Duration) -> Percentiles {
    let (group, member) = ("bench-latency", "member-0");
    broker.join_group(topic, group, member).expect("join");
    let produce = |value| {
        broker.produce_raw(topic, None, value).expect("produce_raw");
    };
    stamped(rate, duration, produce, || {
        let records = broker
            .poll_batch_raw(topic, group, member, POLL_BATCH, LONG_POLL)
            .expect("poll_batch_raw");
        let (handed, cpu) = (Instant::now(), current_cpu());
        if let Some(last) = records.last() {
            broker
                .commit(topic, group, last.partition, last.offset)
                .expect("commit");
        }
        let stamps = records.iter().map(|r| stamp_of(&r.value)).collect();
        (stamps, handed, cpu)
    })
}

/// As [`broker_e2e`], the consumer a `Consumer<Vec<u8>>` (its `poll_batch` and `commit`):
/// the typed path, which decodes each record.
pub fn consumer_e2e(broker: &NanoKafka, topic: &str, rate: u32, duration: Duration) -> Percentiles {
    let mut consumer = broker
        .consumer::<Vec<u8>>(topic, "bench-latency-consumer", "member-0")
        .expect("consumer");
    let produce = |value: Vec<u8>| {
        broker.produce(topic, &value).expect("produce");
    };
    stamped(rate, duration, produce, || {
        let records = consumer
            .poll_batch(POLL_BATCH, LONG_POLL)
            .expect("poll_batch");
        let (handed, cpu) = (Instant::now(), current_cpu());
        if let Some(last) = records.last() {
            consumer.commit(last).expect("commit");
        }
        let stamps = records.iter().map(|r| stamp_of(&r.value)).collect();
        (stamps, handed, cpu)
    })
}

/// A producer thread `produce`s a value stamped with the time (and its CPU) every 1/`rate` s
/// for `duration`, while this thread calls `consume` until it has them all: a poll, then a
/// commit of what it returned, answering the polled records' stamps, when the poll handed
/// them over and the CPU it did so on. The latency of each record runs from its stamp to that
/// moment.
fn stamped(
    rate: u32,
    duration: Duration,
    produce: impl Fn(Vec<u8>) + Sync,
    mut consume: impl FnMut() -> (Vec<(u64, u32)>, Instant, u32),
) -> Percentiles {
    let meter = Meter::start();
    let base = Instant::now();
    let (sent, histogram, same_cpu) = std::thread::scope(|scope| {
        let producer = scope.spawn(|| {
            paced(rate, duration, |_| {
                produce(stamped_value(base.elapsed().as_nanos() as u64));
            })
        });
        let (mut histogram, mut same_cpu) = (histogram(), 0);
        loop {
            // Every record is in the log once the producer is done: an empty poll after that
            // is the end.
            let produced_all = producer.is_finished();
            let (stamps, handed, consumer_cpu) = consume();
            let now = handed.duration_since(base).as_nanos() as u64;
            if stamps.is_empty() && produced_all {
                break;
            }
            for stamp in stamps {
                record(&mut histogram, &mut same_cpu, stamp, now, consumer_cpu);
            }
        }
        (
            producer.join().expect("producer thread"),
            histogram,
            same_cpu,
        )
    });
    let usage = meter.usage();
    assert_eq!(histogram.len(), sent, "every record consumed once");
    Percentiles::of(&histogram, usage, same_cpu)
}

/// The same paced stamps through a crossbeam channel, the receiver blocked in `recv`.
pub fn channel_e2e(rate: u32, duration: Duration) -> Percentiles {
    let (tx, rx) = crossbeam_channel::unbounded::<Vec<u8>>();
    let meter = Meter::start();
    let base = Instant::now();
    let receiver = std::thread::spawn(move || receive_stamps(rx, base));
    send_stamps(tx, base, rate, duration);
    let (histogram, same_cpu) = receiver.join().expect("receiver thread");
    Percentiles::of(&histogram, meter.usage(), same_cpu)
}

/// Sends a stamped value every 1/`rate` s for `duration`, then closes the channel.
fn send_stamps(
    tx: crossbeam_channel::Sender<Vec<u8>>,
    base: Instant,
    rate: u32,
    duration: Duration,
) {
    paced(rate, duration, |_| {
        tx.send(stamped_value(base.elapsed().as_nanos() as u64))
            .expect("send");
    });
}

/// Records every stamped value until the channel closes: the latencies, and how many were
/// taken on the CPU they were sent from.
fn receive_stamps(
    rx: crossbeam_channel::Receiver<Vec<u8>>,
    base: Instant,
) -> (Histogram<u64>, u64) {
    let (mut histogram, mut same_cpu) = (histogram(), 0);
    for value in rx {
        let now = base.elapsed().as_nanos() as u64;
        record(
            &mut histogram,
            &mut same_cpu,
            stamp_of(&value),
            now,
            current_cpu(),
        );
    }
    (histogram, same_cpu)
}

/// Pins the calling thread to `cpu`; false if the kernel refuses (a CPU outside this
/// process's set).
fn pin_to(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it, and
    // sched_setaffinity only reads the set it is given, for the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as in `pin_to`; sched_getaffinity fills the set it is given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Why [`channel_e2e_other_cpu`] measured nothing.
pub const OTHER_CPU_UNAVAILABLE: &str =
    "this process may run on one CPU only, or pinning was refused";

/// [`channel_e2e`] with the sender pinned to one CPU and the receiver to another: what a
/// consumer woken on the other vCPU than its producer waits, in this run, with no broker
/// between them (the host's wake-up of an idle vCPU, on a VM whose idle vCPUs halt). `None`
/// when this process may run on one CPU only, or the kernel refuses a pin. Only the bench's
/// own two threads are pinned.
pub fn channel_e2e_other_cpu(rate: u32, duration: Duration) -> Option<Percentiles> {
    let &[sender_cpu, receiver_cpu, ..] = allowed_cpus().as_slice() else {
        return None;
    };
    let (tx, rx) = crossbeam_channel::unbounded::<Vec<u8>>();
    let meter = Meter::start();
    let base = Instant::now();
    let receiver = std::thread::spawn(move || {
        let pinned = pin_to(receiver_cpu);
        let received = receive_stamps(rx, base);
        pinned.then_some(received)
    });
    let sender = std::thread::spawn(move || {
        let pinned = pin_to(sender_cpu);
        send_stamps(tx, base, rate, duration);
        pinned
    });
    let sender_pinned = sender.join().expect("sender thread");
    let (histogram, same_cpu) = receiver.join().expect("receiver thread")?;
    sender_pinned.then(|| Percentiles::of(&histogram, meter.usage(), same_cpu))
}
