//! How the broker's threads and its blocking callers wait for one another without wasting
//! cores: spin only while spinning pays, and spin by yielding.
//!
//! Why spin at all: waking a thread that sleeps costs tens of microseconds on a virtual
//! machine, ten times what a partition needs to append a record, so a caller producing one
//! record at a time is several times faster when neither end sleeps between calls.
//!
//! Why spinning hurt: a spinner holds a core. When more threads spin than there are cores
//! (a caller and two I/O threads on two cores, or a busy neighbour taking one core), the
//! thread that has the work to do waits for a spinner's time slice to end, and one record
//! costs milliseconds instead of microseconds.
//!
//! The three rules here:
//! - **Spin by yielding.** A waiter calls `sched_yield` between short rounds of checks: on a
//!   core of its own that returns at once, and on a shared core it hands the core to the
//!   thread it waits for, whose answer then comes in microseconds. So spinners do not starve
//!   the threads they wait for, and several may spin at once: four blocking producers on two
//!   cores go faster spinning together than taking turns to sleep. (A busy phase before the
//!   first yield, tried at 0.5 and 2 µs, halved a producer's rate beside a busy neighbour.)
//! - **Never spin where a spin cannot win.** A yield hands the core to a thread that does not
//!   yield it back (a busy neighbour, another process, the kernel's write-back) for the rest
//!   of that thread's time slice, milliseconds, while a waiter that sleeps is woken within
//!   tens of microseconds, ahead of busy threads (the scheduler favours a thread that slept).
//!   So a spin stops at the first yield that stalls ([`Spun::Lost`]) and its waiter does not
//!   spin again for a while ([`LOST_SPIN_BACKOFF`], doubling while spins keep losing, up to
//!   [`MAX_LOST_SPIN_BACKOFF`]); and no spin starts while the scheduler's run queue
//!   holds as many runnable threads as there are cores besides this process's waiters, which
//!   give their cores up within microseconds ([`crowded`], sampled from `/proc/loadavg` at
//!   most every [`crowd::CROWD_SAMPLE_EVERY`]).
//! - **Spin only when it pays.** A [`SpinHistory`] remembers whether the last wait was
//!   answered within the spin window. When it was not, the next wait sleeps at once; when
//!   sleeps turn out to have been short (the answer came within the window after all),
//!   spinning is tried again. How many short sleeps in a row that takes doubles with every
//!   spin no answer ended (up to [`MAX_SHORT_SLEEPS`]) and halves with every one an answer
//!   did. So a trickle of records (a few thousand per second) costs a wake-up each and no
//!   spin, even where each record brings a short exchange (a produce, then a commit and the
//!   next poll microseconds apart) before a long pause; and a tight loop of calls spins and
//!   never sleeps.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

mod crowd;

pub use crowd::{asleep, awake, crowded, Awake};

/// Checks of a spin between two yields (a `spin_loop` hint after each).
const CHECKS_PER_YIELD: u32 = 16;

/// Nanoseconds since a process-wide origin: a timestamp that fits an atomic.
pub fn now_nanos() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A `sched_yield` that took this long gave the core to a thread that does not yield it
/// back (a busy neighbour) for the rest of that thread's time slice.
const STALLED_YIELD: Duration = Duration::from_micros(500);

/// How a spin ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spun {
    /// `done()` came true within the window.
    Answered,
    /// The window passed first.
    Unanswered,
    /// A yield stalled ([`STALLED_YIELD`]): the core went to a thread that does not give it
    /// back, so spinning cannot win here, and the spin ended at once. `answered` tells
    /// whether `done()` was true by then.
    Lost { answered: bool },
}

impl Spun {
    /// Whether `done()` came true (and the waiter has its answer).
    pub fn answered(self) -> bool {
        matches!(self, Spun::Answered | Spun::Lost { answered: true })
    }
}

/// Spins until `done()` or until `window` has passed since `start`, yielding the core after
/// every [`CHECKS_PER_YIELD`] checks; a yield that stalls ends the spin ([`Spun::Lost`]).
pub fn spin_until(start: Instant, window: Duration, done: impl FnMut() -> bool) -> Spun {
    spin_yielding(start, window, done, std::thread::yield_now)
}

/// [`spin_until`] with its yield passed in (tests stall it).
fn spin_yielding(
    start: Instant,
    window: Duration,
    mut done: impl FnMut() -> bool,
    yield_now: impl Fn(),
) -> Spun {
    loop {
        for _ in 0..CHECKS_PER_YIELD {
            if done() {
                return Spun::Answered;
            }
            std::hint::spin_loop();
        }
        let yielded = Instant::now();
        if yielded.duration_since(start) >= window {
            return match done() {
                true => Spun::Answered,
                false => Spun::Unanswered,
            };
        }
        yield_now();
        if yielded.elapsed() >= STALLED_YIELD {
            return Spun::Lost { answered: done() };
        }
    }
}

/// How long a waiter whose spin was lost ([`Spun::Lost`]) waits without spinning, whatever
/// its sleeps show, after a lost spin that followed a won one: about a time slice, what the
/// lost spin cost. A host whose yields stall now and then (a vCPU taken away for a moment)
/// then costs the waiter little spinning.
pub const LOST_SPIN_BACKOFF: Duration = Duration::from_millis(2);

/// The longest such wait: each lost spin that comes right after one doubles the wait, up
/// to this. A spin tried this seldom where it keeps losing takes a time slice in sixty-four.
pub const MAX_LOST_SPIN_BACKOFF: Duration = Duration::from_millis(128);

/// When a waiter whose spins were lost may spin again: [`LOST_SPIN_BACKOFF`], doubled by
/// each lost spin after the last one that was not, up to [`MAX_LOST_SPIN_BACKOFF`].
#[derive(Debug, Default)]
struct LostBackoff {
    /// No spin before this ([`now_nanos`]).
    until: AtomicU64,
    /// What the next lost spin waits, in nanoseconds (0: [`LOST_SPIN_BACKOFF`]).
    next: AtomicU64,
}

impl LostBackoff {
    fn allows(&self, now: u64) -> bool {
        now >= self.until.load(Ordering::Relaxed)
    }

    /// A spin ended at `now`: lost, or not.
    fn spun(&self, lost: bool, now: u64) {
        if !lost {
            self.next.store(0, Ordering::Relaxed);
            return;
        }
        let wait = self
            .next
            .load(Ordering::Relaxed)
            .max(nanos(LOST_SPIN_BACKOFF));
        self.until
            .store(now.saturating_add(wait), Ordering::Relaxed);
        let next = wait.saturating_mul(2).min(nanos(MAX_LOST_SPIN_BACKOFF));
        self.next.store(next, Ordering::Relaxed);
    }
}

pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The most short sleeps in a row a [`SpinHistory`] asks for before it spins again: after
/// many unanswered spins, one in this many exchanges is still tried.
pub const MAX_SHORT_SLEEPS: u32 = 64;

/// Whether spinning has been paying for one waiter (a caller thread, an I/O thread); see the
/// module docs. The waiter records each wait's outcome; anyone may read it.
#[derive(Debug)]
pub struct SpinHistory {
    /// The last wait was answered within the window (or no wait has happened yet).
    pays: AtomicBool,
    /// When the waiter went to sleep without spinning ([`now_nanos`]), or 0 when awake.
    slept_at: AtomicU64,
    /// Short sleeps in a row needed before spinning again.
    needed: AtomicU32,
    /// What the next unanswered spin sets `needed` to: doubled by each (up to
    /// [`MAX_SHORT_SLEEPS`]), halved by each answered spin, never below 1.
    next_needed: AtomicU32,
    /// Short sleeps in a row since spinning stopped (a long one starts the count again).
    short_sleeps: AtomicU32,
    /// After lost spins: when spinning may resume.
    lost: LostBackoff,
}

impl Default for SpinHistory {
    fn default() -> Self {
        SpinHistory {
            pays: AtomicBool::new(true),
            slept_at: AtomicU64::new(0),
            needed: AtomicU32::new(1),
            next_needed: AtomicU32::new(1),
            short_sleeps: AtomicU32::new(0),
            lost: LostBackoff::default(),
        }
    }
}

impl SpinHistory {
    /// Whether a wait starting at `now` ([`now_nanos`]) should spin, as far as this waiter's
    /// own spins tell (the host's run queue is [`crowded`]'s to tell).
    pub fn pays(&self, now: u64) -> bool {
        self.pays.load(Ordering::Relaxed) && self.lost.allows(now)
    }

    /// A spin ended at `now` ([`now_nanos`]). Unanswered, the waiter sleeps next, and the
    /// more unanswered spins came lately, the more short sleeps in a row it needs to spin
    /// again; lost, it also does not spin for a while ([`LostBackoff`]), answered or not.
    pub fn spun(&self, spun: Spun, now: u64) {
        self.lost.spun(matches!(spun, Spun::Lost { .. }), now);
        let answered = spun == Spun::Answered;
        let next = self.next_needed.load(Ordering::Relaxed);
        if answered {
            self.next_needed.store((next / 2).max(1), Ordering::Relaxed);
        } else {
            self.needed.store(next, Ordering::Relaxed);
            self.next_needed
                .store((next * 2).min(MAX_SHORT_SLEEPS), Ordering::Relaxed);
        }
        self.short_sleeps.store(0, Ordering::Relaxed);
        self.pays.store(answered, Ordering::Relaxed);
    }

    /// The waiter goes to sleep now; [`SpinHistory::woke`] tells how long it slept.
    pub fn sleeping(&self) {
        self.slept_at.store(now_nanos().max(1), Ordering::Relaxed);
    }

    /// The waiter woke after [`SpinHistory::sleeping`], for an answer given `at` ([`now_nanos`]):
    /// an answer within `window` of the sleep would have ended a spin. Once enough such short
    /// sleeps came in a row, the next wait spins again. (When the waiter got its core back
    /// does not count: on a loaded host that can be long after the answer.)
    pub fn woke(&self, at: u64, window: Duration) {
        let slept_at = self.slept_at.swap(0, Ordering::Relaxed);
        // An answer from before the sleep (a ring that came before it) says nothing.
        if slept_at == 0 || at < slept_at {
            return;
        }
        if Duration::from_nanos(at - slept_at) >= window {
            self.short_sleeps.store(0, Ordering::Relaxed);
            return;
        }
        let short = self.short_sleeps.load(Ordering::Relaxed) + 1;
        if short >= self.needed.load(Ordering::Relaxed) {
            self.short_sleeps.store(0, Ordering::Relaxed);
            self.pays.store(true, Ordering::Relaxed);
        } else {
            self.short_sleeps.store(short, Ordering::Relaxed);
        }
    }
}

/// How long an awaited request ([`Hurry`]) keeps its task awake for the answer.
pub const HURRY_WINDOW: Duration = Duration::from_micros(50);

thread_local! {
    /// [`Hurry`] futures made on this thread and not finished (shared, so that one finished on
    /// another thread of a work-stealing runtime still counts itself out here).
    static HURRYING: Arc<AtomicUsize> = Arc::default();
    /// Whether this thread's hurried requests have been answered within the window.
    static HURRY_PAYS: Cell<bool> = const { Cell::new(true) };
    /// When a request may be kept awake on this thread again after a yield between its polls
    /// stalled.
    static HURRY_LOST: LostBackoff = LostBackoff::default();
}

/// An awaited request that keeps its task awake, for up to [`HURRY_WINDOW`], instead of
/// letting the runtime park its thread: it asks to be polled again at once (`wake_by_ref`,
/// yielding the core first), so a reply that comes within microseconds is found without the
/// tens of microseconds an epoll wake-up of the thread costs. The actor-face twin of the
/// blocking handle's spin, with its rules: it keeps awake only while that has been paying on
/// this thread, and only when it is the only such request on its thread (a caller with
/// requests pipelined has other work, and must not be kept polling one of them), and never
/// where it cannot win (a yield that stalled, a [`crowded`] host). Other tasks of the thread
/// still run between its polls.
pub struct Hurry<F> {
    inner: F,
    /// How long it keeps its task awake: [`HURRY_WINDOW`] outside tests.
    window: Duration,
    started: Option<Instant>,
    /// The `HURRYING` count of the thread that made it, until it ends.
    counted: Option<Arc<AtomicUsize>>,
    /// Still keeping its task awake.
    awake: bool,
    /// Where it learns whether it can win: [`HOST`] outside tests.
    host: Host,
}

/// What a [`Hurry`] asks of the host: whether it is [`crowded`], and a yield of the core.
#[derive(Clone, Copy)]
struct Host {
    crowded: fn() -> bool,
    yield_now: fn(),
}

const HOST: Host = Host {
    crowded: || {
        // The task's thread waits too while it keeps awake: not one of the crowd.
        let _waiting = Awake::enter();
        crowded()
    },
    yield_now: std::thread::yield_now,
};

impl<F> Hurry<F> {
    pub fn new(inner: F) -> Self {
        Self::within(inner, HURRY_WINDOW, HOST)
    }

    /// Keeps its task awake for up to `window` instead of [`HURRY_WINDOW`], asking `host`.
    fn within(inner: F, window: Duration, host: Host) -> Self {
        let count = HURRYING.with(Arc::clone);
        count.fetch_add(1, Ordering::Relaxed);
        Hurry {
            inner,
            window,
            started: None,
            counted: Some(count),
            awake: true,
            host,
        }
    }

    fn uncount(&mut self) {
        if let Some(count) = self.counted.take() {
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether it is the only one in flight on this thread (and was made on it).
    fn alone(&self) -> bool {
        let Some(count) = &self.counted else {
            return false;
        };
        HURRYING.with(|here| Arc::ptr_eq(here, count)) && count.load(Ordering::Relaxed) == 1
    }
}

impl<F> Drop for Hurry<F> {
    fn drop(&mut self) {
        self.uncount();
    }
}

impl<F: Future + Unpin> Future for Hurry<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Only a request alone on its thread is timed: one of many in flight never keeps its
        // task awake, and reading the clock twice per request would be its largest cost.
        if self.started.is_none() && self.awake {
            match self.alone() {
                true => self.started = Some(Instant::now()),
                false => self.awake = false,
            }
        }
        if let Poll::Ready(output) = Pin::new(&mut self.inner).poll(cx) {
            // Answered within the window, awake or not: keeping awake pays.
            if self.started.is_some_and(|s| s.elapsed() < self.window) {
                HURRY_PAYS.with(|p| p.set(true));
            }
            self.uncount();
            return Poll::Ready(output);
        }
        if let Some(started) = self.started.filter(|_| self.awake && self.alone()) {
            if HURRY_PAYS.with(Cell::get) && self.may_hurry() {
                if started.elapsed() < self.window {
                    let yielded = Instant::now();
                    (self.host.yield_now)();
                    let lost = yielded.elapsed() >= STALLED_YIELD;
                    HURRY_LOST.with(|l| l.spun(lost, now_nanos()));
                    if !lost {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                } else {
                    HURRY_PAYS.with(|p| p.set(false));
                }
            }
        }
        self.awake = false;
        Poll::Pending
    }
}

impl<F> Hurry<F> {
    /// Whether it may keep its task awake now: no yield of this thread's stalled lately and
    /// the host is not crowded.
    fn may_hurry(&self) -> bool {
        HURRY_LOST.with(|l| l.allows(now_nanos())) && !(self.host.crowded)()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;

    #[test]
    fn a_spin_ends_answered_when_done_and_unanswered_after_its_window() {
        let spun = spin_until(Instant::now(), Duration::from_secs(60), || true);
        assert_eq!(spun, Spun::Answered);
        let start = Instant::now();
        let window = Duration::from_micros(200);
        // A yield that returns at once: one that stalls is the next test's.
        let spun = spin_yielding(start, window, || false, || {});
        assert_eq!(spun, Spun::Unanswered);
        assert!(start.elapsed() >= window);
    }

    #[test]
    fn a_yield_that_stalls_ends_the_spin_at_once_as_lost() {
        let start = Instant::now();
        // A yield that hands the core to a busy thread for the rest of its time slice.
        let stalled = || std::thread::sleep(STALLED_YIELD);
        let spun = spin_yielding(start, Duration::from_secs(60), || false, stalled);
        assert_eq!(spun, Spun::Lost { answered: false });
        assert!(start.elapsed() < Duration::from_secs(30), "spun on");
        let mut checks = 0;
        let late = || {
            checks += 1;
            checks > CHECKS_PER_YIELD
        };
        let spun = spin_yielding(Instant::now(), Duration::from_secs(60), late, stalled);
        assert_eq!(spun, Spun::Lost { answered: true });
        assert!(
            spun.answered(),
            "the answer that came during the stall is taken"
        );
    }

    #[test]
    fn a_lost_spin_stops_spinning_for_the_backoff_whatever_the_sleeps_show() {
        let history = SpinHistory::default();
        let window = Duration::from_secs(30);
        let now = now_nanos();
        let backoff = nanos(LOST_SPIN_BACKOFF);
        history.spun(Spun::Lost { answered: true }, now);
        assert!(
            !history.pays(now),
            "a lost spin, even answered, does not pay"
        );
        // Short sleeps, as many as any unanswered spin needs: they would restart spinning.
        let needed = usize::try_from(MAX_SHORT_SLEEPS).expect("small");
        sleeps(&history, window, &vec![Duration::ZERO; needed]);
        assert!(!history.pays(now + backoff - 1), "within the backoff");
        assert!(history.pays(now + backoff), "after it");
    }

    #[test]
    fn each_lost_spin_in_a_row_doubles_the_backoff_up_to_a_bound_and_a_won_one_resets_it() {
        let backoff = LostBackoff::default();
        let (min, max) = (nanos(LOST_SPIN_BACKOFF), nanos(MAX_LOST_SPIN_BACKOFF));
        let mut now = 1;
        let mut wait = min;
        for _ in 0..12 {
            backoff.spun(true, now);
            assert!(!backoff.allows(now + wait - 1), "shorter than {wait} ns");
            assert!(backoff.allows(now + wait));
            now += wait;
            wait = (wait * 2).min(max);
        }
        assert_eq!(wait, max, "bounded");
        backoff.spun(false, now);
        backoff.spun(true, now);
        assert!(backoff.allows(now + min), "a won spin starts it over");
    }

    #[test]
    fn spinning_stops_after_an_unanswered_spin_and_resumes_after_a_short_sleep() {
        let history = SpinHistory::default();
        // Windows no preemption of the test thread between two clock reads outlasts.
        let window = Duration::from_secs(30);
        assert!(history.pays(now_nanos()), "a new waiter spins");
        history.spun(Spun::Unanswered, now_nanos());
        assert!(!history.pays(now_nanos()));
        // A long sleep: the answer would not have come within the spin.
        history.sleeping();
        history.woke(now_nanos() + 60_000_000_000, window);
        assert!(!history.pays(now_nanos()));
        // A short one: it would have.
        history.sleeping();
        history.woke(now_nanos(), window);
        assert!(history.pays(now_nanos()));
        // A wake without a recorded sleep, or for an answer older than the sleep, changes
        // nothing.
        history.spun(Spun::Unanswered, now_nanos());
        history.woke(now_nanos(), window);
        assert!(!history.pays(now_nanos()));
        let before = now_nanos();
        history.sleeping();
        history.woke(before.saturating_sub(1), window);
        assert!(!history.pays(now_nanos()));
    }

    /// Sleeps of `history` answered after `after` each.
    fn sleeps(history: &SpinHistory, window: Duration, after: &[Duration]) {
        for &after in after {
            history.sleeping();
            let answered = now_nanos() + u64::try_from(after.as_nanos()).expect("short");
            history.woke(answered, window);
        }
    }

    #[test]
    fn each_unanswered_spin_doubles_the_short_sleeps_in_a_row_needed_to_spin_again() {
        let (window, short, long) = (
            Duration::from_secs(30),
            Duration::ZERO,
            Duration::from_secs(60),
        );
        let history = SpinHistory::default();
        history.spun(Spun::Unanswered, now_nanos());
        sleeps(&history, window, &[short]);
        assert!(
            history.pays(now_nanos()),
            "after one unanswered spin, one short sleep"
        );
        history.spun(Spun::Unanswered, now_nanos());
        sleeps(&history, window, &[short]);
        assert!(
            !history.pays(now_nanos()),
            "after two in a row, one short sleep is not enough"
        );
        // A trickle: a short exchange, then a long pause, over and over.
        for _ in 0..10 {
            sleeps(&history, window, &[long, short]);
            assert!(
                !history.pays(now_nanos()),
                "a long sleep starts the count again"
            );
        }
        sleeps(&history, window, &[short]);
        assert!(history.pays(now_nanos()), "two short sleeps in a row");
        history.spun(Spun::Unanswered, now_nanos());
        sleeps(&history, window, &[short, short, short]);
        assert!(!history.pays(now_nanos()));
        sleeps(&history, window, &[short]);
        assert!(
            history.pays(now_nanos()),
            "after three, four short sleeps in a row"
        );
        // Answered spins halve what the next unanswered one asks for (8 → 4 → 2).
        history.spun(Spun::Answered, now_nanos());
        history.spun(Spun::Answered, now_nanos());
        history.spun(Spun::Unanswered, now_nanos());
        sleeps(&history, window, &[short]);
        assert!(!history.pays(now_nanos()));
        sleeps(&history, window, &[short]);
        assert!(history.pays(now_nanos()));
        for _ in 0..20 {
            history.spun(Spun::Unanswered, now_nanos());
        }
        let needed = usize::try_from(MAX_SHORT_SLEEPS).expect("small");
        sleeps(&history, window, &vec![short; needed - 1]);
        assert!(!history.pays(now_nanos()));
        sleeps(&history, window, &[short]);
        assert!(
            history.pays(now_nanos()),
            "never more than MAX_SHORT_SLEEPS"
        );
    }

    #[test]
    fn a_hurried_request_alone_keeps_its_task_awake_and_one_among_others_does_not() {
        let (tx, rx) = oneshot::channel::<u8>();
        // A window no preemption of the test thread outlasts.
        let mut hurried = Hurry::within(rx, Duration::from_secs(60), QUIET);
        let woken = std::sync::Arc::new(AtomicBool::new(false));
        let waker = waker_setting(woken.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut hurried).poll(&mut cx).is_pending());
        assert!(
            woken.swap(false, Ordering::SeqCst),
            "asks to be polled again"
        );
        // A second request on this thread: the first stops asking.
        let (_tx2, rx2) = oneshot::channel::<u8>();
        let other = Hurry::within(rx2, Duration::from_secs(60), QUIET);
        assert!(Pin::new(&mut hurried).poll(&mut cx).is_pending());
        assert!(!woken.swap(false, Ordering::SeqCst));
        drop(other);
        tx.send(7).unwrap();
        assert!(matches!(
            Pin::new(&mut hurried).poll(&mut cx),
            Poll::Ready(Ok(7))
        ));
        drop(hurried);
        assert_eq!(
            HURRYING.with(|n| n.load(Ordering::Relaxed)),
            0,
            "every request is uncounted"
        );
    }

    /// A host with cores to spare, whose yields return at once.
    const QUIET: Host = Host {
        crowded: || false,
        yield_now: || {},
    };

    #[test]
    fn a_hurried_request_does_not_keep_its_task_awake_where_it_cannot_win() {
        let woken = std::sync::Arc::new(AtomicBool::new(false));
        let waker = waker_setting(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let window = Duration::from_secs(60);
        // A crowded run queue.
        let crowded = Host {
            crowded: || true,
            ..QUIET
        };
        let (_tx, rx) = oneshot::channel::<u8>();
        let mut hurried = Hurry::within(rx, window, crowded);
        assert!(Pin::new(&mut hurried).poll(&mut cx).is_pending());
        assert!(
            !woken.swap(false, Ordering::SeqCst),
            "kept awake on a crowded host"
        );
        drop(hurried);
        // A yield that stalls: this request stops asking, and so does the next on the thread.
        let stalling = Host {
            yield_now: || std::thread::sleep(STALLED_YIELD),
            ..QUIET
        };
        let (_tx, rx) = oneshot::channel::<u8>();
        let mut hurried = Hurry::within(rx, window, stalling);
        assert!(Pin::new(&mut hurried).poll(&mut cx).is_pending());
        assert!(
            !woken.swap(false, Ordering::SeqCst),
            "kept awake after a stall"
        );
        drop(hurried);
        let (_tx, rx) = oneshot::channel::<u8>();
        let mut next = Hurry::within(rx, window, QUIET);
        assert!(Pin::new(&mut next).poll(&mut cx).is_pending());
        assert!(
            !woken.swap(false, Ordering::SeqCst),
            "kept awake within LOST_SPIN_BACKOFF of a stall"
        );
    }

    fn waker_setting(flag: std::sync::Arc<AtomicBool>) -> std::task::Waker {
        struct Flag(std::sync::Arc<AtomicBool>);
        impl std::task::Wake for Flag {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        std::task::Waker::from(std::sync::Arc::new(Flag(flag)))
    }
}
