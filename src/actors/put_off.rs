//! Put-off wake-ups: a task on an I/O thread that another thread answers (a subscriber's
//! `Ack` to its subscription) is not woken at once but at the thread's next wake-up, or at
//! most [`PutOff::bound`] later.
//!
//! Why: at a trickle the I/O thread wakes for every produce anyway, and each extra wake-up of
//! a thread parked in `epoll_wait` costs tens of microseconds of CPU on a virtual machine,
//! far more than the work it brings. An answer that nothing waits on at once (a commit, the
//! next poll of a partition no record reached yet) can ride along with the next produce.
//!
//! How: [`put_off_wake`] wraps the future the task awaits and hands it a waker that, instead of
//! waking the task, lists its waker here. The thread serves the list (wakes them, from the
//! thread itself: no cross-thread wake-up) every time it is about to park
//! (`Doorbell::idle`), and a keeper task on the thread ([`keep`]) serves it when a timer of
//! [`PutOff::bound`] runs out. The keeper keeps that timer only while put-off wake-ups come
//! (it is *armed*); after [`PutOff::quiet`] without one it disarms, and the thread parks
//! with no timeout again: an idle broker costs nothing. A wake-up listed while the keeper is
//! disarmed wakes the keeper at once (a plain cross-thread wake-up), which serves it and
//! arms.
//!
//! Order closes the race with a disarming keeper: a lister sets `pending` and then reads
//! `armed`; the keeper clears `armed` and then reads `pending` (all sequentially
//! consistent), so either the keeper serves what was listed or the lister sees it disarmed
//! and wakes it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures::task::AtomicWaker;

use crate::spin::{nanos, now_nanos};

/// How long a put-off wake-up may wait for the thread's next wake-up.
pub const PUT_OFF_BOUND: Duration = Duration::from_millis(5);

/// How long without a put-off wake-up before the keeper disarms.
pub const PUT_OFF_QUIET: Duration = Duration::from_millis(100);

/// One I/O thread's put-off wake-ups; see the module docs.
#[derive(Debug)]
pub struct PutOff {
    listed: Mutex<Vec<Waker>>,
    /// `listed` may hold wake-ups: checked before every park.
    pending: AtomicBool,
    /// The keeper keeps its timer: a listed wake-up is served within `bound` without a wake.
    armed: AtomicBool,
    /// The keeper is asked to serve now (and arm).
    kicked: AtomicBool,
    keeper: AtomicWaker,
    /// When the last wake-up was listed ([`now_nanos`]).
    listed_at: AtomicU64,
    /// Times the keeper's timer ran out (each a wake-up of the thread).
    expired: AtomicU64,
    bound: Duration,
    quiet: Duration,
    /// Pre-park checks that found nothing listed: a test gives an answer only after one,
    /// so that nothing but the thread's next wake-up may serve it.
    #[cfg(test)]
    quiet_checks: AtomicU64,
}

impl Default for PutOff {
    fn default() -> Self {
        PutOff::new(PUT_OFF_BOUND, PUT_OFF_QUIET)
    }
}

impl PutOff {
    pub fn new(bound: Duration, quiet: Duration) -> Self {
        PutOff {
            listed: Mutex::default(),
            pending: AtomicBool::new(false),
            armed: AtomicBool::new(false),
            kicked: AtomicBool::new(false),
            keeper: AtomicWaker::new(),
            listed_at: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            bound,
            quiet,
            #[cfg(test)]
            quiet_checks: AtomicU64::new(0),
        }
    }

    /// The longest a put-off wake-up waits while nothing else wakes the thread.
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// Whether the keeper keeps its timer (put-off wake-ups came within `quiet`).
    pub fn armed(&self) -> bool {
        self.armed.load(Ordering::SeqCst)
    }

    /// Lists `waker` to be woken by the thread; wakes the keeper if it is disarmed.
    fn list(&self, waker: Waker) {
        self.listed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(waker);
        self.listed_at.store(now_nanos(), Ordering::Relaxed);
        self.pending.store(true, Ordering::SeqCst);
        if !self.armed.load(Ordering::SeqCst) {
            self.kick();
        }
    }

    /// Called by the thread before it parks: with wake-ups listed, the keeper serves them
    /// (woken from this thread, so the park returns at once). Returns whether it did.
    pub fn before_park(&self) -> bool {
        if !self.pending.load(Ordering::Relaxed) {
            #[cfg(test)]
            self.quiet_checks.fetch_add(1, Ordering::Release);
            return false;
        }
        self.kick();
        true
    }

    fn kick(&self) {
        self.kicked.store(true, Ordering::SeqCst);
        self.keeper.wake();
    }

    /// Wakes every listed wake-up; returns how many.
    fn serve(&self) -> usize {
        if !self.pending.swap(false, Ordering::SeqCst) {
            return 0;
        }
        let listed = std::mem::take(&mut *self.listed.lock().unwrap_or_else(|p| p.into_inner()));
        let served = listed.len();
        listed.into_iter().for_each(Waker::wake);
        served
    }

    /// Ready once kicked (the kick is taken).
    fn kicked(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| {
            self.keeper.register(cx.waker());
            match self.kicked.swap(false, Ordering::SeqCst) {
                true => Poll::Ready(()),
                false => Poll::Pending,
            }
        })
    }

    /// No wake-up listed for `quiet`.
    fn is_quiet(&self) -> bool {
        now_nanos().saturating_sub(self.listed_at.load(Ordering::Relaxed)) >= nanos(self.quiet)
    }
}

/// The keeper task of an I/O thread's [`PutOff`]; runs until the thread stops.
pub async fn keep(put_off: Arc<PutOff>) {
    /// A stopped keeper serves nobody: listers wake their tasks themselves.
    struct Disarm<'a>(&'a PutOff);
    impl Drop for Disarm<'_> {
        fn drop(&mut self) {
            self.0.armed.store(false, Ordering::SeqCst);
            self.0.serve();
        }
    }
    let _disarm = Disarm(&put_off);
    loop {
        put_off.kicked().await;
        put_off.armed.store(true, Ordering::SeqCst);
        loop {
            put_off.serve();
            let timer = tokio::time::sleep(put_off.bound);
            tokio::pin!(timer);
            let kicked = put_off.kicked();
            tokio::pin!(kicked);
            let expired = futures::future::select(timer, kicked).await;
            if matches!(expired, futures::future::Either::Right(_)) {
                continue;
            }
            put_off.expired.fetch_add(1, Ordering::Relaxed);
            if put_off.serve() == 0 && put_off.is_quiet() {
                put_off.armed.store(false, Ordering::SeqCst);
                put_off.serve();
                break;
            }
        }
    }
}

/// `inner`, its wake-ups put off (see the module docs) when `put_off` is given; as it is
/// otherwise. Only for a task that runs on `put_off`'s thread.
pub async fn put_off_wake<F: Future>(inner: F, put_off: Option<Arc<PutOff>>) -> F::Output {
    let mut inner = std::pin::pin!(inner);
    let Some(put_off) = put_off else {
        return inner.await;
    };
    // The waker handed to `inner`, made again only when the task's changes.
    let mut listed: Option<(Waker, Waker)> = None;
    std::future::poll_fn(|cx| {
        let task = cx.waker();
        let waker = match &listed {
            Some((of, waker)) if of.will_wake(task) => waker,
            _ => {
                let waker = Waker::from(Arc::new(Listed {
                    task: task.clone(),
                    put_off: put_off.clone(),
                }));
                &listed.insert((task.clone(), waker)).1
            }
        };
        inner.as_mut().poll(&mut Context::from_waker(waker))
    })
    .await
}

/// The waker [`put_off_wake`] polls its future with.
struct Listed {
    task: Waker,
    put_off: Arc<PutOff>,
}

impl Wake for Listed {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.put_off.list(self.task.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::io_thread::{Doorbell, IoThread};
    use std::sync::mpsc;
    use std::time::Instant;

    /// A future on the I/O thread that waits until [`Answer::give`]: as a subscriber's answer
    /// the subscription awaits.
    #[derive(Default)]
    struct Answer {
        given: AtomicBool,
        waker: Mutex<Option<Waker>>,
        /// The thread's quiet pre-park checks when the task last polled the answer.
        checks_at_poll: AtomicU64,
    }

    impl Answer {
        fn wait(self: &Arc<Self>, put_off: Arc<PutOff>) -> impl Future<Output = ()> {
            let answer = self.clone();
            std::future::poll_fn(move |cx| {
                let checks = put_off.quiet_checks.load(Ordering::Acquire);
                answer.checks_at_poll.store(checks, Ordering::SeqCst);
                *answer.waker.lock().unwrap() = Some(cx.waker().clone());
                match answer.given.load(Ordering::SeqCst) {
                    true => Poll::Ready(()),
                    false => Poll::Pending,
                }
            })
        }

        /// Gives the answer from this thread once the waiting task has polled it.
        fn give(&self) {
            let waker = self.polled();
            self.given.store(true, Ordering::SeqCst);
            waker.wake();
        }

        /// [`Answer::give`], once the thread has also checked for put-off wake-ups after that
        /// poll and found none: it parks without looking again, so only its next wake-up can
        /// serve the answer. (Given earlier, the answer may be found by the check that
        /// follows the poll, on the same wake-up.)
        fn give_once_parking(&self, put_off: &PutOff) {
            let waker = self.polled();
            let polled_at = self.checks_at_poll.load(Ordering::SeqCst);
            until(|| put_off.quiet_checks.load(Ordering::Acquire) > polled_at);
            self.given.store(true, Ordering::SeqCst);
            waker.wake();
        }

        /// The waker of the task's last poll, once it has polled.
        fn polled(&self) -> Waker {
            let mut waker = None;
            until(|| {
                waker = self.waker.lock().unwrap().take();
                waker.is_some()
            });
            waker.expect("polled")
        }
    }

    /// Yields until `done` (at most 10 s).
    fn until(mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "never happened");
            std::thread::yield_now();
        }
    }

    /// Spawns a task on `io` that awaits an answer with its wake-ups put off; the receiver
    /// gets a message once it is done.
    fn awaiting(io: &IoThread) -> (Arc<Answer>, mpsc::Receiver<()>) {
        let answer = Arc::new(Answer::default());
        let (done, finished) = mpsc::channel();
        let put_off = io.doorbell.put_off.clone();
        let waited = answer.wait(put_off.clone());
        io.arbiter.spawn(async move {
            put_off_wake(waited, Some(put_off)).await;
            let _ = done.send(());
        });
        (answer, finished)
    }

    fn io_thread(bound: Duration, quiet: Duration) -> IoThread {
        let doorbell = Doorbell::with_put_off(Duration::ZERO, PutOff::new(bound, quiet));
        IoThread::start_with(doorbell).expect("I/O thread")
    }

    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn a_put_off_wake_up_waits_for_the_threads_next_wake_up() {
        actix_rt::System::new().block_on(async {
            let io = io_thread(Duration::from_secs(60), Duration::from_secs(60));
            // Disarmed, the first one wakes the thread at once, and arms the keeper.
            let (answer, done) = awaiting(&io);
            answer.give();
            done.recv_timeout(LONG)
                .expect("served at once while disarmed");
            assert!(io.doorbell.put_off.armed());

            let (answer, done) = awaiting(&io);
            answer.give_once_parking(&io.doorbell.put_off);
            assert!(
                done.recv_timeout(Duration::from_millis(300)).is_err(),
                "the answer woke the I/O thread"
            );
            // Anything else that wakes the thread serves it.
            io.arbiter.spawn_fn(|| {});
            done.recv_timeout(LONG).expect("served at the next wake-up");
            io.arbiter.stop();
        });
    }

    #[test]
    fn a_put_off_wake_up_is_served_within_the_bound_and_a_quiet_keeper_disarms() {
        actix_rt::System::new().block_on(async {
            let io = io_thread(Duration::from_millis(20), Duration::from_millis(50));
            let put_off = io.doorbell.put_off.clone();
            let (answer, done) = awaiting(&io);
            answer.give();
            done.recv_timeout(LONG)
                .expect("served at once while disarmed");
            // Nothing else wakes the thread: the keeper's timer serves it.
            let (answer, done) = awaiting(&io);
            answer.give();
            done.recv_timeout(LONG).expect("served within the bound");

            // Quiet: the keeper disarms and keeps no timer; the thread sleeps until woken.
            let deadline = Instant::now() + LONG;
            while put_off.armed() {
                assert!(Instant::now() < deadline, "never disarmed");
                std::thread::sleep(Duration::from_millis(5));
            }
            let expired = put_off.expired.load(Ordering::Relaxed);
            std::thread::sleep(10 * put_off.bound());
            assert_eq!(put_off.expired.load(Ordering::Relaxed), expired);

            // Disarmed again, a put-off wake-up wakes the thread itself.
            let (answer, done) = awaiting(&io);
            answer.give();
            done.recv_timeout(LONG).expect("served once disarmed");
            io.arbiter.stop();
        });
    }
}
