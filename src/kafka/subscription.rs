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
//! Attempt counts go with the commits as on the embedded broker: a `Retry` commits the
//! retried record's offset with an [`AttemptNote`] as the commit's metadata, and a new
//! assignment's partitions are held until their commits are read back. Commits asked for
//! are made before the member leaves.
//!
//! It runs on the arbiter of the code that subscribed and owns a [`KafkaMember`]; every
//! librdkafka call (poll, commit, seek, close) runs on tokio's blocking pool, so the arbiter
//! never blocks. What it does alike with the embedded actor (its events, the decode-error
//! policy, writing dead letters) is in `actors::subscription::shared`.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::flat::{lock, SharedMember};
use super::member::KafkaMember;
use super::{blocking, KafkaBackend};
use crate::actors::subscription::shared::{Flow, LetterFailed, Subscribing};
use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::group::dead_letter::DeadLetter;
use crate::group::delivery::{AttemptNote, Batch};
use crate::group::Assignment;
use crate::messages::{Delivered, SubscribeOptions, Subscription, SubscriptionEnd, Unsubscribe};
use crate::types::Record;

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
    options.validate_for(topic)?;
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
    let span = tracing::info_span!("kafka subscription", topic, group, member);
    let mut actor = KafkaSubscriptionActor {
        flow: Flow::new(span, &mut options, assignment.generation, end),
        topic: topic.to_owned(),
        group: group.to_owned(),
        member: Arc::new(Mutex::new(joined)),
        recipient,
        options,
        backend,
        generation: assignment.generation,
        restore: None,
        commits: 0,
        end_after_commits: None,
        payload: PhantomData,
    };
    actor.learn(assignment);
    Ok(Subscription::new(actor.start().recipient(), ended))
}

/// See the module docs.
struct KafkaSubscriptionActor<T: DeserializeOwned + Send + 'static> {
    /// Its events, rules, batches out (with the records they were read from, kept for
    /// their dead letters when a dead-letter topic is named) and end.
    flow: Flow<Vec<Record<Vec<u8>>>>,
    topic: String,
    group: String,
    member: SharedMember,
    recipient: Recipient<Delivered<T>>,
    options: SubscribeOptions,
    /// Dead letters are produced through it.
    backend: Arc<KafkaBackend>,
    /// The member's generation as last learned.
    generation: u64,
    /// A generation entered and its partitions, held until their attempt counts are read
    /// back from their commits (`restore_attempts`).
    restore: Option<(u64, Vec<u32>)>,
    /// Commits sent and not yet answered: a leave waits for them.
    commits: usize,
    /// An end that waits for `commits` to be answered.
    end_after_commits: Option<SubscriptionEnd>,
    payload: PhantomData<fn() -> T>,
}

/// One poll's outcome: the records (possibly none) and the assignment they were read in.
type Polled = Result<(Vec<Record<Vec<u8>>>, Assignment)>;

impl<T: DeserializeOwned + Send + 'static> KafkaSubscriptionActor<T> {
    /// The member's assignment after a poll: a new generation (reported) drops the rules'
    /// waits and counts; its partitions are held until their counts are read back from
    /// their commits (`restore_attempts`).
    fn learn(&mut self, assignment: Assignment) {
        let partitions = assignment.partitions.clone();
        if let Some(generation) = self.flow.report.learn(assignment) {
            self.generation = generation;
            self.flow.rules.enter(generation);
            if !partitions.is_empty() {
                self.flow.rules.restore(&partitions);
                self.restore = Some((generation, partitions));
            }
        }
    }

    /// Reads the attempt counts of the generation last entered back from its partitions'
    /// commits, then frees each partition (without them when they cannot be read).
    /// `unread`, records a poll took of partitions now held, go back to the member first,
    /// so that they are read again, in order, once their partition is free.
    fn restore_attempts(&mut self, unread: Vec<Record<Vec<u8>>>, ctx: &mut Context<Self>) {
        let Some((generation, partitions)) = self.restore.take() else {
            return;
        };
        let member = self.member.clone();
        let all = partitions.clone();
        let read = blocking(move || {
            let mut member = lock(&member)?;
            member.unread(unread);
            member.committed_notes(&partitions)
        });
        ctx.spawn(read.into_actor(self).map(move |read, act, ctx| {
            let notes = read.unwrap_or_else(|e| {
                let _span = act.flow.report.span().clone().entered();
                tracing::warn!(error = %e, "attempt counts not read back: they start at 1");
                all.into_iter().map(|p| (p, None)).collect()
            });
            for (partition, note) in notes {
                if act.flow.rules.restored(generation, partition, note) {
                    act.released(partition, ctx);
                }
            }
        }));
    }

    /// Counts a commit sent; `committed` is called with its answer.
    fn commit_sent(&mut self) {
        self.commits += 1;
    }

    /// A commit was answered: an end that waited for the commits goes on after the last.
    fn committed(&mut self, ctx: &mut Context<Self>) {
        self.commits = self.commits.saturating_sub(1);
        if self.commits == 0 {
            if let Some(why) = self.end_after_commits.take() {
                self.end(why, ctx);
            }
        }
    }

    /// Decodes a polled run and hands over the records before the first that does not
    /// decode; that one is dealt with (`undecodable`) once it is first in line.
    fn deliver(&mut self, raw: Vec<Record<Vec<u8>>>, ctx: &mut Context<Self>) {
        let Some(partition) = raw.first().map(|r| r.partition) else {
            return;
        };
        if self.flow.rules.is_held(partition) {
            return;
        }
        if self.options.dead_letter_topic.is_some() {
            self.flow.unanswered.insert(partition, raw.clone());
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
                    self.flow.rules.delivered(self.batch(partition, &records));
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

    /// `record`, first in line, does not decode (`e`): dead-letter it, or end.
    fn undecodable(&mut self, record: Record<Vec<u8>>, e: Error, ctx: &mut Context<Self>) {
        let at = (record.partition, record.offset);
        match self.flow.report.undecodable(&self.options, &e, at) {
            Ok(letter) => {
                self.flow.rules.hold(letter.partition);
                self.dead_letter(record, letter, ctx);
            }
            Err(end) => self.end(end, ctx),
        }
    }

    /// Sends a batch to the subscriber, holding a credit and its partition until it answers.
    fn hand_over(&mut self, records: Vec<Record<T>>, ctx: &mut Context<Self>) {
        let Some(partition) = records.first().map(|r| r.partition) else {
            return;
        };
        let batch = self.batch(partition, &records);
        self.flow.rules.delivered(batch);
        self.send_batch(batch, records, ctx);
    }

    /// Produces `record` (which `letter` names) to the dead-letter topic, then commits past
    /// it (a commit refused after a rebalance is reported), then reads its partition (held
    /// meanwhile) on after it.
    fn dead_letter(
        &mut self,
        record: Record<Vec<u8>>,
        letter: DeadLetter,
        ctx: &mut Context<Self>,
    ) {
        let Some(topic) = self.options.dead_letter_topic.clone() else {
            return;
        };
        let (partition, offset) = (record.partition, record.offset);
        let headers = record.headers.iter();
        let batch = letter.batch(
            (&self.topic, &self.group),
            record.key.as_deref(),
            &record.value,
            headers.map(|h| (h.key.as_bytes(), h.value.as_deref())),
        );
        let origin = (record.key, record.headers);
        let backend = self.backend.clone();
        let member = self.member.clone();
        let written = async move {
            let delivered = backend
                .produce_batch(&topic, None, &batch)
                .await
                .map_err(LetterFailed::Produce)?;
            let at = delivered.first().copied().ok_or_else(|| {
                LetterFailed::Produce(Error::Internal {
                    actor: "subscription".into(),
                    reason: "a dead letter's produce reported no delivery".into(),
                })
            })?;
            blocking(move || {
                let mut member = lock(&member)?;
                member.commit_forward(partition, offset)?;
                member.seek(partition, offset.saturating_add(1))
            })
            .await
            .map_err(|e| LetterFailed::Commit(at, e))?;
            Ok(at)
        };
        ctx.spawn(written.into_actor(self).map(move |written, act, ctx| {
            if let Some(end) = act.flow.report.dead_lettered(letter, origin, written) {
                return act.end(end, ctx);
            }
            act.flow.rules.release(partition, offset);
            act.pump(ctx);
            act.drained(ctx);
        }));
    }

    /// Moves the member's position in `partition` to `offset` (a failure is logged: the
    /// partition is then read on where it was, and a rebalance resets it anyway).
    fn seek(&self, partition: u32, offset: u64) -> impl std::future::Future<Output = ()> {
        let member = self.member.clone();
        let span = self.flow.report.span().clone();
        let seek = blocking(move || lock(&member)?.seek(partition, offset));
        async move {
            if let Err(e) = seek.await {
                let _span = span.entered();
                tracing::warn!(error = %e, partition, offset, "subscription seek failed");
            }
        }
    }
}

impl<T: DeserializeOwned + Send + 'static> Subscribing for KafkaSubscriptionActor<T> {
    type Payload = T;
    type Kept = Vec<Record<Vec<u8>>>;

    fn flow(&mut self) -> &mut Flow<Vec<Record<Vec<u8>>>> {
        &mut self.flow
    }

    fn subscriber(&self) -> (&Recipient<Delivered<T>>, &str, &str) {
        (&self.recipient, &self.topic, &self.group)
    }

    /// Polls again if there is a credit, no poll is running and the subscription runs.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        self.restore_attempts(Vec::new(), ctx);
        if self.end_after_commits.is_some() || !self.flow.start_poll(self.options.max_in_flight) {
            return;
        }
        let member = self.member.clone();
        let (max, wait) = (self.options.max_batch, self.options.poll_wait);
        let held = self.flow.rules.held();
        let poll = blocking(move || -> Polled {
            let mut member = lock(&member)?;
            let records = member.poll_batch_holding(max, wait, &held)?;
            Ok((records, member.assignment()))
        });
        ctx.spawn(poll.into_actor(self).map(|polled, act, ctx| {
            if !act.flow.poll_done() {
                return;
            }
            match polled {
                Ok((records, assignment)) => {
                    act.learn(assignment);
                    if act.restore.is_some() {
                        return act.restore_attempts(records, ctx);
                    }
                    act.deliver(records, ctx);
                }
                Err(Error::UnknownTopic { .. }) => {
                    return act.end(SubscriptionEnd::TopicDeleted, ctx)
                }
                Err(e) => return act.poll_failed(&e, ctx),
            }
            act.pump(ctx);
        }));
    }

    fn released(&mut self, _: u32, ctx: &mut Context<Self>) {
        self.pump(ctx);
    }

    fn commit(&mut self, _: u64, partition: u32, offset: Option<u64>, ctx: &mut Context<Self>) {
        let Some(offset) = offset else { return };
        let member = self.member.clone();
        let commit = blocking(move || lock(&member)?.commit_forward(partition, offset));
        self.commit_sent();
        ctx.spawn(commit.into_actor(self).map(move |result, act, ctx| {
            if let Err(error) = result {
                // A rebalance moved the partition: its new owner re-reads from the last commit.
                act.flow.report.commit_refused(partition, offset, error);
            }
            act.committed(ctx);
        }));
    }

    /// Commits the retried record's offset (`from`: the records before it are processed)
    /// with its count (an [`AttemptNote`]).
    fn commit_retry(
        &mut self,
        _: u64,
        partition: u32,
        (_, from, attempt): (Option<u64>, u64, u32),
        ctx: &mut Context<Self>,
    ) {
        let member = self.member.clone();
        let note = AttemptNote(attempt);
        let commit = blocking(move || lock(&member)?.commit_note(partition, from, note));
        self.commit_sent();
        ctx.spawn(commit.into_actor(self).map(move |result, act, ctx| {
            if let Err(error) = result {
                let offset = from.saturating_sub(1);
                act.flow.report.commit_refused(partition, offset, error);
            }
            act.committed(ctx);
        }));
    }

    /// A partition read again from another offset stays held until the seek is done, so no
    /// poll reads it before.
    fn resume(&mut self, partition: u32, from: Option<u64>, ctx: &mut Context<Self>) {
        if let Some(offset) = from {
            self.flow.rules.hold(partition);
            let seek = self.seek(partition, offset);
            ctx.spawn(seek.into_actor(self).map(move |(), act, ctx| {
                act.flow.rules.release(partition, offset.saturating_sub(1));
                act.pump(ctx);
            }));
        }
        self.pump(ctx);
    }

    fn retry_later(
        &mut self,
        partition: u32,
        from: u64,
        (delay, token): (Duration, u64),
        ctx: &mut Context<Self>,
    ) {
        let seek = self.seek(partition, from);
        ctx.spawn(seek.into_actor(self).map(move |(), _, ctx| {
            ctx.run_later(delay, move |act, ctx| {
                if act.flow.rules.wake(partition, token) {
                    act.pump(ctx);
                }
            });
        }));
        self.pump(ctx);
    }

    fn dead_letter_from(
        &mut self,
        kept: Vec<Record<Vec<u8>>>,
        _: u64,
        letter: DeadLetter,
        ctx: &mut Context<Self>,
    ) {
        match kept.into_iter().find(|r| r.offset == letter.offset) {
            Some(record) => self.dead_letter(record, letter, ctx),
            None => self.letter_lost(letter.partition, letter.offset, ctx),
        }
    }

    /// Ends the subscription with `why`: once the commits sent are answered, leaves the
    /// group (on a blocking thread), then stops.
    fn end(&mut self, why: SubscriptionEnd, ctx: &mut Context<Self>) {
        if self.flow.ending.is_some() || self.wait_for_answers(&why, ctx) {
            return;
        }
        if self.commits > 0 {
            // The first end wins.
            self.end_after_commits.get_or_insert(why);
            return;
        }
        self.flow.ending = Some(why);
        let member = self.member.clone();
        let left = blocking(move || {
            lock(&member)?.leave();
            Ok(())
        });
        ctx.wait(left.into_actor(self).map(|_, _, ctx| ctx.stop()));
    }
}

impl<T: DeserializeOwned + Send + 'static> Actor for KafkaSubscriptionActor<T> {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _span = self.flow.report.span().clone().entered();
        tracing::info!("subscription started");
        self.pump(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        // Stopped without a reason: its system is stopping.
        self.flow.report.ended(self.flow.ending.take());
    }
}

impl<T: DeserializeOwned + Send + 'static> Handler<Unsubscribe> for KafkaSubscriptionActor<T> {
    type Result = ();

    fn handle(&mut self, _: Unsubscribe, ctx: &mut Context<Self>) {
        self.end(SubscriptionEnd::Unsubscribed, ctx);
    }
}
