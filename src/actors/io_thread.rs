//! The broker's I/O threads: actix arbiters that run the partition actors, each with a
//! [`Doorbell`] that lets it spin briefly when it runs out of work instead of going to sleep.
//!
//! Why: a produce crosses threads twice (caller → partition → caller). On this kind of
//! (virtual) machine, waking a thread that sleeps in `epoll_wait` costs tens of microseconds,
//! ten times what the partition needs to append the record. A producer that sends its next
//! record right after the last reply finds the I/O thread still spinning and pays no wake-up.
//!
//! How: the arbiter's tokio runtime calls `Doorbell::idle` each time it is about to park.
//! That spins (yielding the core after its first microseconds: `crate::spin`) until the
//! doorbell rings or `idle_spin` has passed. Whoever sends an actor on this thread a message
//! that should be answered fast (a produce) rings it *after* the message is enqueued, so the
//! message's own wake-up has already been signalled and the runtime's park returns at once.
//! Other messages do not ring: they are handled when the spin ends, at most `idle_spin`
//! later. `idle_spin` of zero turns the spin off.
//!
//! The spin happens only while it pays: a spin that ended without a ring makes the next idle
//! sleep at once, and a sleep that ends within `idle_spin` (the runtime's unpark hook) turns
//! spinning back on. A trickle of messages costs a wake-up each and no spin. Nor does it
//! spin where it cannot win: after a yield that stalled, or while the host's run queue is
//! crowded (`crate::spin`).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::FutureExt;

use super::put_off::{keep, PutOff};
use crate::error::{Error, Result};
use crate::spin::{self, crowded, now_nanos, spin_until, SpinHistory};

/// Rung by senders of latency-sensitive messages; see the module docs.
#[derive(Debug)]
pub struct Doorbell {
    rings: AtomicU64,
    /// When the last ring came ([`now_nanos`]): a sleep that a ring ended within `idle_spin`
    /// would have been a paying spin.
    rung_at: AtomicU64,
    idle_spin: Duration,
    history: SpinHistory,
    /// The thread is counted among the waiters `spin::crowded` leaves out: from a wake-up of
    /// its runtime to its next park.
    awake: AtomicBool,
    /// Wake-ups of this thread's tasks put off to its next wake-up (`super::put_off`).
    pub put_off: Arc<PutOff>,
}

impl Doorbell {
    pub fn new(idle_spin: Duration) -> Self {
        Self::with_put_off(idle_spin, PutOff::default())
    }

    pub(crate) fn with_put_off(idle_spin: Duration, put_off: PutOff) -> Self {
        Doorbell {
            put_off: Arc::new(put_off),
            rings: AtomicU64::new(0),
            rung_at: AtomicU64::new(0),
            idle_spin,
            history: SpinHistory::default(),
            awake: AtomicBool::new(false),
        }
    }

    /// Tells the thread, if it is spinning, that a message is waiting for it.
    pub fn ring(&self) {
        if !self.idle_spin.is_zero() {
            self.rung_at.store(now_nanos(), Ordering::Relaxed);
            self.rings.fetch_add(1, Ordering::Release);
        }
    }

    /// Called by the runtime before it parks: returns when rung or after `idle_spin`, or at
    /// once while spinning has not been paying or cannot win.
    fn idle(&self) {
        // Put-off wake-ups are served now: work is queued, so no spin.
        if self.put_off.before_park() || self.idle_spin.is_zero() {
            return;
        }
        if !self.awake.load(Ordering::Relaxed) {
            // Running since before its first park: count it now, for the check below.
            self.awake.store(true, Ordering::Relaxed);
            spin::awake();
        }
        if self.history.pays(now_nanos()) && !crowded() {
            let seen = self.rings.load(Ordering::Acquire);
            let spun = spin_until(Instant::now(), self.idle_spin, || {
                self.rings.load(Ordering::Acquire) != seen
            });
            self.history.spun(spun, now_nanos());
            if spun.answered() {
                return;
            }
        }
        self.history.sleeping();
        self.awake.store(false, Ordering::Relaxed);
        spin::asleep();
    }

    /// Called by the runtime when it wakes from a park: judged by when the last ring came,
    /// not by when this thread got a core again (on a loaded host that can take far longer
    /// than the ring).
    fn woke(&self) {
        if self.idle_spin.is_zero() {
            return;
        }
        if !self.awake.swap(true, Ordering::Relaxed) {
            spin::awake();
        }
        let rung_at = self.rung_at.load(Ordering::Relaxed);
        self.history.woke(rung_at, self.idle_spin);
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // A runtime stopped while awake: it no longer waits for anyone.
        if *self.awake.get_mut() {
            spin::asleep();
        }
    }
}

thread_local! {
    /// Set on the threads the broker runs on (its System thread and the I/O threads).
    static BROKER_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as one the broker runs on (see [`on_broker_thread`]).
pub fn mark_broker_thread() {
    BROKER_THREAD.with(|flag| flag.set(true));
}

/// Whether this thread is one the broker itself runs on: code here must never wait for the
/// broker (it would wait for itself).
pub fn on_broker_thread() -> bool {
    BROKER_THREAD.with(std::cell::Cell::get)
}

/// One I/O thread: its arbiter and its doorbell. Stopping is the owner's job.
#[derive(Debug)]
pub struct IoThread {
    pub arbiter: Arbiter,
    pub doorbell: Arc<Doorbell>,
}

/// What a topic needs to place a partition on an I/O thread and ring it.
#[derive(Debug, Clone)]
pub struct IoThreadHandle {
    pub arbiter: ArbiterHandle,
    pub doorbell: Arc<Doorbell>,
}

impl IoThread {
    /// Starts an arbiter whose runtime spins up to `idle_spin` before parking. Must be called
    /// inside a running actix System.
    pub fn start(idle_spin: Duration) -> io::Result<Self> {
        Self::start_with(Doorbell::new(idle_spin))
    }

    pub(crate) fn start_with(doorbell: Doorbell) -> io::Result<Self> {
        let doorbell = Arc::new(doorbell);
        let (parking, waking) = (doorbell.clone(), doorbell.clone());
        let arbiter = Arbiter::try_with_tokio_rt(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .on_thread_park(move || parking.idle())
                .on_thread_unpark(move || waking.woke())
                .build()
        })?;
        arbiter.spawn_fn(mark_broker_thread);
        arbiter.spawn(keep(doorbell.put_off.clone()));
        Ok(IoThread { arbiter, doorbell })
    }

    pub fn handle(&self) -> IoThreadHandle {
        IoThreadHandle {
            arbiter: self.arbiter.handle(),
            doorbell: self.doorbell.clone(),
        }
    }
}

/// An actor's address on an I/O thread, with that thread (its arbiter and doorbell). Every
/// message goes through it, and each send rings the doorbell after the message is enqueued:
/// a thread that spins while idle then handles it at once instead of when its spin ends.
/// `PartitionRef` and `CoordinatorRef` are its two kinds.
#[derive(Debug)]
pub struct Rung<A: Actor> {
    addr: Addr<A>,
    io: IoThreadHandle,
}

impl<A: Actor> Clone for Rung<A> {
    fn clone(&self) -> Self {
        Rung {
            addr: self.addr.clone(),
            io: self.io.clone(),
        }
    }
}

impl<A: Actor<Context = Context<A>>> Rung<A> {
    pub fn new(addr: Addr<A>, io: IoThreadHandle) -> Self {
        Rung { addr, io }
    }

    /// The address itself (a message sent through it does not ring).
    pub fn addr(&self) -> &Addr<A> {
        &self.addr
    }

    /// The I/O thread the actor runs on.
    pub fn io(&self) -> &IoThreadHandle {
        &self.io
    }

    /// Sends `msg` (enqueued before this returns) and rings the doorbell.
    pub fn send<M>(&self, msg: M) -> Request<A, M>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
    {
        let request = self.addr.send(msg);
        self.io.doorbell.ring();
        request
    }

    /// Sends `msg` without waiting for room or a reply, and rings the doorbell.
    pub fn do_send<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
    {
        self.addr.do_send(msg);
        self.io.doorbell.ring();
    }

    /// Sends `msg` now (see [`Rung::send`]) and flattens a closed mailbox into
    /// `BrokerStopped`.
    pub fn ask<M, T>(&self, msg: M) -> impl std::future::Future<Output = Result<T>> + 'static
    where
        M: Message<Result = Result<T>> + Send + 'static,
        T: Send + 'static,
        A: Handler<M>,
    {
        // A combinator, not an `async` block, which would hold the request twice.
        self.send(msg).map(|answer| {
            answer
                .map_err(|_| Error::BrokerStopped)
                .and_then(|answer| answer)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_ends_the_idle_spin_early() {
        let bell = Arc::new(Doorbell::new(Duration::from_secs(60)));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ringer = {
            let (bell, done) = (bell.clone(), done.clone());
            // Rings until the spin has returned: a ring before the spin starts is not seen.
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    bell.ring();
                    std::thread::yield_now();
                }
            })
        };
        let start = Instant::now();
        bell.idle();
        done.store(true, Ordering::Release);
        ringer.join().expect("ringer");
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the ring was missed"
        );
    }

    #[test]
    fn zero_idle_spin_never_spins() {
        let bell = Doorbell::new(Duration::ZERO);
        bell.ring();
        assert_eq!(bell.rings.load(Ordering::Relaxed), 0);
        bell.idle();
    }
}
