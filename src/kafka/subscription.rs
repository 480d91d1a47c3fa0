//! `KafkaSubscriptionActor<T>`: a push subscription on the Kafka backend. The same contract
//! as the embedded `SubscriptionActor<T>`: typed [`Delivered<T>`] batches of one partition,
//! at most `max_in_flight` unanswered, `Ack::Commit` commits a batch's last record, `Defer`
//! leaves it uncommitted; the subscription ends on [`Subscription::unsubscribe`] or when the
//! subscriber's mailbox closes, and then leaves the group.
//!
//! It runs on the arbiter of the code that subscribed and owns a [`KafkaMember`]; every
//! librdkafka call (poll, commit, close) runs on tokio's blocking pool, so the arbiter never
//! blocks. A record that does not decode as `T` stalls its partition, as on the embedded
//! broker: the member seeks back to it and polls again after a second, until a commit moves
//! past it.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;

use super::flat::{lock, SharedMember};
use super::member::KafkaMember;
use super::{blocking, KafkaConfig};
use crate::error::{Error, Result};
use crate::messages::{Ack, Delivered, SubscribeOptions, Subscription, Unsubscribe};
use crate::types::Record;

/// Retry delay after a failed poll or a record that does not decode.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Joins (waiting for the first assignment) and starts the subscription.
///
/// # Errors
/// `InvalidArgument` for zero options; as [`KafkaMember::join`].
pub(crate) async fn subscribe<T: DeserializeOwned + Send + 'static>(
    config: &KafkaConfig,
    (topic, group, member): (&str, &str, &str),
    recipient: Recipient<Delivered<T>>,
    options: SubscribeOptions,
) -> Result<Subscription> {
    options.validate()?;
    let config = config.clone();
    let names = (topic.to_owned(), group.to_owned(), member.to_owned());
    let joined = blocking(move || {
        let (topic, group, member) = &names;
        KafkaMember::join(&config, topic, group, member, options.group)
    })
    .await?;
    let actor = KafkaSubscriptionActor {
        span: tracing::info_span!("kafka subscription", topic, group, member),
        topic: topic.to_owned(),
        group: group.to_owned(),
        member: Arc::new(Mutex::new(joined)),
        recipient,
        options,
        in_flight: 0,
        polling: false,
        payload: PhantomData,
    };
    Ok(Subscription::new(actor.start().recipient()))
}

/// See the module docs.
struct KafkaSubscriptionActor<T: DeserializeOwned + Send + 'static> {
    span: tracing::Span,
    topic: String,
    group: String,
    member: SharedMember,
    recipient: Recipient<Delivered<T>>,
    options: SubscribeOptions,
    in_flight: usize,
    polling: bool,
    payload: PhantomData<fn() -> T>,
}

/// One poll's outcome: the records (possibly none) and the generation they were read in.
type Polled = Result<(Vec<Record<Vec<u8>>>, u64)>;

impl<T: DeserializeOwned + Send + 'static> KafkaSubscriptionActor<T> {
    /// Polls again if there is a credit and no poll is running.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.polling || self.in_flight >= self.options.max_in_flight {
            return;
        }
        self.polling = true;
        let member = self.member.clone();
        let (max, wait) = (self.options.max_batch, self.options.poll_wait);
        let poll = blocking(move || -> Polled {
            let mut member = lock(&member)?;
            let records = member.poll_batch(max, wait)?;
            Ok((records, member.assignment().generation))
        });
        ctx.spawn(poll.into_actor(self).map(|polled, act, ctx| {
            act.polling = false;
            match polled {
                Ok((records, generation)) => act.deliver(records, generation, ctx),
                Err(Error::UnknownTopic { .. }) => return act.leave(ctx),
                Err(e) => {
                    let _span = act.span.clone().entered();
                    tracing::warn!(error = %e, "subscription poll failed; retrying");
                    act.hold_polling(ctx);
                    return;
                }
            }
            act.pump(ctx);
        }));
    }

    /// Stops polling for [`RETRY_AFTER`].
    fn hold_polling(&mut self, ctx: &mut Context<Self>) {
        self.polling = true;
        ctx.run_later(RETRY_AFTER, |act, ctx| {
            act.polling = false;
            act.pump(ctx);
        });
    }

    /// Sends a polled batch to the subscriber, holding a credit until it answers.
    fn deliver(&mut self, raw: Vec<Record<Vec<u8>>>, generation: u64, ctx: &mut Context<Self>) {
        let Some(first) = raw.first().map(|r| (r.partition, r.offset)) else {
            return;
        };
        let records = match raw
            .into_iter()
            .map(|r| r.decode::<T>(&self.topic))
            .collect::<Result<Vec<_>>>()
        {
            Ok(records) => records,
            Err(e) => return self.stall(e, first, ctx),
        };
        let Some(last) = records.last().map(|r| (r.partition, r.offset)) else {
            return;
        };
        self.in_flight += 1;
        let delivered = Delivered {
            topic: self.topic.clone(),
            group: self.group.clone(),
            generation,
            records,
        };
        let answer = self.recipient.send(delivered);
        ctx.spawn(answer.into_actor(self).map(move |answer, act, ctx| {
            act.in_flight -= 1;
            match answer {
                Ok(Ack::Commit) => act.commit(last, ctx),
                Ok(Ack::Defer) => {}
                // The subscriber is gone: end the subscription.
                Err(_) => return act.leave(ctx),
            }
            act.pump(ctx);
        }));
    }

    /// A record of the batch does not decode: seek back to the batch's first record and
    /// retry later, so the partition stays where it is until a commit moves past it.
    fn stall(&mut self, e: Error, (partition, offset): (u32, u64), ctx: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        tracing::error!(error = %e, "record does not decode; its partition is stalled until it is committed past");
        let member = self.member.clone();
        let seek = blocking(move || lock(&member)?.seek(partition, offset));
        ctx.spawn(seek.into_actor(self).map(|sought, act, ctx| {
            if let Err(e) = sought {
                let _span = act.span.clone().entered();
                tracing::warn!(error = %e, "seek back to the record that does not decode failed");
            }
            act.hold_polling(ctx);
        }));
    }

    fn commit(&mut self, (partition, offset): (u32, u64), ctx: &mut Context<Self>) {
        let member = self.member.clone();
        let commit = blocking(move || lock(&member)?.commit_forward(partition, offset));
        ctx.spawn(commit.into_actor(self).map(|result, act, _| {
            if let Err(e) = result {
                // A rebalance moved the partition: its new owner re-reads from the last commit.
                let _span = act.span.clone().entered();
                tracing::debug!(error = %e, "subscription commit refused");
            }
        }));
    }

    /// Leaves the group (on a blocking thread), then stops.
    fn leave(&mut self, ctx: &mut Context<Self>) {
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
        let _span = self.span.clone().entered();
        tracing::info!("subscription started");
        self.pump(ctx);
    }
}

impl<T: DeserializeOwned + Send + 'static> Handler<Unsubscribe> for KafkaSubscriptionActor<T> {
    type Result = ();

    fn handle(&mut self, _: Unsubscribe, ctx: &mut Context<Self>) {
        self.leave(ctx);
    }
}
