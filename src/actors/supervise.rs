//! What supervision needs beyond actix's `Supervisor`: catching a handler's panic so the
//! actor restarts (actix alone leaves an actor whose handler panicked dead for good: its
//! arbiter catches the panic at the task boundary and the mailbox closes), and a restart
//! budget with backoff so a crash loop ends in a clear failure instead of a spin.

use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::{Actor, ActorContext, Context, ResponseFuture};
use futures::FutureExt;

use crate::error::{Error, Result};

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

/// [`guarded`] for a handler that replies with a `Result`: a panic answers
/// [`Error::Internal`] naming the actor (which restarts).
pub fn guarded_reply<A, T>(
    act: &mut A,
    ctx: &mut Context<A>,
    name: &str,
    body: impl FnOnce(&mut A, &mut Context<A>) -> Result<T>,
) -> Result<T>
where
    A: Actor<Context = Context<A>>,
{
    guarded(act, ctx, name, body).unwrap_or_else(|| Err(internal(name, "handler panicked")))
}

/// [`guarded`] for a handler that replies with a future: a panic in the handler restarts the
/// actor, and one in the future (which owns no actor state, so nothing needs restarting)
/// answers [`Error::Internal`] too, instead of unwinding through the arbiter's task.
pub fn guarded_future<A, T>(
    act: &mut A,
    ctx: &mut Context<A>,
    name: &Arc<str>,
    body: impl FnOnce(&mut A, &mut Context<A>) -> ResponseFuture<Result<T>>,
) -> ResponseFuture<Result<T>>
where
    A: Actor<Context = Context<A>>,
    T: 'static,
{
    let name = name.clone();
    match guarded(act, ctx, &name, body) {
        Some(reply) => Box::pin(catch_future_panic(name, reply)),
        None => Box::pin(async move { Err(internal(&name, "handler panicked")) }),
    }
}

/// Runs `future`; a panic inside it becomes [`Error::Internal`] naming `name`.
pub fn catch_future_panic<T>(
    name: Arc<str>,
    future: impl Future<Output = Result<T>>,
) -> impl Future<Output = Result<T>> {
    AssertUnwindSafe(future).catch_unwind().map(move |answer| {
        answer.unwrap_or_else(|panic| {
            let message = panic_message(&panic).to_owned();
            tracing::error!(actor = %name, panic = %message, "a reply future panicked");
            Err(internal(&name, &message))
        })
    })
}

fn internal(actor: &str, reason: &str) -> Error {
    Error::Internal {
        actor: actor.to_owned(),
        reason: reason.to_owned(),
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
