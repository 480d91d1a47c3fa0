//! `KafkaSubscriptionActor<T>`: a push subscription on the Kafka backend. The same contract
//! as the embedded `SubscriptionActor<T>`: typed [`Delivered<T>`] batches of one partition,
//! at most `max_in_flight` unanswered and at most one per partition, the same acks
//! (`Commit`, `Defer`, `CommitUpTo`, `Retry` with `max_attempts`, following the same rules,
//! `group::delivery`), the same [`SubscriptionEvent`]s and the same awaitable end.
//!
//! Dead letters have the embedded format (headers `nanokafka.dlq.*`, see
//! `actors::subscription`); the dead-letter topic is created through the cluster's admin
//! API when missing (1 partition), and a dead letter is produced (and delivered) before the
//! source record is committed past.
//!
//! Differences:
//! - a held partition is paused in librdkafka; once released it is read again on the next
//!   poll (a poll already waiting is not cut short, so that can take up to `poll_wait`);
//! - generations are the member's own count of assignments (see `kafka::member`).
//!
//! It runs on the arbiter of the code that subscribed and owns a [`KafkaMember`]; every
//! librdkafka call (poll, commit, seek, close) runs on tokio's blocking pool, so the arbiter
//! never blocks.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::flat::{lock, SharedMember};
use super::member::KafkaMember;
use super::{blocking, KafkaBackend};
use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::group::delivery::{self, Answer, Batch, Deliveries, Outcome};
use crate::group::Assignment;
use crate::messages::{
    Ack, DecodeAction, Delivered, OnDecodeError, SubscribeOptions, Subscription, SubscriptionEnd,
    SubscriptionEvent, Unsubscribe,
};
use crate::storage::RecordBatch;
use crate::types::Record;

/// Retry delay after a failed poll.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Joins (waiting for the first assignment) and starts the subscription.
///
/// # Errors
/// `InvalidArgument` for options `SubscribeOptions::validate` refuses and a dead-letter
/// topic named as the subscribed topic; as [`KafkaMember::join`]; as the dead-letter
/// topic's creation (the member then leaves).
pub(crate) async fn subscribe<T: DeserializeOwned + Send + 'static>(
    backend: Arc<KafkaBackend>,
    (topic, group, member): (&str, &str, &str),
    recipient: Recipient<Delivered<T>>,
    mut options: SubscribeOptions,
) -> Result<Subscription> {
    options.validate()?;
    if options.dead_letter_topic.as_deref() == Some(topic) {
        return Err(Error::InvalidArgument {
            name: "dead_letter_topic",
            reason: format!("{topic:?} is the subscribed topic itself"),
        });
    }
    let config = backend.config().clone();
    let names = (topic.to_owned(), group.to_owned(), member.to_owned());
    let group_options = options.group;
    let joined = blocking(move || {
        let (topic, group, member) = &names;
        KafkaMember::join(&config, topic, group, member, group_options)
    })
    .await?;
    if let Some(dlq) = &options.dead_letter_topic {
        match backend.create_topic(dlq, &TopicConfig::default()).await {
            Ok(()) | Err(Error::TopicExists { .. }) => {}
            Err(e) => {
                // Dropping the member leaves the group; it blocks, so not on this thread.
                let _ = blocking(move || {
                    drop(joined);
                    Ok(())
                })
                .await;
                return Err(e);
            }
        }
    }
    let assignment = joined.assignment();
    let (end, ended) = watch::channel(None);
    let mut actor = KafkaSubscriptionActor {
        span: tracing::info_span!("kafka subscription", topic, group, member),
        topic: topic.to_owned(),
        group: group.to_owned(),
        member: Arc::new(Mutex::new(joined)),
        recipient,
        events: options.events.take(),
        rules: Deliveries::new(
            assignment.generation,
            options.max_attempts,
            options.dead_letter_topic.is_some(),
        ),
        options,
        backend,
        unanswered: std::collections::BTreeMap::new(),
        generation: assignment.generation,
        assignment: Vec::new(),
        told: None,
        in_flight: 0,
        polling: false,
        ending: None,
        end,
        payload: PhantomData,
    };
    actor.learn(assignment);
    Ok(Subscription::new(actor.start().recipient(), ended))
}

/// See the module docs.
struct KafkaSubscriptionActor<T: DeserializeOwned + Send + 'static> {
    span: tracing::Span,
    topic: String,
    group: String,
    member: SharedMember,
    recipient: Recipient<Delivered<T>>,
    events: Option<Recipient<SubscriptionEvent>>,
    options: SubscribeOptions,
    /// Dead letters are produced through it.
    backend: Arc<KafkaBackend>,
    /// The records of each unanswered batch as read, kept for their dead letters when a
    /// dead-letter topic is named.
    unanswered: std::collections::BTreeMap<u32, Vec<Record<Vec<u8>>>>,
    rules: Deliveries,
    /// The member's generation as last learned.
    generation: u64,
    /// The member's partitions as last told.
    assignment: Vec<u32>,
    told: Option<u64>,
    in_flight: usize,
    polling: bool,
    ending: Option<SubscriptionEnd>,
    end: watch::Sender<Option<SubscriptionEnd>>,
    payload: PhantomData<fn() -> T>,
}

/// One poll's outcome: the records (possibly none) and the assignment they were read in.
type Polled = Result<(Vec<Record<Vec<u8>>>, Assignment)>;

impl<T: DeserializeOwned + Send + 'static> KafkaSubscriptionActor<T> {
    /// Logs `event` and sends it to the events recipient (`do_send`: in order, and the last
    /// one as the actor stops).
    fn emit(&self, event: SubscriptionEvent) {
        let _span = self.span.clone().entered();
        match &event {
            SubscriptionEvent::DecodeFailed { .. } => tracing::error!(?event, "subscription"),
            _ => tracing::info!(?event, "subscription"),
        }
        if let Some(events) = &self.events {
            events.do_send(event);
        }
    }

    /// The member's assignment after a poll: a new generation is told as differences.
    fn learn(&mut self, assignment: Assignment) {
        if self.told == Some(assignment.generation) {
            return;
        }
        self.told = Some(assignment.generation);
        let (revoked, assigned) = delivery::rebalance(&self.assignment, &assignment.partitions);
        let generation = assignment.generation;
        if !revoked.is_empty() {
            self.emit(SubscriptionEvent::Revoked {
                generation,
                partitions: revoked,
            });
        }
        self.emit(SubscriptionEvent::Assigned {
            generation,
            partitions: assigned,
        });
        self.assignment = assignment.partitions;
        self.generation = generation;
        self.rules.enter(generation);
    }

    /// Polls again if there is a credit, no poll is running and the subscription runs.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.ending.is_some() || self.polling || self.in_flight >= self.options.max_in_flight {
            return;
        }
        self.polling = true;
        let member = self.member.clone();
        let (max, wait) = (self.options.max_batch, self.options.poll_wait);
        let held = self.rules.held();
        let poll = blocking(move || -> Polled {
            let mut member = lock(&member)?;
            let records = member.poll_batch_holding(max, wait, &held)?;
            Ok((records, member.assignment()))
        });
        ctx.spawn(poll.into_actor(self).map(|polled, act, ctx| {
            act.polling = false;
            if act.ending.is_some() {
                return;
            }
            match polled {
                Ok((records, assignment)) => {
                    act.learn(assignment);
                    act.deliver(records, ctx);
                }
                Err(Error::UnknownTopic { .. }) => {
                    return act.end(SubscriptionEnd::TopicDeleted, ctx)
                }
                Err(e) => {
                    let _span = act.span.clone().entered();
                    tracing::warn!(error = %e, "subscription poll failed; retrying");
                    act.polling = true;
                    ctx.run_later(RETRY_AFTER, |act, ctx| {
                        act.polling = false;
                        act.pump(ctx);
                    });
                    return;
                }
            }
            act.pump(ctx);
        }));
    }

    /// Decodes a polled run and hands over the records before the first that does not
    /// decode; that one ends the subscription once it is first in line.
    fn deliver(&mut self, raw: Vec<Record<Vec<u8>>>, ctx: &mut Context<Self>) {
        let Some(partition) = raw.first().map(|r| r.partition) else {
            return;
        };
        if self.rules.is_held(partition) {
            return;
        }
        if self.options.dead_letter_topic.is_some() {
            self.unanswered.insert(partition, raw.clone());
        }
        let mut records = Vec::with_capacity(raw.len());
        for record in raw {
            let offset = record.offset;
            let kept = record.clone();
            match record.decode::<T>(&self.topic) {
                Ok(record) => records.push(record),
                Err(e) if records.is_empty() => return self.undecodable(kept, e, ctx),
                Err(_) => {
                    // Read it again, first in line, after the records before it.
                    self.rules.delivered(self.batch(partition, &records));
                    let seek = self.seek(partition, offset);
                    let records = std::mem::take(&mut records);
                    ctx.wait(seek.into_actor(self).map(move |(), act, ctx| {
                        act.hand_over(records, ctx);
                    }));
                    return;
                }
            }
        }
        self.hand_over(records, ctx);
    }

    fn batch(&self, partition: u32, records: &[Record<T>]) -> Batch {
        let offsets = records.first().zip(records.last());
        let (first, last) = offsets.map_or((0, 0), |(f, l)| (f.offset, l.offset));
        Batch {
            partition,
            first,
            last,
            generation: self.generation,
        }
    }

    fn undecodable(&mut self, record: Record<Vec<u8>>, e: Error, ctx: &mut Context<Self>) {
        let (partition, offset) = (record.partition, record.offset);
        let error = match &e {
            Error::Decode { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        if self.options.decode_error_policy() == OnDecodeError::DeadLetter {
            self.rules.hold(partition);
            let reason = Reason::Decode(error);
            return self.dead_letter(record, 1, reason, ctx);
        }
        self.emit(SubscriptionEvent::DecodeFailed {
            partition,
            offset,
            error: error.clone(),
            action: DecodeAction::Stopped,
        });
        let end = SubscriptionEnd::DecodeError {
            partition,
            offset,
            error,
        };
        self.end(end, ctx);
    }

    /// Sends a batch to the subscriber, holding a credit and its partition until it answers.
    fn hand_over(&mut self, records: Vec<Record<T>>, ctx: &mut Context<Self>) {
        let Some(partition) = records.first().map(|r| r.partition) else {
            return;
        };
        let batch = self.batch(partition, &records);
        self.rules.delivered(batch);
        self.in_flight += 1;
        let delivered = Delivered {
            topic: self.topic.clone(),
            group: self.group.clone(),
            generation: batch.generation,
            records,
        };
        let answer = self.recipient.send(delivered);
        ctx.spawn(answer.into_actor(self).map(move |answer, act, ctx| {
            act.in_flight -= 1;
            let raw = act.unanswered.remove(&batch.partition);
            match answer {
                Ok(ack) => act.answered(batch, ack, raw, ctx),
                Err(_) => act.end(SubscriptionEnd::SubscriberGone, ctx),
            }
        }));
    }

    /// Acts on the subscriber's answer (see `group::delivery`). A partition read again from
    /// another offset stays held until the seek is done, so no poll reads it before.
    fn answered(
        &mut self,
        batch: Batch,
        ack: Ack,
        raw: Option<Vec<Record<Vec<u8>>>>,
        ctx: &mut Context<Self>,
    ) {
        if self.ending.is_some() {
            return;
        }
        let partition = batch.partition;
        match self.rules.answered(batch, answer(ack)) {
            Outcome::Go { commit, resume } => {
                self.commit(partition, commit, ctx);
                if let Some(offset) = resume {
                    self.rules.hold(partition);
                    let seek = self.seek(partition, offset);
                    ctx.spawn(seek.into_actor(self).map(move |(), act, ctx| {
                        act.rules.release(partition, offset.saturating_sub(1));
                        act.pump(ctx);
                    }));
                }
                self.pump(ctx);
            }
            Outcome::Wait {
                commit,
                from,
                delay,
                token,
            } => {
                self.commit(partition, commit, ctx);
                let seek = self.seek(partition, from);
                ctx.spawn(seek.into_actor(self).map(move |(), _, ctx| {
                    ctx.run_later(delay, move |act, ctx| {
                        if act.rules.wake(partition, token) {
                            act.pump(ctx);
                        }
                    });
                }));
                self.pump(ctx);
            }
            Outcome::Exhausted {
                commit,
                offset,
                attempts,
            } => {
                self.commit(partition, commit, ctx);
                let end = SubscriptionEnd::RetriesExhausted {
                    partition,
                    offset,
                    attempts,
                };
                self.end(end, ctx);
            }
            Outcome::DeadLetter { offset, attempts } => {
                let record = raw.into_iter().flatten().find(|r| r.offset == offset);
                match record {
                    Some(record) => {
                        self.dead_letter(record, attempts, Reason::RetriesExhausted, ctx);
                    }
                    // Not kept (cannot happen: kept for every batch with a dead-letter topic).
                    None => {
                        self.rules.release(partition, offset.saturating_sub(1));
                        self.pump(ctx);
                    }
                }
            }
        }
    }

    /// Produces `record` to the dead-letter topic, then commits past it (a commit refused
    /// after a rebalance is reported), then reads its partition (held meanwhile) on after it.
    fn dead_letter(
        &mut self,
        record: Record<Vec<u8>>,
        attempts: u32,
        reason: Reason,
        ctx: &mut Context<Self>,
    ) {
        let Some(topic) = self.options.dead_letter_topic.clone() else {
            return;
        };
        let (partition, offset) = (record.partition, record.offset);
        let letter = self.letter(&record, attempts, &reason);
        let backend = self.backend.clone();
        let member = self.member.clone();
        let written = async move {
            backend
                .produce_batch(&topic, None, &letter)
                .await
                .map_err(|e| (true, e))?;
            blocking(move || {
                let mut member = lock(&member)?;
                member.commit_forward(partition, offset)?;
                member.seek(partition, offset.saturating_add(1))
            })
            .await
            .map_err(|e| (false, e))
        };
        ctx.spawn(written.into_actor(self).map(move |written, act, ctx| {
            match written {
                Err((true, error)) => {
                    let end = SubscriptionEnd::DeadLetterFailed {
                        partition,
                        offset,
                        error,
                    };
                    return act.end(end, ctx);
                }
                Err((false, error)) => act.emit(SubscriptionEvent::CommitRefused {
                    partition,
                    offset,
                    error,
                }),
                Ok(()) => {}
            }
            act.emit(match reason {
                Reason::Decode(error) => SubscriptionEvent::DecodeFailed {
                    partition,
                    offset,
                    error,
                    action: DecodeAction::DeadLettered,
                },
                Reason::RetriesExhausted => SubscriptionEvent::DeadLettered {
                    partition,
                    offset,
                    attempts,
                },
            });
            act.rules.release(partition, offset);
            act.pump(ctx);
        }));
    }

    /// The dead letter of `record` (the embedded format: `actors::subscription`).
    fn letter(&self, record: &Record<Vec<u8>>, attempts: u32, reason: &Reason) -> RecordBatch {
        let (why, error) = match reason {
            Reason::Decode(error) => ("decode", Some(error.as_str())),
            Reason::RetriesExhausted => ("retries-exhausted", None),
        };
        let (partition, offset, attempts) = (
            record.partition.to_string(),
            record.offset.to_string(),
            attempts.to_string(),
        );
        let mut about: Vec<(&str, &str)> = vec![
            ("nanokafka.dlq.topic", &self.topic),
            ("nanokafka.dlq.partition", &partition),
            ("nanokafka.dlq.offset", &offset),
            ("nanokafka.dlq.group", &self.group),
            ("nanokafka.dlq.reason", why),
        ];
        if let Some(error) = error {
            about.push(("nanokafka.dlq.error", error));
        }
        about.push(("nanokafka.dlq.attempts", &attempts));
        let headers: Vec<_> = record
            .headers
            .iter()
            .map(|h| (h.key.as_bytes(), h.value.as_deref()))
            .chain(
                about
                    .iter()
                    .map(|(k, v)| (k.as_bytes(), Some(v.as_bytes()))),
            )
            .collect();
        let mut batch = RecordBatch::new();
        batch.push_header_refs(record.key.as_deref(), &record.value, &headers);
        batch
    }

    /// Moves the member's position in `partition` to `offset` (a failure is logged: the
    /// partition is then read on where it was, and a rebalance resets it anyway).
    fn seek(&self, partition: u32, offset: u64) -> impl std::future::Future<Output = ()> {
        let member = self.member.clone();
        let span = self.span.clone();
        let seek = blocking(move || lock(&member)?.seek(partition, offset));
        async move {
            if let Err(e) = seek.await {
                let _span = span.entered();
                tracing::warn!(error = %e, partition, offset, "subscription seek failed");
            }
        }
    }

    fn commit(&mut self, partition: u32, offset: Option<u64>, ctx: &mut Context<Self>) {
        let Some(offset) = offset else { return };
        let member = self.member.clone();
        let commit = blocking(move || lock(&member)?.commit_forward(partition, offset));
        ctx.spawn(commit.into_actor(self).map(move |result, act, _| {
            if let Err(error) = result {
                // A rebalance moved the partition: its new owner re-reads from the last commit.
                act.emit(SubscriptionEvent::CommitRefused {
                    partition,
                    offset,
                    error,
                });
            }
        }));
    }

    /// Ends the subscription with `why`: leaves the group (on a blocking thread), then stops.
    fn end(&mut self, why: SubscriptionEnd, ctx: &mut Context<Self>) {
        if self.ending.is_some() {
            return;
        }
        self.ending = Some(why);
        let member = self.member.clone();
        let left = blocking(move || {
            lock(&member)?.leave();
            Ok(())
        });
        ctx.wait(left.into_actor(self).map(|_, _, ctx| ctx.stop()));
    }
}

/// Why a record is dead-lettered (the `nanokafka.dlq.reason` header and its details).
#[derive(Debug, Clone)]
enum Reason {
    Decode(String),
    RetriesExhausted,
}

/// The actor face's `Ack` as the rules take it.
fn answer(ack: Ack) -> Answer {
    match ack {
        Ack::Commit => Answer::Commit,
        Ack::Defer => Answer::Defer,
        Ack::CommitUpTo(offset) => Answer::CommitUpTo(offset),
        Ack::Retry { offset, after } => Answer::Retry { offset, after },
    }
}

impl<T: DeserializeOwned + Send + 'static> Actor for KafkaSubscriptionActor<T> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        tracing::info!("subscription started");
        self.pump(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        // Stopped without a reason: its system is stopping.
        let why = self.ending.take().unwrap_or(SubscriptionEnd::BrokerStopped);
        self.emit(SubscriptionEvent::Ended(why.clone()));
        self.end.send_replace(Some(why));
    }
}

impl<T: DeserializeOwned + Send + 'static> Handler<Unsubscribe> for KafkaSubscriptionActor<T> {
    type Result = ();

    fn handle(&mut self, _: Unsubscribe, ctx: &mut Context<Self>) {
        self.end(SubscriptionEnd::Unsubscribed, ctx);
    }
}
