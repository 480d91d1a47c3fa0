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
//! spinning back on. A trickle of messages costs a wake-up each and no spin.
//!
//! **Wake-ups put off** ([`Unhurried`]). Some answers need not wake the thread: a push
//! subscriber's answer to a batch that was not full can wait until the thread wakes for
//! something else (the next produce, a timer), within a bound. Such a future's wake-up is
//! kept by the doorbell instead of waking the thread, and delivered when the thread next
//! unparks or is about to park; a timer of its own makes it wake the thread by itself once
//! the bound has passed. At a steady few hundred events a second this saves the thread one
//! wake-up per event.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use actix::prelude::*;

use crate::error::{Error, Result};
use crate::spin::{now_nanos, spin_until, SpinHistory};

/// Rung by senders of latency-sensitive messages; see the module docs.
#[derive(Debug)]
pub struct Doorbell {
    rings: AtomicU64,
    /// When the last ring came ([`now_nanos`]): a sleep that a ring ended within `idle_spin`
    /// would have been a paying spin.
    rung_at: AtomicU64,
    idle_spin: Duration,
    history: SpinHistory,
    /// Wake-ups put off until this thread wakes anyway ([`Unhurried`]).
    put_off: Mutex<Vec<Waker>>,
    /// Whether `put_off` may hold any (read without the lock on every park and unpark).
    any_put_off: AtomicBool,
}

impl Doorbell {
    pub fn new(idle_spin: Duration) -> Self {
        Doorbell {
            rings: AtomicU64::new(0),
            rung_at: AtomicU64::new(0),
            idle_spin,
            history: SpinHistory::default(),
            put_off: Mutex::new(Vec::new()),
            any_put_off: AtomicBool::new(false),
        }
    }

    /// Keeps `waker` until this thread next unparks or is about to park (see [`Unhurried`]).
    fn put_off(&self, waker: Waker) {
        let mut put_off = self.put_off.lock().unwrap_or_else(|e| e.into_inner());
        put_off.push(waker);
        self.any_put_off.store(true, Ordering::Release);
    }

    /// Wakes what was put off; returns whether there was any.
    fn wake_put_off(&self) -> bool {
        if !self.any_put_off.swap(false, Ordering::Acquire) {
            return false;
        }
        let wakers = {
            let mut put_off = self.put_off.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::take(&mut *put_off)
        };
        let any = !wakers.is_empty();
        wakers.into_iter().for_each(Waker::wake);
        any
    }

    /// Wake-ups put off and not yet delivered.
    #[cfg(test)]
    fn put_off_len(&self) -> usize {
        self.put_off.lock().map(|w| w.len()).unwrap_or(0)
    }

    /// Tells the thread, if it is spinning, that a message is waiting for it.
    pub fn ring(&self) {
        if !self.idle_spin.is_zero() {
            self.rung_at.store(now_nanos(), Ordering::Relaxed);
            self.rings.fetch_add(1, Ordering::Release);
        }
    }

    /// Called by the runtime before it parks: returns when rung or after `idle_spin`, or at
    /// once while spinning has not been paying or when a wake-up put off was delivered (the
    /// park then returns at once).
    fn idle(&self) {
        if self.wake_put_off() || self.idle_spin.is_zero() {
            return;
        }
        if self.history.pays() {
            let seen = self.rings.load(Ordering::Acquire);
            let rung = spin_until(Instant::now(), self.idle_spin, || {
                self.rings.load(Ordering::Acquire) != seen
            });
            self.history.spun(rung);
            if rung {
                return;
            }
        }
        self.history.sleeping();
    }

    /// Called by the runtime when it wakes from a park: judged by when the last ring came,
    /// not by when this thread got a core again (on a loaded host that can take far longer
    /// than the ring).
    fn woke(&self) {
        self.wake_put_off();
        let rung_at = self.rung_at.load(Ordering::Relaxed);
        self.history.woke(rung_at, self.idle_spin);
    }
}

thread_local! {
    /// The doorbell of the I/O thread this is; none on any other thread.
    static DOORBELL: RefCell<Option<Arc<Doorbell>>> = const { RefCell::new(None) };
}

/// A future whose wake-ups wait until its I/O thread wakes for something else, at most
/// `within` after it was made; from then on it wakes the thread as any future does. Off an
/// I/O thread (or with no bound) it is the future itself. See the module docs.
///
/// For answers whose only urgency is bounded: what it awaits may be seen up to `within`
/// late, never lost.
pub struct Unhurried<F> {
    inner: Pin<Box<F>>,
    /// Until it has passed, wake-ups are put off; `None` once it has (or when there is no
    /// doorbell).
    deadline: Option<(Pin<Box<actix_rt::time::Sleep>>, Arc<Doorbell>)>,
}

impl<F: Future> Unhurried<F> {
    /// `inner`, its wake-ups put off for up to `within` when made on an I/O thread.
    pub fn new(inner: F, within: Option<Duration>) -> Self {
        let doorbell = DOORBELL.with(|bell| bell.borrow().clone());
        let deadline = within
            .zip(doorbell)
            .map(|(within, bell)| (Box::pin(actix_rt::time::sleep(within)), bell));
        Unhurried {
            inner: Box::pin(inner),
            deadline,
        }
    }
}

/// The waker an [`Unhurried`] polls its future with: hands the task's waker to the doorbell.
struct PutOff {
    task: Waker,
    doorbell: Arc<Doorbell>,
}

impl Wake for PutOff {
    fn wake(self: Arc<Self>) {
        self.doorbell.put_off(self.task.clone());
    }
}

impl<F: Future> Future for Unhurried<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        if let Some((deadline, doorbell)) = &mut this.deadline {
            if deadline.as_mut().poll(cx).is_pending() {
                let waker = Waker::from(Arc::new(PutOff {
                    task: cx.waker().clone(),
                    doorbell: doorbell.clone(),
                }));
                return this
                    .inner
                    .as_mut()
                    .poll(&mut TaskContext::from_waker(&waker));
            }
            this.deadline = None;
        }
        this.inner.as_mut().poll(cx)
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
        let doorbell = Arc::new(Doorbell::new(idle_spin));
        let (parking, waking) = (doorbell.clone(), doorbell.clone());
        let arbiter = Arbiter::try_with_tokio_rt(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .on_thread_park(move || parking.idle())
                .on_thread_unpark(move || waking.woke())
                .build()
        })?;
        let bell = doorbell.clone();
        arbiter.spawn_fn(move || {
            mark_broker_thread();
            DOORBELL.with(|own| *own.borrow_mut() = Some(bell));
        });
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
        let request = self.send(msg);
        async move { request.await.map_err(|_| Error::BrokerStopped)? }
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

    /// Makes this thread's doorbell `bell`, as an I/O thread's start does, but without its
    /// runtime's hooks: only the test calls `bell.woke()`.
    fn ring_with(bell: &Arc<Doorbell>) {
        DOORBELL.with(|own| *own.borrow_mut() = Some(bell.clone()));
    }

    /// Spawns a task on this thread awaiting an [`Unhurried`] oneshot put off `within`; returns
    /// the sender that answers it and a receiver told when the task has seen the answer,
    /// once the task has been polled and is waiting.
    async fn waiting_task(
        within: Duration,
    ) -> (
        futures::channel::oneshot::Sender<()>,
        futures::channel::oneshot::Receiver<()>,
    ) {
        let (answer, answered) = futures::channel::oneshot::channel::<()>();
        let (seen_tx, seen) = futures::channel::oneshot::channel();
        let (polled_tx, polled) = futures::channel::oneshot::channel();
        actix_rt::spawn(async move {
            let mut answer = Unhurried::new(answered, Some(within));
            assert!(futures::poll!(&mut answer).is_pending());
            let _ = polled_tx.send(());
            answer.await.expect("answered");
            let _ = seen_tx.send(());
        });
        polled.await.expect("first poll");
        (answer, seen)
    }

    #[test]
    fn a_wake_up_put_off_comes_with_the_threads_next_wake_up() {
        actix_rt::System::new().block_on(async {
            let bell = Arc::new(Doorbell::new(Duration::ZERO));
            ring_with(&bell);
            let (answer, mut seen) = waiting_task(Duration::from_secs(3600)).await;
            answer.send(()).expect("waiting");
            // The answer came, but its wake-up was kept: the task is not run for it.
            assert_eq!(bell.put_off_len(), 1);
            for _ in 0..10 {
                actix_rt::task::yield_now().await;
            }
            assert_eq!(seen.try_recv(), Ok(None), "woken without the thread waking");
            // The thread wakes (for anything): the kept wake-up is delivered.
            bell.woke();
            assert_eq!(bell.put_off_len(), 0);
            seen.await.expect("delivered with the next wake-up");
        });
    }

    #[test]
    fn a_wake_up_put_off_is_delivered_before_the_thread_parks() {
        actix_rt::System::new().block_on(async {
            let bell = Arc::new(Doorbell::new(Duration::from_secs(60)));
            ring_with(&bell);
            let (answer, seen) = waiting_task(Duration::from_secs(3600)).await;
            answer.send(()).expect("waiting");
            // About to park with a wake-up kept: it is delivered, and the idle spin (60 s
            // here) is skipped, since there is work.
            let start = Instant::now();
            bell.idle();
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "spun with work waiting"
            );
            seen.await.expect("delivered before parking");
        });
    }

    #[test]
    fn a_wake_up_put_off_wakes_the_thread_itself_once_its_bound_has_passed() {
        actix_rt::System::new().block_on(async {
            let bell = Arc::new(Doorbell::new(Duration::ZERO));
            ring_with(&bell);
            let (answer, seen) = waiting_task(Duration::from_millis(20)).await;
            answer.send(()).expect("waiting");
            // Nothing calls `woke` here: only the bound's own timer can deliver it.
            actix_rt::time::timeout(Duration::from_secs(30), seen)
                .await
                .expect("delivered by its deadline")
                .expect("seen");
        });
    }

    #[test]
    fn off_an_io_thread_nothing_is_put_off() {
        actix_rt::System::new().block_on(async {
            let (answer, seen) = waiting_task(Duration::from_secs(3600)).await;
            answer.send(()).expect("waiting");
            actix_rt::time::timeout(Duration::from_secs(30), seen)
                .await
                .expect("woken at once")
                .expect("seen");
        });
    }

    #[test]
    fn a_wake_up_put_off_on_a_running_io_thread_is_never_lost() {
        actix_rt::System::new().block_on(async {
            let io = IoThread::start(Duration::ZERO).expect("I/O thread");
            let (answer, answered) = futures::channel::oneshot::channel::<()>();
            let (seen_tx, seen) = std::sync::mpsc::channel();
            io.arbiter.spawn(async move {
                Unhurried::new(answered, Some(Duration::from_secs(3600)))
                    .await
                    .expect("answered");
                let _ = seen_tx.send(());
            });
            answer.send(()).expect("waiting");
            // Put off or not (a race with the thread's park), the next wake-up delivers it.
            io.arbiter.spawn(async {});
            seen.recv_timeout(Duration::from_secs(30))
                .expect("delivered");
            io.arbiter.stop();
        });
    }

    #[test]
    fn zero_idle_spin_never_spins() {
        let bell = Doorbell::new(Duration::ZERO);
        bell.ring();
        assert_eq!(bell.rings.load(Ordering::Relaxed), 0);
        bell.idle();
    }
}
