//! What supervision needs beyond actix's `Supervisor`: catching a handler's panic so the
//! actor restarts (actix alone would leave it dead, see shared/actix-notes.md), and a restart
//! budget with backoff so a crash loop ends in a clear failure instead of a spin.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use actix::{Actor, ActorContext, Context};

/// Runs a handler body; on a panic, logs it, stops the context (the `Supervisor` restarts
/// the actor, whose `started` reloads from disk) and returns `None`.
pub fn guarded<A, R>(
    act: &mut A,
    ctx: &mut Context<A>,
    name: &str,
    body: impl FnOnce(&mut A, &mut Context<A>) -> R,
) -> Option<R>
where
    A: Actor<Context = Context<A>>,
{
    match catch_unwind(AssertUnwindSafe(|| body(act, ctx))) {
        Ok(reply) => Some(reply),
        Err(panic) => {
            tracing::error!(
                actor = name,
                panic = panic_message(&panic),
                "handler panicked; restarting the actor"
            );
            ctx.stop();
            None
        }
    }
}

fn panic_message(panic: &Box<dyn Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic")
}

/// At most this many restarts within [`RESTART_WINDOW`]; one more and the actor gives up.
pub const MAX_RESTARTS: usize = 5;
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// The first restart is immediate; each further one within the window waits twice as long.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// What to do about a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartDecision {
    Now,
    After(Duration),
    GiveUp,
}

/// Recent restarts of one actor.
#[derive(Debug, Default)]
pub struct RestartBudget {
    recent: VecDeque<Instant>,
    total: u64,
}

impl RestartBudget {
    /// Records a restart at `now` and decides how to proceed.
    pub fn record(&mut self, now: Instant) -> RestartDecision {
        self.total += 1;
        while self
            .recent
            .front()
            .is_some_and(|&t| now.duration_since(t) > RESTART_WINDOW)
        {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        match self.recent.len() {
            1 => RestartDecision::Now,
            n if n > MAX_RESTARTS => RestartDecision::GiveUp,
            n => RestartDecision::After(FIRST_BACKOFF * 2u32.pow(n as u32 - 2)),
        }
    }

    /// Restarts since the actor was created.
    pub fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_then_give_up_and_the_window_forgives() {
        let mut budget = RestartBudget::default();
        let t0 = Instant::now();
        assert_eq!(budget.record(t0), RestartDecision::Now);
        assert_eq!(
            budget.record(t0),
            RestartDecision::After(Duration::from_millis(50))
        );
        assert_eq!(
            budget.record(t0),
            RestartDecision::After(Duration::from_millis(100))
        );
        budget.record(t0);
        budget.record(t0);
        assert_eq!(budget.record(t0), RestartDecision::GiveUp);
        assert_eq!(budget.record(t0 + RESTART_WINDOW * 2), RestartDecision::Now);
        assert_eq!(budget.total(), 7);
    }
}
