//! `SubscriptionActor<T>`: pushes a topic's records to a subscribing actor as typed
//! [`Delivered<T>`] messages, as a member of a consumer group.
//!
//! It is a `Consumer` that runs by itself: it polls with its own [`Positions`] (the same
//! consumer poll the `Consumer` handle sends), decodes each batch from the buffer it was read
//! into and `send`s it to the subscriber's `Recipient`. At most `max_in_flight` batches are
//! unanswered at once: when the subscriber is slow the actor stops polling, records stay in
//! the log, the topic's backlog grows and producers meet `max_size` backpressure. Nothing is
//! sent with `do_send`.
//!
//! The subscriber answers each batch with an [`Ack`]: `Commit` commits the batch (fenced by
//! the generation it was delivered in), `Defer` leaves it uncommitted. After a rebalance, an
//! eviction or a coordinator restart the positions are dropped and reading resumes at the
//! committed offsets, so whatever was not committed is delivered again (at-least-once).
//!
//! A record whose payload does not decode as `T` stops progress on its partition (like
//! Kafka's consumer, which keeps failing on it): the records before it are delivered, then
//! the actor logs the error and retries every second; commit past it (or fix the producer)
//! to move on. The subscription ends when the subscriber's mailbox closes or on
//! [`Subscription::unsubscribe`]; it then leaves the group.
//!
//! It reaches the broker through [`BrokerRequests`] (recipients of the broker's messages),
//! not through a handle, so the actor layer never depends on the client layer above it.

use std::marker::PhantomData;
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;

use super::topic::ConsumerPollFetched;
use crate::error::{Error, Result};
use crate::group::{Assignment, Positions};
use crate::messages::{
    Ack, ConsumerPoll, Delivered, FencedCommit, JoinGroup, LeaveGroup, SubscribeOptions,
    Subscription, Unsubscribe,
};

use super::coordinator::FetchedBatch;

/// The broker requests a subscription sends (recipients of the `BrokerActor`).
#[derive(Debug, Clone)]
pub struct BrokerRequests {
    pub poll: Recipient<ConsumerPollFetched>,
    pub commit: Recipient<FencedCommit>,
    pub join: Recipient<JoinGroup>,
    pub leave: Recipient<LeaveGroup>,
}

/// Sends `msg` and flattens a closed mailbox into `BrokerStopped`.
async fn ask<M, T>(to: Recipient<M>, msg: M) -> Result<T>
where
    M: Message<Result = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    to.send(msg).await.map_err(|_| Error::BrokerStopped)?
}

/// Retry delay after a failed poll (a partition restarting, a poison record).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// See the module docs.
pub struct SubscriptionActor<T: DeserializeOwned + Send + 'static> {
    span: tracing::Span,
    broker: BrokerRequests,
    join: JoinGroup,
    options: SubscribeOptions,
    recipient: Recipient<Delivered<T>>,
    positions: Positions,
    in_flight: usize,
    polling: bool,
    payload: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned + Send + 'static> std::fmt::Debug for SubscriptionActor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionActor")
            .field("join", &self.join)
            .field("positions", &self.positions)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned + Send + 'static> SubscriptionActor<T> {
    /// Starts a subscription for a member that has already joined (`join`) with `assignment`.
    pub(crate) fn start(
        broker: BrokerRequests,
        join: JoinGroup,
        assignment: &Assignment,
        recipient: Recipient<Delivered<T>>,
        options: SubscribeOptions,
    ) -> Subscription {
        let actor = SubscriptionActor {
            span: tracing::info_span!(
                "subscription",
                topic = %join.topic,
                group = %join.group,
                member = %join.member
            ),
            broker,
            join,
            options,
            recipient,
            positions: Positions::new(assignment.generation),
            in_flight: 0,
            polling: false,
            payload: PhantomData,
        };
        Subscription::new(actor.start().recipient())
    }

    /// Polls again if there is a credit and no poll is running.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.polling || self.in_flight >= self.options.max_in_flight {
            return;
        }
        self.polling = true;
        let poll = ConsumerPollFetched(ConsumerPoll {
            topic: self.join.topic.clone(),
            group: self.join.group.clone(),
            member: self.join.member.clone(),
            generation: self.positions.generation(),
            positions: self.positions.all().clone(),
            max_records: self.options.max_batch,
            wait: Some(self.options.poll_wait),
        });
        let request = ask(self.broker.poll.clone(), poll);
        ctx.spawn(request.into_actor(self).map(|polled, act, ctx| {
            act.polling = false;
            match polled {
                Ok(batch) => act.deliver(batch, ctx),
                Err(Error::UnknownMember { .. }) => return act.rejoin(ctx),
                Err(Error::BrokerStopped) | Err(Error::UnknownTopic { .. }) => return ctx.stop(),
                Err(e) => {
                    let _span = act.span.clone().entered();
                    tracing::warn!(error = %e, "subscription poll failed; retrying");
                    ctx.run_later(RETRY_AFTER, |act, ctx| act.pump(ctx));
                    return;
                }
            }
            act.pump(ctx);
        }));
    }

    /// Sends a polled batch to the subscriber, holding a credit until it answers.
    fn deliver(&mut self, batch: FetchedBatch, ctx: &mut Context<Self>) {
        // A rebalance: what this member reads now starts at the committed offsets.
        self.positions.enter(batch.assignment.generation);
        let Some(fetched) = batch.fetched else { return };
        let records = match fetched.decode::<T>(&self.join.topic) {
            Ok(records) => records,
            Err(e) => {
                let _span = self.span.clone().entered();
                tracing::error!(error = %e, "record does not decode; its partition is stalled until it is committed past");
                self.polling = true; // hold polling for the retry delay
                ctx.run_later(RETRY_AFTER, |act, ctx| {
                    act.polling = false;
                    act.pump(ctx);
                });
                return;
            }
        };
        let Some(last) = records.last() else { return };
        let (partition, offset) = (last.partition, last.offset);
        self.positions.delivered(partition, offset);
        self.in_flight += 1;
        let generation = self.positions.generation();
        let delivered = Delivered {
            topic: self.join.topic.clone(),
            group: self.join.group.clone(),
            generation,
            records,
        };
        ctx.spawn(
            self.recipient
                .send(delivered)
                .into_actor(self)
                .map(move |answer, act, ctx| {
                    act.in_flight -= 1;
                    match answer {
                        Ok(Ack::Commit) => act.commit(generation, partition, offset, ctx),
                        Ok(Ack::Defer) => {}
                        // The subscriber is gone: end the subscription.
                        Err(_) => return act.leave(ctx),
                    }
                    act.pump(ctx);
                }),
        );
    }

    fn commit(&mut self, generation: u64, partition: u32, offset: u64, ctx: &mut Context<Self>) {
        let commit = FencedCommit {
            topic: self.join.topic.clone(),
            group: self.join.group.clone(),
            member: self.join.member.clone(),
            generation,
            partition,
            offset,
        };
        let request = ask(self.broker.commit.clone(), commit);
        ctx.spawn(request.into_actor(self).map(|result, act, _| {
            if let Err(e) = result {
                // Fenced after a rebalance: the new owner re-reads from the last commit.
                let _span = act.span.clone().entered();
                tracing::debug!(error = %e, "subscription commit refused");
            }
        }));
    }

    fn rejoin(&mut self, ctx: &mut Context<Self>) {
        let join = ask(self.broker.join.clone(), self.join.clone());
        ctx.spawn(join.into_actor(self).map(|joined, act, ctx| match joined {
            Ok(assignment) => {
                act.positions = Positions::new(assignment.generation);
                act.pump(ctx);
            }
            Err(e) => {
                let _span = act.span.clone().entered();
                tracing::warn!(error = %e, "subscription cannot rejoin; retrying");
                ctx.run_later(RETRY_AFTER, |act, ctx| act.rejoin(ctx));
            }
        }));
    }

    /// Leaves the group, then stops.
    fn leave(&mut self, ctx: &mut Context<Self>) {
        let leave = LeaveGroup {
            topic: self.join.topic.clone(),
            group: self.join.group.clone(),
            member: self.join.member.clone(),
        };
        let request = ask(self.broker.leave.clone(), leave);
        ctx.wait(request.into_actor(self).map(|_, _, ctx| ctx.stop()));
    }
}

impl<T: DeserializeOwned + Send + 'static> Actor for SubscriptionActor<T> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        tracing::info!(
            generation = self.positions.generation(),
            "subscription started"
        );
        self.pump(ctx);
    }
}

impl<T: DeserializeOwned + Send + 'static> Handler<Unsubscribe> for SubscriptionActor<T> {
    type Result = ();

    fn handle(&mut self, _: Unsubscribe, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: &self.span, "Unsubscribe").entered();
        self.leave(ctx);
    }
}
