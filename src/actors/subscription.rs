//! `SubscriptionActor<T>`: pushes a topic's records to a subscribing actor as typed
//! [`Delivered<T>`] messages, as a member of a consumer group, and reports what happens to
//! it as [`SubscriptionEvent`](crate::messages::SubscriptionEvent)s.
//!
//! It is a `Consumer` that runs by itself: it polls with its own [`Positions`] (the same
//! consumer poll the `Consumer` handle sends), decodes each batch from the buffer it was read
//! into and `send`s it to the subscriber's `Recipient`. At most `max_in_flight` batches are
//! unanswered at once, and at most one per partition: when the subscriber is slow the actor
//! stops polling, records stay in the log, the topic's backlog grows and producers meet
//! `max_size` backpressure. Batches are sent with `send`, never `do_send`.
//!
//! **Polls per batch.** After a batch that was not full (its partition caught up: at low
//! rates, every batch) the next poll waits up to [`POLL_GRACE`] for the subscriber's
//! answer, so that one poll of every partition follows each batch instead of a poll without
//! the batch's partition, cut short by the answer, and another; after a full batch (a
//! backlog) it starts at once.
//!
//! **Order.** The rules are `group::delivery`'s: a partition is held (left out of the polls)
//! while a batch of it is unanswered, while it waits for a retry, and while one of its
//! records is being dead-lettered, so the subscriber always sees a partition's records in
//! offset order, each after every earlier one was answered for the last time. Other
//! partitions are read meanwhile (after a batch that was not full, from [`POLL_GRACE`] on:
//! see below); a poll that waits is woken when a partition it left out is released.
//!
//! **Acks.** `Commit` commits the batch, `Defer` commits nothing, `CommitUpTo(o)` commits
//! through `o` and delivers the rest of the batch again at once, `Retry { offset, after }`
//! commits the records before `offset` and delivers `offset` and everything after it again
//! after `after`. A record retried `max_attempts` times goes to the dead-letter topic and is
//! committed past (without one, the subscription ends with
//! [`SubscriptionEnd::RetriesExhausted`]). Every commit is fenced by the generation the batch
//! was delivered in; a refused one is reported
//! ([`SubscriptionEvent::CommitRefused`](crate::messages::SubscriptionEvent::CommitRefused)).
//! After a rebalance, an eviction or a coordinator restart the positions, retry waits and
//! attempt counts are dropped and reading resumes at the committed offsets, so whatever was
//! not committed is delivered again (at-least-once); the attempt counts come back from the
//! commits (`attempts`).
//!
//! **Failed requests.** A poll or a rejoin that fails with an error that does not end the
//! subscription (a partition restarting, a batch that cannot be read) is reported
//! ([`SubscriptionEvent::RequestFailed`](crate::messages::SubscriptionEvent::RequestFailed))
//! and sent again after a second, from where reading was.
//!
//! **Records that do not decode** as `T`: the records before one are delivered; then, per
//! `on_decode_error`, it is dead-lettered and committed past, or the subscription ends with
//! [`SubscriptionEnd::DecodeError`] (the record stays uncommitted).
//!
//! **Dead letters.** A dead-lettered record is produced to the dead-letter topic (keyed
//! like the original, so all of them go to the same partition of a topic with several)
//! with its key, its value bytes unchanged and its headers, followed by:
//!
//! | header | value (UTF-8) |
//! | --- | --- |
//! | `nanokafka.dlq.topic` | the source topic |
//! | `nanokafka.dlq.partition` | the source partition, decimal |
//! | `nanokafka.dlq.offset` | the source offset, decimal |
//! | `nanokafka.dlq.group` | the subscription's group |
//! | `nanokafka.dlq.reason` | `decode`, `retries-exhausted` or `rejected` (`Ack::DeadLetter`) |
//! | `nanokafka.dlq.error` | the decode error's text, or the subscriber's reason |
//! | `nanokafka.dlq.attempts` | deliveries of the record, decimal (1 for `decode`) |
//!
//! It is produced before the source record is committed past, so it is never lost; a crash
//! (or a refused commit) between the two dead-letters it again when it is read next:
//! at-least-once across crashes, exactly once otherwise. A dead letter that cannot be
//! produced ends the subscription ([`SubscriptionEnd::DeadLetterFailed`]) with the record
//! uncommitted.
//!
//! **The end.** The subscription ends on [`Subscription::unsubscribe`], when the subscriber's
//! mailbox closes, when the broker stops or the topic is deleted, and on the two cases above;
//! it then leaves the group (unless the broker or topic is gone), sends
//! [`SubscriptionEvent::Ended`](crate::messages::SubscriptionEvent::Ended) and resolves
//! [`Subscription::ended`].
//!
//! It reaches the broker through [`BrokerRequests`] (recipients of the broker's messages),
//! not through a handle, so the actor layer never depends on the client layer above it.
//! What it does alike with the Kafka backend's subscription (its events, the decode-error
//! policy, writing dead letters) is in `shared`.

mod attempts;
pub(crate) mod shared;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures::channel::oneshot;
use futures::future::{self, FutureExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::coordinator::{
    Chain, CommitAsMember, ConsumerPollGroup, CoordinatorRef, FetchedBatch, PollPause,
};
use super::put_off::PutOff;
use super::topic::{GetGroupRoute, SubscriptionPoll};
use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::group::dead_letter::DeadLetter;
use crate::group::delivery::Batch;
use crate::group::{Assignment, Positions};
use crate::messages::{
    ConsumerPoll, CreateTopic, Delivered, FencedCommit, JoinGroup, LeaveGroup, ProduceBatch,
    SubscribeOptions, Subscription, SubscriptionEnd, SubscriptionEvent, SubscriptionRequest,
    Unsubscribe,
};
use crate::partition::Fetched;
use crate::types::{Delivery, Header};
use shared::{Flow, LetterFailed, Subscribing, RETRY_AFTER};

/// The broker requests a subscription sends (recipients of the `BrokerActor`).
#[derive(Debug, Clone)]
pub struct BrokerRequests {
    /// Shared, as `commit`: every poll's future holds one, for the request through the broker
    /// (cloning a `Recipient` allocates).
    pub poll: Arc<Recipient<SubscriptionPoll>>,
    pub commit: Arc<Recipient<FencedCommit>>,
    pub join: Recipient<JoinGroup>,
    pub leave: Recipient<LeaveGroup>,
    /// Dead letters.
    pub produce: Recipient<ProduceBatch>,
    /// The dead-letter topic, when missing.
    pub create: Recipient<CreateTopic>,
    /// The group's coordinator, asked for once joined.
    pub group_route: Recipient<GetGroupRoute>,
    /// Where polls and fenced commits go once known: straight to the coordinator, on whose
    /// arbiter the subscription then runs (its polls, their fetches and its commits cross no
    /// thread). When the coordinator is gone, the request is made through the broker, whose
    /// answer names why (the topic deleted, the broker stopped).
    pub coordinator: Option<CoordinatorRef>,
}

impl BrokerRequests {
    /// A subscription's poll for `join`'s member, to the coordinator when known (see
    /// `coordinator`). The request through the broker, made only when the coordinator is
    /// gone, has no wake signal: nothing would be released before its answer. It is built
    /// only then, from `join` (shared: a poll copies none of its names).
    fn poll(
        &self,
        join: &Arc<JoinGroup>,
        poll: PollOf,
        pause: PollPause,
    ) -> impl Future<Output = Result<FetchedBatch>> {
        let through_broker = self.poll.clone();
        let (direct, fallback) = match &self.coordinator {
            None => (None, Err(subscription_poll(join, poll, pause))),
            Some(coordinator) => {
                let fallback = (
                    join.clone(),
                    PollOf {
                        positions: poll.positions.clone(),
                        ..poll
                    },
                    PollPause {
                        partitions: pause.partitions.clone(),
                        wake: None,
                        wait_first: pause.wait_first,
                        early_wake: None,
                    },
                );
                let direct = coordinator.ask(ConsumerPollGroup {
                    member: join.member.clone(),
                    generation: poll.generation,
                    positions: poll.positions,
                    max_records: poll.max_records,
                    wait: poll.wait,
                    pause,
                    chain: Chain::Off,
                });
                (Some(direct), Ok(fallback))
            }
        };
        direct_then_broker(direct, move || {
            let poll = fallback.map_or_else(
                |built| built,
                |(join, poll, pause)| subscription_poll(&join, poll, pause),
            );
            ask(&through_broker, poll)
        })
    }

    /// A fenced commit by `join`'s member, to the coordinator when known (see
    /// `coordinator`); the request through the broker is built only when it is gone.
    fn commit(
        &self,
        join: &Arc<JoinGroup>,
        (generation, partition, offset): (u64, u32, u64),
    ) -> impl Future<Output = Result<()>> {
        let through_broker = self.commit.clone();
        let direct = self.coordinator.as_ref().map(|coordinator| {
            coordinator.ask(CommitAsMember {
                member: join.member.clone(),
                generation,
                partition,
                offset,
            })
        });
        let join = join.clone();
        direct_then_broker(direct, move || {
            let commit = FencedCommit {
                topic: join.topic.clone(),
                group: join.group.clone(),
                member: join.member.clone(),
                generation,
                partition,
                offset,
            };
            ask(&through_broker, commit)
        })
    }
}

/// What a subscription's poll asks for, apart from its names and pause.
#[derive(Debug)]
struct PollOf {
    generation: u64,
    positions: BTreeMap<u32, u64>,
    max_records: usize,
    wait: Option<Duration>,
}

/// `poll` by `join`'s member, as the broker takes it.
fn subscription_poll(join: &JoinGroup, poll: PollOf, pause: PollPause) -> SubscriptionPoll {
    SubscriptionPoll {
        poll: ConsumerPoll {
            topic: join.topic.clone(),
            group: join.group.clone(),
            member: join.member.clone(),
            generation: poll.generation,
            positions: poll.positions,
            max_records: poll.max_records,
            wait: poll.wait,
        },
        pause,
    }
}

/// The coordinator's answer to `direct` when there is one; the request through the broker
/// (`through_broker`, made only then) when there is none or the coordinator is gone.
///
/// Combinators rather than an `async fn`, and the rare request through the broker boxed: an
/// `async fn` keeps its arguments beside the futures it awaits, and a poll's future, boxed by
/// the subscription for every poll, grew past 2 KiB (glibc then consolidates its free lists on
/// each allocation).
fn direct_then_broker<T, F>(
    direct: Option<impl Future<Output = Result<T>>>,
    through_broker: impl FnOnce() -> F,
) -> impl Future<Output = Result<T>>
where
    T: 'static,
    F: Future<Output = Result<T>> + 'static,
{
    let direct = match direct {
        Some(direct) => direct.left_future(),
        None => future::ready(Err(Error::BrokerStopped)).right_future(),
    };
    direct.then(|answer| match answer {
        Err(Error::BrokerStopped) => through_broker().boxed_local().left_future(),
        answered => future::ready(answered).right_future(),
    })
}

/// Sends `msg` now (so requests leave in the order they are made) and flattens a closed
/// mailbox into `BrokerStopped`.
fn ask<M, T>(to: &Recipient<M>, msg: M) -> impl Future<Output = Result<T>>
where
    M: Message<Result = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    to.send(msg).map(|answer| {
        answer
            .map_err(|_| Error::BrokerStopped)
            .and_then(|answer| answer)
    })
}

/// Joins `join`'s group, makes sure the dead-letter topic exists and starts the
/// subscription. Nothing stays joined when it fails.
///
/// # Errors
/// As `messages::Subscribe`.
pub(crate) async fn subscribe<T: DeserializeOwned + Send + 'static>(
    broker: BrokerRequests,
    join: JoinGroup,
    recipient: Recipient<Delivered<T>>,
    options: SubscribeOptions,
) -> Result<Subscription> {
    options.validate_for(&join.topic)?;
    let assignment = ask(&broker.join, join.clone()).await?;
    if let Some(topic) = &options.dead_letter_topic {
        let create = CreateTopic {
            topic: topic.clone(),
            config: TopicConfig::default(),
        };
        match ask(&broker.create, create).await {
            Ok(()) | Err(Error::TopicExists { .. }) => {}
            Err(e) => {
                let leave = LeaveGroup {
                    topic: join.topic,
                    group: join.group,
                    member: join.member,
                };
                let _ = ask(&broker.leave, leave).await;
                return Err(e);
            }
        }
    }
    let mut broker = broker;
    let route = GetGroupRoute {
        topic: join.topic.clone(),
        group: join.group.clone(),
    };
    // Without it (the topic deleted meanwhile), polls go through the broker, which says so.
    broker.coordinator = ask(&broker.group_route, route).await.ok();
    Ok(SubscriptionActor::start(
        broker,
        join,
        &assignment,
        recipient,
        options,
    ))
}

/// See the module docs.
pub struct SubscriptionActor<T: DeserializeOwned + Send + 'static> {
    /// Its events, rules, batches out and end.
    flow: Flow<Fetched>,
    broker: BrokerRequests,
    /// Shared by every poll and commit, which copy none of its names.
    join: Arc<JoinGroup>,
    options: SubscribeOptions,
    recipient: Recipient<Delivered<T>>,
    positions: Positions,
    /// The partitions the running poll leaves out, and the signal that ends its wait.
    poll_paused: BTreeSet<u32>,
    poll_wake: Option<oneshot::Sender<()>>,
    /// The next poll, put off by [`POLL_GRACE`] after a batch that caught its partition up.
    deferred_poll: Option<SpawnHandle>,
    /// The last poll found no backlog (no records, or a batch that was not full): the next
    /// one waits for data before it fetches (see [`PollPause::wait_first`]).
    caught_up: bool,
    /// A generation entered whose partitions' attempt counts are to be read back from their
    /// commits (held by the rules until then); read by the next `pump`.
    restore: Option<(u64, Vec<u32>)>,
    payload: PhantomData<fn() -> T>,
}

/// How long the next poll waits after a batch that was not full (its partition caught up)
/// went out, unless the subscriber answers first. At low rates every batch is such a batch,
/// and the subscriber's answer usually comes well within this: the poll that starts then
/// reads every partition, where one started at once would leave the batch's partition out,
/// be cut short by the answer and be made again (its fetches and waits twice per batch).
/// Under a backlog batches are full and the next poll starts at once, as before. On an I/O
/// thread the answer is served at the thread's next wake-up (`put_off`), so the grace is
/// longer by the put-off bound: a timer that ran out first would be a wake-up of its own.
const POLL_GRACE: Duration = Duration::from_millis(2);

impl<T: DeserializeOwned + Send + 'static> std::fmt::Debug for SubscriptionActor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscriptionActor")
            .field("join", &self.join)
            .field("positions", &self.positions)
            .field("rules", &self.flow.rules)
            .field("in_flight", &self.flow.in_flight)
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
        mut options: SubscribeOptions,
    ) -> Subscription {
        let (end, ended) = watch::channel(None);
        let span = tracing::info_span!(
            "subscription",
            topic = %join.topic,
            group = %join.group,
            member = %join.member
        );
        let actor = SubscriptionActor {
            flow: Flow::new(span, &mut options, assignment.generation, end),
            broker,
            join: Arc::new(join),
            options,
            recipient,
            positions: Positions::new(assignment.generation),
            poll_paused: BTreeSet::new(),
            poll_wake: None,
            deferred_poll: None,
            caught_up: false,
            restore: None,
            payload: PhantomData,
        };
        let mut actor = actor;
        actor.learn(assignment.clone());
        let addr = match actor.broker.coordinator.as_ref() {
            Some(coordinator) => {
                let arbiter = coordinator.io().arbiter.clone();
                SubscriptionActor::start_in_arbiter(&arbiter, move |_| actor)
            }
            None => actor.start(),
        };
        Subscription::new(addr.recipient(), ended)
    }

    /// The member's assignment as a poll, a join or a rejoin told it: a new generation
    /// (reported) drops the positions and the rules' waits and counts; its partitions are
    /// held until their counts are read back from their commits (`restore_attempts`).
    fn learn(&mut self, assignment: Assignment) {
        let partitions = assignment.partitions.clone();
        if let Some(generation) = self.flow.report.learn(assignment) {
            self.positions.enter(generation);
            self.flow.rules.enter(generation);
            if self.broker.coordinator.is_some() && !partitions.is_empty() {
                self.flow.rules.restore(&partitions);
                self.restore = Some((generation, partitions));
            }
        }
    }

    /// What a poll read: decoded and handed over, or the record that does not decode dealt
    /// with. Whether a batch was handed over.
    fn polled(&mut self, batch: FetchedBatch, ctx: &mut Context<Self>) -> bool {
        self.learn(batch.assignment);
        let max_batch = self.options.max_batch;
        self.caught_up = (batch.fetched.as_ref()).is_none_or(|f| f.records.len() < max_batch);
        let Some(fetched) = batch.fetched else {
            return false;
        };
        if self.flow.rules.is_held(fetched.partition) {
            // Read by a poll re-planned after a rebalance: read again once released.
            return false;
        }
        match fetched.decode::<T>(&self.join.topic) {
            Ok(records) if records.is_empty() => false,
            Ok(records) => {
                self.hand_over(fetched, records, ctx);
                true
            }
            Err(e) => {
                self.undecodable(fetched, e, ctx);
                false
            }
        }
    }

    /// Polls again after [`POLL_GRACE`] (and the put-off bound), or when something else pumps first (the
    /// subscriber's answer).
    fn pump_after_grace(&mut self, ctx: &mut Context<Self>) {
        let grace = POLL_GRACE + self.answers_put_off().map_or(Duration::ZERO, |p| p.bound());
        let later = ctx.run_later(grace, |act, ctx| {
            act.deferred_poll = None;
            act.pump(ctx);
        });
        self.deferred_poll = Some(later);
    }

    /// Sends a batch to the subscriber, holding a credit and its partition until it answers.
    fn hand_over(
        &mut self,
        fetched: Fetched,
        records: Vec<crate::types::Record<T>>,
        ctx: &mut Context<Self>,
    ) {
        let (first, last) = match (records.first(), records.last()) {
            (Some(first), Some(last)) => (first.offset, last.offset),
            _ => return,
        };
        let batch = Batch {
            partition: fetched.partition,
            first,
            last,
            generation: self.positions.generation(),
        };
        self.positions.delivered(batch.partition, last);
        self.flow.rules.delivered(batch);
        self.flow.unanswered.insert(batch.partition, fetched);
        self.send_batch(batch, records, ctx);
    }

    /// The first record `fetched` holds does not decode (`error`): dead-letter it, or end.
    fn undecodable(&mut self, fetched: Fetched, error: Error, ctx: &mut Context<Self>) {
        let at = (fetched.partition, 0);
        match self.flow.report.undecodable(&self.options, &error, at) {
            Ok(letter) => {
                self.flow.rules.hold(letter.partition);
                let generation = self.positions.generation();
                self.dead_letter(&fetched, generation, letter, ctx);
            }
            Err(end) => self.end(end, ctx),
        }
    }

    /// Produces the record `letter` names, read in `fetched`, to the dead-letter topic, then
    /// commits past it (fenced by `generation`), then releases its partition (held
    /// meanwhile) and reads on after it.
    fn dead_letter(
        &mut self,
        fetched: &Fetched,
        generation: u64,
        letter: DeadLetter,
        ctx: &mut Context<Self>,
    ) {
        let (partition, offset) = (fetched.partition, letter.offset);
        let Some(topic) = self.options.dead_letter_topic.clone() else {
            return;
        };
        let Some(record) = fetched.records.iter().find(|r| r.offset == offset) else {
            return self.letter_lost(partition, offset, ctx);
        };
        let names = (self.join.topic.as_str(), self.join.group.as_str());
        let batch = letter.batch(names, record.key, record.value, record.headers.iter());
        let headers = record.headers.iter().map(|(key, value)| Header {
            key: String::from_utf8_lossy(key).into_owned(),
            value: value.map(<[u8]>::to_vec),
        });
        let origin = (record.key.map(<[u8]>::to_vec), headers.collect());
        let produce = ask(
            &self.broker.produce,
            ProduceBatch {
                topic,
                partition: None,
                batch,
            },
        );
        let (broker, join) = (self.broker.clone(), self.join.clone());
        let written = async move {
            let delivered = produce.await.map_err(LetterFailed::Produce)?;
            let at = delivered.first().copied().ok_or_else(|| {
                LetterFailed::Produce(Error::Internal {
                    actor: "subscription".into(),
                    reason: "a dead letter's produce reported no delivery".into(),
                })
            })?;
            let commit = broker.commit(&join, (generation, partition, offset));
            commit.await.map_err(|e| LetterFailed::Commit(at, e))?;
            Ok::<Delivery, LetterFailed>(at)
        };
        ctx.spawn(written.into_actor(self).map(move |written, act, ctx| {
            if written.is_ok() {
                act.positions.seek(partition, offset.saturating_add(1));
            }
            if let Some(end) = act.flow.report.dead_lettered(letter, origin, written) {
                return act.end(end, ctx);
            }
            act.flow.rules.release(partition, offset);
            act.released(partition, ctx);
            act.drained(ctx);
        }));
    }

    fn rejoin(&mut self, ctx: &mut Context<Self>) {
        let join = ask(&self.broker.join, JoinGroup::clone(&self.join));
        ctx.spawn(join.into_actor(self).map(|joined, act, ctx| match joined {
            Ok(assignment) => {
                // A new membership: positions of the old one are stale even when the
                // generation number happens to be the same.
                act.positions = Positions::new(assignment.generation);
                act.learn(assignment);
                act.pump(ctx);
            }
            Err(Error::BrokerStopped) => act.end(SubscriptionEnd::BrokerStopped, ctx),
            Err(Error::UnknownTopic { .. }) => act.end(SubscriptionEnd::TopicDeleted, ctx),
            Err(error) => {
                act.flow.report.emit(SubscriptionEvent::RequestFailed {
                    request: SubscriptionRequest::Rejoin,
                    error,
                    retry_in: RETRY_AFTER,
                });
                ctx.run_later(RETRY_AFTER, |act, ctx| act.rejoin(ctx));
            }
        }));
    }
}

impl<T: DeserializeOwned + Send + 'static> Subscribing for SubscriptionActor<T> {
    type Payload = T;
    type Kept = Fetched;

    fn flow(&mut self) -> &mut Flow<Fetched> {
        &mut self.flow
    }

    fn subscriber(&self) -> (&Recipient<Delivered<T>>, &str, &str) {
        (&self.recipient, &self.join.topic, &self.join.group)
    }

    /// Started on the coordinator's I/O thread when it is known (`start`).
    fn answers_put_off(&self) -> Option<Arc<PutOff>> {
        let coordinator = self.broker.coordinator.as_ref()?;
        Some(coordinator.io().doorbell.put_off.clone())
    }

    /// Polls again if there is a credit, no poll is running and the subscription runs. The
    /// held partitions are left out; a poll of nothing but held partitions still waits, as
    /// a sign of life, until one is released.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if let Some(deferred) = self.deferred_poll.take() {
            ctx.cancel_future(deferred);
        }
        self.restore_attempts(ctx);
        if !self.flow.start_poll(self.options.max_in_flight) {
            return;
        }
        let (wake, woken) = oneshot::channel();
        self.poll_wake = Some(wake);
        self.poll_paused = self.flow.rules.held();
        let poll = PollOf {
            generation: self.positions.generation(),
            positions: self.positions.all().clone(),
            max_records: self.options.max_batch,
            wait: Some(self.options.poll_wait),
        };
        let pause = PollPause {
            partitions: self.poll_paused.clone(),
            wake: Some(woken),
            wait_first: self.caught_up,
            // An actor's poll: no blocking thread to wake.
            early_wake: None,
        };
        let request = self.broker.poll(&self.join, poll, pause);
        ctx.spawn(request.into_actor(self).map(|polled, act, ctx| {
            act.poll_wake = None;
            if !act.flow.poll_done() {
                return;
            }
            match polled {
                Ok(batch) => {
                    if act.polled(batch, ctx) && act.caught_up {
                        return act.pump_after_grace(ctx);
                    }
                }
                Err(Error::UnknownMember { .. }) => {
                    act.flow.report.lose_all();
                    return act.rejoin(ctx);
                }
                Err(Error::BrokerStopped) => return act.end(SubscriptionEnd::BrokerStopped, ctx),
                Err(Error::UnknownTopic { .. }) => {
                    return act.end(SubscriptionEnd::TopicDeleted, ctx)
                }
                Err(e) => return act.poll_failed(&e, ctx),
            }
            act.pump(ctx);
        }));
    }

    /// `partition` is free again: a poll waiting without it is cut short to take it in.
    fn released(&mut self, partition: u32, ctx: &mut Context<Self>) {
        if self.poll_paused.contains(&partition) {
            self.poll_wake.take();
        }
        self.pump(ctx);
    }

    /// Commits `offset` (if any) of `partition`, fenced by `generation`; a refusal is
    /// reported.
    fn commit(
        &mut self,
        generation: u64,
        partition: u32,
        offset: Option<u64>,
        ctx: &mut Context<Self>,
    ) {
        let Some(offset) = offset else { return };
        let request = self
            .broker
            .commit(&self.join, (generation, partition, offset));
        ctx.spawn(request.into_actor(self).map(move |result, act, _| {
            if let Err(error) = result {
                act.flow.report.commit_refused(partition, offset, error);
            }
        }));
    }

    fn commit_retry(
        &mut self,
        generation: u64,
        partition: u32,
        retry: (Option<u64>, u64, u32),
        ctx: &mut Context<Self>,
    ) {
        self.commit_attempt(generation, partition, retry, ctx);
    }

    fn resume(&mut self, partition: u32, from: Option<u64>, ctx: &mut Context<Self>) {
        if let Some(offset) = from {
            self.positions.seek(partition, offset);
        }
        self.released(partition, ctx);
    }

    fn retry_later(
        &mut self,
        partition: u32,
        from: u64,
        (delay, token): (Duration, u64),
        ctx: &mut Context<Self>,
    ) {
        self.positions.seek(partition, from);
        ctx.run_later(delay, move |act, ctx| {
            if act.flow.rules.wake(partition, token) {
                act.released(partition, ctx);
            }
        });
        self.pump(ctx);
    }

    fn dead_letter_from(
        &mut self,
        kept: Fetched,
        generation: u64,
        letter: DeadLetter,
        ctx: &mut Context<Self>,
    ) {
        self.dead_letter(&kept, generation, letter, ctx);
    }

    /// Ends the subscription with `why`: leaves the group (unless the broker or the topic is
    /// gone), then stops. The first end wins.
    fn end(&mut self, why: SubscriptionEnd, ctx: &mut Context<Self>) {
        if self.flow.ending.is_some() || self.wait_for_answers(&why, ctx) {
            return;
        }
        let leave = !matches!(
            why,
            SubscriptionEnd::BrokerStopped | SubscriptionEnd::TopicDeleted
        );
        self.flow.ending = Some(why);
        self.poll_wake.take();
        if !leave {
            return ctx.stop();
        }
        let leave = LeaveGroup {
            topic: self.join.topic.clone(),
            group: self.join.group.clone(),
            member: self.join.member.clone(),
        };
        let request = ask(&self.broker.leave, leave);
        ctx.wait(request.into_actor(self).map(|_, _, ctx| ctx.stop()));
    }
}

impl<T: DeserializeOwned + Send + 'static> Actor for SubscriptionActor<T> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _span = self.flow.report.span().clone().entered();
        tracing::info!(
            generation = self.positions.generation(),
            "subscription started"
        );
        self.pump(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        // Stopped without a reason: its system is stopping (the broker's thread).
        self.flow.report.ended(self.flow.ending.take());
    }
}

impl<T: DeserializeOwned + Send + 'static> Handler<Unsubscribe> for SubscriptionActor<T> {
    type Result = ();

    fn handle(&mut self, _: Unsubscribe, ctx: &mut Context<Self>) {
        let _span = tracing::debug_span!(parent: self.flow.report.span(), "Unsubscribe").entered();
        self.end(SubscriptionEnd::Unsubscribed, ctx);
    }
}
