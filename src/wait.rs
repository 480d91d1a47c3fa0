//! `block_on` for the blocking handle: polls a request's future on the calling thread and,
//! between polls, waits for its wake-up by spinning briefly, then yielding, then parking.
//!
//! Why not `futures::executor::block_on`: it parks at once, and on this kind of (virtual)
//! machine a parked thread takes tens of microseconds to be woken, far longer than a
//! partition takes to answer a produce. A reply that arrives while the caller still spins
//! costs no system call and no wake-up. The spin is bounded ([`SPIN_ROUNDS`] and
//! [`YIELD_ROUNDS`], a few tens of microseconds), so a caller waiting for an fsync or a long
//! poll parks as before and burns no CPU.

use std::future::Future;
use std::hint::spin_loop;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

/// Busy rounds (each a few `spin_loop` hints) before yielding.
const SPIN_ROUNDS: u32 = 64;
/// `yield_now` rounds before parking.
const YIELD_ROUNDS: u32 = 64;

/// Wakes the waiting thread: sets the flag, then unparks (a no-op syscall-wise unless the
/// thread is already parked).
struct ThreadWaker {
    woken: AtomicBool,
    thread: Thread,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// How a caller expects to wait for its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Patience {
    /// A round trip (a produce, a commit, a poll that does not wait): spin briefly first.
    Spin,
    /// A long poll, which usually waits for data to come: park at once, leaving the cores to
    /// the threads that must run to produce it.
    Park,
}

/// Runs `future` to completion on this thread, spinning first (see [`Patience::Spin`]).
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    block_on_with(future, Patience::Spin)
}

/// Runs `future` to completion on this thread, waiting between polls as `patience` says.
pub(crate) fn block_on_with<F: Future>(future: F, patience: Patience) -> F::Output {
    let mut future = pin!(future);
    let signal = Arc::new(ThreadWaker {
        woken: AtomicBool::new(false),
        thread: thread::current(),
    });
    let waker = Waker::from(Arc::clone(&signal));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        wait(&signal.woken, patience);
    }
}

/// Threads spinning in [`wait`] right now.
static SPINNERS: AtomicUsize = AtomicUsize::new(0);

/// How many threads may spin at once: all cores but one, which is left to the broker's
/// threads (spinning callers would otherwise slow down the very thread that answers them).
fn max_spinners() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| thread::available_parallelism().map_or(1, |n| n.get()) - 1)
}

/// Returns once `woken` is set (and clears it): spin, then yield, then park. Only
/// [`max_spinners`] threads spin at a time, and only for [`Patience::Spin`]; the others park
/// at once.
fn wait(woken: &AtomicBool, patience: Patience) {
    let spinning = patience == Patience::Spin
        && SPINNERS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max_spinners()).then_some(n + 1)
            })
            .is_ok();
    let mut round = if spinning {
        0
    } else {
        SPIN_ROUNDS + YIELD_ROUNDS
    };
    while !woken.swap(false, Ordering::Acquire) {
        if round < SPIN_ROUNDS {
            for _ in 0..(1 << (round / 8).min(6)) {
                spin_loop();
            }
        } else if round < SPIN_ROUNDS + YIELD_ROUNDS {
            thread::yield_now();
        } else {
            if round == SPIN_ROUNDS + YIELD_ROUNDS && spinning {
                SPINNERS.fetch_sub(1, Ordering::AcqRel);
            }
            // Spurious unparks are fine: the flag is checked again.
            thread::park();
        }
        round = round.saturating_add(1);
    }
    if spinning && round <= SPIN_ROUNDS + YIELD_ROUNDS {
        SPINNERS.fetch_sub(1, Ordering::AcqRel);
    }
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
    fn a_ready_future_needs_no_wake() {
        assert_eq!(block_on(async { 3 }), 3);
    }
}
