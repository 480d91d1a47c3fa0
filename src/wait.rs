//! `block_on` for the blocking handle: polls a request's future on the calling thread and,
//! between polls, waits for its wake-up by spinning briefly, then yielding, then parking.
//!
//! Why not `futures::executor::block_on`: it parks at once, and on this kind of (virtual)
//! machine a parked thread takes tens of microseconds to be woken, far longer than a
//! partition takes to answer a produce. A reply that arrives while the caller still spins
//! costs no system call and no wake-up. The spin is bounded ([`SPIN_WINDOW`], longer for a
//! batch to append: [`Patience::append`]), yields the core between short rounds of checks,
//! and is skipped while this thread's spins have not been paying or cannot win (a yield that
//! stalled, a crowded host: see `crate::spin`); a caller waiting for an fsync or a long poll
//! parks and burns no CPU. A long poll's thread is woken early, by the producer as it sends
//! an append to a partition the poll waits at (or by the partition as the append arrives),
//! and spins the rest of the way (see
//! [`block_on_with`] and [`EarlyWake`]).

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crate::spin::{self, crowded, now_nanos, spin_until, SpinHistory};

/// `BlockingInActorContext` on a thread inside a running runtime (an actix System or
/// Arbiter thread, or tokio), where blocking would stall or deadlock it: every blocking call
/// checks this before it waits. A thread whose System has already stopped is fine.
pub(crate) fn refuse_actix_thread() -> crate::Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(crate::Error::BlockingInActorContext);
    }
    Ok(())
}

/// How long a caller spins for its reply before it sleeps. A produce is answered within a
/// few microseconds by a partition thread that is awake, and within tens when it must first
/// be woken: both fit.
const SPIN_WINDOW: Duration = Duration::from_micros(50);

/// Bytes a partition thread appends per microsecond, at least (a 110 kB batch: about 35 µs
/// of `pwrite` and CRC on this kind of machine): what a batch adds to [`SPIN_WINDOW`].
const APPEND_BYTES_PER_MICRO: usize = 2048;

/// The longest spin for a batch. A batch whose append takes longer than this is answered
/// after a sleep: its wake-up, tens of microseconds, is then a small part of its time.
const MAX_SPIN_WINDOW: Duration = Duration::from_micros(150);

thread_local! {
    /// The waker of the long poll this thread is polling (`Patience::Park`), while it polls
    /// it: see [`long_poll_waker`].
    static LONG_POLL_WAKER: std::cell::RefCell<Option<Waker>> =
        const { std::cell::RefCell::new(None) };
    /// Whether this thread's spins have been paying (see `crate::spin`).
    static HISTORY: SpinHistory = SpinHistory::default();
    /// Whether this thread is counted among the waiters `spin::crowded` leaves out.
    static CALLER: Caller = const { Caller(std::cell::Cell::new(false)) };
}

/// A blocking caller's thread counts among the waiters `spin::crowded` leaves out from its
/// first call until it parks, and again once it wakes: between two calls it runs its own
/// code, and comes back to wait within microseconds in the loops that make spinning pay. (A
/// caller that goes off to compute for long after a call is taken for a waiter until it next
/// parks; a yield of a spin beside it that stalls still tells.)
struct Caller(std::cell::Cell<bool>);

impl Caller {
    fn awake(&self) {
        if !self.0.replace(true) {
            spin::awake();
        }
    }

    fn asleep(&self) {
        if self.0.replace(false) {
            spin::asleep();
        }
    }
}

impl Drop for Caller {
    /// The thread ends.
    fn drop(&mut self) {
        self.asleep();
    }
}

/// Wakes the waiting thread: notes when, sets the flag, then unparks (a no-op syscall-wise
/// unless the thread is already parked).
struct ThreadWaker {
    woken: AtomicBool,
    /// When the last wake came ([`now_nanos`]).
    woken_at: AtomicU64,
    thread: Thread,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken_at.store(now_nanos(), Ordering::Relaxed);
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// How a caller expects to wait for its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Patience {
    /// A round trip (a produce, a commit, a poll that does not wait): spin up to this long
    /// first.
    Spin(Duration),
    /// A long poll, which usually waits for data to come: park at once, leaving the cores to
    /// the threads that must run to produce it.
    Park,
}

impl Patience {
    /// A round trip that writes or reads little: spin up to [`SPIN_WINDOW`].
    pub(crate) const ROUND_TRIP: Patience = Patience::Spin(SPIN_WINDOW);

    /// A produce of `bytes`: the partition thread's append of a large batch takes longer
    /// than a round trip, and a caller who stopped spinning just before its answer would pay
    /// a wake-up per batch. The window grows with the bytes ([`APPEND_BYTES_PER_MICRO`]), up
    /// to [`MAX_SPIN_WINDOW`].
    pub(crate) fn append(bytes: usize) -> Patience {
        let append = Duration::from_micros((bytes / APPEND_BYTES_PER_MICRO) as u64);
        Patience::Spin((SPIN_WINDOW + append).min(MAX_SPIN_WINDOW))
    }
}

/// Runs `future` to completion on this thread, spinning first (see [`Patience::ROUND_TRIP`]).
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    block_on_with(future, Patience::ROUND_TRIP)
}

/// Runs `future` to completion on this thread, waiting between polls as `patience` says.
///
/// A long poll (`Patience::Park`) makes its waker available to the requests it sends
/// ([`long_poll_waker`]), so that an append sent to a partition it waits at can wake this
/// thread at once, before it is written and the poll answered: woken with no answer yet, the
/// thread spins for it ([`Patience::ROUND_TRIP`]) before it parks again. Waking a parked
/// thread costs tens of microseconds on a virtual machine; this way they pass while the
/// partition's thread wakes and writes.
pub(crate) fn block_on_with<F: Future>(future: F, patience: Patience) -> F::Output {
    CALLER.with(Caller::awake);
    let mut future = pin!(future);
    let signal = Arc::new(ThreadWaker {
        woken: AtomicBool::new(false),
        woken_at: AtomicU64::new(0),
        thread: thread::current(),
    });
    let waker = Waker::from(Arc::clone(&signal));
    let mut cx = Context::from_waker(&waker);
    let mut next = patience;
    loop {
        let polled = match patience {
            Patience::Park => poll_long_poll(future.as_mut(), &mut cx),
            Patience::Spin(_) => future.as_mut().poll(&mut cx),
        };
        if let Poll::Ready(output) = polled {
            return output;
        }
        wait(&signal, next);
        // Woken without an answer from a park: most likely early, by a partition (see
        // above), so the answer is on its way.
        next = match (patience, next) {
            (Patience::Park, Patience::Park) => Patience::ROUND_TRIP,
            _ => patience,
        };
    }
}

/// Polls a long poll's `future` with its waker available to the requests it sends (see
/// [`long_poll_waker`]).
fn poll_long_poll<F: Future>(future: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
    let outer = LONG_POLL_WAKER.with(|w| w.replace(Some(cx.waker().clone())));
    let polled = future.poll(cx);
    LONG_POLL_WAKER.with(|w| *w.borrow_mut() = outer);
    polled
}

/// The waker of the blocking long poll this thread is polling, if it is polling one: a
/// request it sends may hand it to the partitions it waits at (`PollPause::early_wake`).
pub(crate) fn long_poll_waker() -> Option<Waker> {
    LONG_POLL_WAKER.with(|w| w.borrow().clone())
}

/// A long poll's early wake-up for one round of its waits (`WaitForData::early_wake`): the
/// poll's waker, woken at most once however many partitions, and their producers, fire it.
/// A second early wake would end the thread's spin for an answer that is on its way and
/// make it park again ([`block_on_with`]), so the first one to fire spends it.
#[derive(Debug, Clone)]
pub struct EarlyWake(Arc<EarlyWakeState>);

#[derive(Debug)]
struct EarlyWakeState {
    spent: AtomicBool,
    waker: Waker,
}

impl EarlyWake {
    pub fn new(waker: Waker) -> Self {
        EarlyWake(Arc::new(EarlyWakeState {
            spent: AtomicBool::new(false),
            waker,
        }))
    }

    /// Wakes the poll's thread, unless this was fired before.
    pub fn fire(&self) {
        if !self.0.spent.swap(true, Ordering::AcqRel) {
            self.0.waker.wake_by_ref();
        }
    }
}

/// Threads spinning in [`wait`] right now.
static SPINNERS: AtomicUsize = AtomicUsize::new(0);

/// How many threads may spin at once: four per core. Spinners yield the core between checks
/// (see `crate::spin`), so they do not keep the broker's threads from answering them; the
/// bound only keeps a crowd of callers from turning the spin windows into a core's worth of
/// `sched_yield` calls.
fn max_spinners() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| thread::available_parallelism().map_or(1, |n| n.get()) * 4)
}

/// Returns once `signal` is woken (and clears it): spin (see `crate::spin`), then park. Only
/// [`max_spinners`] threads spin at a time, only for [`Patience::Spin`], only while this
/// thread's spins have been paying, and never while the host is `crowded`; the others park
/// at once.
fn wait(signal: &ThreadWaker, patience: Patience) {
    let Patience::Spin(window) = patience else {
        CALLER.with(Caller::asleep);
        // Spurious unparks are fine: the flag is checked again.
        while !signal.woken.swap(false, Ordering::Acquire) {
            thread::park();
        }
        CALLER.with(Caller::awake);
        return;
    };
    let woken = || signal.woken.swap(false, Ordering::Acquire);
    let start = Instant::now();
    if HISTORY.with(|h| h.pays(now_nanos())) && !crowded() && take_spin_slot() {
        let spun = spin_until(start, window, woken);
        SPINNERS.fetch_sub(1, Ordering::AcqRel);
        HISTORY.with(|h| h.spun(spun, now_nanos()));
        if spun.answered() {
            return;
        }
    }
    HISTORY.with(SpinHistory::sleeping);
    CALLER.with(Caller::asleep);
    while !woken() {
        thread::park();
    }
    CALLER.with(Caller::awake);
    let at = signal.woken_at.load(Ordering::Relaxed);
    HISTORY.with(|h| h.woke(at, window));
}

/// Takes one of the [`max_spinners`] slots, if one is free.
fn take_spin_slot() -> bool {
    SPINNERS
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max_spinners()).then_some(n + 1)
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn replies_before_and_after_the_spin_both_wake_the_caller() {
        // At once (caught while spinning) and late (after the caller has parked).
        for delay in [Duration::ZERO, Duration::from_millis(50)] {
            let (tx, rx) = futures::channel::oneshot::channel();
            let sender = thread::spawn(move || {
                thread::sleep(delay);
                tx.send(7).expect("receiver alive");
            });
            assert_eq!(block_on(rx), Ok(7));
            sender.join().expect("sender");
        }
        let (tx, rx) = futures::channel::oneshot::channel();
        let sender = thread::spawn(move || tx.send(8).expect("receiver alive"));
        assert_eq!(block_on_with(rx, Patience::Park), Ok(8));
        sender.join().expect("sender");
        assert_eq!(
            SPINNERS.load(Ordering::Acquire),
            0,
            "spin slots are given back"
        );
    }

    #[test]
    fn a_large_batch_spins_longer_for_its_append_up_to_a_bound() {
        let window = |bytes| match Patience::append(bytes) {
            Patience::Spin(window) => window,
            Patience::Park => panic!("a produce of {bytes} B parks at once"),
        };
        assert_eq!(window(100), SPIN_WINDOW, "a record is a round trip");
        // 1000 records of 100 B: about 35 µs of pwrite and CRC on top of the round trip.
        let batch = window(110_000);
        assert!(
            batch >= SPIN_WINDOW + Duration::from_micros(50),
            "{batch:?} for 110 kB"
        );
        assert!(window(220_000) > batch);
        assert_eq!(window(1 << 30), MAX_SPIN_WINDOW);
    }

    #[test]
    fn a_ready_future_needs_no_wake() {
        assert_eq!(block_on(async { 3 }), 3);
    }

    /// A long poll's requests can take its waker; one woken early, before its answer, keeps
    /// waiting and returns the answer. Round trips and code outside a poll get no waker.
    #[test]
    fn a_long_poll_woken_early_waits_on_for_its_answer() {
        assert!(long_poll_waker().is_none(), "outside a poll");
        assert!(
            block_on(async { long_poll_waker().is_none() }),
            "a round trip"
        );
        let answer = block_on_with(
            async {
                let waker = long_poll_waker().expect("a long poll's waker");
                let (answer, answered) = futures::channel::oneshot::channel();
                let sender = thread::spawn(move || {
                    waker.wake_by_ref(); // early: no answer yet
                    thread::sleep(Duration::from_millis(20));
                    answer.send(9).expect("receiver alive");
                });
                let answer = answered.await;
                sender.join().expect("sender");
                answer
            },
            Patience::Park,
        );
        assert_eq!(answer, Ok(9));
        assert!(long_poll_waker().is_none(), "cleared after the poll");
    }

    /// What an append to a partition does to a blocking long poll parked there: besides the
    /// answer's wake-up, the poll's thread gets one as the append arrives, before it is
    /// written (without it, one wake-up in all); the poll returns the record.
    #[test]
    fn an_append_wakes_a_parked_blocking_long_poll_early() {
        use crate::{NanoKafka, TopicConfig};
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
        broker.create_topic("t", TopicConfig::default()).unwrap();
        broker.join_group("t", "g", "m").unwrap();
        // A produce and a first poll teach the handle the topic's and the group's actors;
        // later polls go to them directly, and only those can be woken early.
        broker.produce_raw("t", None, b"first".to_vec()).unwrap();
        let first = broker.poll_batch_raw("t", "g", "m", 10, Duration::ZERO);
        assert_eq!(first.unwrap().len(), 1);
        broker.commit("t", "g", 0, 0).unwrap();
        let handle = broker.async_handle();
        let poll = handle.poll_batch_raw("t", "g", "m", 10, Duration::from_secs(10));
        let (records, wakes) = woken_by_an_append(&broker, poll);
        let records = records.unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].value, b"hello");
        assert!(wakes >= 2, "{wakes} wake-up(s): no early one");
    }

    /// Polls `poll` (a blocking long poll's, its waker available to its requests) until it
    /// waits at partition 0 of `t`, produces `hello` there, and drives it to its answer;
    /// returns the answer and the wake-ups its waker got.
    fn woken_by_an_append<T>(
        broker: &crate::NanoKafka,
        poll: impl Future<Output = T>,
    ) -> (T, usize) {
        let wakes = Arc::new(CountingWaker::default());
        let waker = Waker::from(Arc::clone(&wakes));
        let mut cx = Context::from_waker(&waker);
        let mut poll = pin!(poll);
        assert!(
            poll_long_poll(poll.as_mut(), &mut cx).is_pending(),
            "nothing to read yet"
        );
        while broker.stats().unwrap().topics["t"].partitions[0].parked_polls == 0 {
            thread::yield_now();
        }
        broker.produce_raw("t", None, b"hello".to_vec()).unwrap();
        let answer = loop {
            let seen = wakes.count.load(Ordering::Acquire);
            if let Poll::Ready(answer) = poll.as_mut().poll(&mut cx) {
                break answer;
            }
            while wakes.count.load(Ordering::Acquire) == seen {
                thread::yield_now();
            }
        };
        (answer, wakes.count.load(Ordering::Acquire))
    }

    /// The same for a `Consumer`'s long poll (its direct route, `ConsumerPollGroup`).
    #[test]
    fn an_append_wakes_a_parked_blocking_consumer_poll_early() {
        use crate::messages::ConsumerPoll;
        use crate::{NanoKafka, TopicConfig};
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
        broker.create_topic("t", TopicConfig::default()).unwrap();
        let assignment = broker.join_group("t", "g", "m").unwrap();
        // A produce and a first poll teach the handle the topic's and the group's actors.
        broker.produce_raw("t", None, b"first".to_vec()).unwrap();
        let first = broker.poll_batch_raw("t", "g", "m", 10, Duration::ZERO);
        assert_eq!(first.unwrap().len(), 1);
        let handle = broker.async_handle();
        let poll = ConsumerPoll {
            topic: "t".into(),
            group: "g".into(),
            member: "m".into(),
            generation: assignment.generation,
            positions: [(0, 1)].into(),
            max_records: 10,
            wait: Some(Duration::from_secs(10)),
        };
        let (batch, wakes) = woken_by_an_append(&broker, handle.consumer_poll_fetched(poll));
        let fetched = batch.unwrap().fetched.expect("the record");
        assert_eq!(fetched.to_raw()[0].value, b"hello");
        assert!(wakes >= 2, "{wakes} wake-up(s): no early one");
    }

    #[derive(Default)]
    struct CountingWaker {
        count: AtomicUsize,
    }

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
    }
}
