//! What the embedded `SubscriptionActor<T>` and the Kafka backend's
//! `KafkaSubscriptionActor<T>` do alike, apart from reaching the broker: the state they keep
//! alike ([`Flow`]: rules, credit, unanswered batches, end); the [`Reporter`] that logs and
//! sends their [`SubscriptionEvent`]s (rebalances told as differences, records that do not
//! decode, dead letters, refused commits, the end) and applies the decode-error policy; and
//! the steps of [`Subscribing`] (handing a batch over, acting on the subscriber's `Ack`,
//! pausing after a failed poll). The rules per partition are `group::delivery`'s and dead
//! letters are written by `group::dead_letter` (plain Rust); this is the part that needs
//! actix.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::watch;

use crate::actors::put_off::{put_off_wake, PutOff};
use crate::error::Error;
use crate::group::dead_letter::{DeadLetter, DeadLetterReason};
use crate::group::delivery::{self, Batch, Deliveries, Outcome};
use crate::group::Assignment;
use crate::messages::{
    Ack, DecodeAction, Delivered, OnDecodeError, SubscribeOptions, SubscriptionEnd,
    SubscriptionEvent, SubscriptionRequest,
};
use crate::types::{Delivery, Header, Record};

/// Retry delay after a failed poll (a partition restarting) or rejoin.
pub(crate) const RETRY_AFTER: Duration = Duration::from_secs(1);

/// How long an unsubscribe waits at most for the answers of the batches with the subscriber
/// (see [`Subscribing::wait_for_answers`]). A subscriber answers within milliseconds as a
/// rule; one that does not must not keep its member, and so its partitions, in the group
/// for ever, and an unsubscribe should not outlast a session timeout's worth of waiting.
pub(crate) const DRAIN_AT_MOST: Duration = Duration::from_secs(10);

/// The state both kinds of subscription actor keep alike. `K`: what an unanswered batch
/// was read from.
#[derive(Debug)]
pub(crate) struct Flow<K> {
    /// Its events and its end.
    pub(crate) report: Reporter,
    pub(crate) rules: Deliveries,
    /// What each unanswered batch was read from (one per partition), for its dead letters.
    pub(crate) unanswered: BTreeMap<u32, K>,
    /// Batches sent and not answered yet.
    pub(crate) in_flight: usize,
    /// A poll (or the pause after a failed one) is running.
    pub(crate) polling: bool,
    /// Set once the subscription is ending: nothing more is polled or delivered.
    pub(crate) ending: Option<SubscriptionEnd>,
    /// An unsubscribe waits for the answers of the batches with the subscriber: nothing more
    /// is polled; `drain_expired` once it waited [`DRAIN_AT_MOST`].
    pub(crate) draining: bool,
    pub(crate) drain_expired: bool,
}

impl<K> Flow<K> {
    /// A subscription with `options` (its events recipient taken out of them), starting in
    /// `generation`, logging in `span`, whose end goes to `end`.
    pub(crate) fn new(
        span: tracing::Span,
        options: &mut SubscribeOptions,
        generation: u64,
        end: watch::Sender<Option<SubscriptionEnd>>,
    ) -> Self {
        Flow {
            report: Reporter::new(span, options.events.take(), end),
            rules: Deliveries::new(
                generation,
                options.max_attempts,
                options.dead_letter_topic.is_some(),
            ),
            unanswered: BTreeMap::new(),
            in_flight: 0,
            polling: false,
            ending: None,
            draining: false,
            drain_expired: false,
        }
    }

    /// Starts a poll if the subscription runs, no poll is running and fewer than
    /// `max_in_flight` batches are unanswered; whether it did.
    pub(crate) fn start_poll(&mut self, max_in_flight: usize) -> bool {
        let stopped = self.ending.is_some() || self.draining;
        if stopped || self.polling || self.in_flight >= max_in_flight {
            return false;
        }
        self.polling = true;
        true
    }

    /// The running poll is done; whether the subscription still runs (what a poll read
    /// after its end, or while an unsubscribe waits for answers, is dropped).
    pub(crate) fn poll_done(&mut self) -> bool {
        self.polling = false;
        self.ending.is_none() && !self.draining
    }
}

/// A subscription actor, as the steps both kinds take alike see it; each reaches its
/// broker its own way (`pump` polls, `commit` commits, `resume` and `retry_later` seek,
/// `dead_letter_from` produces, `end` leaves).
pub(crate) trait Subscribing: Actor<Context = Context<Self>> {
    /// The subscriber's record type.
    type Payload: Send + 'static;
    /// What an unanswered batch was read from, kept for its dead letters.
    type Kept;

    fn flow(&mut self) -> &mut Flow<Self::Kept>;
    /// The subscriber, and the topic and group its batches name.
    fn subscriber(&self) -> (&Recipient<Delivered<Self::Payload>>, &str, &str);
    /// Where the subscriber's answers are put off to the next wake-up of the thread this
    /// runs on (`crate::actors::put_off`), if it runs on an I/O thread.
    fn answers_put_off(&self) -> Option<Arc<PutOff>> {
        None
    }

    /// Polls again if there is a credit, no poll is running and the subscription runs.
    fn pump(&mut self, ctx: &mut Context<Self>);
    /// `partition` is free again: read it (soon).
    fn released(&mut self, partition: u32, ctx: &mut Context<Self>);
    /// Commits `offset` (if any) of `partition`, read in `generation`; a refusal is
    /// reported.
    fn commit(
        &mut self,
        generation: u64,
        partition: u32,
        offset: Option<u64>,
        ctx: &mut Context<Self>,
    );
    /// Commits for a retry of the record at `from`, read in `generation`, whose next
    /// delivery is `attempt`: the records before it (`commit`, if any), and where the backend
    /// can keep it, the count with the commit (`group::delivery::AttemptNote`). A refusal is
    /// reported. By default the records before it only: the count stays in memory.
    fn commit_retry(
        &mut self,
        generation: u64,
        partition: u32,
        (commit, _from, _attempt): (Option<u64>, u64, u32),
        ctx: &mut Context<Self>,
    ) {
        self.commit(generation, partition, commit, ctx);
    }
    /// An answered batch's partition is free: read it on from `from` (`None`: after the
    /// batch).
    fn resume(&mut self, partition: u32, from: Option<u64>, ctx: &mut Context<Self>);
    /// `partition` is read again from `from` once the delay of `wait` (delay, token) has
    /// passed and the rules' `wake(partition, token)` frees it.
    fn retry_later(
        &mut self,
        partition: u32,
        from: u64,
        wait: (Duration, u64),
        ctx: &mut Context<Self>,
    );
    /// Dead-letters the record `letter` names, read in `kept` in `generation` (then commits
    /// past it and releases its partition).
    fn dead_letter_from(
        &mut self,
        kept: Self::Kept,
        generation: u64,
        letter: DeadLetter,
        ctx: &mut Context<Self>,
    );
    /// Ends the subscription with `why` (the first end wins), then stops.
    fn end(&mut self, why: SubscriptionEnd, ctx: &mut Context<Self>);

    /// Whether ending with `why` waits first: an unsubscribe with batches at the subscriber,
    /// or records being dead-lettered, waits for their answers and dead letters (for
    /// [`DRAIN_AT_MOST`] at most), which are acted on as usual (committed), so that the
    /// partitions' next owner does not get them again; nothing more is polled meanwhile. The
    /// last of them ends the subscription ([`Subscribing::drained`]).
    fn wait_for_answers(&mut self, why: &SubscriptionEnd, ctx: &mut Context<Self>) -> bool {
        let flow = self.flow();
        let unsubscribed = matches!(why, SubscriptionEnd::Unsubscribed);
        let pending = flow.in_flight > 0 || flow.rules.busy();
        if !unsubscribed || !pending || flow.drain_expired {
            return false;
        }
        if !std::mem::replace(&mut flow.draining, true) {
            ctx.run_later(DRAIN_AT_MOST, |act, ctx| {
                act.flow().drain_expired = true;
                act.end(SubscriptionEnd::Unsubscribed, ctx);
            });
        }
        true
    }

    /// Acts on the subscriber's answer to `batch` (see `group::delivery`), read from `kept`.
    fn answered(
        &mut self,
        batch: Batch,
        ack: Ack,
        kept: Option<Self::Kept>,
        ctx: &mut Context<Self>,
    ) {
        if self.flow().ending.is_some() {
            return;
        }
        let (partition, generation) = (batch.partition, batch.generation);
        match self.flow().rules.answered(batch, ack.into()) {
            Outcome::Go { commit, resume } => {
                self.commit(generation, partition, commit, ctx);
                self.resume(partition, resume, ctx);
            }
            Outcome::Wait {
                commit,
                from,
                attempt,
                delay,
                token,
            } => {
                self.commit_retry(generation, partition, (commit, from, attempt), ctx);
                self.retry_later(partition, from, (delay, token), ctx);
            }
            Outcome::DeadLetter {
                offset,
                attempts,
                reason,
            } => {
                let letter = DeadLetter {
                    partition,
                    offset,
                    attempts,
                    reason,
                };
                match kept {
                    Some(kept) => self.dead_letter_from(kept, generation, letter, ctx),
                    None => self.letter_lost(partition, offset, ctx),
                }
            }
            Outcome::Exhausted {
                commit,
                offset,
                attempts,
            } => {
                self.commit(generation, partition, commit, ctx);
                let end = SubscriptionEnd::RetriesExhausted {
                    partition,
                    offset,
                    attempts,
                };
                self.end(end, ctx);
            }
            Outcome::NoDeadLetterTopic { commit, offset } => {
                self.commit(generation, partition, commit, ctx);
                let end = SubscriptionEnd::DeadLetterFailed {
                    partition,
                    offset,
                    error: Error::InvalidArgument {
                        name: "dead_letter_topic",
                        reason: "Ack::DeadLetter needs a dead-letter topic".into(),
                    },
                };
                self.end(end, ctx);
            }
        }
    }

    /// The record at `offset` of `partition` to dead-letter is not in what was kept
    /// (cannot happen: what a batch was read from is kept whenever a dead-letter topic is
    /// named): read on after it.
    fn letter_lost(&mut self, partition: u32, offset: u64, ctx: &mut Context<Self>) {
        self.flow()
            .rules
            .release(partition, offset.saturating_sub(1));
        self.released(partition, ctx);
    }

    /// Sends `records` (`batch`) to the subscriber, holding a credit until it answers; its
    /// mailbox closed ends the subscription.
    fn send_batch(
        &mut self,
        batch: Batch,
        records: Vec<Record<Self::Payload>>,
        ctx: &mut Context<Self>,
    ) {
        let flow = self.flow();
        flow.in_flight += 1;
        let attempt = flow.rules.attempt(batch.partition, batch.first);
        let (recipient, topic, group) = self.subscriber();
        let answer = recipient.send(Delivered {
            topic: topic.to_owned(),
            group: group.to_owned(),
            generation: batch.generation,
            attempt,
            records,
        });
        let answer = put_off_wake(answer, self.answers_put_off());
        ctx.spawn(answer.into_actor(self).map(move |answer, act, ctx| {
            let flow = act.flow();
            flow.in_flight -= 1;
            let kept = flow.unanswered.remove(&batch.partition);
            match answer {
                Ok(ack) => act.answered(batch, ack, kept, ctx),
                Err(_) => act.end(SubscriptionEnd::SubscriberGone, ctx),
            }
            act.drained(ctx);
        }));
    }

    /// An answer or a dead letter is done: an unsubscribe waiting for it ends the
    /// subscription once nothing is pending (see [`Subscribing::wait_for_answers`]).
    fn drained(&mut self, ctx: &mut Context<Self>) {
        let flow = self.flow();
        if flow.draining && flow.in_flight == 0 && !flow.rules.busy() {
            self.end(SubscriptionEnd::Unsubscribed, ctx);
        }
    }

    /// A poll failed (`error`, not one that ends the subscription): logged, and the next
    /// one waits [`RETRY_AFTER`].
    fn poll_failed(&mut self, error: &Error, ctx: &mut Context<Self>) {
        self.flow().report.emit(SubscriptionEvent::RequestFailed {
            request: SubscriptionRequest::Poll,
            error: error.clone(),
            retry_in: RETRY_AFTER,
        });
        self.flow().polling = true;
        ctx.run_later(RETRY_AFTER, |act, ctx| {
            act.flow().polling = false;
            act.pump(ctx);
        });
    }
}

/// How writing a dead letter failed.
#[derive(Debug)]
pub(crate) enum LetterFailed {
    /// It could not be produced: the subscription ends, the record uncommitted.
    Produce(Error),
    /// It was produced (there), but committing past the record was refused (a rebalance).
    Commit(Delivery, Error),
}

/// Reports what happens to a subscription: logs each event in the subscription's span,
/// sends it to the events recipient, and sends the end to the [`Subscription`]'s watchers
/// (`crate::messages::Subscription`).
#[derive(Debug)]
pub(crate) struct Reporter {
    span: tracing::Span,
    events: Option<Recipient<SubscriptionEvent>>,
    /// The member's partitions as last told (the events' differences are against it).
    assignment: Vec<u32>,
    /// The generation the events last told of.
    told: Option<u64>,
    end: watch::Sender<Option<SubscriptionEnd>>,
}

impl Reporter {
    pub(crate) fn new(
        span: tracing::Span,
        events: Option<Recipient<SubscriptionEvent>>,
        end: watch::Sender<Option<SubscriptionEnd>>,
    ) -> Self {
        Reporter {
            span,
            events,
            assignment: Vec::new(),
            told: None,
            end,
        }
    }

    /// The subscription's span (topic, group, member).
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Logs `event` and sends it to the events recipient. `do_send`: events keep their order
    /// and the last one is sent as the actor stops (a pending `send` would be dropped).
    pub(crate) fn emit(&self, event: SubscriptionEvent) {
        let _span = self.span.clone().entered();
        match &event {
            SubscriptionEvent::DecodeFailed { .. } => tracing::error!(?event, "subscription"),
            SubscriptionEvent::DeadLettered { .. } | SubscriptionEvent::RequestFailed { .. } => {
                tracing::warn!(?event, "subscription")
            }
            _ => tracing::info!(?event, "subscription"),
        }
        if let Some(events) = &self.events {
            events.do_send(event);
        }
    }

    /// The member's assignment as a poll, a join or a rejoin told it: a generation not told
    /// yet is reported as differences (`Revoked`, then `Assigned`, each only when it names a
    /// partition) and returned, for the actor to enter it.
    pub(crate) fn learn(&mut self, assignment: Assignment) -> Option<u64> {
        let generation = assignment.generation;
        if self.told == Some(generation) {
            return None;
        }
        self.told = Some(generation);
        let (revoked, assigned) = delivery::rebalance(&self.assignment, &assignment.partitions);
        self.revoke(generation, revoked);
        if !assigned.is_empty() {
            self.emit(SubscriptionEvent::Assigned {
                generation,
                partitions: assigned,
            });
        }
        self.assignment = assignment.partitions;
        Some(generation)
    }

    /// The member lost every partition (evicted, or ending): `Revoked` for those it had. The
    /// next assignment learned is told whatever its generation number.
    pub(crate) fn lose_all(&mut self) {
        let generation = self.told.take().unwrap_or_default();
        let owned = std::mem::take(&mut self.assignment);
        self.revoke(generation, owned);
    }

    fn revoke(&self, generation: u64, partitions: Vec<u32>) {
        if !partitions.is_empty() {
            self.emit(SubscriptionEvent::Revoked {
                generation,
                partitions,
            });
        }
    }

    /// The record at `at` (partition, offset; those the `Decode` error names, if it does)
    /// does not decode (`error`). Under `options`' policy it is to be dead-lettered
    /// (returned), or the subscription ends (reported, and the end returned).
    pub(crate) fn undecodable(
        &self,
        options: &SubscribeOptions,
        error: &Error,
        at: (u32, u64),
    ) -> Result<DeadLetter, SubscriptionEnd> {
        let (partition, offset, text) = match error {
            Error::Decode {
                partition,
                offset,
                source,
                ..
            } => (*partition, *offset, source.to_string()),
            other => (at.0, at.1, other.to_string()),
        };
        match options.decode_error_policy() {
            OnDecodeError::DeadLetter => Ok(DeadLetter {
                partition,
                offset,
                attempts: 1,
                reason: DeadLetterReason::Decode(text),
            }),
            OnDecodeError::Stop => {
                self.emit(SubscriptionEvent::DecodeFailed {
                    partition,
                    offset,
                    error: text.clone(),
                    action: DecodeAction::Stopped,
                });
                Err(SubscriptionEnd::DecodeError {
                    partition,
                    offset,
                    error: text,
                })
            }
        }
    }

    /// Reports how writing `letter` (of the record with `origin`'s key and headers) went:
    /// produced (where `written` says; committed past, or the commit refused) is reported; a
    /// failed produce is the subscription's end, returned.
    pub(crate) fn dead_lettered(
        &self,
        letter: DeadLetter,
        origin: (Option<Vec<u8>>, Vec<Header>),
        written: Result<Delivery, LetterFailed>,
    ) -> Option<SubscriptionEnd> {
        let DeadLetter {
            partition,
            offset,
            attempts,
            reason,
        } = letter;
        let at = match written {
            Err(LetterFailed::Produce(error)) => {
                return Some(SubscriptionEnd::DeadLetterFailed {
                    partition,
                    offset,
                    error,
                })
            }
            Err(LetterFailed::Commit(at, error)) => {
                self.emit(SubscriptionEvent::CommitRefused {
                    partition,
                    offset,
                    error,
                });
                at
            }
            Ok(at) => at,
        };
        let (key, headers) = origin;
        let reason = match reason {
            DeadLetterReason::Decode(error) => {
                self.emit(SubscriptionEvent::DecodeFailed {
                    partition,
                    offset,
                    error,
                    action: DecodeAction::DeadLettered,
                });
                return None;
            }
            DeadLetterReason::RetriesExhausted => None,
            DeadLetterReason::Rejected(reason) => Some(reason),
        };
        self.emit(SubscriptionEvent::DeadLettered {
            partition,
            offset,
            attempts,
            key,
            headers,
            reason,
            dead_letter_partition: at.partition,
            dead_letter_offset: at.offset,
        });
        None
    }

    /// A commit of `partition` up to `offset` was refused (`error`).
    pub(crate) fn commit_refused(&self, partition: u32, offset: u64, error: Error) {
        self.emit(SubscriptionEvent::CommitRefused {
            partition,
            offset,
            error,
        });
    }

    /// The actor stopped, `ending` (`None`: without a reason, its system is stopping):
    /// reports the end and resolves the subscription's watchers.
    pub(crate) fn ended(&mut self, ending: Option<SubscriptionEnd>) {
        let why = ending.unwrap_or(SubscriptionEnd::BrokerStopped);
        self.lose_all();
        self.emit(SubscriptionEvent::Ended(why.clone()));
        self.end.send_replace(Some(why));
    }
}
