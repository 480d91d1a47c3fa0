//! Blocking calls on a loaded host: one thread's blocking `produce_raw` while two busy
//! processes and one busy thread of this process compete for the cores (a service with a
//! spinning worker on a shared host), against the same-run baseline for one blocking
//! cross-thread exchange: a std-channel round trip to an owner thread that appends the same
//! 100 B to a file, under the same load.
//!
//! Waits that spin lose here: with more runnable threads than cores, the core a spinner gives
//! up goes to a busy thread for a whole time slice. The quiet pair (the same two measurements
//! with no load) shows what the spin is for. Both pairs are measured in turns
//! (`produce::interleaved`), so each figure and its baseline see the same states of the host.
//! Under the same load, as context: an actor awaiting each `Topic::produce_keyed` (the async
//! path) and the low-rate subscription row (`actor::low_rate`).
//!
//! The busy processes are this bench re-run with [`BUSY_SECS_VAR`] set: they spin until that
//! many seconds have passed, so a bench that dies mid-row leaves no spinner behind for long,
//! and [`Load`] kills them when dropped.

use std::fs::File;
use std::io::Write;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nanokafka::FsyncPolicy;

use crate::actor;
use crate::harness::{self, payload, tallied, Rate, Tally, TempBroker};
use crate::produce;
use crate::report::{Figure, Row, Target};

/// Set in a busy child: seconds it spins before it exits.
pub const BUSY_SECS_VAR: &str = "NANOKAFKA_BENCH_BUSY_SECS";
/// Busy processes of the load (beside one busy thread of this process).
const BUSY_PROCESSES: usize = 2;
/// Events per second of the subscription row under load (the actor section's rate).
const SUBSCRIPTION_RATE: u32 = 500;

/// When this process is a busy child (see the module docs): spins for [`BUSY_SECS_VAR`]
/// seconds and returns true; the caller then exits.
pub fn busy_child() -> bool {
    if std::env::var_os(BUSY_SECS_VAR).is_none() {
        return false;
    }
    let secs = harness::env_number(BUSY_SECS_VAR, 0.0, 0.0..=3600.0);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        for _ in 0..1000 {
            std::hint::spin_loop();
        }
    }
    true
}

/// The load: [`BUSY_PROCESSES`] busy children and one busy thread here, until dropped (the
/// children end by themselves after `bound` in any case).
pub struct Load {
    children: Vec<Child>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Load {
    pub fn start(bound: Duration) -> Self {
        let exe = std::env::current_exe().expect("the bench's own path");
        let children = (0..BUSY_PROCESSES)
            .map(|_| {
                Command::new(&exe)
                    .env(BUSY_SECS_VAR, bound.as_secs_f64().to_string())
                    .spawn()
                    .expect("start a busy process")
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        Load {
            children,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for child in &mut self.children {
            // Already gone if its bound passed: then `kill` fails and `wait` reaps it.
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("busy thread");
        }
    }
}

/// The baseline: blocking round trips through std channels to an owner thread that appends
/// each 100-byte payload to a file with one `write` and answers with its count, for `budget`.
pub fn channel_round_trips(budget: Duration) -> Tally {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut file = File::create(dir.path().join("owner.log")).expect("create");
    let (request, requests) = mpsc::channel::<Vec<u8>>();
    let (answer, answers) = mpsc::channel::<u64>();
    let owner = std::thread::spawn(move || {
        let mut appended = 0u64;
        for value in requests {
            file.write_all(&value).expect("append");
            appended += 1;
            if answer.send(appended).is_err() {
                break;
            }
        }
    });
    let tally = tallied(|| {
        let start = Instant::now();
        let mut done = 0u64;
        while start.elapsed() < budget {
            request.send(payload()).expect("owner alive");
            done = answers.recv().expect("owner alive");
        }
        done
    });
    drop(request);
    owner.join().expect("owner thread");
    tally
}

/// The figures: each pair measured in turns.
pub struct Figures {
    pub quiet_produce: Rate,
    pub quiet_channel: Rate,
    pub loaded_produce: Rate,
    pub loaded_channel: Rate,
    /// An actor awaiting each `produce_keyed`, under the load (context).
    pub loaded_awaited: Rate,
    /// The low-rate subscription row under the load: its rate (events produced per second
    /// until all were delivered and committed) and whether every one was delivered.
    pub loaded_subscription: Rate,
    pub subscription_delivered_all: bool,
}

pub fn measure(budget: Duration) -> Figures {
    let never = TempBroker::start(FsyncPolicy::Never);
    let broker = &never.broker;
    let (quiet, loaded) = (never.topic("quiet-one"), never.topic("loaded-one"));
    let [quiet_produce, quiet_channel] = produce::interleaved(
        budget,
        [
            &|slice| produce::blocking_tally(broker, quiet, 1, slice),
            &channel_round_trips,
        ],
    );
    // Two turns of `budget`, the async row, the subscription row and its drain.
    let load = Load::start(budget * 6 + Duration::from_secs(30));
    let [loaded_produce, loaded_channel] = produce::interleaved(
        budget,
        [
            &|slice| produce::blocking_tally(broker, loaded, 1, slice),
            &channel_round_trips,
        ],
    );
    let loaded_awaited = actor::awaited(broker, "loaded-awaited", budget);
    let low = actor::low_rate(broker, "loaded-subscription", SUBSCRIPTION_RATE, budget);
    drop(load);
    Figures {
        quiet_produce,
        quiet_channel,
        loaded_produce,
        loaded_channel,
        loaded_awaited,
        loaded_subscription: low.rate(),
        subscription_delivered_all: low.delivered == low.produced() && low.lag == 0,
    }
}

/// The table's rows: the loaded row (target ≥ 0.3×), the quiet pair and the context rows.
pub fn rows(figures: &Figures) -> Vec<Row> {
    let loaded_label = "std-channel round trip to a file-appending thread, same load";
    vec![
        Row::Section("blocking calls on a loaded host (2 busy processes + 1 busy thread)"),
        Row::Figure(
            Figure::rate(
                "produce_loaded",
                "1 blocking thread, produce_raw, under the load",
                figures.loaded_produce,
            )
            .vs(loaded_label, figures.loaded_channel.per_sec)
            .target(Target::RatioAtLeast(0.3)),
        ),
        Row::Figure(
            Figure::rate(
                "produce_loaded_quiet",
                "the same, no load (context)",
                figures.quiet_produce,
            )
            .vs(
                "the same round trip, no load",
                figures.quiet_channel.per_sec,
            ),
        ),
        Row::Figure(
            Figure::rate(
                "produce_loaded_awaited",
                "an actor awaiting each produce_keyed, under the load (context)",
                figures.loaded_awaited,
            )
            .vs(loaded_label, figures.loaded_channel.per_sec),
        ),
        Row::Figure(Figure::rate(
            "produce_loaded_subscription",
            format!(
                "{SUBSCRIPTION_RATE} events/s through a subscription, under the load \
                 (context; every event delivered and committed: {})",
                figures.subscription_delivered_all
            ),
            figures.loaded_subscription,
        )),
        Row::Figure(Figure::rate(
            "baseline_channel_round_trip_loaded",
            loaded_label,
            figures.loaded_channel,
        )),
        Row::Figure(Figure::rate(
            "baseline_channel_round_trip_quiet",
            "the same round trip, no load",
            figures.quiet_channel,
        )),
    ]
}

/// `NANOKAFKA_BENCH_ONLY=loaded`: the rows above, one line each pair.
pub fn only(budget: Duration) {
    let f = measure(budget);
    println!(
        "loaded: produce {:.0} rec/s, channel {:.0} rec/s, ratio {:.3}; quiet: produce {:.0} \
         rec/s, channel {:.0} rec/s, ratio {:.3}",
        f.loaded_produce.per_sec,
        f.loaded_channel.per_sec,
        f.loaded_produce.per_sec / f.loaded_channel.per_sec,
        f.quiet_produce.per_sec,
        f.quiet_channel.per_sec,
        f.quiet_produce.per_sec / f.quiet_channel.per_sec,
    );
    println!(
        "loaded, async awaited produce_keyed: {:.0} rec/s, ratio {:.3} to the loaded channel; \
         subscription at {SUBSCRIPTION_RATE}/s: {:.0} ev/s, {:.1} us CPU/ev, all delivered \
         and committed: {}",
        f.loaded_awaited.per_sec,
        f.loaded_awaited.per_sec / f.loaded_channel.per_sec,
        f.loaded_subscription.per_sec,
        f.loaded_subscription.cpu_us_per_record,
        f.subscription_delivered_all
    );
}
