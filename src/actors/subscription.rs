//! `SubscriptionActor<T>`: pushes a topic's records to a subscribing actor as typed
//! [`Delivered<T>`] messages, as a member of a consumer group.
//!
//! It is a `Consumer` that runs by itself: it polls with its own positions (the same
//! `ConsumerPoll` the `Consumer` handle sends), decodes each batch and `send`s it to the
//! subscriber's `Recipient`. At most `max_in_flight` batches are unanswered at once: when the
//! subscriber is slow the actor stops polling, records stay in the log, the topic's backlog
//! grows and producers meet `max_size` backpressure. Nothing is sent with `do_send`.
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

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;

use crate::async_handle::AsyncNanoKafka;
use crate::error::Error;
use crate::group::GroupOptions;
use crate::messages::{ConsumerPoll, FencedCommit};
use crate::types::{ConsumerBatch, Record};

/// A batch of consecutive records of one partition, pushed to a subscriber. Reply with an
/// [`Ack`] (return `Ack::Commit` from the handler, or a future that resolves to it).
#[derive(Debug)]
pub struct Delivered<T> {
    pub topic: String,
    pub group: String,
    /// The group generation the batch was read in; its commit is fenced by it.
    pub generation: u64,
    pub records: Vec<Record<T>>,
}

impl<T: 'static> Message for Delivered<T> {
    type Result = Ack;
}

/// The subscriber's answer to a [`Delivered`] batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, MessageResponse)]
pub enum Ack {
    /// The batch is processed: commit its last offset.
    Commit,
    /// Do not commit: the batch is re-delivered after the next rebalance or restart unless a
    /// later commit of the same partition covers it.
    Defer,
}

/// How a subscription behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// The group's options, as for a join.
    pub group: GroupOptions,
    /// Batches delivered but not yet answered (default 4).
    pub max_in_flight: usize,
    /// Records per batch at most (default 100).
    pub max_batch: usize,
    /// How long one poll waits for data (default 1 s). The poll is a sign of life too, so
    /// keep it well below the session timeout.
    pub poll_wait: Duration,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            group: GroupOptions::default(),
            max_in_flight: 4,
            max_batch: 100,
            poll_wait: Duration::from_secs(1),
        }
    }
}

/// Ends a subscription: it leaves its group and stops. Fire-and-forget.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct Unsubscribe;

/// A running subscription. Dropping it does not end the subscription; the subscriber's
/// mailbox closing does, or [`Subscription::unsubscribe`].
#[derive(Debug, Clone)]
pub struct Subscription {
    stop: Recipient<Unsubscribe>,
}

impl Subscription {
    /// Leaves the group and stops pushing.
    pub fn unsubscribe(&self) {
        self.stop.do_send(Unsubscribe);
    }
}

/// Retry delay after a failed poll (a partition restarting, a poison record).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// See the module docs.
pub struct SubscriptionActor<T: DeserializeOwned + Send + 'static> {
    span: tracing::Span,
    bus: AsyncNanoKafka,
    topic: String,
    group: String,
    member: String,
    options: SubscribeOptions,
    recipient: Recipient<Delivered<T>>,
    generation: u64,
    positions: BTreeMap<u32, u64>,
    in_flight: usize,
    polling: bool,
    payload: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned + Send + 'static> std::fmt::Debug for SubscriptionActor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionActor")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("member", &self.member)
            .field("generation", &self.generation)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned + Send + 'static> SubscriptionActor<T> {
    /// Starts a subscription for a member that has already joined at `generation`.
    pub(crate) fn start(
        bus: AsyncNanoKafka,
        (topic, group, member): (&str, &str, &str),
        generation: u64,
        recipient: Recipient<Delivered<T>>,
        options: SubscribeOptions,
    ) -> Subscription {
        let actor = SubscriptionActor {
            span: tracing::info_span!("subscription", topic, group, member),
            bus,
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            options,
            recipient,
            generation,
            positions: BTreeMap::new(),
            in_flight: 0,
            polling: false,
            payload: PhantomData,
        };
        Subscription {
            stop: actor.start().recipient(),
        }
    }

    /// Polls again if there is a credit and no poll is running.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.polling || self.in_flight >= self.options.max_in_flight {
            return;
        }
        self.polling = true;
        let poll = ConsumerPoll {
            topic: self.topic.clone(),
            group: self.group.clone(),
            member: self.member.clone(),
            generation: self.generation,
            positions: self.positions.clone(),
            max_records: self.options.max_batch,
            wait: Some(self.options.poll_wait),
        };
        let bus = self.bus.clone();
        let request = async move { bus.consumer_poll(poll).await };
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
    fn deliver(&mut self, batch: ConsumerBatch, ctx: &mut Context<Self>) {
        if batch.assignment.generation != self.generation {
            // A rebalance: what this member reads now starts at the committed offsets.
            self.positions.clear();
            self.generation = batch.assignment.generation;
        }
        let mut records = Vec::with_capacity(batch.records.len());
        for raw in batch.records {
            match raw.decode::<T>(&self.topic) {
                Ok(record) => records.push(record),
                Err(e) => {
                    let _span = self.span.clone().entered();
                    tracing::error!(error = %e, "record does not decode; its partition is stalled until it is committed past");
                    self.polling = true; // hold polling for the retry delay
                    ctx.run_later(RETRY_AFTER, |act, ctx| {
                        act.polling = false;
                        act.pump(ctx);
                    });
                    break;
                }
            }
        }
        let Some(last) = records.last() else { return };
        let (partition, offset) = (last.partition, last.offset);
        self.positions.insert(partition, offset + 1);
        self.in_flight += 1;
        let delivered = Delivered {
            topic: self.topic.clone(),
            group: self.group.clone(),
            generation: self.generation,
            records,
        };
        let generation = self.generation;
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
            topic: self.topic.clone(),
            group: self.group.clone(),
            member: self.member.clone(),
            generation,
            partition,
            offset,
        };
        let bus = self.bus.clone();
        let request = async move { bus.fenced_commit(commit).await };
        ctx.spawn(request.into_actor(self).map(|result, act, _| {
            if let Err(e) = result {
                // Fenced after a rebalance: the new owner re-reads from the last commit.
                let _span = act.span.clone().entered();
                tracing::debug!(error = %e, "subscription commit refused");
            }
        }));
    }

    fn rejoin(&mut self, ctx: &mut Context<Self>) {
        let bus = self.bus.clone();
        let (topic, group, member) = (self.topic.clone(), self.group.clone(), self.member.clone());
        let options = self.options.group;
        let join = async move { bus.join_group_with(&topic, &group, &member, options).await };
        ctx.spawn(join.into_actor(self).map(|joined, act, ctx| match joined {
            Ok(assignment) => {
                act.positions.clear();
                act.generation = assignment.generation;
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
        let bus = self.bus.clone();
        let (topic, group, member) = (self.topic.clone(), self.group.clone(), self.member.clone());
        let leave = async move { bus.leave_group(&topic, &group, &member).await };
        ctx.wait(leave.into_actor(self).map(|_, _, ctx| ctx.stop()));
    }
}

impl<T: DeserializeOwned + Send + 'static> Actor for SubscriptionActor<T> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        tracing::info!(generation = self.generation, "subscription started");
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
