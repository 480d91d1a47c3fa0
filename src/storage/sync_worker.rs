//! [`SyncWorker`]: the thread that runs the `FsyncPolicy::Interval` syncs, so that their
//! `fdatasync`s never stall the threads that append and read; and [`Completion`], how the
//! owner of a sync learns that it is done.
//!
//! # Why a thread of its own
//! One `fdatasync` can take tens of milliseconds or more when the page cache is writing back
//! gigabytes (ext4 in ordered mode makes even a small file's sync wait for the journal commit
//! behind it). Partitions and group coordinators share a few I/O threads, so a sync run on
//! one stalls every partition and coordinator on it. Here the owner (the partition actor)
//! only takes a snapshot of what to sync ([`crate::partition::Partition::begin_sync`]), hands
//! the blocking part to this worker, and applies the result when it is told it is done.
//!
//! # Why one thread per broker, fed over a channel
//! - Cheap at rest: the thread sleeps in a channel receive (no polling, no timer), and is
//!   started at the first sync, so a broker under `Always` or `Never` never has one.
//! - Cheap at rate: 32 partitions syncing once a second are 32 channel sends and wake-ups a
//!   second, not 32 thread spawns (a spawn costs tens of microseconds and a stack).
//! - One at a time is enough: syncs on one file system largely serialize in the kernel anyway
//!   (one journal), and a slow one only delays the next partitions' syncs, which nobody waits
//!   for on the hot path (`Always` syncs inline).
//! - The same kind of job runs here too: a roll's sealing (a sync of the sealed segment) and
//!   the unlinking of segments retention dropped (which frees their page cache: milliseconds
//!   for 64 MiB), handed over by the partition log ([`super::PartitionLog::set_worker`]).
//! - Per broker, not per process: a broker that stops takes its worker with it (the thread
//!   ends once the last sender is dropped), and brokers in one process (tests) never queue
//!   behind each other's syncs.
//!
//! A job that panics is caught, so the thread serves the next; its [`Completer`] is dropped
//! unanswered, which its [`Completion`] reports as [`Abandoned`].

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

type Job = Box<dyn FnOnce() + Send>;

/// How the worker's thread competes for the CPU with the broker's other threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuPriority {
    /// As any thread: syncs are short and someone may be waiting for one.
    Normal,
    /// The lowest (nice 19, on Linux): for long CPU-bound jobs nobody waits on, the log
    /// cleaner's passes. The thread still has every idle cycle, but an I/O thread that wakes
    /// takes its core at once instead of sharing it: a pass at normal priority made the p99
    /// of produces to its partition several times what it is without a pass
    /// (`benches/README.md`, the cleaner rows), as RocksDB's
    /// `Env::LowerThreadPoolCPUPriority` is there to avoid for compactions. Elsewhere than
    /// Linux the thread runs as any other (a nice value there is the whole process's).
    Background,
}

/// One lazily started thread that runs jobs in the order they were sent. See the module docs.
#[derive(Debug)]
pub struct SyncWorker {
    sender: Mutex<Option<Sender<Job>>>,
    /// The thread's name.
    name: &'static str,
    priority: CpuPriority,
}

impl Default for SyncWorker {
    fn default() -> Self {
        Self::named("nanokafka-sync")
    }
}

impl SyncWorker {
    /// A worker whose thread is not started yet (the first [`SyncWorker::run`] starts it).
    pub fn new() -> Self {
        Self::default()
    }

    /// As [`SyncWorker::new`], its thread named `name` (the log cleaner's runs the same way:
    /// one pass at a time, off the I/O threads).
    pub fn named(name: &'static str) -> Self {
        SyncWorker {
            sender: Mutex::new(None),
            name,
            priority: CpuPriority::Normal,
        }
    }

    /// This worker with its thread at `priority` once started.
    pub fn with_priority(self, priority: CpuPriority) -> Self {
        SyncWorker { priority, ..self }
    }

    /// Runs `job` on the worker thread (starting it first if needed). When no thread can be
    /// had, runs it here: late is better than never for a sync.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        let mut sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let job: Job = Box::new(job);
        let job = match sender.as_ref() {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                // The thread is gone (it cannot end while a sender lives, but be safe).
                Err(mpsc::SendError(job)) => job,
            },
            None => job,
        };
        let (tx, rx) = mpsc::channel::<Job>();
        let priority = self.priority;
        let spawned = std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || {
                if priority == CpuPriority::Background {
                    lower_cpu_priority();
                }
                for job in rx {
                    // The job's `Completer` reports a panic as `Abandoned` to its owner.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            });
        match spawned {
            Ok(_) => {
                let _ = tx.send(job);
                *sender = Some(tx);
            }
            Err(e) => {
                drop(sender);
                tracing::warn!(error = %e, "cannot start the sync thread; syncing inline");
                job();
            }
        }
    }
}

/// Gives the calling thread the lowest CPU priority (see [`CpuPriority::Background`]).
#[cfg(target_os = "linux")]
fn lower_cpu_priority() {
    /// The lowest nice value: the weight of 15 against 1024 for a thread at 0.
    const LOWEST: libc::c_int = 19;
    // SAFETY: setpriority takes plain integers and touches no memory of ours; on Linux,
    // PRIO_PROCESS with `who` 0 names the calling thread alone.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, LOWEST) } != 0 {
        let error = std::io::Error::last_os_error();
        tracing::debug!(%error, "cannot lower a background thread's CPU priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_cpu_priority() {}

/// The job was dropped without an answer (it panicked, or its worker is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abandoned;

#[derive(Debug)]
enum State<T> {
    Waiting,
    Done(T),
    Abandoned,
    Taken,
}

#[derive(Debug)]
struct Shared<T> {
    state: Mutex<State<T>>,
    done: Condvar,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The owner's side of a job's answer: polled without blocking, or waited for.
#[derive(Debug)]
pub struct Completion<T>(Arc<Shared<T>>);

/// The job's side: answers once, or reports [`Abandoned`] when dropped unanswered.
#[derive(Debug)]
pub struct Completer<T>(Option<Arc<Shared<T>>>);

/// A new pair.
pub fn completion<T>() -> (Completion<T>, Completer<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::Waiting),
        done: Condvar::new(),
    });
    (Completion(shared.clone()), Completer(Some(shared)))
}

impl<T> Completion<T> {
    /// The answer if it has come (once: later calls return `None`).
    pub fn try_take(&self) -> Option<Result<T, Abandoned>> {
        take(&mut self.0.lock())
    }

    /// Whether the answer has come (or the job was abandoned), without taking it.
    pub fn is_done(&self) -> bool {
        !matches!(*self.0.lock(), State::Waiting)
    }

    /// Blocks until the answer comes.
    pub fn wait(&self) -> Result<T, Abandoned> {
        let mut state = self.0.lock();
        loop {
            if let Some(answer) = take(&mut state) {
                return answer;
            }
            if matches!(*state, State::Taken) {
                return Err(Abandoned);
            }
            state = self
                .0
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

fn take<T>(state: &mut State<T>) -> Option<Result<T, Abandoned>> {
    match std::mem::replace(state, State::Taken) {
        State::Done(answer) => Some(Ok(answer)),
        State::Abandoned => Some(Err(Abandoned)),
        waiting @ State::Waiting => {
            *state = waiting;
            None
        }
        State::Taken => None,
    }
}

impl<T> Completer<T> {
    /// Hands `answer` to the [`Completion`], waking whoever waits for it.
    pub fn complete(mut self, answer: T) {
        if let Some(shared) = self.0.take() {
            *shared.lock() = State::Done(answer);
            shared.done.notify_all();
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            *shared.lock() = State::Abandoned;
            shared.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_in_order_on_one_thread_and_answers_arrive() {
        let worker = SyncWorker::new();
        let (first, done_first) = completion();
        let (second, done_second) = completion();
        worker.run(move || done_first.complete(std::thread::current().id()));
        worker.run(move || done_second.complete(std::thread::current().id()));
        let (a, b) = (first.wait().unwrap(), second.wait().unwrap());
        assert_eq!(a, b, "one thread");
        assert_ne!(a, std::thread::current().id(), "not the caller's");
        assert_eq!(first.try_take(), None, "an answer is taken once");
    }

    #[test]
    fn a_panicking_job_is_abandoned_and_the_worker_goes_on() {
        let worker = SyncWorker::new();
        let (lost, completer) = completion::<u32>();
        worker.run(move || {
            let _completer = completer;
            panic!("injected");
        });
        assert_eq!(lost.wait(), Err(Abandoned));
        let (next, completer) = completion();
        worker.run(move || completer.complete(7));
        assert_eq!(next.wait(), Ok(7));
    }
}
