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
//! The two rules here:
//! - **Spin by yielding.** A waiter calls `sched_yield` between short rounds of checks: on a
//!   core of its own that returns at once, and on a shared core it hands the core to the
//!   thread it waits for, whose answer then comes in microseconds. So spinners do not starve
//!   the threads they wait for, and several may spin at once: four blocking producers on two
//!   cores go faster spinning together than taking turns to sleep. (A busy phase before the
//!   first yield, tried at 0.5 and 2 µs, halved a producer's rate beside a busy neighbour.)
//!   A yield that stalls hands the core to a thread that does not yield back (a busy
//!   neighbour, the kernel's write-back) for the rest of its time slice, and the scheduler
//!   never moves a thread that only yields: so after such a yield the spinner sleeps once,
//!   briefly, and the timer's wake-up places it on an idle core if there is one.
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

/// Spins until `done()` or until `window` has passed since `start`, yielding the core after
/// every [`CHECKS_PER_YIELD`] checks. Returns whether `done()` came true.
///
/// After a yield that stalled ([`STALLED_YIELD`]), the spinner sleeps once, briefly: a
/// spinner that only yields is never moved off a core it shares with a busy neighbour, and
/// each of its yields then costs a time slice, while the timer's wake-up places it on an
/// idle core if there is one.
pub fn spin_until(start: Instant, window: Duration, mut done: impl FnMut() -> bool) -> bool {
    loop {
        for _ in 0..CHECKS_PER_YIELD {
            if done() {
                return true;
            }
            std::hint::spin_loop();
        }
        let yielded = Instant::now();
        if yielded.duration_since(start) >= window {
            return done();
        }
        std::thread::yield_now();
        if yielded.elapsed() >= STALLED_YIELD {
            std::thread::sleep(Duration::from_micros(1));
        }
    }
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
}

impl Default for SpinHistory {
    fn default() -> Self {
        SpinHistory {
            pays: AtomicBool::new(true),
            slept_at: AtomicU64::new(0),
            needed: AtomicU32::new(1),
            next_needed: AtomicU32::new(1),
            short_sleeps: AtomicU32::new(0),
        }
    }
}

impl SpinHistory {
    /// Whether the next wait should spin.
    pub fn pays(&self) -> bool {
        self.pays.load(Ordering::Relaxed)
    }

    /// A spin ended: answered within the window, or not (the waiter sleeps next; the more
    /// unanswered spins came lately, the more short sleeps in a row it needs to spin again).
    pub fn spun(&self, answered: bool) {
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
}

/// An awaited request that keeps its task awake, for up to [`HURRY_WINDOW`], instead of
/// letting the runtime park its thread: it asks to be polled again at once (`wake_by_ref`,
/// yielding the core first), so a reply that comes within microseconds is found without the
/// tens of microseconds an epoll wake-up of the thread costs. The actor-face twin of the
/// blocking handle's spin, with its rules: it keeps awake only while that has been paying on
/// this thread, and only when it is the only such request on its thread (a caller with
/// requests pipelined has other work, and must not be kept polling one of them). Other tasks
/// of the thread still run between its polls.
pub struct Hurry<F> {
    inner: F,
    /// How long it keeps its task awake: [`HURRY_WINDOW`] outside tests.
    window: Duration,
    started: Option<Instant>,
    /// The `HURRYING` count of the thread that made it, until it ends.
    counted: Option<Arc<AtomicUsize>>,
    /// Still keeping its task awake.
    awake: bool,
}

impl<F> Hurry<F> {
    pub fn new(inner: F) -> Self {
        Self::within(inner, HURRY_WINDOW)
    }

    /// Keeps its task awake for up to `window` instead of [`HURRY_WINDOW`].
    fn within(inner: F, window: Duration) -> Self {
        let count = HURRYING.with(Arc::clone);
        count.fetch_add(1, Ordering::Relaxed);
        Hurry {
            inner,
            window,
            started: None,
            counted: Some(count),
            awake: true,
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
            if HURRY_PAYS.with(Cell::get) {
                if started.elapsed() < self.window {
                    std::thread::yield_now();
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                HURRY_PAYS.with(|p| p.set(false));
            }
        }
        self.awake = false;
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;

    #[test]
    fn a_spin_that_is_answered_returns_true_and_one_that_is_not_returns_false_after_its_window() {
        assert!(spin_until(Instant::now(), Duration::from_secs(60), || true));
        let start = Instant::now();
        let window = Duration::from_micros(200);
        assert!(!spin_until(start, window, || false));
        assert!(start.elapsed() >= window);
    }

    #[test]
    fn spinning_stops_after_an_unanswered_spin_and_resumes_after_a_short_sleep() {
        let history = SpinHistory::default();
        // Windows no preemption of the test thread between two clock reads outlasts.
        let window = Duration::from_secs(30);
        assert!(history.pays(), "a new waiter spins");
        history.spun(false);
        assert!(!history.pays());
        // A long sleep: the answer would not have come within the spin.
        history.sleeping();
        history.woke(now_nanos() + 60_000_000_000, window);
        assert!(!history.pays());
        // A short one: it would have.
        history.sleeping();
        history.woke(now_nanos(), window);
        assert!(history.pays());
        // A wake without a recorded sleep, or for an answer older than the sleep, changes
        // nothing.
        history.spun(false);
        history.woke(now_nanos(), window);
        assert!(!history.pays());
        let before = now_nanos();
        history.sleeping();
        history.woke(before.saturating_sub(1), window);
        assert!(!history.pays());
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
        history.spun(false);
        sleeps(&history, window, &[short]);
        assert!(history.pays(), "after one unanswered spin, one short sleep");
        history.spun(false);
        sleeps(&history, window, &[short]);
        assert!(
            !history.pays(),
            "after two in a row, one short sleep is not enough"
        );
        // A trickle: a short exchange, then a long pause, over and over.
        for _ in 0..10 {
            sleeps(&history, window, &[long, short]);
            assert!(!history.pays(), "a long sleep starts the count again");
        }
        sleeps(&history, window, &[short]);
        assert!(history.pays(), "two short sleeps in a row");
        history.spun(false);
        sleeps(&history, window, &[short, short, short]);
        assert!(!history.pays());
        sleeps(&history, window, &[short]);
        assert!(history.pays(), "after three, four short sleeps in a row");
        // Answered spins halve what the next unanswered one asks for (8 → 4 → 2).
        history.spun(true);
        history.spun(true);
        history.spun(false);
        sleeps(&history, window, &[short]);
        assert!(!history.pays());
        sleeps(&history, window, &[short]);
        assert!(history.pays());
        for _ in 0..20 {
            history.spun(false);
        }
        let needed = usize::try_from(MAX_SHORT_SLEEPS).expect("small");
        sleeps(&history, window, &vec![short; needed - 1]);
        assert!(!history.pays());
        sleeps(&history, window, &[short]);
        assert!(history.pays(), "never more than MAX_SHORT_SLEEPS");
    }

    #[test]
    fn a_hurried_request_alone_keeps_its_task_awake_and_one_among_others_does_not() {
        let (tx, rx) = oneshot::channel::<u8>();
        // A window no preemption of the test thread outlasts.
        let mut hurried = Hurry::within(rx, Duration::from_secs(60));
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
        let other = Hurry::within(rx2, Duration::from_secs(60));
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
