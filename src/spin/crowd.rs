//! Whether the host's cores are crowded, for `crate::spin`: the scheduler's runnable threads
//! (`/proc/loadavg`), sampled now and then, against the cores, leaving out this process's
//! own waiters, which give their core up within microseconds.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use super::{nanos, now_nanos};

/// Threads of this process that wait for one another through `crate::spin` and are awake
/// now: blocking callers from their first call until they park (`crate::wait`), I/O threads
/// not parked. They give their
/// core up within microseconds (a spin yields, a wait ends), so [`crowded`] does not count
/// them among the threads that fill the cores.
static AWAKE: AtomicUsize = AtomicUsize::new(0);

/// This thread starts being one of the [`AWAKE`] (it must call [`asleep`] once it stops).
pub fn awake() {
    AWAKE.fetch_add(1, Ordering::Relaxed);
}

/// This thread, counted by [`awake`], sleeps now (or is done).
pub fn asleep() {
    AWAKE.fetch_sub(1, Ordering::Relaxed);
}

/// Counts this thread among the [`AWAKE`] until dropped.
pub struct Awake(());

impl Awake {
    pub fn enter() -> Self {
        awake();
        Awake(())
    }
}

impl Drop for Awake {
    fn drop(&mut self) {
        asleep();
    }
}

/// How often the run queue is sampled for [`crowded`]: reading `/proc/loadavg` costs
/// 10–20 microseconds on a virtual machine (the kernel counts every CPU's runnable threads),
/// more than a round trip, so it is done by one waiter every so often. At a trickle (a wait
/// every 2 ms) a read every 10 ms would be one per 5 events, 2 % of the process's CPU; every
/// 50 ms it is one per 25. A crowd that comes meanwhile costs at most one lost spin
/// (`crate::spin`'s back-off takes it from there).
pub const CROWD_SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Whether the host's cores are crowded: the runnable threads that are not this process's
/// waiters (counted by [`awake`]; they give their core up within microseconds) are enough to
/// fill every core. A spin then cannot win: the thread it waits for, or the spinner itself,
/// queues behind a busy thread for a time slice. The caller must be counted by [`awake`]
/// (it is a waiter). The last sample holds for [`CROWD_SAMPLE_EVERY`]; where the run queue
/// cannot be read, never crowded.
pub fn crowded() -> bool {
    static CROWD: Crowd = Crowd::new();
    CROWD.crowded_at(
        now_nanos(),
        AWAKE.load(Ordering::Relaxed),
        cores(),
        runnable_threads,
    )
}

/// [`crowded`]'s last sample and when it was taken.
#[derive(Debug)]
struct Crowd {
    /// When ([`now_nanos`], at least 1), or 0 before the first.
    sampled_at: AtomicU64,
    crowded: AtomicBool,
}

impl Crowd {
    const fn new() -> Self {
        Crowd {
            sampled_at: AtomicU64::new(0),
            crowded: AtomicBool::new(false),
        }
    }

    /// Whether the cores are crowded at `now`. When the last sample is older than
    /// [`CROWD_SAMPLE_EVERY`], one caller takes a new one: `runnable()` threads on the whole
    /// host, `ours` of them this process's awake waiters (the caller among them).
    fn crowded_at(
        &self,
        now: u64,
        ours: usize,
        cores: usize,
        runnable: impl FnOnce() -> Option<usize>,
    ) -> bool {
        let at = self.sampled_at.load(Ordering::Relaxed);
        let stale = at == 0 || now.saturating_sub(at) >= nanos(CROWD_SAMPLE_EVERY);
        let sampler = stale
            && self
                .sampled_at
                .compare_exchange(at, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if !sampler {
            return self.crowded.load(Ordering::Relaxed);
        }
        let crowded = runnable().is_some_and(|n| n.saturating_sub(ours) >= cores);
        self.crowded.store(crowded, Ordering::Relaxed);
        crowded
    }
}

/// Cores this process may run on.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Runnable threads on the host now: the numerator of `/proc/loadavg`'s fourth field (read
/// with one `pread` of a descriptor kept open), or `None` where there is none.
fn runnable_threads() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::FileExt;
        static LOADAVG: OnceLock<Option<std::fs::File>> = OnceLock::new();
        let file = LOADAVG
            .get_or_init(|| std::fs::File::open("/proc/loadavg").ok())
            .as_ref()?;
        let mut buf = [0u8; 128];
        let len = file.read_at(&mut buf, 0).ok()?;
        parse_runnable(std::str::from_utf8(&buf[..len]).ok()?)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The runnable count of a `/proc/loadavg` line (`0.52 0.41 0.30 3/217 14570`: three load
/// averages, runnable/total scheduling entities, the last PID), or `None` if it is not one.
fn parse_runnable(loadavg: &str) -> Option<usize> {
    let (runnable, _total) = loadavg.split_whitespace().nth(3)?.split_once('/')?;
    runnable.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cores_are_crowded_when_threads_besides_our_waiters_fill_them() {
        let every = nanos(CROWD_SAMPLE_EVERY);
        let crowd = Crowd::new();
        // Two busy processes and a busy thread beside this waiter, on two cores.
        assert!(crowd.crowded_at(1, 1, 2, || Some(4)));
        // Within the sampling interval the sample holds; the run queue is not read.
        let unread = || -> Option<usize> { panic!("read within the interval") };
        assert!(crowd.crowded_at(every, 1, 2, unread));
        // Four callers and two I/O threads of ours, all awake: not crowded.
        assert!(!crowd.crowded_at(1 + every, 6, 2, || Some(6)));
        // One busy thread beside a waiter: a core is left (a stalled yield still tells).
        assert!(!crowd.crowded_at(1 + 2 * every, 1, 2, || Some(2)));
        // Two fill both cores.
        assert!(crowd.crowded_at(1 + 3 * every, 1, 2, || Some(3)));
        // Four cores make room for them.
        assert!(!crowd.crowded_at(1 + 4 * every, 1, 4, || Some(3)));
        // A run queue that cannot be read never stops a spin.
        assert!(!crowd.crowded_at(1 + 5 * every, 0, 1, || None));
    }

    #[test]
    fn a_trickle_of_waits_reads_the_run_queue_at_most_every_fifty_milliseconds() {
        // 500 events/s: an I/O thread about to park and a caller, each once per 2 ms.
        let crowd = Crowd::new();
        let reads = std::cell::Cell::new(0);
        let two_ms = nanos(Duration::from_millis(2));
        for event in 0..250u64 {
            for waiter in 0..2 {
                crowd.crowded_at(1 + event * two_ms + waiter * 1_000, 2, 2, || {
                    reads.set(reads.get() + 1);
                    Some(2)
                });
            }
        }
        // 500 ms of events: one read per 50 ms, not one per event.
        assert_eq!(reads.get(), 10);
    }

    #[test]
    fn the_runnable_count_is_read_from_loadavg_and_anything_else_is_none() {
        assert_eq!(parse_runnable("0.52 0.41 0.30 3/217 14570\n"), Some(3));
        assert_eq!(parse_runnable("8.27 6.94 4.23 10/217 14570"), Some(10));
        for bad in [
            "",
            "0.52 0.41 0.30",
            "0.52 0.41 0.30 3 217",
            "1 2 3 x/217 4",
        ] {
            assert_eq!(parse_runnable(bad), None, "{bad:?}");
        }
    }
}
